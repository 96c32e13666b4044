#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How the server refuses requests, against the real binary:
#   uri-too-long  a URL past the server's cap (64 KiB) is a JSON 414, not the HTTP library's HTML
#   uri-long-ok   a URL just under the cap is served
#   log-line      a refused request leaves one line in the log: method, path (no query: it may
#                 hold secrets), status, tenant and the reason
#   log-flood     a flood of refused requests leaves at most 10 lines a second, and "not logged"
#                 summaries account for every other one
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_rejects: curl is not installed"; exit 0; fi
st=0
fail() { echo "FAIL server_rejects/$1: $2"; st=1; }
ok() { echo "ok server_rejects/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server

# ---- uri-too-long / uri-long-ok --------------------------------------------------------------------
long=$(head -c 100000 /dev/zero | tr '\0' a)
code=$(curl -s -o "$TMPDIR/r1" -w '%{http_code} %{content_type}' "$url/api/v1/labels?x=$long")
if [ "${code%% *}" = 414 ] && grep -q '"error"' "$TMPDIR/r1" && [[ $code == *application/json* ]]; then
  ok uri-too-long "$(cut -c1-120 "$TMPDIR/r1")"
else fail uri-too-long "HTTP $code $(head -c 200 "$TMPDIR/r1")"; fi
code=$(curl -s -o "$TMPDIR/r2" -w '%{http_code}' "$url/api/v1/labels?x=${long:0:60000}")
if [ "$code" = 200 ]; then ok uri-long-ok "a 60 kB URL"
else fail uri-long-ok "HTTP $code $(head -c 200 "$TMPDIR/r2")"; fi

# ---- log-line ---------------------------------------------------------------------------------------
code=$(curl -s -o "$TMPDIR/r3" -w '%{http_code}' -H 'X-Scope-OrgID: team-a' \
  "$url/api/v1/query?query=cpu%7Bbroken&secret=hunter2")
sleep 1.2 # one second on: the next line below is not limited by this one's second
line=$(grep 'rejected GET /api/v1/query' "$TMPDIR/log")
if [ "$code" = 400 ] && [ "$(grep -c 'rejected GET /api/v1/query' "$TMPDIR/log")" = 1 ] &&
   [[ $line == *" 400 "* && $line == *"tenant=team-a"* && $line == *"query:"* ]] &&
   ! grep -q hunter2 "$TMPDIR/log"; then
  ok log-line "$line"
else fail log-line "HTTP $code; log: $(tail -5 "$TMPDIR/log")"; fi

# ---- log-flood --------------------------------------------------------------------------------------
n=300
args=()
for ((i = 0; i < n; i++)); do args+=("$url/api/v1/nothing-here-$i"); done
t0=$(date +%s.%N)
curl -s "${args[@]}" >/dev/null
t1=$(date +%s.%N)
# The server's summary of the last second comes about 0.2 s after that second ends: wait for
# the account to close (at most 10 s; a busy machine may be slow to run the server's loop).
for ((i = 0; i < 50; i++)); do
  lines=$(grep -c 'rejected GET /api/v1/nothing-here' "$TMPDIR/log")
  summed=$(sed -n 's/.* \([0-9][0-9]*\) rejected requests not logged.*/\1/p' "$TMPDIR/log" |
    awk '{ t += $1 } END { print t + 0 }')
  [ $((lines + summed)) -ge $n ] && break
  sleep 0.2
done
bound=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", 10 * (int(b - a) + 2) }')
if [ "$lines" -ge 1 ] && [ "$lines" -le "$bound" ] && [ $((lines + summed)) = $n ]; then
  ok log-flood "$n refused: $lines lines (at most $bound in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s), $summed in summaries"
else fail log-flood "$lines lines (bound $bound), $summed in summaries, of $n; $(grep 'not logged' "$TMPDIR/log" | head -3)"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
