#!/usr/bin/env bash
# gpt_precision_ratio.sh: issue 14's "bf16 >= 1.6x over our own fp32" in one command. Runs
# build/bench_gpt at one shape in fp32 and bf16 alternately, ROUNDS times, and reports each
# round's ratio and their median. On a shared machine whose speed drifts for minutes at a time
# (docs/BENCHMARKS.md), a ratio is only sound between two runs taken back to back: this script
# never compares runs of different rounds.
#
#   bench/gpt_precision_ratio.sh                    cpu shape, 2 threads, 6 rounds
#   SHAPE=gpu BATCH=64 STEPS=4 WARMUP=1 ROUNDS=3 bench/gpt_precision_ratio.sh   the GPU recipe's batch
#   THREADS=1 CLOCK=cpu bench/gpt_precision_ratio.sh                            process CPU time
#
# Writes bench/results/gpt-ratio-<shape>-<date>.md (raw JSON beside it) and its chart, .svg (each
# round's fp32 and bf16 ms/step, the ratio on the fp32 bar; bench/plot_svg.py). Needs a CPU with
# AVX512-BF16 (bench_gpt refuses bf16 elsewhere, and then so does this script).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
BUILD_DIR=${BUILD_DIR:-build}
SHAPE=${SHAPE:-cpu}
ROUNDS=${ROUNDS:-6}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-3}
CLOCK=${CLOCK:-wall}
BATCH_ARGS=()
if [ -n "${BATCH:-}" ]; then BATCH_ARGS=(--batch "$BATCH"); fi

if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target bench_gpt >/dev/null
fi
source bench/pin.sh
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- src 2>/dev/null)" ]; then rev="$rev+dirty"; fi
stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/gpt-ratio-$SHAPE-$stamp
mkdir -p "$out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

for r in $(seq 1 "$ROUNDS"); do
  for p in fp32 bf16; do
    "${PIN[@]}" "$BUILD_DIR/bench_gpt" --shape "$SHAPE" "${BATCH_ARGS[@]}" --precision "$p" --threads "$THREADS" \
      --steps "$STEPS" --warmup "$WARMUP" --profile-steps 0 --clock "$CLOCK" --json "$out/round$r.$p.json" \
      > "$out/round$r.$p.log" 2>&1 || { echo "bench_gpt $p failed (round $r): see $out/round$r.$p.log" >&2; exit 1; }
  done
  echo "round $r: $(tail -1 "$out/round$r.fp32.log" | sed 's/.*: //') | $(tail -1 "$out/round$r.bf16.log" | sed 's/.*: //')"
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out" "$ROUNDS" "$SHAPE" "$THREADS" "$CLOCK" "$rev" "$pinned" "$out.md" "$load_before / $load_after" <<'EOF'
import json, os, statistics, sys
sys.path.insert(0, "bench")
import plot_svg
out, rounds, shape, threads, clock, rev, pinned, md, load = sys.argv[1:]
rows = []
for r in range(1, int(rounds) + 1):
    f = json.load(open(f"{out}/round{r}.fp32.json"))["step"]["ms_median"]
    b = json.load(open(f"{out}/round{r}.bf16.json"))["step"]["ms_median"]
    rows.append((r, f, b, f / b))
first = json.load(open(f"{out}/round1.fp32.json"))
ratios = [x[3] for x in rows]
with open(md, "w") as o:
    o.write(f"# bf16 over own fp32, GPT step, {shape} shape (batch {first['shape']['batch']})\n\n")
    o.write(f"seqtrain {rev}; {threads} threads ({pinned}); clock {clock}; medians of each run's timed steps; "
            f"fp32 and bf16 back to back in every round; load average before / after: {load} (the runs "
            f"themselves add about {threads}: more means other work shared the cores).\n\n")
    o.write("| round | fp32 ms/step | bf16 ms/step | bf16 / fp32 |\n|---|---|---|---|\n")
    for r, f, b, q in rows:
        o.write(f"| {r} | {f:.2f} | {b:.2f} | {q:.3f} |\n")
    o.write(f"\n**median of the rounds: {statistics.median(ratios):.3f}x** (range {min(ratios):.3f}–{max(ratios):.3f}); "
            f"target ≥ 1.6x: {'met' if statistics.median(ratios) >= 1.6 else 'missed'}\n")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
plot_svg.write(out + ".svg", f"GPT step, bf16 over own fp32 ({shape} shape, batch {first['shape']['batch']}): {cpu}, "
               f"{threads} threads", [(f"round {r}", [("fp32", f), ("bf16", b)]) for r, f, b, _ in rows],
               f"ms/step ({clock} clock)", reference="bf16",
               subtitle=f"{os.path.basename(out)}; seqtrain {rev}; median of the rounds' ratios "
                        f"{statistics.median(ratios):.3f}x (target >= 1.6x)")
print(open(md).read())
EOF
echo "wrote $out.md"
