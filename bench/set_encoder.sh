#!/usr/bin/env bash
# set_encoder.sh: the set encoder's training step (the AAM shape, bench/bench_set_encoder.cpp)
# beside PyTorch's nn.TransformerEncoder with src_key_padding_mask (bench/torch_set_encoder.py),
# on the same threads, for the three length patterns (full: no padding, aam: lengths 20..256,
# half: half the steps padding). Peers: PyPI torch (bench/.venv, made by bench/setup_venv.sh)
# eager and torch.compile, and Debian's python3-torch 1.13 eager. Writes
# bench/results/set_encoder-<date>.md with each row's ms/step, GFLOP/s and the ratios the issue
# asks for: seqtrain vs PyTorch eager, and half-padded vs full time for each engine; and
# bench/results/set_encoder-<date>.svg, the chart of ms/step per length pattern and engine
# (bench/plot_svg.py).
#
#   bench/set_encoder.sh                     2 threads, 10 steps after 2 warm-up
#   THREADS=1 STEPS=5 bench/set_encoder.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target bench_set_encoder bench_step >/dev/null
out=bench/results/set_encoder-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
# The f32 matmul peak on the same cores, which each row's GFLOP/s is a share of.
taskset -c 0-$((THREADS - 1)) "$BUILD_DIR/bench_step" --workload peak --threads "$THREADS" --json "$out/peak.txt" >/dev/null
PYPI=bench/.venv/bin/python
for lengths in full aam half; do
  taskset -c 0-$((THREADS - 1)) "$BUILD_DIR/bench_set_encoder" --threads "$THREADS" --steps "$STEPS" \
    --warmup "$WARMUP" --lengths "$lengths" --json "$out/seqtrain-$lengths.json" >/dev/null
  if [ -x "$PYPI" ]; then
    taskset -c 0-$((THREADS - 1)) "$PYPI" bench/torch_set_encoder.py --threads "$THREADS" --steps "$STEPS" \
      --warmup "$WARMUP" --lengths "$lengths" --json "$out/pypi-eager-$lengths.json" >/dev/null
  fi
done
if [ -x "$PYPI" ]; then
  taskset -c 0-$((THREADS - 1)) "$PYPI" bench/torch_set_encoder.py --threads "$THREADS" --steps "$STEPS" \
    --warmup "$WARMUP" --lengths aam --mode compile --json "$out/pypi-compile-aam.json" >/dev/null || true
fi
# Debian's torch 1.13 (reference BLAS here: slow) on the aam batch only, with fewer steps.
taskset -c 0-$((THREADS - 1)) /usr/bin/python3 bench/torch_set_encoder.py --threads "$THREADS" --steps 2 \
  --warmup 1 --lengths aam --json "$out/debian-eager-aam.json" >/dev/null || true
/usr/bin/python3 - "$out" "$THREADS" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "bench")
import plot_svg
out, threads = sys.argv[1], sys.argv[2]
rows = {os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(out + "/*.json"))}
peak = json.load(open(out + "/peak.txt"))["peak"]["matmul_gflops"]
lines = [f"# Set encoder step (AAM shape: batch 64, T 256, F 64, d 128, 4 layers, 4 heads, FF 512)", "",
         f"lscpu model: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}", "",
         f"f32 matmul peak on these cores: {peak:.0f} GFLOP/s", "",
         "| run | engine | lengths | valid share | ms/step | GFLOP/s (padded) | of f32 peak |", "|---|---|---|---|---|---|---|"]
for k, r in rows.items():
    lines.append(f"| {k} | {r['engine']} | {r['lengths']} | {r['valid_share']:.2f} | {r['ms_step']:.1f} | "
                 f"{r['gflops']:.1f} | {100 * r['gflops'] / peak:.0f}% |")
lines.append("")
def ms(k): return rows[k]["ms_step"] if k in rows else None
for L in ("full", "aam", "half"):
    s, e = ms(f"seqtrain-{L}"), ms(f"pypi-eager-{L}")
    if s and e: lines.append(f"- {L}: seqtrain {e / s:.2f}x faster than PyPI torch eager")
if ms("seqtrain-aam") and ms("pypi-compile-aam"):
    lines.append(f"- aam: seqtrain {ms('pypi-compile-aam') / ms('seqtrain-aam'):.2f}x faster than torch.compile")
for eng in ("seqtrain", "pypi-eager"):
    if ms(f"{eng}-half") and ms(f"{eng}-full"):
        lines.append(f"- {eng}: half-padded batch takes {ms(f'{eng}-half') / ms(f'{eng}-full'):.2f}x the full batch's time")
open(out + ".md", "w").write("\n".join(lines) + "\n")
groups = []  # the chart: one group per length pattern, one bar per engine
for L in ("full", "aam", "half"):
    runs = [r for r in rows.values() if r["lengths"] == L]
    if runs:
        groups.append((f"{L} ({runs[0]['valid_share']:.0%} valid)", [(r["engine"], r["ms_step"]) for r in runs]))
plot_svg.write(out + ".svg", f"Set encoder step (AAM shape), seqtrain against PyTorch: {lines[2].split(': ', 1)[1]}, "
               f"{threads} threads", groups, "ms/step",
               subtitle=f"{os.path.basename(out)}; batch 64, T 256, F 64, d 128, 4 layers, 4 heads, FF 512; "
                        f"f32 matmul peak {peak:.0f} GFLOP/s", reference="seqtrain")
print("\n".join(lines))
PY
