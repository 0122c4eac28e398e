#!/usr/bin/env bash
# Installs every Debian 12 package that seqtrain's build, tests and examples need.
# Idempotent: packages already present are skipped; safe to run as root on a fresh machine.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config
      libdnnl-dev ocl-icd-opencl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev
      libopenmpi-dev libcpp-httplib-dev libsqlite3-dev python3 python3-numpy python3-torch
      chromium python3-websocket
      python3-venv)  # the venv ctest TensorBoardReader installs TensorBoard into from PyPI
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all packages present"
