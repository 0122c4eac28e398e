#!/usr/bin/env bash
# fleet.sh: issue 38's speed targets for a fleet of many series (bench/bench_fleet.cpp): a fleet of
# SERIES series x ROWS rows loads, normalizes (per-series statistics) and windows in under 2 s, from
# the synthetic fleet and from a glob of one CSV a series (written once into CSV_DIR, reused); a
# run trained on it keeps the loader's data wait under 2% of step time; a FOLDS-fold backtest
# without refit costs at most 1.2x one evaluation pass over the same windows. Writes
# bench/results/fleet-<date>.json and prints it.
#
#   bench/fleet.sh                              1,000 series x 10,000 rows, 2 threads, 5 folds
#   SERIES=100 ROWS=2000 REPEATS=5 bench/fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target bench_fleet >/dev/null
out=bench/results/fleet-$(date +%Y%m%d-%H%M%S).json
mkdir -p bench/results
"$BUILD_DIR/bench_fleet" --series "${SERIES:-1000}" --rows "${ROWS:-10000}" --threads "${THREADS:-2}" \
  --folds "${FOLDS:-5}" --repeats "${REPEATS:-3}" --train-steps "${STEPS:-200}" \
  --csv-dir "${CSV_DIR:-${TMPDIR:-/tmp}/bench_fleet_csv}" --json "$out"
echo "wrote $out"
