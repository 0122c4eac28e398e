#!/usr/bin/env bash
# The Quickstart main job: set up, build, and train the forecaster on the embedded synthetic data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
OUT=${OUT:-runs/quickstart}
exec build/seqtrain train examples/forecast.yaml --out "$OUT" --overwrite "$@"
