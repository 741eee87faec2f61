#!/usr/bin/env bash
# Starts N ranks of a program on this machine with the environment torchrun gives its workers
# (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and fails unless
# every rank succeeds. Usage: launch_local.sh N program [arguments...]
set -u
ranks=$1
shift
source "$(dirname "$0")/../common/free_port.sh"
port=$(free_port)
pids=()
for ((rank = 0; rank < ranks; ++rank)); do
  RANK=$rank WORLD_SIZE=$ranks LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$ranks \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
