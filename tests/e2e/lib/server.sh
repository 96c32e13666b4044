# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/server_*.sh.
#   start_server [OPTIONS...]     runs `$STROBE server` on a free loopback port with a fresh data
#                                 dir in $TMPDIR/data and sets pid and url; on failure it prints a
#                                 FAIL line with the server's log and exits
#   launch_server BIN DATA [OPTIONS...]  the same with any binary and data dir, without judging:
#                                 0 once /ready answers (pid, port, url set), non-zero when the
#                                 server exited or did not answer within 60 s (pid still set)
# Both poll /ready (never a fixed sleep) and write the server's stderr to $TMPDIR/log. The
# caller's EXIT trap kills $pid.
# STROBE_TEST_CLICKHOUSE=HOST:PORT runs these servers on the ClickHouse store instead of SQLite
# (docs/clickhouse.md): a database of its own per data dir, named in DATA/.chdb, so that a fresh
# data dir is a fresh store and a restart on the same dir finds its data again.
launch_server() {
  local bin=$1 data=$2 i
  shift 2
  port=
  : >"$TMPDIR/log"
  if [ -n "${STROBE_TEST_CLICKHOUSE:-}" ]; then
    mkdir -p "$data"
    [ -f "$data/.chdb" ] || echo "t$$_$RANDOM$RANDOM" >"$data/.chdb"
    set -- --store "clickhouse://$STROBE_TEST_CLICKHOUSE/$(cat "$data/.chdb")" "$@"
  fi
  "$bin" server --data "$data" --listen 127.0.0.1:0 "$@" 2>>"$TMPDIR/log" & pid=$!
  for ((i = 0; i < 1200; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$TMPDIR/log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  url=http://127.0.0.1:$port
  [ -n "$port" ] && curl -sf "$url/ready" >/dev/null
}
start_server() {
  rm -rf "$TMPDIR/data"
  launch_server "$STROBE" "$TMPDIR/data" "$@" && return 0
  echo "FAIL $(basename "$0" .sh)/start: server did not come up: $(head -5 "$TMPDIR/log" | tr '\n' ' ')"
  exit 1
}
