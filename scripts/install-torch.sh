#!/usr/bin/env bash
# The project's Python environment, from PyPI: PyTorch for the tests that meet torch's c10d store
# and its launcher torchrun (tests/nccl/tcp_store_test.cpp, the torchrun.* and
# example_ddp_*_torchrun tests), safetensors and numpy for those that exchange checkpoints with
# the safetensors package (tests/train/checkpoint_safetensors_python_test.cpp), matplotlib for
# scripts/plot-memory-timeline.py and bench/report.py's plots; scripts/bench.sh runs in it. They
# need no GPU: the torch wheel PyPI has for Linux imports and launches without a driver. About
# 5 GB, outside the checkout (shared by every clone); nothing is done when the environment
# already has them all, and one that lacks some gets only those added (pip keeps the torch it
# has).
# Usage: scripts/install-torch.sh [virtual environment, default ~/.cache/graphstep/torch-venv]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
venv=${1:-${torch_venv}}
wanted="import torch.distributed.run, safetensors.torch, numpy, matplotlib"
if [[ -x ${venv}/bin/python ]] && "${venv}/bin/python" -c "${wanted}" 2>/dev/null; then
  echo "install-torch.sh: ${venv} already has torch, safetensors, numpy and matplotlib"
  exit 0
fi
[[ -x ${venv}/bin/python ]] || python3 -m venv "${venv}"
# numpy also quiets torch's warning at import, and is what safetensors.numpy returns.
"${venv}/bin/pip" install --quiet --disable-pip-version-check torch numpy safetensors matplotlib
"${venv}/bin/python" -c "import torch, safetensors, matplotlib; print('install-torch.sh: torch', \
torch.__version__, 'safetensors', safetensors.__version__, 'matplotlib', matplotlib.__version__)"
