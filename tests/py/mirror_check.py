"""Loads a seqtrain-written model.safetensors into the PyTorch mirror module and writes it back.

Called by tests/test_python_mirror.cpp. Checks that the module's state_dict has exactly the
file's names and shapes, that load_state_dict(strict=True) accepts it, that every parameter
arrives bit for bit, and that a forward pass runs; then saves the module with save_seqtrain so
the C++ side can check the trip back. Exit codes: 0 success, 3 strict load refused the file
(what --expect-strict-failure wants), anything else a failure.
"""

import argparse
import sys

import numpy as np
import torch

from seqtrain_torch import from_spec, load_file, load_seqtrain, read_file, save_seqtrain

STRICT_REFUSED = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--type", required=True, choices=["lstm", "gru", "mlp"])
    ap.add_argument("--input-size", type=int, required=True)
    ap.add_argument("--lookback", type=int, default=4)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--output-size", type=int, required=True)
    ap.add_argument("--expect-strict-failure", action="store_true")
    ap.add_argument("--expect-meta", action="append", default=[], help="key=value the file's metadata must hold")
    ap.add_argument("input")
    ap.add_argument("output", nargs="?")
    a = ap.parse_args()

    torch.manual_seed(0)
    module = from_spec({"type": a.type, "input_size": a.input_size, "lookback": a.lookback, "hidden": a.hidden,
                        "layers": a.layers, "bidirectional": a.bidirectional, "dropout": 0.1,
                        "output_size": a.output_size})

    if a.expect_strict_failure:
        try:
            load_seqtrain(a.input, module)
        except RuntimeError as e:  # what load_state_dict(strict=True) raises for missing/extra/mis-shaped keys
            print(f"strict load refused the file as expected: {e}", file=sys.stderr)
            return STRICT_REFUSED
        print("strict load unexpectedly accepted the file", file=sys.stderr)
        return 1

    arrays, meta = read_file(a.input)
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in arrays.items()}
    if want != got:
        print(f"name/shape mismatch\n  module only: {sorted(set(want.items()) - set(got.items()))}\n"
              f"  file only:   {sorted(set(got.items()) - set(want.items()))}", file=sys.stderr)
        return 1
    for kv in a.expect_meta:
        k, v = kv.split("=", 1)
        if meta.get(k) != v:
            print(f"metadata {k!r} is {meta.get(k)!r}, expected {v!r}", file=sys.stderr)
            return 1

    if load_seqtrain(a.input, module) != meta:
        print("load_seqtrain returned different metadata", file=sys.stderr)
        return 1
    for k, p in module.state_dict().items():
        if p.dtype != torch.float32 or not np.array_equal(p.numpy().view(np.uint32), arrays[k].view(np.uint32)):
            print(f"parameter {k} did not arrive bit for bit", file=sys.stderr)
            return 1

    module.eval()
    with torch.no_grad():
        y = module(torch.randn(2, a.lookback, a.input_size))
    if tuple(y.shape) != (2, a.output_size) or not torch.isfinite(y).all():
        print(f"forward produced {tuple(y.shape)}, finite={bool(torch.isfinite(y).all())}", file=sys.stderr)
        return 1

    if a.output:
        save_seqtrain(module, a.output, metadata={"writer": "seqtrain_torch"})
        back = load_file(a.output)
        if set(back) != set(arrays) or any(not np.array_equal(back[k], arrays[k]) for k in arrays):
            print("save_seqtrain did not write back what was loaded", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
