# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/server_*.sh: start_server [OPTIONS...] runs `$STROBE server` on a free
# loopback port with a fresh data dir in $TMPDIR, polls /ready (never a fixed sleep), and sets
# pid and url; on failure it prints a FAIL line with the server's log and exits. The caller's
# EXIT trap kills $pid.
start_server() {
  local name
  name=$(basename "$0" .sh)
  rm -rf "$TMPDIR/data"
  "$STROBE" server --data "$TMPDIR/data" --listen 127.0.0.1:0 "$@" 2>"$TMPDIR/log" & pid=$!
  local port= i
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$TMPDIR/log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  url=http://127.0.0.1:$port
  if ! curl -sf "$url/ready" >/dev/null; then
    echo "FAIL $name/start: server did not come up: $(head -5 "$TMPDIR/log" | tr '\n' ' ')"
    exit 1
  fi
}
