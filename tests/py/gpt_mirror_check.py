"""Loads a seqtrain GPT model.safetensors into seqtrain_torch.GPT and writes it back.

Usage: gpt_mirror_check.py --vocab V --block T --n-layer L --n-head H --n-embd C [--bias 0|1]
           [--expect-strict-failure] [--expect-meta key=value ...] [--expect-same-bytes]
           INPUT [OUTPUT]

Checks that the module's state_dict has exactly the file's names and shapes (both tied keys,
transformer.wte.weight and lm_head.weight, included, with byte-identical data), that
load_seqtrain (load_state_dict(strict=True)) accepts it, that every tensor arrives bit for bit
and the tie survives loading (one Parameter), and that a forward pass with targets gives finite
logits [2, T, V] and a finite loss. With OUTPUT, saves the module with save_seqtrain (metadata
writer=seqtrain_torch) and checks that OUTPUT reads back bit for bit. --expect-same-bytes also
saves it with INPUT's own metadata and requires the very bytes of INPUT (true when seqtrain
writes the tensors in state_dict order, as its writer and save_file format headers alike).
Exit codes as mirror_check.py: 0 success, 3 strict loading refused the file (what
--expect-strict-failure wants; a file whose tied copies differ counts as refused), anything
else a failure.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

from seqtrain_torch import load_file, load_seqtrain, read_file, save_seqtrain
from seqtrain_torch.gpt import GPT, GPTConfig

STRICT_REFUSED = 3


def fail(msg):
    print(msg, file=sys.stderr)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--block", type=int, required=True)
    ap.add_argument("--n-layer", type=int, required=True)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--n-embd", type=int, required=True)
    ap.add_argument("--bias", type=int, choices=[0, 1], default=1)
    ap.add_argument("--expect-strict-failure", action="store_true")
    ap.add_argument("--expect-meta", action="append", default=[], help="key=value the file's metadata must hold")
    ap.add_argument("--expect-same-bytes", action="store_true")
    ap.add_argument("input")
    ap.add_argument("output", nargs="?")
    a = ap.parse_args()

    torch.manual_seed(0)
    cfg = GPTConfig(block_size=a.block, vocab_size=a.vocab, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
                    dropout=0.1, bias=bool(a.bias))
    module = GPT(cfg)

    if a.expect_strict_failure:
        try:
            load_seqtrain(a.input, module)
        except RuntimeError as e:  # load_state_dict(strict=True)'s refusals, and differing tied copies
            print(f"strict load refused the file as expected: {e}", file=sys.stderr)
            return STRICT_REFUSED
        return fail("strict load unexpectedly accepted the file")

    arrays, meta = read_file(a.input)
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in arrays.items()}
    if want != got:
        return fail(f"name/shape mismatch\n  module only: {sorted(set(want.items()) - set(got.items()))}\n"
                    f"  file only:   {sorted(set(got.items()) - set(want.items()))}")
    if arrays["transformer.wte.weight"].tobytes() != arrays["lm_head.weight"].tobytes():
        return fail("the file's transformer.wte.weight and lm_head.weight differ; the tied head must be "
                    "stored under both names with identical bytes")
    for kv in a.expect_meta:
        k, v = kv.split("=", 1)
        if meta.get(k) != v:
            return fail(f"metadata {k!r} is {meta.get(k)!r}, expected {v!r}")

    try:
        got_meta = load_seqtrain(a.input, module)
    except RuntimeError as e:
        print(f"strict load refused the file: {e}", file=sys.stderr)
        return STRICT_REFUSED
    if got_meta != meta:
        return fail("load_seqtrain returned different metadata")
    if module.lm_head.weight is not module.transformer.wte.weight:
        return fail("loading broke the tie between lm_head.weight and transformer.wte.weight")
    for k, p in module.state_dict().items():
        if p.dtype != torch.float32 or arrays[k].dtype != np.float32 or \
                not np.array_equal(p.numpy().view(np.uint32), arrays[k].view(np.uint32)):
            return fail(f"parameter {k} did not arrive bit for bit (file dtype {arrays[k].dtype})")

    module.eval()
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, a.vocab, (2, a.block), generator=g)
    tgt = torch.randint(0, a.vocab, (2, a.block), generator=g)
    with torch.no_grad():
        logits, loss = module(idx, tgt)
    if tuple(logits.shape) != (2, a.block, a.vocab) or not torch.isfinite(logits).all() or \
            not torch.isfinite(loss):
        return fail(f"forward produced logits {tuple(logits.shape)}, finite={bool(torch.isfinite(logits).all())}, "
                    f"loss {loss.item()}")

    if a.output:
        save_seqtrain(module, a.output, metadata={"writer": "seqtrain_torch"})
        back = load_file(a.output)
        if set(back) != set(arrays):
            return fail(f"save_seqtrain wrote names {sorted(back)}, expected {sorted(arrays)}")
        for k in arrays:
            if back[k].dtype != arrays[k].dtype or back[k].tobytes() != arrays[k].tobytes():
                return fail(f"save_seqtrain did not write back {k} bit for bit")
    if a.expect_same_bytes:
        with tempfile.TemporaryDirectory() as td:
            again = os.path.join(td, "again.safetensors")
            save_seqtrain(module, again, metadata=meta)
            with open(a.input, "rb") as f1, open(again, "rb") as f2:
                b1, b2 = f1.read(), f2.read()
            if b1 != b2:
                n = int.from_bytes(b1[:8], "little")
                return fail(f"re-saving with the input's metadata gave different bytes ({len(b2)} vs {len(b1)}); "
                            f"input header: {b1[8:8 + n].decode(errors='replace')[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
