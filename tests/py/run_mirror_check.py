"""Checks a run's checkpoint from PyTorch's side (tests/test_cnn.cpp runs it).

    run_mirror_check.py CHECKPOINT X.npy LENGTHS.npy EXPECTED.npy

seqtrain_torch's from_spec builds the mirror of CHECKPOINT/state.json's model_spec, which loads
CHECKPOINT/model.safetensors with load_state_dict(strict=True); in eval mode its outputs on X
(LENGTHS each window's valid steps) must be EXPECTED (what seqtrain computed) within 1e-5 of their
scale. Exit code 0 when they are; the report goes to stderr.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from seqtrain_torch import from_spec, read_file  # noqa: E402


def main(ckpt, x_path, lengths_path, expected_path):
    with open(os.path.join(ckpt, "state.json"), encoding="utf-8") as f:
        module = from_spec(json.load(f)["model_spec"])
    arrays, _ = read_file(os.path.join(ckpt, "model.safetensors"))
    module.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()}, strict=True)
    module.eval()
    x = torch.from_numpy(np.load(x_path).astype(np.float32))
    lengths = torch.from_numpy(np.load(lengths_path).astype(np.int64))
    with torch.no_grad():
        got = module(x, lengths).numpy()
    want = np.load(expected_path)
    if got.shape != want.shape:
        print(f"the mirror gives {got.shape}, seqtrain {want.shape}", file=sys.stderr)
        return 1
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    print(f"{type(module).__name__}: {got.shape[0]} rows of {got.shape[1]} outputs, largest difference {err:.2e} "
          "of their scale", file=sys.stderr)
    return 0 if err <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
