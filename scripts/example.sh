#!/usr/bin/env bash
# Builds and runs an example: on a GPU when one is visible (the default preset), else on the
# simulated CUDA device (the sim preset), which the example says.
# Usage: scripts/example.sh [example, default transformer_lm] [arguments...]
#
# The main example trains a GPT-2-style transformer eagerly and then as one captured graph per
# step, from the same seed, and checks that the losses are the same bit for bit; on a GPU it
# also reports how much less time the graphed step takes. On the simulated device, where every
# kernel runs on the CPU, it trains a tiny model for a few steps; arguments given come after
# that model's and override them (the example takes the last value of a flag), so
# `scripts/example.sh transformer_lm --accumulate 4 --skip-norm 100` runs the tiny model with
# gradient accumulation.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
example=${1:-transformer_lm}
shift || true
arguments=("$@")
if gpu_visible; then
  preset=default
  build_dir=build
else
  preset=sim
  build_dir=build-sim
  echo "example.sh: no GPU visible: building and running ${example} on the simulated CUDA device"
  if [[ "${example}" == transformer_lm ]]; then
    arguments=(--mode both --steps 4 --layers 2 --width 32 --heads 2 --batch 2 --sequence 8
               --vocab 100 --print-every 1 --attention plain "${arguments[@]}")
  fi
fi
cmake --preset "${preset}" >/dev/null
cmake --build --preset "${preset}" --target "${example}"
binary=$(find "${build_dir}/examples" -type f -name "${example}" -perm -u+x | head -n 1)
if [[ -z "${binary}" ]]; then
  echo "example.sh: no example named ${example} (see examples/)" >&2
  exit 2
fi
exec "${binary}" "${arguments[@]}"
