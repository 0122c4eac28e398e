#!/usr/bin/env bash
# The Quickstart test command: set up, build with warnings as errors, run every test; then run
# the whole suite again with the kernels capped at AVX2 (SEQTRAIN_ISA=avx2, which caps oneDNN
# too), so that a machine with AVX-512 also proves the path every AVX2-only CPU takes.
# On a failure the last lines printed are each failed test's own failure lines: CI keeps only
# the tail of this output, and ctest's summary alone names a test without saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CMAKE_ARGS="-DSEQTRAIN_WERROR=ON ${CMAKE_ARGS:-}" bash scripts/build.sh
cd "${BUILD_DIR:-build}"

suite() {  # $1: a label for the digest
  if ctest --output-on-failure -j "$(nproc)" --timeout 1200; then return 0; fi
  echo "== why ($1): the failure lines of each failed test (full output above)"
  /usr/bin/python3 "$OLDPWD/tests/py/failed_digest.py" Testing/Temporary/LastTest.log --lines 8 || true
  return 1
}

suite "native ISA"
if grep -qw avx2 /proc/cpuinfo; then
  echo "== the whole suite again with SEQTRAIN_ISA=avx2"
  SEQTRAIN_ISA=avx2 suite "SEQTRAIN_ISA=avx2"
else
  echo "== this CPU has no AVX2: the suite above already ran the plain kernels"
fi
