"""PyTorch reference for masked pretraining's objective: the masked MSE and the std (collapse)
penalty, with their gradients, in float64.

usage: masked_loss_ref.py PRED TARGET MASK OUT_DIR [ENC [VALID]]

Inputs (.npy; any float or integer dtype, read as float64 / bool):
  PRED, TARGET  [B, T, F]  the decoder's reconstruction and the unmasked input
  MASK          [B, T, F] or [B, T] (one flag per step, all its features)  nonzero = masked
  ENC           [B, T, C]  the encoder's per-step output (optional: the penalty is computed
                           only when it is given)
  VALID         [B, T] (nonzero = a valid step) or [B] integer lengths (steps 0..len-1 valid);
                optional, default every step valid. It selects the penalty's rows only: MASK
                is taken as given (a loss mask already holds no padding).

Definitions (exactly what seqtrain's masked_pretrain objective must compute):
  masked MSE   loss = sum over masked elements of (pred - target)^2 / (number of masked
               elements), an element being one (sample, step, feature); a [B, T] mask counts
               F elements per masked step. A case with no masked element (0/0) is refused.
  std penalty  rows = the valid steps of ENC flattened over (batch, steps): H [N, C];
               std_c = sqrt(mean_n (H[n, c] - mean_n H[n, c])^2), the population std
               (torch.std(unbiased=False)), per dimension c;
               penalty = mean_c relu(1 - std_c), unweighted (the objective adds
               train.masking.std_penalty * penalty, so its gradient is that weight times
               the one written here). A dimension with std exactly 0 has no gradient (NaN in
               torch); callers keep ENC non-constant.

Writes to OUT_DIR: loss_ref.npy [1], grad_pred_ref.npy [B, T, F] (d loss / d PRED), and with
ENC: penalty_ref.npy [1], grad_enc_ref.npy [B, T, C] (d penalty / d ENC; zero on invalid
steps). Prints one JSON line: {"masked_mse", "masked_count", "std_penalty", "valid_rows"}.
"""
import json
import os
import sys

import numpy as np
import torch


def fail(msg):
    print(f"masked_loss_ref: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path, what):
    try:
        return np.load(path)
    except (OSError, ValueError) as e:
        fail(f"cannot read {what} {path}: {e}")


def masked_mse(pred, target, mask):
    """(loss, count) of the masked MSE; pred requires grad."""
    if mask.dim() == 2:
        mask = mask.unsqueeze(-1).expand_as(pred)
    m = mask.to(pred.dtype)
    count = m.sum()
    if count.item() == 0:
        fail("the mask masks no element: the masked MSE is 0/0")
    return ((pred - target) ** 2 * m).sum() / count, int(count.item())


def valid_rows(valid, b, t):
    """[B, T] bool of the valid steps from a [B, T] flag array or [B] lengths."""
    if valid is None:
        return torch.ones(b, t, dtype=torch.bool)
    v = torch.from_numpy(valid)
    if v.dim() == 1:
        if v.shape[0] != b:
            fail(f"VALID holds {v.shape[0]} lengths for a batch of {b}")
        return torch.arange(t).unsqueeze(0) < v.long().unsqueeze(1)
    if tuple(v.shape) != (b, t):
        fail(f"VALID has shape {tuple(v.shape)}, expected ({b}, {t}) or ({b},)")
    return v != 0


def std_penalty(enc, valid):
    """mean_c relu(1 - population std over the valid rows of enc [B, T, C])."""
    h = enc[valid]  # [N, C]
    if h.shape[0] < 2:
        fail(f"{h.shape[0]} valid step(s): the std over them is undefined or 0")
    return torch.relu(1 - torch.std(h, dim=0, unbiased=False)).mean(), h.shape[0]


def main(argv):
    if len(argv) not in (4, 5, 6):
        fail("usage: masked_loss_ref.py PRED TARGET MASK OUT_DIR [ENC [VALID]]")
    torch.set_num_threads(1)
    pred = torch.from_numpy(load(argv[0], "PRED")).double().requires_grad_(True)
    target = torch.from_numpy(load(argv[1], "TARGET")).double()
    mask = torch.from_numpy(load(argv[2], "MASK")) != 0
    out = argv[3]
    if pred.dim() != 3 or pred.shape != target.shape:
        fail(f"PRED {tuple(pred.shape)} and TARGET {tuple(target.shape)} must be the same [B, T, F]")
    if tuple(mask.shape) not in (tuple(pred.shape), tuple(pred.shape[:2])):
        fail(f"MASK has shape {tuple(mask.shape)}, expected {tuple(pred.shape)} or {tuple(pred.shape[:2])}")
    os.makedirs(out, exist_ok=True)
    loss, count = masked_mse(pred, target, mask)
    loss.backward()
    np.save(os.path.join(out, "loss_ref.npy"), loss.detach().reshape(1).numpy())
    np.save(os.path.join(out, "grad_pred_ref.npy"), pred.grad.numpy())
    result = {"masked_mse": loss.item(), "masked_count": count}
    if len(argv) >= 5:
        enc = torch.from_numpy(load(argv[4], "ENC")).double().requires_grad_(True)
        if enc.dim() != 3 or enc.shape[:2] != pred.shape[:2]:
            fail(f"ENC has shape {tuple(enc.shape)}, expected ({pred.shape[0]}, {pred.shape[1]}, C)")
        valid = valid_rows(load(argv[5], "VALID") if len(argv) == 6 else None, enc.shape[0], enc.shape[1])
        penalty, rows = std_penalty(enc, valid)
        penalty.backward()
        np.save(os.path.join(out, "penalty_ref.npy"), penalty.detach().reshape(1).numpy())
        np.save(os.path.join(out, "grad_enc_ref.npy"), enc.grad.numpy())
        result.update(std_penalty=penalty.item(), valid_rows=rows)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
