#!/usr/bin/env bash
# Creates bench/.venv with PyPI's torch and numpy, the second PyTorch peer that bench/run.sh
# compares against (the first is Debian's python3-torch). A large download (torch plus, on
# Linux x86-64, its CUDA runtime wheels: several GB); never part of the tests.
#   bench/setup_venv.sh                 latest torch from the default index
#   TORCH_SPEC='torch==2.5.1' bench/setup_venv.sh
#   PIP_INDEX_URL=<a CPU-only wheel index> bench/setup_venv.sh   smaller download
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install --upgrade --quiet pip
.venv/bin/pip install ${TORCH_SPEC:-torch} numpy
.venv/bin/python -c 'import torch; print("bench/.venv: torch", torch.__version__)'
