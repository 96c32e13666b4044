# SPDX-License-Identifier: Apache-2.0
# Shell helpers the benchmarks share (sourced, not run): a note on stderr, the median of numbers
# on stdin, and a strobe server started on a free loopback port and stopped again. Each bench
# script keeps what it measures; what it needs to get there lives here once.
#
#   . "$(dirname "$0")/lib.sh"     after `cd` to the repository root; uses $strobe when set

# shellcheck source=../tests/e2e/lib/admin_port.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib/admin_port.sh"

note() { echo "bench: $*" >&2; }

# The median of the numbers given as arguments, or else on stdin one a line (the mean of the two
# middle ones for an even count); "-" when there are none.
median() {
  if [ $# -gt 0 ]; then printf '%s\n' "$@"; else cat; fi | sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# need_bins FILE...: exits 2 naming the first one that is missing or not executable.
need_bins() {
  local b
  for b in "$@"; do [ -x "$b" ] || { note "missing $b: run make bench"; exit 2; }; done
}

# server_start DATA LOG [ARGS...]: `$strobe server` (or $BENCH_SERVER_BIN) on DATA, listening
# on a free loopback port, its stderr in LOG; waits up to BENCH_SERVER_WAIT s (20) for /ready
# (a large store takes longer to open). Sets spid and url;
# exits 1 with the log when it does not come up.
server_start() {
  local data=$1 log=$2 port= i
  shift 2
  "${BENCH_SERVER_BIN:-$strobe}" server --data "$data" --listen 127.0.0.1:0 "$@" 2>"$log" & spid=$!
  url=
  for ((i = 0; i < ${BENCH_SERVER_WAIT:-20} * 20; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$log" 2>/dev/null | head -1)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null; then
      url=http://127.0.0.1:$port
      return 0
    fi
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  note "the server did not start: $(head -c 2000 "$log")"
  exit 1
}

# server_stop: stops the server server_start started (nothing when none runs).
server_stop() {
  [ -n "${spid:-}" ] || return 0
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null || true
  spid=
}

# agent_start ARGS...: `$strobe agent` pushing to $url, its admin API on a free loopback port,
# its stderr in $work/agent.log; sets apid and admin (the admin URL). Exits 1 with the log when
# it does not come up within 20 s.
agent_start() {
  : > "$work/agent.log" # the background job's redirection may come after the first read
  "$strobe" agent --server "$url" --admin 127.0.0.1:0 --log-level warn "$@" 2>"$work/agent.log" &
  apid=$!
  admin_port_wait "$work/agent.log" "$apid" 400 || true
  admin=http://127.0.0.1:$admin_port
  [ -n "$admin_port" ] || { note "the agent did not start: $(head -c 2000 "$work/agent.log")"; exit 1; }
}
# agent_stop: stops it (SIGTERM: it pushes what it holds first).
agent_stop() { kill -TERM "$apid"; wait "$apid" || true; apid=; }
