#!/usr/bin/env bash
# The Quickstart main job: set up, build, and train the forecaster on the embedded synthetic data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TARGET=seqtrain bash scripts/build.sh   # the tests are scripts/test.sh's business
OUT=${OUT:-runs/quickstart}
exec build/seqtrain train examples/forecast.yaml --out "$OUT" --overwrite "$@"
