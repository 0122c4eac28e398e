#!/usr/bin/env bash
# pretrain.sh: masked pretraining's step at moola's shape (bench/bench_pretrain.cpp: batch 512, T 105,
# F 4, patch masking at 15%, LayerNorm-MLP decoder, masked MSE, AdamW) beside PyTorch's
# (bench/torch_pretrain.py), on the same threads, for the 2-layer BiLSTM (hidden 128) and the
# 4-layer transformer (d 128); and seqtrain's fine-tuning step with the encoder frozen against the
# same step learning. Peers: PyPI torch (bench/.venv, made by bench/setup_venv.sh) eager and
# torch.compile, Debian's python3-torch 1.13 eager (a step or two: its reference BLAS is slow).
# Writes bench/results/pretrain-<date>.md with each row's ms/step and GFLOP/s and the ratios, and
# bench/results/pretrain-<date>.svg, the chart of ms/step per encoder and engine (bench/plot_svg.py).
#
#   bench/pretrain.sh                      2 threads, 10 steps after 2 warm-up
#   THREADS=1 STEPS=5 bench/pretrain.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target bench_pretrain bench_step >/dev/null
out=bench/results/pretrain-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
pin() { taskset -c 0-$((THREADS - 1)) "$@"; }
pin "$BUILD_DIR/bench_step" --workload peak --threads "$THREADS" --json "$out/peak.txt" >/dev/null
PYPI=bench/.venv/bin/python
for model in bilstm transformer; do
  pin "$BUILD_DIR/bench_pretrain" --model "$model" --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" \
    --json "$out/seqtrain-$model.json" >/dev/null
  if [ -x "$PYPI" ]; then
    pin "$PYPI" bench/torch_pretrain.py --model "$model" --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" \
      --json "$out/pypi-eager-$model.json" >/dev/null
    pin "$PYPI" bench/torch_pretrain.py --model "$model" --compile --threads "$THREADS" --steps "$STEPS" \
      --warmup "$WARMUP" --json "$out/pypi-compile-$model.json" >/dev/null || true
  fi
  timeout 240 taskset -c 0-$((THREADS - 1)) /usr/bin/python3 bench/torch_pretrain.py --model "$model" --threads "$THREADS" --steps 1 --warmup 0 \
    --json "$out/debian-eager-$model.json" >/dev/null || true
done
for ft in frozen unfrozen; do
  pin "$BUILD_DIR/bench_pretrain" --model bilstm --finetune "$ft" --threads "$THREADS" --steps "$STEPS" \
    --warmup "$WARMUP" --json "$out/seqtrain-finetune-$ft.json" >/dev/null
done
/usr/bin/python3 - "$out" "$THREADS" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "bench")
import plot_svg
out, threads = sys.argv[1], sys.argv[2]
rows = {os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(out + "/*.json"))}
peak = json.load(open(out + "/peak.txt"))["peak"]["matmul_gflops"]
cpu = open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()
lines = ["# Masked pretraining step (moola's shape: batch 512, T 105, F 4; BiLSTM 2x128 or transformer 4 x d128)", "",
         f"lscpu model: {cpu}", "", f"f32 matmul peak on these cores: {peak:.0f} GFLOP/s", "",
         "| run | engine | ms/step | GFLOP/s | of f32 peak |", "|---|---|---|---|---|"]
for k, r in rows.items():
    if "error" in r:
        lines.append(f"| {k} | {r['engine']} | failed: {r['error'][:80]} | | |")
        continue
    g = r.get("gflops", 0.0)
    lines.append(f"| {k} | {r['engine']} | {r['ms_step']:.1f} | {g:.1f} | {100 * g / peak:.0f}% |")
lines.append("")
def ms(k): return rows[k]["ms_step"] if k in rows and "ms_step" in rows[k] else None
for m in ("bilstm", "transformer"):
    s = ms(f"seqtrain-{m}")
    for peer in ("pypi-eager", "pypi-compile", "debian-eager"):
        p = ms(f"{peer}-{m}")
        if s and p: lines.append(f"- {m}: seqtrain {p / s:.2f}x faster than {rows[f'{peer}-{m}']['engine']}")
if ms("seqtrain-finetune-frozen") and ms("seqtrain-finetune-unfrozen"):
    lines.append(f"- fine-tuning with the encoder frozen costs "
                 f"{ms('seqtrain-finetune-frozen') / ms('seqtrain-finetune-unfrozen'):.2f}x an unfrozen step")
open(out + ".md", "w").write("\n".join(lines) + "\n")
groups = [(f"{m} pretraining step", [(rows[k]["engine"], ms(k)) for k in rows
                                     if k.endswith("-" + m) and not k.startswith("seqtrain-finetune") and ms(k)])
          for m in ("bilstm", "transformer")]
groups.append(("BiLSTM fine-tuning step (seqtrain)", [(f"seqtrain, encoder {ft}", ms(f"seqtrain-finetune-{ft}"))
                                                      for ft in ("frozen", "unfrozen")]))
plot_svg.write(out + ".svg", f"Masked pretraining step (moola's shape), seqtrain against PyTorch: {cpu}, {threads} threads",
               [g for g in groups if any(v for _, v in g[1])], "ms/step",
               subtitle=f"{os.path.basename(out)}; batch 512, T 105, F 4; f32 matmul peak {peak:.0f} GFLOP/s",
               reference="seqtrain")
print("\n".join(lines))
PY
