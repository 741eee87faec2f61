# What the fault checks (peer_fault_check.sh, launcher_fault_check.sh) share: waiting for a run's
# first trained step, and finding the simulated NCCL's shared-memory segments a run left.

# Waits for LOG to show a trained step ("step ... loss") while process PID runs, for at most
# 60 s. Returns 0 once it does, 1 when PID ended first, 2 when the time ran out.
await_first_step() {
  local log=$1 pid=$2 i
  for ((i = 0; i < 600; ++i)); do
    grep -q 'step .*loss' "${log}" 2>/dev/null && return 0
    kill -0 "${pid}" 2>/dev/null || return 1
    sleep 0.1
  done
  grep -q 'step .*loss' "${log}" 2>/dev/null && return 0
  return 2
}

# The segments of /dev/shm now, for new_nccl_segments to compare with, into FILE.
shm_snapshot() {
  ls /dev/shm 2>/dev/null | sort > "$1"
}

# The simulated NCCL's segments made since shm_snapshot wrote FILE by a process of PIDS (pids
# separated by "|"): it names a segment after the process that made the id, and one of an
# earlier run whose process had the same number is not there in the snapshot.
new_nccl_segments() {
  ls /dev/shm 2>/dev/null | sort | comm -13 "$1" - | grep -E "^graphstep-nccl-($2)-" || true
}
