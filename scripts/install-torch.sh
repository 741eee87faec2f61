#!/usr/bin/env bash
# PyTorch from PyPI in a virtual environment, for the tests that meet its c10d store and its
# launcher torchrun (tests/nccl/tcp_store_test.cpp, the torchrun.* and example_ddp_*_torchrun
# tests). They need no GPU: the torch wheel PyPI has for Linux imports and launches without a
# driver. About 5 GB, outside the checkout (shared by every clone); nothing is done when the
# environment already has torch. matplotlib goes there too, for scripts/plot-memory-timeline.py
# and its test.
# Usage: scripts/install-torch.sh [virtual environment, default ~/.cache/graphstep/torch-venv]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
venv=${1:-${torch_venv}}
if [[ -x ${venv}/bin/python ]] && "${venv}/bin/python" -c "import torch.distributed.run" \
  2>/dev/null; then
  echo "install-torch.sh: ${venv} already has torch"
else
  python3 -m venv "${venv}"
  # numpy only quiets torch's warning at import.
  "${venv}/bin/pip" install --quiet --disable-pip-version-check torch numpy
  "${venv}/bin/python" -c "import torch; print('install-torch.sh: torch', torch.__version__)"
fi
if ! "${venv}/bin/python" -c "import matplotlib" 2>/dev/null; then
  "${venv}/bin/pip" install --quiet --disable-pip-version-check matplotlib
fi
"${venv}/bin/python" -c "import matplotlib; print('install-torch.sh: matplotlib', matplotlib.__version__)"
