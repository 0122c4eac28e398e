#!/usr/bin/env bash
# Configures and builds seqtrain into build/ (Release unless BUILD_TYPE says otherwise); TARGET
# builds one target only (the Quickstart's main job needs just `seqtrain`).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" ${TARGET:+--target "$TARGET"}
