#!/usr/bin/env bash
# Starts N ranks of a program on this machine under torchrun, PyTorch's launcher, and fails
# unless every rank succeeds: `standalone` (torchrun --standalone: its c10d rendezvous on a free
# port) or `static` (its default rendezvous, on a free MASTER_PORT). torchrun comes from
# $TORCHRUN, else VENV/bin/torchrun (scripts/install-torch.sh makes one), else the PATH; without
# one, the run reports itself skipped.
# Usage: launch_torchrun.sh VENV standalone|static N program [arguments...]
set -u
source "$(dirname "$0")/../common/free_port.sh"
venv=$1
launch=$2
ranks=$3
shift 3
torchrun=${TORCHRUN:-}
if [[ -z ${torchrun} && -x ${venv}/bin/torchrun ]]; then torchrun=${venv}/bin/torchrun; fi
if [[ -z ${torchrun} ]]; then torchrun=$(command -v torchrun || true); fi
if [[ -z ${torchrun} ]]; then
  echo "[  SKIPPED ] torchrun not found: run scripts/install-torch.sh or set TORCHRUN"
  exit 0
fi
case ${launch} in
  standalone) rendezvous=(--standalone) ;;
  static) rendezvous=(--master-addr=127.0.0.1 --master-port="$(free_port)") ;;
  *)
    echo "launch_torchrun.sh: '${launch}' is neither standalone nor static" >&2
    exit 2
    ;;
esac
exec "${torchrun}" "${rendezvous[@]}" --nproc-per-node="${ranks}" --no-python "$@"
