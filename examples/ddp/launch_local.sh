#!/usr/bin/env bash
# Starts N ranks of a program on this machine with the environment torchrun gives its workers
# (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or with
# LAUNCHER=srun the one srun gives the tasks of a job step (common/rank_environment.sh), and
# fails unless every rank succeeds and, with EXPECT set, unless their output matches that
# extended regular expression (a world of one per rank would succeed too).
# Usage: [LAUNCHER=srun] [EXPECT=regex] launch_local.sh N program [arguments...]
set -u
ranks=$1
shift
launcher=${LAUNCHER:-torchrun}
source "$(dirname "$0")/../common/free_port.sh"
source "$(dirname "$0")/../common/rank_environment.sh"
if [[ "${launcher}" == srun ]]; then port=$(free_slurm_port); else port=$(free_port); fi
# With EXPECT, each rank's output goes to a file, shown once every rank has ended.
logs=$(mktemp -d)
trap 'rm -rf "${logs}"' EXIT
pids=()
for ((rank = 0; rank < ranks; ++rank)); do
  # shellcheck disable=SC2046  # one variable per line
  if [[ -n "${EXPECT:-}" ]]; then
    env $(rank_environment "${launcher}" "${rank}" "${ranks}" "${port}") "$@" \
      > "${logs}/${rank}" 2>&1 &
  else
    env $(rank_environment "${launcher}" "${rank}" "${ranks}" "${port}") "$@" &
  fi
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
if [[ -n "${EXPECT:-}" ]]; then
  cat "${logs}"/*
  if ! cat "${logs}"/* | grep -Eq "${EXPECT}"; then
    echo "launch_local.sh: no rank printed a line matching '${EXPECT}'"
    status=1
  fi
fi
exit $status
