#!/usr/bin/env bash
# Two hosts of two ranks each on this machine: each host is a Linux network namespace of its own
# (loopback up, joined to the other by a veth pair of two private addresses, nothing routed
# beyond), and in each a real torchrun starts its node's ranks:
#   torchrun --nnodes=2 --nproc-per-node=2 --node-rank=N --master-addr=<host 0's address> ...
# torchrun's rendezvous, the c10d store on host 0 through which graphstep passes NCCL's id, and
# graphstep's peer watch (each rank's connection to rank 0) all cross from one host to the other
# over the veth pair. The simulated NCCL's collectives do not: its ranks meet in POSIX shared
# memory (/dev/shm), which the two namespaces share. So this checks the launch across hosts, not
# a network transport of the collectives.
#
# The check fails unless every rank succeeds, and:
# - each rank got the variables of its place (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE=4,
#   LOCAL_WORLD_SIZE=2, MASTER_ADDR=host 0's address) and graphstep read them so;
# - host 0's ranks ran in host 0's namespace, host 1's in host 1's, neither in this script's, and
#   torchrun's store on host 0 answers at 127.0.0.1 on host 0 only (host 1 reaches it through
#   the veth pair alone);
# - the communicator spans the 4 ranks, every rank ends with rank 0's weights, and each rank's
#   losses are those of the same rank in a job of 4 ranks on one host (run first, in host 0's
#   namespace);
# - no shared-memory segment of the simulated NCCL is left.
# The namespaces are named after this process and removed however the check ends; after a
# SIGKILL, which leaves no time for that, by the next check, once nothing runs in them.
#
#   two_hosts_check.sh TORCHRUN program [arguments...]
#
# Each launch is stopped after $TWO_HOSTS_TIMEOUT seconds (default 120). Reports itself skipped
# where TORCHRUN is not there or network namespaces cannot be made (no permission: not root, no
# CAP_SYS_ADMIN; or no `ip` of iproute2).
set -u
torchrun=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
source "${here}/fault_check.sh"
limit=${TWO_HOSTS_TIMEOUT:-120}  # seconds each launch may take
port=29500                       # free: each namespace has its own ports
prefix=graphstep-two-hosts

skip() {
  echo "[  SKIPPED ] two_hosts_check: $*"
  exit 0
}
command -v ip > /dev/null || skip "no 'ip' command (iproute2) to make network namespaces with"
[[ -x "${torchrun}" ]] || skip "torchrun not found at ${torchrun}: run scripts/install-torch.sh"

