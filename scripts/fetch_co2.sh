#!/usr/bin/env bash
# Fetches the Mauna Loa CO2 series for examples/co2_forecast.yaml: weekly means in ppm from
# March 1958 to December 2001, 2284 weeks of which 59 are missing (empty cells, filled by the
# example's data.nan_policy). Run it yourself, before training (the example's command does):
#   bash scripts/fetch_co2.sh && build/seqtrain train examples/co2_forecast.yaml
# It is never run by the build or the tests.
#
# Usage: scripts/fetch_co2.sh [OUT]   (default data/co2.csv, columns date (YYYYMMDD) and co2)
# Source: statsmodels/datasets/co2/co2.csv inside PyPI's statsmodels 0.15.0 wheel (BSD-3; the
# data are the Scripps / NOAA record statsmodels ships), fetched with `pip download --no-deps`
# into data/cache/ and checked against its pinned SHA-256; scripts/co2_csv.py copies the CSV out
# of the wheel and renames it into place, so OUT is never half written.
# Environment:
#   SEQTRAIN_CO2_WHEEL    a statsmodels wheel already on disk: used instead of pip, hash not
#                         checked (offline machines, and the test with its tiny fake wheel)
#   SEQTRAIN_DATA_CACHE   the cache directory (default data/cache)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/data/co2.csv}"
CACHE="${SEQTRAIN_DATA_CACHE:-$ROOT/data/cache}"
LOCAL_WHEEL="${SEQTRAIN_CO2_WHEEL:-}"
# Any platform's wheel holds the same CSV; this one is pinned (pip picks it with these options).
WHEEL=statsmodels-0.15.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
WHEEL_SHA256=c6f2bd48915cc9b3b95c3c7f6ac363b6f8aaa38172962ba5f7f6885f0dfe57f2
HOW_BY_HAND="download $WHEEL from https://pypi.org/project/statsmodels/0.15.0/#files and rerun with SEQTRAIN_CO2_WHEEL=/path/to/$WHEEL"

NAME=fetch_co2
# shellcheck source=scripts/pypi_pinned.sh
. "$ROOT/scripts/pypi_pinned.sh"

if [ -n "$LOCAL_WHEEL" ]; then
  [ -f "$LOCAL_WHEEL" ] || die "SEQTRAIN_CO2_WHEEL=$LOCAL_WHEEL is not a file; point it at $WHEEL or unset it"
  wheel="$LOCAL_WHEEL"
  say "using $wheel (SEQTRAIN_CO2_WHEEL; its hash is not checked)"
else
  pinned_download statsmodels==0.15.0 "$WHEEL" "$WHEEL_SHA256" "$HOW_BY_HAND" \
    --only-binary :all: --python-version 3.12 --platform manylinux_2_27_x86_64
  wheel="$CACHE/$WHEEL"
fi
python3 "$ROOT/scripts/co2_csv.py" "$wheel" "$OUT"
