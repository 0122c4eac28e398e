#!/usr/bin/env bash
# The Quickstart test command: set up, build with warnings as errors, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CMAKE_ARGS="-DSEQTRAIN_WERROR=ON ${CMAKE_ARGS:-}" bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 1200