# Namespaces left by a check that was killed (SIGKILL leaves no time to clean up).
for path in /run/netns/"${prefix}"-*; do
  [[ -e "${path}" ]] || continue
  stale=${path##*/}
  owner=${stale#"${prefix}"-}
  owner=${owner%%-*}
  if ! kill -0 "${owner}" 2> /dev/null && [[ -z $(ip netns pids "${stale}" 2> /dev/null) ]]; then
    ip netns delete "${stale}" 2> /dev/null
  fi
done

run="$$-${RANDOM}"
hosts=("${prefix}-${run}-0" "${prefix}-${run}-1")
# 10.X.Y.1/30 and 10.X.Y.2/30, X and Y chosen per run: seen only inside the two namespaces.
subnet="10.$((RANDOM % 256)).$((RANDOM % 256))"
addresses=("${subnet}.1" "${subnet}.2")
made=()
work=$(mktemp -d)
shm_snapshot "${work}/shm-before"

cleanup() {
  local host pids
  for host in "${made[@]}"; do
    pids=$(ip netns pids "${host}" 2> /dev/null)
    # shellcheck disable=SC2086  # one pid per word
    [[ -z "${pids}" ]] || kill -KILL ${pids} 2> /dev/null
  done
  for host in "${made[@]}"; do ip netns delete "${host}" 2> /dev/null; done
  rm -rf "${work}"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

fail() {
  local file
  echo "two_hosts_check: FAILED: $*"
  for file in "${work}"/*/*.log "${work}"/*.log; do
    [[ -e "${file}" ]] || continue
    echo "---- ${file#"${work}"/}"
    cat "${file}"
  done
  exit 1
}

if ! error=$(ip netns add "${hosts[0]}" 2>&1); then
  if grep -qiE "not permitted|permission denied" <<< "${error}"; then
    skip "cannot make a network namespace here (ip netns add: ${error}): run as root, or with" \
      "CAP_SYS_ADMIN and CAP_NET_ADMIN"
  fi
  fail "ip netns add ${hosts[0]}: ${error}"
fi
made+=("${hosts[0]}")
error=$(ip netns add "${hosts[1]}" 2>&1) || fail "ip netns add ${hosts[1]}: ${error}"
made+=("${hosts[1]}")
# The pair is made inside the namespaces: its ends never appear in this script's.
error=$({ ip link add eth0 netns "${hosts[0]}" type veth peer name eth0 netns "${hosts[1]}" &&
  for host in 0 1; do
    ip -n "${hosts[host]}" address add "${addresses[host]}/30" dev eth0 &&
      ip -n "${hosts[host]}" link set lo up &&
      ip -n "${hosts[host]}" link set eth0 up || exit 1
  done; } 2>&1) || fail "joining the namespaces by a veth pair: ${error}"

namespace_of() { ip netns exec "$1" readlink /proc/self/ns/net; }
own_namespace=$(readlink /proc/self/ns/net)
namespaces=("$(namespace_of "${hosts[0]}")" "$(namespace_of "${hosts[1]}")")
[[ "${namespaces[0]}" != "${namespaces[1]}" && "${namespaces[0]}" != "${own_namespace}" &&
   "${namespaces[1]}" != "${own_namespace}" ]] || fail "the hosts' namespaces are not distinct"
echo "two_hosts_check: host 0 is ${hosts[0]} (${addresses[0]}, ${namespaces[0]}), host 1 is" \
  "${hosts[1]} (${addresses[1]}, ${namespaces[1]}); this script runs in ${own_namespace}"

# launch NAME HOST NODES NODE_RANK MASTER_ADDR program [arguments...]: starts one torchrun in
# HOST's namespace, in the background; its ranks' reports go to ${work}/NAME (rank_report.sh),
# its own output to ${work}/NAME/torchrun-NODE_RANK.log.
launch() {
  local name=$1 host=$2 nodes=$3 node=$4 master=$5
  shift 5
  local ranks=$((4 / nodes))  # 4 ranks in all
  mkdir -p "${work}/${name}"
  ip netns exec "${hosts[host]}" env RANK_REPORTS="${work}/${name}" HOST_INDEX="${host}" \
    GRAPHSTEP_SIM_DEVICES="${ranks}" timeout -k 5 "${limit}" "${torchrun}" \
    --nnodes="${nodes}" --nproc-per-node="${ranks}" --node-rank="${node}" \
    --master-addr="${master}" --master-port="${port}" --rdzv-id="${prefix}-${run}-${name}" \
    --no-python bash "${here}/rank_report.sh" "$@" > "${work}/${name}/torchrun-${node}.log" 2>&1 &
}

# The reference: 4 ranks on host 0 alone.
launch one_host 0 1 0 127.0.0.1 "${@}"
wait $! || fail "4 ranks on one host (no second host involved) failed"

# The two hosts at once; when one fails, the other gets 30 s to end before it is stopped.
launch two_hosts 0 2 0 "${addresses[0]}" "${@}"
launched=($!)
launch two_hosts 1 2 1 "${addresses[0]}" "${@}"
launched+=($!)
status=(running running)
failed_at=
while [[ "${status[*]}" == *running* ]]; do
  for host in 0 1; do
    [[ "${status[host]}" == running ]] || continue
    kill -0 "${launched[host]}" 2> /dev/null && continue
    wait "${launched[host]}"
    status[host]=$?
    ((status[host] == 0)) || failed_at=${failed_at:-${SECONDS}}
  done
  if [[ -n "${failed_at}" ]] && ((SECONDS - failed_at > 30)); then
    for host in 0 1; do
      [[ "${status[host]}" == running ]] && kill -TERM "${launched[host]}" 2> /dev/null
    done
  fi
  sleep 0.2
done
for host in 0 1; do
  case ${status[host]} in
    0) ;;
    124) fail "host ${host}'s torchrun still ran after ${limit} s" ;;
    *) fail "host ${host}'s torchrun ended with status ${status[host]}" ;;
  esac
done

# What each rank was given, and where it ran.
losses() { grep -oE '^\[[a-z]+\] step +[0-9]+/[0-9]+ +loss [0-9.]+' "$1"; }
for rank in 0 1 2 3; do
  env_file="${work}/two_hosts/rank${rank}.env"
  log="${work}/two_hosts/rank${rank}.log"
  [[ -e "${env_file}" ]] || fail "no rank ${rank} was started"
  host=$((rank / 2))
  local_rank=$((rank % 2))
  loopback=refused
  ((host == 0)) && loopback=answers
  want=("HOST_INDEX=${host}" "RANK=${rank}" "LOCAL_RANK=${local_rank}"
        "GROUP_RANK=${host}" "WORLD_SIZE=4" "LOCAL_WORLD_SIZE=2"
        "MASTER_ADDR=${addresses[0]}" "MASTER_PORT=${port}" "TORCHELASTIC_USE_AGENT_STORE=True"
        "netns=${namespaces[host]}" "master_port_on_loopback=${loopback}")
  for line in "${want[@]}"; do
    grep -qxF "${line}" "${env_file}" ||
      fail "rank ${rank}: expected ${line}; it had: $(tr '\n' ' ' < "${env_file}")"
  done
  read_as="transformer_lm: rank ${rank} of 4 (local ${local_rank} of 2), through torchrun's"
  read_as+=" store at ${addresses[0]}:${port}"
  grep -qF "${read_as}" "${log}" || fail "rank ${rank} did not print '${read_as}'"
  grep -qE "data parallel: rank ${rank} of 4," "${log}" ||
    fail "rank ${rank}'s communicator is not rank ${rank} of 4"
  [[ -n "$(losses "${log}")" ]] || fail "rank ${rank} printed no loss"
  for mode in $(losses "${log}" | cut -d' ' -f1 | sort -u); do  # [eager], [graphed]
    grep -qF "${mode} the weights of every rank are rank 0's, bit for bit" "${log}" ||
      fail "rank ${rank} did not find its weights equal to rank 0's after training ${mode}"
  done
  if ! difference=$(diff <(losses "${work}/one_host/rank${rank}.log") <(losses "${log}")); then
    fail "rank ${rank}'s losses on two hosts differ from those of rank ${rank} on one host:" \
      "${difference}"
  fi
  echo "two_hosts_check: rank ${rank}: host ${host}, local rank ${local_rank}, in" \
    "${namespaces[host]}, MASTER_ADDR=${addresses[0]}; $(losses "${log}" | wc -l) losses as on" \
    "one host"
done
# The ranks of both jobs: rank 0 names the segments of its communicators after its process.
pids=$(sed -n 's/^pid=//p' "${work}"/*/rank*.env | paste -sd '|')
left=$(new_nccl_segments "${work}/shm-before" "${pids}")
[[ -z "${left}" ]] || fail "left in /dev/shm: ${left}"
for rank in 0 1 2 3; do
  echo "---- rank ${rank} on two hosts:"
  cat "${work}/two_hosts/rank${rank}.log"
done
echo "two_hosts_check: 2 hosts x 2 ranks trained together through torchrun's store at" \
  "${addresses[0]}:${port}; every rank ended with rank 0's weights and its losses on one host"
