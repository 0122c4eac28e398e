#!/usr/bin/env bash
# trace.sh: what the tracer costs (issue 37). The GPT example (examples/shakespeare_gpt.yaml, on a
# generated play-like text of the same alphabet) trained for 6 + STEPS steps with the trace on
# (--profile=STEPS) and off, in alternating pairs on the same threads; the step time is taken
# over the traced window from the train records (time between the records at steps 5 and
# 5 + STEPS). BASE=path/to/other/seqtrain adds that binary's runs (e.g. one built before the
# tracer existed: "off" against no tracer at all). Writes bench/results/trace-<date>.md.
#
#   bench/trace.sh                    3 pairs, 200 steps, 2 threads
#   PAIRS=5 STEPS=100 THREADS=1 BASE=/tmp/old/build/seqtrain bench/trace.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target seqtrain >/dev/null
out=bench/results/trace-$(date +%Y%m%d-%H%M%S).md
mkdir -p bench/results
/usr/bin/python3 bench/trace_bench.py --binary "$BUILD_DIR/seqtrain" ${BASE:+--base "$BASE"} --pairs "${PAIRS:-3}" \
  --steps "${STEPS:-200}" --threads "${THREADS:-2}" | tee "$out"
echo "wrote $out"
