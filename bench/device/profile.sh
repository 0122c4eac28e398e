#!/usr/bin/env bash
# bench/device/profile.sh: where a bench_cuda step's GPU time goes, per kernel, through Nsight
# Compute (ncu; one metric, gpu__time_duration, so one replay per kernel): every kernel of
# --warmup 1 --steps 2 is timed, and kernel_table.py sums them by name per step. The sum of the
# kernels' times against the step's wall time says how much of the step the GPU idles (launch
# gaps, host reads). Run after check.sh has unpacked the bundle (BIN, LD_LIBRARY_PATH as there).
#   OUT=/tmp/out BIN=/tmp/seqtrain-bundle/bin bash bench/device/profile.sh gpt bf16
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/seqtrain-device}
BIN=${BIN:-/tmp/seqtrain-bundle/bin}
[ -d /tmp/seqtrain-bundle/lib ] && export LD_LIBRARY_PATH="/tmp/seqtrain-bundle/lib:${LD_LIBRARY_PATH:-}"
NV=$(python3 -c "import nvidia, os; print(list(nvidia.__path__)[0])" 2>/dev/null || true)
[ -n "$NV" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(find "$NV" -maxdepth 3 -type d -name lib | tr '\n' ':')"
w=$1 p=$2
csv=$OUT/ncu_${w}_${p}.csv
timeout 240 ncu --metrics gpu__time_duration.sum --csv --print-units base "$BIN/bench_cuda" --workload "$w" \
  --precision "$p" --warmup 1 --steps 2 >"$csv" 2>"$OUT/ncu_${w}_${p}.err" || echo "ncu exit $? (see ncu_${w}_${p}.err)"
python3 bench/device/kernel_table.py "$csv" --steps 3
