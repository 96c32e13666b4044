# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/lib/agent.sh (start_agent) and bench/lib.sh (agent_start): the one way an
# agent started with --admin 127.0.0.1:0 is found, from the "admin listening on ... port N" line
# it logs once its admin API is up.
#   admin_port_wait LOG PID TRIES  reads LOG every 50 ms, at most TRIES times and while PID
#                                  lives; sets admin_port: 0 once it is known, non-zero (and
#                                  admin_port empty) when the agent exited or never said it
admin_port_wait() {
  local log=$1 pid=$2 tries=$3 i
  admin_port=
  for ((i = 0; i < tries; i++)); do
    admin_port=$(sed -n 's/.*admin listening on .* port \([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$admin_port" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
