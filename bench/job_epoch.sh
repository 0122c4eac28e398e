#!/usr/bin/env bash
# The forecasting job end to end on W1's shape (batch 256, lookback 150, 8 features, LSTM 128x2):
# one epoch of `seqtrain train` (data, training, validation, checkpoints) against the equivalent
# PyTorch script (Dataset + DataLoader, same loop, torch.save), same threads, same CSV.
# Usage: [THREADS=2] [BATCHES=12] [PYBINS="python ..."] bench/job_epoch.sh   (from the repository root)
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
# AUGMENT=1: every augmentation on (seqtrain only; the PyTorch script has none, so no peers run
# and only seqtrain's own figures, the data wait above all, are printed).
if [ "${AUGMENT:-0}" = 1 ]; then
  sed -i 's/split: \[0.7, 0.15, 0.15\]}/split: [0.7, 0.15, 0.15], augment: {jitter_sigma: 0.03, scale_sigma: 0.1, warp_sigma: 0.2, shift_max: 5, mask_prob: 0.02, mask_width: 4}}/' "$W/job.yaml"
  PYBINS=none
fi
start=$(date +%s.%N)
$PIN $BIN train "$W/job.yaml" --out "$W/run" --quiet > "$W/st.log"
st_total=$(/usr/bin/python3 -c "print($(date +%s.%N) - $start)")
read -r st_train st_wait <<<"$(/usr/bin/python3 -c "
import json; r=[json.loads(l) for l in open('$W/run/metrics.jsonl')]; d=[x for x in r if x['split']=='data'][0]
print(d['epoch_train_s'], d['data_wait_s'])")"
st_ckpt=$(sed -n 's/^checkpoint_block_s: //p' "$W/st.log")
# Peers: Debian's torch (python3-torch) and, when bench/setup_venv.sh made it, PyPI's torch;
# PYBINS overrides the list. Every peer runs the same script on the same CSV in this command.
DEFAULT_PEERS=/usr/bin/python3; [ -x bench/.venv/bin/python ] && DEFAULT_PEERS="$DEFAULT_PEERS bench/.venv/bin/python"
PYBINS=${PYBINS:-${PYBIN:-$DEFAULT_PEERS}}
i=0; for py in $PYBINS; do
  [ "$py" = none ] && break
  $PIN $py "$(dirname "$0")/torch_job.py" "$W/w1.csv" "$THREADS" "$W/torch.pt" > "$W/torch$i.json"
  i=$((i+1))
done
/usr/bin/python3 - "$st_total" "$st_train" "$st_wait" "$BATCHES" "$THREADS" "$st_ckpt" $(ls "$W"/torch*.json 2>/dev/null | sort) <<'PY'
import json, sys
total, train, wait = map(float, sys.argv[1:4]); batches, threads = sys.argv[4], sys.argv[5]
ckpt = float(sys.argv[6]); peers = [json.load(open(f)) for f in sys.argv[7:]]
name = lambda t: f"torch {t['torch']}"
print(f"| job epoch, W1 shape, {batches} batches, {threads} threads | seqtrain | "
      + " | ".join(f"{name(t)} | speedup" for t in peers) + " |")
print("|---|---|" + "---|---|" * len(peers))
row = lambda label, mine, key: print(f"| {label} | {mine:.2f} | " + " | ".join(
    f"{t[key]:.2f} | **{t[key] / mine:.1f}x**" for t in peers) + " |")
row("whole job (process start to exit) s", total, "total_s")
row("training epoch s", train, "train_s")
blank = "  |" * (2 * len(peers))
print(f"| seqtrain data wait s (share of epoch) | {wait:.4f} ({100*wait/train:.2f}%) |{blank}")
print(f"| seqtrain checkpoint time the loop waited (share of epoch) | {ckpt:.4f} ({100*ckpt/train:.2f}%) |{blank}")
print(f"| everything but training steps (start-up, data, validation, checkpoints) s | {total-train:.2f} ({100*(total-train)/total:.1f}% of job) | "
      + " | ".join(f"{t['total_s']-t['train_s']:.2f} | " for t in peers) + "|")
PY
