"""PyTorch peer of bench/job_epoch.sh: one epoch of the W1-shaped forecasting job with a
Dataset + DataLoader, MSE, clip_grad_norm_, AdamW, validation and torch.save of a checkpoint.
Usage: torch_job.py CSV THREADS CHECKPOINT_PATH  -> prints JSON timings."""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import torch
from torch import nn

path, threads, ckpt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
n = len(data); n_tr, n_va = int(n * 0.7), int(n * 0.15)
mu, sd = data[:n_tr].mean(0), data[:n_tr].std(0)
data = (data - mu) / np.where(sd == 0, 1, sd)
L = 150

class Windows(torch.utils.data.Dataset):
    def __init__(self, rows): self.rows = rows
    def __len__(self): return len(self.rows) - L
    def __getitem__(self, k): return torch.from_numpy(self.rows[k:k + L]), torch.from_numpy(self.rows[k + L, 7:8])

class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.rnn = nn.LSTM(8, 128, 2, batch_first=True); self.head = nn.Linear(128, 1)
    def forward(self, x): return self.head(self.rnn(x)[0][:, -1])

train = torch.utils.data.DataLoader(Windows(data[:n_tr]), batch_size=256, shuffle=False)
val = torch.utils.data.DataLoader(Windows(data[n_tr:n_tr + n_va]), batch_size=256)
model = Model(); opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
t1 = time.perf_counter()
for x, y in train:
    opt.zero_grad(); loss = nn.functional.mse_loss(model(x), y); loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
t2 = time.perf_counter()
with torch.no_grad():
    v = sum(nn.functional.mse_loss(model(x), y, reduction="sum").item() for x, y in val)
torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, ckpt)
t3 = time.perf_counter()
print(json.dumps({"torch": torch.__version__, "train_s": t2 - t1, "total_s": t3 - t0, "val": v}))
