#!/usr/bin/env bash
# native_vs_portable.sh: what -march=native gains over the default portable build. Builds both
# (build/ portable, build-native/ with SEQTRAIN_NATIVE=ON), then runs bench_step from each in
# turn, round after round on the same pinned cores, and prints each workload's fastest ms/step
# per build and the portable/native ratio (1.00 = no loss). ISA=avx2 caps both at AVX2.
#   bench/native_vs_portable.sh                 W1 W1GRU W2, 3 rounds
#   WORKLOADS=W1 REPEAT=5 bench/native_vs_portable.sh
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
WORKLOADS=${WORKLOADS:-"W1 W1GRU W2"}
REPEAT=${REPEAT:-3}
[ -n "${ISA:-}" ] && export SEQTRAIN_ISA=$ISA
for b in build build-native; do
  native=OFF; [ $b = build-native ] && native=ON
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DSEQTRAIN_NATIVE=$native >/dev/null
  cmake --build $b --target bench_step >/dev/null
done
source bench/pin.sh
tmp=$(mktemp -d)
echo "| workload | portable ms/step (best of $REPEAT) | native ms/step | portable / native |"
echo "|---|---|---|---|"
for w in $WORKLOADS; do
  for ((r = 1; r <= REPEAT; r++)); do
    for b in build build-native; do
      "${PIN[@]}" $b/bench_step --workload "$w" --threads "$THREADS" --steps "${STEPS:-5}" --warmup "${WARMUP:-2}" \
        --peak-gflops 1 --json "$tmp/$w.$b.$r.json" >/dev/null 2>&1
    done
  done
  python3 - "$tmp" "$w" <<'PY'
import glob, json, sys
tmp, w = sys.argv[1], sys.argv[2]
best = {b: min(json.load(open(p))["ms_per_step"] for p in glob.glob(f"{tmp}/{w}.{b}.*.json")) for b in ("build", "build-native")}
print(f"| {w} | {best['build']:.1f} | {best['build-native']:.1f} | {best['build'] / best['build-native']:.3f} |")
PY
done
rm -rf "$tmp"
