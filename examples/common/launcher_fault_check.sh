#!/usr/bin/env bash
# A killed rank ends the others under a launcher that starts the ranks itself: torchrun or
# mpirun starts RANKS ranks of a program on simulated devices; once a step was trained, rank 1
# is killed (SIGKILL), and the launcher must end within 30 s, failed, leaving no process of the
# run and no shared-memory segment of the simulated NCCL behind. The launcher ends the others
# when a rank fails, and so does graphstep's peer watch (under torchrun; mpirun's ranks meet
# through MPI, which has none): whichever comes first.
#
#   launcher_fault_check.sh torchrun|mpirun LAUNCHER RANKS program [arguments...]
#
# LAUNCHER is the launcher's path; one that is not there reports the check skipped.
set -u
kind=$1
launcher=$2
ranks=$3
shift 3
if [[ ! -x "${launcher}" ]]; then
  echo "[  SKIPPED ] ${kind} not found at ${launcher}"
  exit 0
fi
source "$(dirname "$0")/free_port.sh"
source "$(dirname "$0")/fault_check.sh"
work=$(mktemp -d)
shm_snapshot "${work}/shm-before"
# Every process of this run inherits the mark, so that rank 1 and any process left over are
# found among all others.
mark="graphstep-fault-$$-${RANDOM}"
case "${kind}" in
  torchrun)
    rank_variable=RANK
    command=("${launcher}" --master-addr=127.0.0.1 --master-port="$(free_port)"
             --nproc-per-node="${ranks}" --no-python "$@") ;;
  mpirun)
    rank_variable=OMPI_COMM_WORLD_RANK
    command=("${launcher}" -np "${ranks}" --oversubscribe --allow-run-as-root
             -x GRAPHSTEP_SIM_DEVICES -x GRAPHSTEP_FAULT_MARK "$@") ;;
  *) echo "launcher_fault_check: unknown launcher '${kind}'" >&2; exit 2 ;;
esac
GRAPHSTEP_FAULT_MARK=${mark} GRAPHSTEP_SIM_DEVICES=${ranks} stdbuf -oL "${command[@]}" \
  > "${work}/log" 2>&1 &
launched=$!

# The environment of process $1, a variable per line; nothing for one that is gone.
environment_of() {
  { tr '\0' '\n' < "/proc/$1/environ"; } 2>/dev/null
}
# The processes of this run, by their mark; with a rank variable's value, that rank alone.
marked() {
  local want=${1:-} entry pid variables
  for entry in /proc/[0-9]*; do
    pid=${entry#/proc/}
    variables=$(environment_of "${pid}")
    grep -qx "GRAPHSTEP_FAULT_MARK=${mark}" <<<"${variables}" || continue
    [[ -z "${want}" ]] || grep -qx "${want}" <<<"${variables}" || continue
    echo "${pid}"
  done
}
fail() {
  echo "launcher_fault_check (${kind}, ${ranks} ranks): $*"
  cat "${work}/log"
  kill -KILL ${launched} $(marked) 2>/dev/null
  rm -rf "${work}"
  exit 1
}

await_first_step "${work}/log" "${launched}"
case $? in
  1) fail "the run ended before a step was trained" ;;
  2) fail "no step was trained within 60 s" ;;
esac
victim=$(marked "${rank_variable}=1" | head -1)
[[ -n "${victim}" ]] || fail "rank 1's process was not found"
seen=$(marked | tr '\n' '|')
kill -KILL "${victim}"
killed_at=$(date +%s)
while kill -0 "${launched}" 2>/dev/null && (($(date +%s) - killed_at < 30)); do sleep 0.1; done
kill -0 "${launched}" 2>/dev/null && fail "${kind} still runs 30 s after rank 1 was killed"
wait "${launched}"
[[ $? -eq 0 ]] && fail "${kind} reported success although rank 1 was killed"
took=$(($(date +%s) - killed_at))
sleep 1  # the launcher's last children, if any, are reaped
left=$(marked)
[[ -z "${left}" ]] || fail "processes of the run are left: ${left}"
segments=$(new_nccl_segments "${work}/shm-before" "${seen%|}")
if [[ -n "${segments}" ]]; then
  for segment in ${segments}; do rm -f "/dev/shm/${segment}"; done
  fail "left in /dev/shm: ${segments}"
fi
echo "launcher_fault_check (${kind}, ${ranks} ranks): ${kind} ended ${took} s after rank 1 was" \
  "killed, nothing left behind; the ranks said:"
grep -E "has ended|NCCL reported|has not finished|Terminated|signal|exited" "${work}/log" | head -5
rm -rf "${work}"
