#!/usr/bin/env bash
# bench/device/bundle.sh: packs a build of this machine into .devbundle/seqtrain.tar.xz for a GPU
# machine whose image has the CUDA libraries but not seqtrain's Debian ones (oneDNN, yaml-cpp,
# fmt, GoogleTest, OpenMPI...): the executables, the CUDA plugin and every shared library they
# load except glibc's and CUDA's own (the GPU machine's driver and toolkit provide those).
# check.sh unpacks it when present and builds from source otherwise. .devbundle/ is git-ignored.
#   BUILD_DIR=build bash bench/device/bundle.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD_DIR:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .devbundle
for f in seqtrain seqtrain_tests libseqtrain_cuda.so bench_cuda; do
  [ -e "$B/$f" ] || { echo "bundle: $B/$f is missing: build it first (scripts/build.sh)" >&2; exit 2; }
  cp "$B/$f" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$f"
done
for f in "$stage"/bin/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libcudnn[^/]*|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf .devbundle/seqtrain.tar.xz bin lib
ls -la .devbundle/seqtrain.tar.xz
git rev-parse HEAD > .devbundle/commit
