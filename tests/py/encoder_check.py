"""Checks a `seqtrain export RUN --encoder FILE` from PyTorch's side (tests/test_encoder.cpp runs it).

    encoder_check.py FILE STATE.json X.npy EXPECTED.npy FAMILY [LENGTHS.npy]

load_encoder(FILE) must build a FAMILY encoder from the file's metadata, load its tensors with
load_state_dict(strict=True) and return it in eval mode; its embed() of X (raw, z-scored here with
STATE.json's "normalizer" as `seqtrain embed` does; LENGTHS each sample's valid steps) must give
EXPECTED (what `seqtrain embed` wrote, [N, C]) within 1e-5. Exit code 0 when all holds; the report
goes to stderr.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from seqtrain_torch import load_encoder, read_file  # noqa: E402

TOL = 1e-5


def main(path, state_path, x_path, expected_path, family, lengths_path=None):
    _, md = read_file(path)
    if md.get("family") != family:
        print(f"metadata family {md.get('family')!r}, expected {family!r}", file=sys.stderr)
        return 1
    module = load_encoder(path)  # strict: a missing or extra tensor raises
    if module.training:
        print("load_encoder returned a module in training mode", file=sys.stderr)
        return 1
    with open(state_path, encoding="utf-8") as f:
        norm = json.load(f)["normalizer"]
    x = np.load(x_path).astype(np.float64)
    if norm["method"] == "zscore":
        x = (x - np.array(norm["shift"])) / np.array(norm["scale"])
    lengths = None if lengths_path is None else torch.from_numpy(np.load(lengths_path).astype(np.int64))
    with torch.no_grad():
        got = module.embed(torch.from_numpy(x.astype(np.float32)), lengths).numpy()
    want = np.load(expected_path)
    if got.shape != want.shape:
        print(f"PyTorch embeds {got.shape}, seqtrain wrote {want.shape}", file=sys.stderr)
        return 1
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    print(f"{family}: {got.shape[0]} embeddings of {got.shape[1]}, largest difference {err.max():.2e}", file=sys.stderr)
    return 0 if err.max() <= TOL else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
