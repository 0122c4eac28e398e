#!/usr/bin/env bash
# run.sh: the step benchmark in one command. Builds bench_step, measures the f32 matmul peak,
# then runs seqtrain and every PyTorch peer on each workload with the same thread count,
# pinned to the same cores, and writes bench/results/step-<date>.md and .csv (raw JSON in
# bench/results/step-<date>/).
#
#   bench/run.sh                          2 threads, workloads W1 W1GRU W2
#   THREADS=1 WORKLOADS="W1" bench/run.sh
#   STEPS=20 WARMUP=3 bench/run.sh        override the step counts below
#   REPEAT=3 bench/run.sh                 3 rounds; each row keeps its fastest run (other jobs
#                                         on a shared machine only ever slow a run down)
#   BUILD_DIR=build-bench bench/run.sh    build directory (default build)
#   SEQTRAIN_ARGS="--rnn-impl onednn --precision bf16" bench/run.sh   extra bench_step options
#   ISA=avx2 bench/run.sh                 caps every engine at AVX2 alike, as an AVX2-only CPU:
#                                         seqtrain (SEQTRAIN_ISA, which caps its oneDNN too), the
#                                         peers' ATen kernels (ATEN_CPU_CAPABILITY), oneDNN
#                                         (ONEDNN_MAX_CPU_ISA), MKL (MKL_ENABLE_INSTRUCTIONS) and
#                                         OpenBLAS (OPENBLAS_CORETYPE); the f32 peak is then AVX2's.
#                                         Results go to bench/results/step-avx2-<date>.
#   ISA=plain bench/run.sh                the same below AVX2 (x86-64 with SSE4.1, oneDNN's lowest
#                                         JIT level; ATen's "default" kernels)
#   ISA=avx512 bench/run.sh               AVX-512 without AVX512-BF16 (a Skylake-X class CPU); fp32
#                                         only, as seqtrain refuses --precision bf16 without it
#
# Peers: Debian's /usr/bin/python3 (python3-torch 1.13) and, when bench/setup_venv.sh has
# made it, bench/.venv/bin/python (PyPI torch). Every run is a fresh process, so peak RSS is
# that engine's own. Within a workload the engines take turns, round after round, so a burst
# of load elsewhere hits them alike.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
WORKLOADS=${WORKLOADS:-"W1 W1GRU W2"}
BUILD_DIR=${BUILD_DIR:-build}
REPEAT=${REPEAT:-1}
ISA=${ISA:-}
case "$ISA" in
  "") ;;
  plain) export SEQTRAIN_ISA=plain ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 DNNL_MAX_CPU_ISA=SSE41 \
                MKL_ENABLE_INSTRUCTIONS=SSE4_2 OPENBLAS_CORETYPE=Nehalem ;;
  avx2) export SEQTRAIN_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 \
               MKL_ENABLE_INSTRUCTIONS=AVX2 OPENBLAS_CORETYPE=Haswell ;;
  avx512) export SEQTRAIN_ISA=avx512 ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE \
                 DNNL_MAX_CPU_ISA=AVX512_CORE MKL_ENABLE_INSTRUCTIONS=AVX512 OPENBLAS_CORETYPE=SkylakeX ;;
  *) echo "bench/run.sh: ISA=$ISA is not supported: use ISA=plain, avx2 or avx512, or leave ISA unset for the" \
          "CPU's own" >&2; exit 2 ;;
esac

# Step counts: small enough for a few minutes on 2 cores. Debian's torch 1.13 calls the
# reference (netlib) BLAS here and takes tens of seconds a step, so it gets fewer steps and
# one round; SLOW_STEPS/SLOW_WARMUP/SLOW_REPEAT set those.
steps_for() {  # engine -> "steps warmup rounds"
  case "$1" in
    torch-debian) echo "${SLOW_STEPS:-${STEPS:-2}} ${SLOW_WARMUP:-${WARMUP:-1}} ${SLOW_REPEAT:-1}" ;;
    *) echo "${STEPS:-5} ${WARMUP:-2} $REPEAT" ;;
  esac
}

stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/step-${ISA:+$ISA-}$stamp
mkdir -p "$out/runs"

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" --target bench_step >/dev/null
BENCH="$BUILD_DIR/bench_step"

source bench/pin.sh

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- src 2>/dev/null)" ]; then rev="$rev+dirty"; fi

ENGINES=(seqtrain)
declare -A CMD=([seqtrain]="$BENCH")
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  ENGINES+=(torch-debian); CMD[torch-debian]="/usr/bin/python3 bench/torch_step.py"
fi
if [ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import torch' 2>/dev/null; then
  ENGINES+=(torch-pypi); CMD[torch-pypi]="bench/.venv/bin/python bench/torch_step.py"
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== f32 matmul peak ($THREADS threads)"
"${PIN[@]}" "$BENCH" --workload peak --threads "$THREADS" --json "$out/peak.json" >/dev/null
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gflops"])' "$out/peak.json")
echo "   $peak GFLOP/s"

rounds=$REPEAT
[ "${SLOW_REPEAT:-1}" -gt "$rounds" ] && rounds=${SLOW_REPEAT:-1}
for w in $WORKLOADS; do
  for ((r = 1; r <= rounds; r++)); do
    for e in "${ENGINES[@]}"; do
      read -r steps warmup n <<<"$(steps_for "$e")"
      [ "$r" -le "$n" ] || continue
      extra=()
      # shellcheck disable=SC2206  # SEQTRAIN_ARGS is a list of options
      [ "$e" = seqtrain ] && extra=(--rev "$rev" ${SEQTRAIN_ARGS:-})
      f="$out/runs/$w.$e.r$r.json"
      echo "== $w $e, round $r/$n ($steps steps after $warmup warm-up)"
      # shellcheck disable=SC2086  # CMD holds an interpreter and a script
      "${PIN[@]}" ${CMD[$e]} --workload "$w" --threads "$THREADS" --steps "$steps" --warmup "$warmup" \
        --peak-gflops "$peak" --json "$f" "${extra[@]}" >/dev/null
      python3 -c 'import json,sys; print("   %.1f ms/step" % json.load(open(sys.argv[1]))["ms_per_step"])' "$f"
    done
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
  "isa_cap": "${ISA:-none}",
  "command": "${ISA:+ISA=$ISA }${OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$OMP_WAIT_POLICY }${SEQTRAIN_ARGS:+SEQTRAIN_ARGS='$SEQTRAIN_ARGS' }THREADS=$THREADS WORKLOADS='$WORKLOADS' REPEAT=$REPEAT ${STEPS:+STEPS=$STEPS }${WARMUP:+WARMUP=$WARMUP }bench/run.sh",
  "peers": {"torch-debian": "Debian python3-torch, /usr/bin/python3", "torch-pypi": "PyPI, bench/.venv"},
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 bench/report.py "$out" "$out"
echo "wrote $out.md and .csv (raw JSON in $out/)"
