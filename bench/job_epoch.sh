#!/usr/bin/env bash
# The forecasting job end to end on W1's shape (batch 256, lookback 150, 8 features, LSTM 128x2):
# one epoch of `seqtrain train` (data, training, validation, checkpoints) against the equivalent
# PyTorch script (Dataset + DataLoader, same loop, torch.save), same threads, same CSV.
# Usage: bench/job_epoch.sh [THREADS=2] [BATCHES=12]   (run from the repository root)
set -euo pipefail
THREADS=${THREADS:-2}; BATCHES=${BATCHES:-12}
BIN=${BIN:-build/seqtrain}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
PIN=""; command -v taskset >/dev/null && PIN="taskset -c 0-$((THREADS-1))"
# Rows so the training split holds BATCHES full batches of 256 windows.
ROWS=$(( (BATCHES * 256 + 150) * 10 / 7 + 10 )); [ "$ROWS" -lt 2800 ] && ROWS=2800
/usr/bin/python3 - "$W/w1.csv" "$ROWS" <<'PY'
import sys, numpy as np
path, rows = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0); t = np.arange(rows)[:, None]
x = np.sin(t / np.array([7, 11, 13, 17, 19, 23, 29, 31])) + 0.1 * rng.standard_normal((rows, 8))
np.savetxt(path, x, delimiter=",", header=",".join(f"f{i}" for i in range(8)), comments="", fmt="%.6f")
PY
cat > "$W/job.yaml" <<YAML
data: {source: csv, path: $W/w1.csv, features: [f0,f1,f2,f3,f4,f5,f6,f7], targets: [f7], lookback: 150, horizon: 1, split: [0.7, 0.15, 0.15]}
model: {type: lstm, hidden: 128, layers: 2}
train: {epochs: 1, batch_size: 256, shuffle: false, loss: mse, grad_clip: 1.0, log_every: 1000, optimizer: {name: adamw, lr: 0.001, weight_decay: 0.01}}
runtime: {threads: $THREADS}
YAML
start=$(date +%s.%N)
$PIN $BIN train "$W/job.yaml" --out "$W/run" --quiet > "$W/st.log"
st_total=$(/usr/bin/python3 -c "print($(date +%s.%N) - $start)")
read -r st_train st_wait <<<"$(/usr/bin/python3 -c "
import json; r=[json.loads(l) for l in open('$W/run/metrics.jsonl')]; d=[x for x in r if x['split']=='data'][0]
print(d['epoch_train_s'], d['data_wait_s'])")"
st_ckpt=$(sed -n 's/^checkpoint_block_s: //p' "$W/st.log")
PYBIN=${PYBIN:-/usr/bin/python3}
$PIN $PYBIN "$(dirname "$0")/torch_job.py" "$W/w1.csv" "$THREADS" "$W/torch.pt" > "$W/torch.json"
/usr/bin/python3 - "$W/torch.json" "$st_total" "$st_train" "$st_wait" "$BATCHES" "$THREADS" "$PYBIN" "$st_ckpt" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); total, train, wait = map(float, sys.argv[2:5]); ckpt = float(sys.argv[8])
print(f"| job epoch, W1 shape, {sys.argv[5]} batches, {sys.argv[6]} threads | seqtrain | torch {t['torch']} ({sys.argv[7]}) | speedup |")
print("|---|---|---|---|")
print(f"| whole job (process start to exit) s | {total:.2f} | {t['total_s']:.2f} | {t['total_s']/total:.1f}x |")
print(f"| training epoch s | {train:.2f} | {t['train_s']:.2f} | {t['train_s']/train:.1f}x |")
print(f"| seqtrain data wait s (share of epoch) | {wait:.4f} ({100*wait/train:.2f}%) | | |")
print(f"| seqtrain checkpoint time the loop waited (share of epoch) | {ckpt:.4f} ({100*ckpt/train:.2f}%) | | |")
print(f"| seqtrain everything but training steps (data, validation, checkpoints, start-up) s | {total-train:.2f} ({100*(total-train)/total:.1f}% of job) | {t['total_s']-t['train_s']:.2f} | |")
PY
