#!/usr/bin/env bash
# A data-parallel example fails fast when a peer fails: it starts RANKS ranks of a program as
# torchrun would (or as srun would, with LAUNCHER=srun: common/rank_environment.sh), makes rank
# 1 fail, and checks that every other rank ends with graphstep's error naming the cause in time,
# and that nothing is left behind (no process of the run, no shared-memory segment of the
# simulated NCCL).
#
#   peer_fault_check.sh kill|stop|mismatch SECONDS RANKS program [arguments...]
#
# kill: rank 1 is killed (SIGKILL) once it has trained a step, every rank on default settings:
# the communicator's peer watch must end the others within 30 s. stop: rank 1 is stopped
# (SIGSTOP) then; only the step deadline can tell, adaptive with a floor of SECONDS
# (--min-step-timeout; never before the first step, however loaded the machine), and the others
# must end within SECONDS + 120 s (the deadline is 20 times the median step where that is more).
# mismatch: rank 1 is started with "--layers 1" added, so its collectives differ from the
# others' from the first step on; every rank has a fixed deadline of SECONDS (--step-timeout),
# and the others must be done within it plus a margin.
set -u
fault=$1
seconds=$2
ranks=$3
shift 3
launcher=${LAUNCHER:-torchrun}
source "$(dirname "$0")/free_port.sh"
source "$(dirname "$0")/rank_environment.sh"
source "$(dirname "$0")/fault_check.sh"
if [[ "${launcher}" == srun ]]; then port=$(free_slurm_port); else port=$(free_port); fi
work=$(mktemp -d)
shm_snapshot "${work}/shm-before"
pids=()
for ((rank = 0; rank < ranks; ++rank)); do
  extra=()
  [[ "${fault}" == mismatch && ${rank} -eq 1 ]] && extra=(--layers 1)
  # Line-buffered, so that the log shows each step as it is trained.
  case "${fault}" in
    kill) deadline=() ;;
    stop) deadline=(--min-step-timeout "${seconds}") ;;
    *) deadline=(--step-timeout "${seconds}") ;;
  esac
  # shellcheck disable=SC2046  # one variable per line
  env $(rank_environment "${launcher}" "${rank}" "${ranks}" "${port}") \
    GRAPHSTEP_SIM_DEVICES=${ranks} \
    stdbuf -oL "$@" "${deadline[@]}" "${extra[@]}" > "${work}/rank${rank}.log" 2>&1 &
  pids+=($!)
done
faulty=${pids[1]}
finish() {
  kill -CONT "${faulty}" 2>/dev/null
  kill -KILL "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  rm -rf "${work}"
}
fail() {
  echo "peer_fault_check (${fault}, ${ranks} ranks): $*"
  for ((rank = 0; rank < ranks; ++rank)); do
    echo "--- rank ${rank}:"
    cat "${work}/rank${rank}.log"
  done
  finish
  exit 1
}

if [[ "${fault}" != mismatch ]]; then  # rank 1 fails once it has trained a step
  await_first_step "${work}/rank1.log" "${faulty}"
  case $? in
    1) fail "rank 1 ended before its first step" ;;
    2) fail "rank 1 trained no step within 60 s" ;;
  esac
  if [[ "${fault}" == kill ]]; then
    kill -KILL "${faulty}"
    wait "${faulty}" 2>/dev/null
  else
    kill -STOP "${faulty}"
  fi
fi
failed_at=$(date +%s)
case "${fault}" in
  kill) limit=30 ;;  # the default settings' promise for a peer whose process ended
  # The adaptive deadline is 20 times the median step, at least SECONDS: a slow machine's
  # steps make it longer, and the rank names it when it ends (checked below).
  stop) limit=$((seconds + 120)) ;;
  *) limit=$((seconds + 30)) ;;
esac
causes=()
for ((rank = 0; rank < ranks; ++rank)); do
  [[ ${rank} -eq 1 ]] && continue
  pid=${pids[rank]}
  while kill -0 "${pid}" 2>/dev/null && (($(date +%s) - failed_at < limit)); do sleep 0.1; done
  kill -0 "${pid}" 2>/dev/null && fail "rank ${rank} still runs ${limit} s after rank 1 failed"
  wait "${pid}"
  [[ $? -eq 0 ]] && fail "rank ${rank} succeeded although rank 1 failed"
  cause=$(grep -E "rank ${rank}\b.*(has not finished after|in progress for|NCCL reported|did not join|differ|has ended)" \
    "${work}/rank${rank}.log" | head -1)
  [[ -n "${cause}" ]] || fail "rank ${rank} failed without naming the cause"
  causes+=("rank ${rank}: ${cause}")
done
took=$(($(date +%s) - failed_at))
# The process that made the id, whose number names the segment, is one of the ranks.
left=$(new_nccl_segments "${work}/shm-before" "$(IFS='|'; echo "${pids[*]}")")
finish
if [[ -n "${left}" ]]; then
  echo "peer_fault_check (${fault}, ${ranks} ranks): left in /dev/shm: ${left}"
  for segment in ${left}; do rm -f "/dev/shm/${segment}"; done
  exit 1
fi
echo "peer_fault_check (${fault}, ${ranks} ranks): every other rank ended within ${took} s of" \
  "rank 1's failure (allowed: ${limit} s), nothing left behind, saying:"
printf '  %s\n' "${causes[@]}"
