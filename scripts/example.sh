#!/usr/bin/env bash
# Builds and runs an example: on a GPU when one is visible (the default preset), else on the
# simulated CUDA device (the sim preset), which the example says.
# Usage: scripts/example.sh [example, default bucketed_shapes] [arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
example=${1:-bucketed_shapes}
shift || true
if gpu_visible; then
  preset=default
  build_dir=build
else
  preset=sim
  build_dir=build-sim
  echo "example.sh: no GPU visible: building and running ${example} on the simulated CUDA device"
fi
cmake --preset "${preset}" >/dev/null
cmake --build --preset "${preset}" --target "${example}"
binary=$(find "${build_dir}/examples" -type f -name "${example}" -perm -u+x | head -n 1)
if [[ -z "${binary}" ]]; then
  echo "example.sh: no example named ${example} (see examples/)" >&2
  exit 2
fi
exec "${binary}" "$@"
