#!/usr/bin/env bash
# The Quickstart test command: set up, build with warnings as errors, run every test; then run
# the whole suite again with the kernels capped at AVX2 (SEQTRAIN_ISA=avx2, which caps oneDNN
# too), so that a machine with AVX-512 also proves the path every AVX2-only CPU takes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CMAKE_ARGS="-DSEQTRAIN_WERROR=ON ${CMAKE_ARGS:-}" bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 1200
if grep -qw avx2 /proc/cpuinfo; then
  echo "== the whole suite again with SEQTRAIN_ISA=avx2"
  SEQTRAIN_ISA=avx2 ctest --output-on-failure -j "$(nproc)" --timeout 1200
else
  echo "== this CPU has no AVX2: the suite above already ran the plain kernels"
fi
