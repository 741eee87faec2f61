# rank_environment LAUNCHER RANK RANKS PORT: prints, one per line, the variables LAUNCHER gives
# rank RANK of RANKS on this machine, with rank 0 listening on 127.0.0.1:PORT:
#   torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
#   srun: what srun gives each task of a one-node job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
#     SLURM_LOCALID, ...), with no MASTER_ADDR or MASTER_PORT: graphstep derives them from the
#     node list and the job id, which is chosen so that the derived port is PORT (PORT must lie
#     in 20000..29999; see free_slurm_port).
# Use: env $(rank_environment srun 1 2 "${port}") program
rank_environment() {
  local launcher=$1 rank=$2 ranks=$3 port=$4
  case "${launcher}" in
    torchrun)
      printf '%s\n' "RANK=${rank}" "WORLD_SIZE=${ranks}" "LOCAL_RANK=${rank}" \
        "LOCAL_WORLD_SIZE=${ranks}" "MASTER_ADDR=127.0.0.1" "MASTER_PORT=${port}" ;;
    srun)
      # detail::slurm_rendezvous_port: 20000 + (job + step) % 10000.
      printf '%s\n' "SLURM_PROCID=${rank}" "SLURM_STEP_NUM_TASKS=${ranks}" \
        "SLURM_NTASKS=${ranks}" "SLURM_LOCALID=${rank}" "SLURM_NODEID=0" \
        "SLURM_STEP_TASKS_PER_NODE=${ranks}" "SLURM_STEP_NODELIST=localhost" \
        "SLURM_JOB_ID=$((port - 20000 + 70000))" "SLURM_STEP_ID=0" ;;
    *) echo "rank_environment: unknown launcher '${launcher}'" >&2; return 1 ;;
  esac
}

# free_slurm_port: a free TCP port of 127.0.0.1 in 20000..29999, where srun's derived port lies.
free_slurm_port() {
  python3 -c '
import random, socket
for _ in range(200):
    port = random.randrange(20000, 30000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(port)
    break
' 2>/dev/null || echo $((20000 + RANDOM % 10000))
}
