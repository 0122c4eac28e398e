"""Checks a `seqtrain export` directory from PyTorch's side (tests/test_export.cpp runs it).

    export_check.py DIR INPUTS.npy EXPECTED.npy [LENGTHS.npy]
                                                  load_exported(DIR) on INPUTS (float windows
                                                  [B, T, F] or int64 token ids [B, T]; with
                                                  LENGTHS, each window's valid steps, a padded
                                                  batch) must give EXPECTED (seqtrain's own
                                                  outputs) within 1e-5
    export_check.py --gpt TMPDIR                  the gpt family, whose C++ model is not built yet:
                                                  an export written here with seqtrain's ModelSpec
                                                  names loads through load_exported

Exit code 0 when everything matches; the report goes to stderr.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from seqtrain_torch import from_spec, load_exported, save_seqtrain  # noqa: E402

TOL = 1e-5


def outputs(module, x, lengths=None):
    with torch.no_grad():
        y = module(torch.from_numpy(x)) if lengths is None else module(torch.from_numpy(x), torch.from_numpy(lengths))
    return (y[0] if isinstance(y, tuple) else y).numpy()


def check_against(path, inputs, expected, lengths=None):
    module = load_exported(path)
    if module.training:
        print("load_exported returned a module in training mode", file=sys.stderr)
        return 1
    x = np.load(inputs)
    want = np.load(expected).astype(np.float64)
    got = outputs(module, x, None if lengths is None else np.load(lengths)).astype(np.float64)
    if got.size != want.size:
        print(f"{path}: {got.shape} outputs, seqtrain gave {want.shape}", file=sys.stderr)
        return 1
    diff = np.abs(got.reshape(-1) - want.reshape(-1))
    bound = TOL * (1 + np.abs(want.reshape(-1)))
    print(f"{path}: {type(module).__name__}, {got.size} outputs, max |diff| {diff.max():.3g}", file=sys.stderr)
    return 0 if (diff <= bound).all() else 1


def check_gpt(tmp):
    spec = {"type": "gpt", "vocab_size": 11, "lookback": 8, "hidden": 16, "layers": 2, "heads": 4,
            "bias": False, "dropout": 0.0, "input_size": 1, "output_size": 1, "embed_size": 32}
    torch.manual_seed(0)
    reference = from_spec(spec).eval()
    nano = from_spec({"type": "gpt", "vocab_size": 11, "block_size": 8, "n_embd": 16, "n_layer": 2, "n_head": 4,
                      "bias": False})
    shapes = lambda m: [(k, tuple(v.shape)) for k, v in m.state_dict().items()]  # noqa: E731
    if shapes(reference) != shapes(nano):
        print("gpt: ModelSpec names and nanoGPT names build different modules", file=sys.stderr)
        return 1
    try:
        from_spec({"type": "gpt", "vocab_size": 11, "block_size": 8, "lookback": 9})
        print("gpt: conflicting block_size / lookback were accepted", file=sys.stderr)
        return 1
    except ValueError:
        pass
    os.makedirs(tmp, exist_ok=True)
    save_seqtrain(reference, os.path.join(tmp, "model.safetensors"))
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump({"format": "seqtrain.export", "version": 1, "model_spec": spec, "torch": spec}, f)
    loaded = load_exported(tmp)
    ids = torch.randint(0, 11, (3, 8))
    with torch.no_grad():
        same = torch.equal(reference(ids)[0], loaded(ids)[0])
    print(f"gpt: ModelSpec-named export loads, same logits: {same}", file=sys.stderr)
    return 0 if same else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--gpt":
        return check_gpt(sys.argv[2])
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    return check_against(*sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
