#!/usr/bin/env bash
# run.sh: the step benchmark in one command. Builds bench_step, measures the f32 matmul peak,
# then runs seqtrain and every PyTorch peer on each workload with the same thread count,
# pinned to the same cores, and writes bench/results/step-<date>.md and .csv (raw JSON in
# bench/results/step-<date>/).
#
#   bench/run.sh                          2 threads, workloads W1 W1GRU W2
#   THREADS=1 WORKLOADS="W1" bench/run.sh
#   STEPS=20 WARMUP=3 bench/run.sh        override the per-workload step counts below
#   BUILD_DIR=build-bench bench/run.sh    build directory (default build)
#   REPEAT=3 bench/run.sh                 run each (workload, engine) 3 times, keep the fastest
#                                         (a shared machine's other jobs only ever slow a run)
#
# Peers: Debian's /usr/bin/python3 (python3-torch 1.13) and, when bench/setup_venv.sh has
# made it, bench/.venv/bin/python (PyPI torch). Each run is a fresh process, so peak RSS is
# that engine's own.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
WORKLOADS=${WORKLOADS:-"W1 W1GRU W2"}
BUILD_DIR=${BUILD_DIR:-build}

# Default step counts: small enough for a few minutes on 2 cores (see docs/BENCHMARKS.md).
# Debian's torch 1.13 calls the reference (netlib) BLAS here and takes tens of seconds a step,
# so it gets fewer; STEPS/WARMUP override every engine, SLOW_STEPS/SLOW_WARMUP that one.
steps_for() {  # engine -> "steps warmup repeats"
  case "$1" in
    torch-debian) echo "${SLOW_STEPS:-${STEPS:-2}} ${SLOW_WARMUP:-${WARMUP:-1}} ${SLOW_REPEAT:-1}" ;;
    *) echo "${STEPS:-5} ${WARMUP:-2} ${REPEAT:-1}" ;;
  esac
}

# run_best TAG WORKLOAD CMD...: runs CMD --steps --warmup --json <file> `repeats` times and
# keeps the run with the lowest median ms/step as $out/WORKLOAD.TAG.json (all in repeats/).
run_best() {
  local tag=$1 w=$2; shift 2
  local steps warmup repeats best="" best_ms="" f ms
  read -r steps warmup repeats <<<"$(steps_for "$tag")"
  for ((r = 1; r <= repeats; r++)); do
    echo "== $w $tag, run $r/$repeats ($steps steps after $warmup warm-up)"
    f="$out/repeats/$w.$tag.r$r.json"
    "${PIN[@]}" "$@" --steps "$steps" --warmup "$warmup" --json "$f" >/dev/null
    ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ms_per_step"])' "$f")
    echo "   $ms ms/step"
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $ms < $best_ms else 1)"; then
      best=$f; best_ms=$ms
    fi
  done
  cp "$best" "$out/$w.$tag.json"
}

stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/step-$stamp
mkdir -p "$out/repeats"

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" --target bench_step >/dev/null
BENCH="$BUILD_DIR/bench_step"

PIN=()
pinned=no
if command -v taskset >/dev/null && [ "$THREADS" -le "$(nproc)" ]; then
  PIN=(taskset -c "0-$((THREADS - 1))")
  pinned="cores 0-$((THREADS - 1))"
fi
# One thread count for every OpenMP runtime involved (oneDNN's, torch's).
export OMP_NUM_THREADS=$THREADS

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- src 2>/dev/null)" ]; then rev="$rev+dirty"; fi

declare -A PEERS=()
PEER_ORDER=()
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  PEERS[debian]=/usr/bin/python3; PEER_ORDER+=(debian)
fi
if [ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import torch' 2>/dev/null; then
  PEERS[pypi]=bench/.venv/bin/python; PEER_ORDER+=(pypi)
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== f32 matmul peak ($THREADS threads)"
"${PIN[@]}" "$BENCH" --workload peak --threads "$THREADS" --json "$out/peak.json" >/dev/null
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gflops"])' "$out/peak.json")
echo "   $peak GFLOP/s"

for w in $WORKLOADS; do
  run_best seqtrain "$w" "$BENCH" --workload "$w" --threads "$THREADS" --peak-gflops "$peak" --rev "$rev"
  for p in "${PEER_ORDER[@]}"; do
    run_best "torch-$p" "$w" "${PEERS[$p]}" bench/torch_step.py --workload "$w" --threads "$THREADS" \
      --peak-gflops "$peak"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The peak once more at the end: the report uses the higher of the two (a peak is a best case).
"${PIN[@]}" "$BENCH" --workload peak --threads "$THREADS" --json "$out/peak-end.json" >/dev/null

python3 - "$out/meta.json" <<EOF
import json, sys
json.dump({
  "date": "$stamp", "threads": $THREADS, "pinned": "$pinned",
  "cpu": "$(lscpu | sed -n 's/^Model name: *//p' | head -1)", "nproc": $(nproc),
  "load_before": "$load_before", "load_after": "$load_after",
  "omp_wait_policy": "${OMP_WAIT_POLICY:-unset}",
  "command": "${OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$OMP_WAIT_POLICY }THREADS=$THREADS WORKLOADS='$WORKLOADS' ${STEPS:+STEPS=$STEPS }${WARMUP:+WARMUP=$WARMUP }bench/run.sh",
  "repeats": "${REPEAT:-1} (Debian torch: ${SLOW_REPEAT:-1})",
  "peers": {"torch-debian": "Debian python3-torch, /usr/bin/python3", "torch-pypi": "PyPI, bench/.venv"},
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 bench/report.py "$out" "bench/results/step-$stamp"
echo "wrote bench/results/step-$stamp.md and .csv (raw JSON in $out/)"
