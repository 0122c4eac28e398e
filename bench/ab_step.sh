#!/usr/bin/env bash
# ab_step.sh: the training step of two builds, paired. Runs BASE's and NEW's bench_step in turn,
# round after round on the same pinned cores, each workload's step with both binaries' own
# defaults, and prints per workload the median ms/step of each and the median of the per-round
# ratios NEW/BASE (1.00 = same speed; issue #21 asks for W1, W1GRU and W2 within 2% of facea28).
#   git worktree add ../base facea28 && cmake -S ../base -B ../base/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build ../base/build --target bench_step
#   bench/ab_step.sh ../base/build build            W1 W1GRU W2, 5 rounds
#   WORKLOADS=W1 REPEAT=7 bench/ab_step.sh BASE_BUILD NEW_BUILD
#   NEW_ARGS="--autotune off" bench/ab_step.sh ...   flags for NEW's bench_step only (a base
#                                                    older than its flags)
set -euo pipefail
BASE=${1:?usage: bench/ab_step.sh BASE_BUILD_DIR NEW_BUILD_DIR}
NEW=${2:?usage: bench/ab_step.sh BASE_BUILD_DIR NEW_BUILD_DIR}
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
WORKLOADS=${WORKLOADS:-"W1 W1GRU W2"}
REPEAT=${REPEAT:-5}
source bench/pin.sh
tmp=$(mktemp -d)
echo "| workload | base ms/step (median of $REPEAT) | new ms/step | new / base (median of pairs) |"
echo "|---|---|---|---|"
for w in $WORKLOADS; do
  for ((r = 1; r <= REPEAT; r++)); do
    for side in base new; do
      bin=$BASE/bench_step; extra=()
      [ $side = new ] && bin=$NEW/bench_step && read -ra extra <<< "${NEW_ARGS:-}"
      "${PIN[@]}" "$bin" "${extra[@]}" --workload "$w" --threads "$THREADS" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" \
        --peak-gflops 1 --json "$tmp/$w.$side.$r.json" >/dev/null 2>&1
    done
  done
  python3 - "$tmp" "$w" "$REPEAT" <<'PY'
import json, statistics, sys
tmp, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ms = lambda side, r: json.load(open(f"{tmp}/{w}.{side}.{r}.json"))["ms_per_step"]
base = [ms("base", r) for r in range(1, n + 1)]
new = [ms("new", r) for r in range(1, n + 1)]
ratio = statistics.median(b2 / b1 for b1, b2 in zip(base, new))
print(f"| {w} | {statistics.median(base):.1f} | {statistics.median(new):.1f} | {ratio:.3f} |")
PY
done
rm -rf "$tmp"
