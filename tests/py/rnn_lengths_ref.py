"""PyTorch reference for tests/test_rnn_lengths.cpp: an LSTM/GRU stack on variable-length
sequences through pack_padded_sequence(enforce_sorted=False), padded back by pad_packed_sequence
(zeros), in float64.

Usage: rnn_lengths_ref.py DIR CELL LAYERS BIDIR HIDDEN
Reads DIR/model.safetensors (seqtrain's rnn.* names; other names ignored), DIR/x.npy [T,N,C]
(time major, as RnnStack's layers), DIR/lengths.npy [N] int64, DIR/dy.npy [T,N,H*D]; writes
DIR/out_ref.npy [T,N,H*D], DIR/hn_ref.npy [layers*D,N,H] (each sample's state at its own last
valid step), DIR/dx_ref.npy [T,N,C] and DIR/grads.safetensors: the gradients of sum(dy * out).
"""
import sys

import numpy as np
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqtrain_torch.safetensors_io import read_file, save_file

d, cell, layers, bidir, hidden = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
x = torch.from_numpy(np.load(f"{d}/x.npy")).double().requires_grad_(True)
lengths = torch.from_numpy(np.load(f"{d}/lengths.npy")).long()
dy = torch.from_numpy(np.load(f"{d}/dy.npy")).double()
rnn = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell](x.shape[2], hidden, num_layers=layers,
                                                          bidirectional=bidir).double()
arrays, _ = read_file(f"{d}/model.safetensors")
rnn.load_state_dict({k[len("rnn."):]: torch.from_numpy(np.asarray(v)).double()
                     for k, v in arrays.items() if k.startswith("rnn.")}, strict=True)
packed_out, state = rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
out, _ = pad_packed_sequence(packed_out, total_length=x.shape[0])
(out * dy).sum().backward()
hn = state[0] if cell == "lstm" else state
np.save(f"{d}/out_ref.npy", out.detach().numpy())
np.save(f"{d}/hn_ref.npy", hn.detach().numpy())
np.save(f"{d}/dx_ref.npy", x.grad.numpy())
save_file({"rnn." + n: p.grad.numpy().astype(np.float64) for n, p in rnn.named_parameters()}, f"{d}/grads.safetensors")
