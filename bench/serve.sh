#!/usr/bin/env bash
# serve.sh: what the training service costs (issue 36). The quickstart config trained by hand
# (`seqtrain train`) and as a service task (submitted over HTTP, timed from submission to the
# server noticing the child's end), in alternating pairs on the same threads; then the list of
# 1,000 finished tasks: the API's answer, and the page's fetch, render and layout in headless
# chromium. Writes bench/results/serve-<date>.md and the chart of the pairs, serve-<date>.svg
# (bench/plot_svg.py).
#
#   bench/serve.sh                 5 pairs, 2 threads
#   PAIRS=9 THREADS=1 bench/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target seqtrain >/dev/null
out=bench/results/serve-$(date +%Y%m%d-%H%M%S).md
mkdir -p bench/results
/usr/bin/python3 bench/serve_bench.py --binary "$BUILD_DIR/seqtrain" --pairs "${PAIRS:-5}" --threads "${THREADS:-2}" \
  --config examples/forecast.yaml --svg "${out%.md}.svg" | tee "$out"
echo "wrote $out and ${out%.md}.svg"
