#!/usr/bin/env bash
# What a launcher runs as each rank in two_hosts_check.sh: writes down what this rank was given
# and where it runs, then becomes the program (the same process, so the same namespaces), whose
# output goes to a log of its own. Into directory $RANK_REPORTS:
#   rank<RANK>.env  the launcher's variables, this host's number ($HOST_INDEX), the process id,
#                   its network namespace (/proc/self/ns/net), and whether anything accepts a
#                   connection at 127.0.0.1:$MASTER_PORT, on the loopback of this rank's own host
#   rank<RANK>.log  the program's output
# Usage: RANK_REPORTS=DIR HOST_INDEX=N rank_report.sh program [arguments...]
set -u
report="${RANK_REPORTS:?RANK_REPORTS names the directory for the reports}/rank${RANK:-unset}"
# bash's /dev/tcp connects and closes at once: nothing is sent.
if (exec 3<>"/dev/tcp/127.0.0.1/${MASTER_PORT:-0}") 2>/dev/null; then
  loopback=answers
else
  loopback=refused
fi
{
  for variable in HOST_INDEX RANK LOCAL_RANK GROUP_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR \
                  MASTER_PORT TORCHELASTIC_USE_AGENT_STORE; do
    echo "${variable}=${!variable-unset}"
  done
  echo "pid=$$"
  echo "netns=$(readlink "/proc/$$/ns/net")"
  echo "master_port_on_loopback=${loopback}"
} > "${report}.env"
exec "$@" > "${report}.log" 2>&1
