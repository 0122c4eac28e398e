#!/usr/bin/env bash
# pretrain_accuracy.sh: test accuracy on UCR GunPoint and UEA BasicMotions (scripts/fetch_ucr.sh) of
# the classifier fine-tuned from a masked-pretrained encoder (examples/ucr_pretrain.yaml, then
# examples/ucr_finetune.yaml) beside the same classifier trained from scratch with the same
# budget (the fine-tuning config without model.encoder_from and without the frozen epochs), over
# seeds 0..4. Writes bench/results/pretrain_accuracy-<date>.md with each run's accuracy and each
# arm's mean and spread (min-max, and the population std), and bench/results/pretrain_accuracy-<date>.svg,
# the chart of each arm's mean accuracy per dataset (bench/plot_svg.py).
#
#   bash scripts/fetch_ucr.sh && bench/pretrain_accuracy.sh
#   SEEDS="0 1" DATASETS=GunPoint bench/pretrain_accuracy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"0 1 2 3 4"}
DATASETS=${DATASETS:-"GunPoint BasicMotions"}
BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/seqtrain
cmake --build "$BUILD_DIR" --target seqtrain >/dev/null
out=bench/results/pretrain_accuracy-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
acc() { "$BIN" eval "$1" 2>/dev/null | sed -n 's/^accuracy: //p'; }
for ds in $DATASETS; do
  d=data/ucr/$ds
  [ -f "$d/train_x.npy" ] || { echo "pretrain_accuracy: $d/train_x.npy missing: run bash scripts/fetch_ucr.sh" >&2; exit 1; }
  data=(--set "data.npy.train_x=$d/train_x.npy" --set "data.npy.train_y=$d/train_y.npy"
        --set "data.npy.test_x=$d/test_x.npy" --set "data.npy.test_y=$d/test_y.npy")
  for seed in $SEEDS; do
    "$BIN" train examples/ucr_pretrain.yaml --set "data.npy.train_x=$d/train_x.npy" --set "seed=$seed" \
      --out "$out/$ds-pretrain-$seed" --quiet >/dev/null
    "$BIN" train examples/ucr_finetune.yaml "${data[@]}" --set "seed=$seed" \
      --set "model.encoder_from=$out/$ds-pretrain-$seed" --out "$out/$ds-finetune-$seed" --quiet >/dev/null
    "$BIN" train examples/ucr_finetune.yaml "${data[@]}" --set "seed=$seed" --set model.encoder_from= \
      --set train.freeze_encoder_epochs=0 --set train.encoder_lr_scale=1 --out "$out/$ds-scratch-$seed" \
      --quiet >/dev/null
    echo "$ds $seed $(acc "$out/$ds-finetune-$seed") $(acc "$out/$ds-scratch-$seed")" | tee -a "$out/accuracy.txt"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import os, statistics, sys
sys.path.insert(0, "bench")
import plot_svg
out = sys.argv[1]
rows = [l.split() for l in open(out + "/accuracy.txt") if l.strip()]
lines = ["# Test accuracy: fine-tuned from masked pretraining vs from scratch (same budget)", "",
         "| dataset | seeds | fine-tuned: mean (min-max, std) | from scratch: mean (min-max, std) |", "|---|---|---|---|"]
def stat(v):
    return f"{statistics.mean(v):.3f} ({min(v):.3f}-{max(v):.3f}, {statistics.pstdev(v):.3f})"
for ds in dict.fromkeys(r[0] for r in rows):
    ft = [float(r[2]) for r in rows if r[0] == ds]
    sc = [float(r[3]) for r in rows if r[0] == ds]
    lines.append(f"| {ds} | {len(ft)} | {stat(ft)} | {stat(sc)} |")
open(out + ".md", "w").write("\n".join(lines) + "\n")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
plot_svg.write(out + ".svg", f"Test accuracy, fine-tuned from masked pretraining against from scratch: {cpu}",
               [(f"{ds} ({sum(r[0] == ds for r in rows)} seeds)",
                 [("fine-tuned from pretraining", statistics.mean(float(r[2]) for r in rows if r[0] == ds)),
                  ("from scratch", statistics.mean(float(r[3]) for r in rows if r[0] == ds))])
                for ds in dict.fromkeys(r[0] for r in rows)],
               "test accuracy, mean over the seeds", lower_is_better=False, value_fmt=lambda v: f"{v:.3f}",
               subtitle=f"{os.path.basename(out)}; examples/ucr_pretrain.yaml then examples/ucr_finetune.yaml, "
                        "against the same classifier from scratch with the same budget")
print("\n".join(lines))
PY
