#!/usr/bin/env bash
# PyTorch and safetensors from PyPI in a virtual environment, for the tests that meet torch's
# c10d store and its launcher torchrun (tests/nccl/tcp_store_test.cpp, the torchrun.* and
# example_ddp_*_torchrun tests) and those that exchange checkpoints with the safetensors package
# (tests/train/checkpoint_safetensors_python_test.cpp). They need no GPU: the torch wheel PyPI
# has for Linux imports and launches without a driver. About 5 GB, outside the checkout (shared
# by every clone); nothing is done when the environment already has torch and safetensors, and
# an environment that has torch alone gets safetensors added (pip keeps the torch it has).
# Usage: scripts/install-torch.sh [virtual environment, default ~/.cache/graphstep/torch-venv]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
venv=${1:-${torch_venv}}
if [[ -x ${venv}/bin/python ]] &&
  "${venv}/bin/python" -c "import torch.distributed.run, safetensors.torch, numpy" 2>/dev/null; then
  echo "install-torch.sh: ${venv} already has torch and safetensors"
  exit 0
fi
[[ -x ${venv}/bin/python ]] || python3 -m venv "${venv}"
# numpy only quiets torch's warning at import, and is what safetensors.numpy returns.
"${venv}/bin/pip" install --quiet --disable-pip-version-check torch numpy safetensors
"${venv}/bin/python" -c "import torch, safetensors; print('install-torch.sh: torch', \
torch.__version__, 'safetensors', safetensors.__version__)"
