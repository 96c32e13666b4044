#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slow and idle connections (build/tools/push_storm --mode slow: a push one byte a second;
# --mode idle: connect and send nothing):
#   served       300 slow + 300 idle connections held open: a normal push and a query still
#                complete, each time
#   idle-closed  the idle ones are closed after limits.connection_timeout (4 s here)
#   slow-closed  the slow ones, which are never idle, after limits.request_timeout (6 s here);
#                counted in /metrics
#   cap          300 slow clients against limits.max_connections 100 (libmicrohttpd closes what
#                comes past the cap at once): a normal push, retrying as agents do, still gets
#                through and is stored, because near the cap a request that is not in after a
#                tenth of request_timeout is cut (counted as reason="busy")
set -u
name=server_slow_clients
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
storm=$(dirname "$STROBE")/tools/push_storm
if ! [ -x "$storm" ]; then echo "FAIL $name/setup: $storm is not built (make build/tools/push_storm)"; exit 1; fi
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid= s1= s2=
trap '[ -n "$s1" ] && kill $s1 2>/dev/null; [ -n "$s2" ] && kill $s2 2>/dev/null; [ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
T='samples:samples:count:samples:count'

start() { # CONFIG: sets pid, port and url
  rm -rf "$TMPDIR/data"
  launch_server "$STROBE" "$TMPDIR/data" --config "$1" || { fail start "server did not come up: $(head -c 400 "$TMPDIR/log")"; exit 1; }
}
# A normal client: one push and a query that must find it. Sets out to "OK seconds" or why not.
k=0
normal() { # CURL-TIMEOUT
  k=$((k + 1))
  local t0 t1 code got
  t0=$(date +%s.%N)
  code=$(printf 'normal;n%d %d\n' "$k" "$k" | curl -s -m "$1" -o "$TMPDIR/presp" -w '%{http_code}' --data-binary @- "$url/api/v1/push?service_name=normal&time=now")
  got=$(curl -s -m "$1" -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"normal\"}" -d format=folded -d from=now-5m | awk -v s="normal;n$k" '$1 == s { print $2 }')
  t1=$(date +%s.%N)
  if [ "$code" = 200 ] && [ "$got" = "$k" ]; then out="OK $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
  else out="push HTTP $code, query found '$got' for n$k"; fi
}
wait_closed() { # FILE: waits (up to 40 s) until the storm writing FILE is done
  local i
  for ((i = 0; i < 400; i++)); do [ -s "$1" ] && return; sleep 0.1; done
}

# ---- slow and idle connections, well under the cap ---------------------------------------------
echo '{ "limits": { "connection_timeout": "4s", "request_timeout": "6s" } }' >"$TMPDIR/a.json"
start "$TMPDIR/a.json"
"$storm" --port "$port" --mode slow --clients 300 --seconds 30 >"$TMPDIR/slow.out" 2>&1 & s1=$!
"$storm" --port "$port" --mode idle --clients 300 --seconds 30 >"$TMPDIR/idle.out" 2>&1 & s2=$!
# Until most of them are connected (the server counts them), then the normal client, three times.
for ((i = 0; i < 100; i++)); do
  open=$(curl -s -m 5 "$url/metrics" | sed -n 's/^strobe_connections{state="open"} //p')
  [ "${open:-0}" -ge 500 ] && break
  sleep 0.05
done
res=
for ((i = 0; i < 3; i++)); do normal 10; res="$res$out; "; done
if [ "$(grep -o 'OK' <<<"$res" | wc -l)" = 3 ]; then ok served "$open connections held open; push + query took (s): $res"
else fail served "with $open slow/idle connections open: $res"; fi
wait "$s1"; s1=
wait "$s2"; s2=
sed 's/^/# slow: /' "$TMPDIR/slow.out"; sed 's/^/# idle: /' "$TMPDIR/idle.out"
f() { sed -n "s/.* $2 \([0-9.]*\).*/\1/p" "$1"; }
if [ "$(f "$TMPDIR/idle.out" closed_by_server)" = 300 ]; then ok idle-closed "max $(f "$TMPDIR/idle.out" max_close_s) s"
else fail idle-closed "$(cat "$TMPDIR/idle.out")"; fi
evt=$(curl -s "$url/metrics" | sed -n 's/^strobe_connections_closed_total{reason="request_timeout"} //p')
if [ "$(f "$TMPDIR/slow.out" closed_by_server)" = 300 ] && [ "${evt:-0}" -ge 300 ]; then ok slow-closed "max $(f "$TMPDIR/slow.out" max_close_s) s, metrics request_timeout $evt"
else fail slow-closed "$(cat "$TMPDIR/slow.out"); metrics request_timeout ${evt:-?}"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# ---- more slow clients than the cap --------------------------------------------------------------
# At the cap libmicrohttpd closes new connections at once: a client retries (agents back off and
# retry). The slow ones must not keep the slots: near the cap a request not in within a tenth of
# request_timeout (60 s here, so 6 s) is cut. Without that rule nothing would free a slot for 60 s.
echo '{ "limits": { "max_connections": 100, "request_timeout": "60s" } }' >"$TMPDIR/b.json"
start "$TMPDIR/b.json"
"$storm" --port "$port" --mode slow --clients 300 --seconds 50 >"$TMPDIR/slow.out" 2>&1 & s1=$!
# Until the server holds 100 connections (its sockets, counted in /proc: /metrics cannot get in).
for ((i = 0; i < 200; i++)); do
  open=$(find "/proc/$pid/fd" -lname 'socket:*' 2>/dev/null | wc -l)
  [ "$open" -ge 100 ] && break
  sleep 0.05
done
k=$((k + 1))
t0=$(date +%s.%N)
code=$(printf 'normal;n%d %d\n' "$k" "$k" | curl -s -m 45 --retry 45 --retry-all-errors --retry-delay 1 --retry-max-time 40 \
  -o "$TMPDIR/presp" -w '%{http_code}' --data-binary @- "$url/api/v1/push?service_name=normal&time=now")
t1=$(date +%s.%N)
got=$(curl -s -m 20 --retry 20 --retry-all-errors --retry-delay 1 -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"normal\"}" -d format=folded -d from=now-5m | awk -v s="normal;n$k" '$1 == s { print $2 }')
busy=$(curl -s -m 20 --retry 20 --retry-all-errors --retry-delay 1 "$url/metrics" | sed -n 's/^strobe_connections_closed_total{reason="busy"} //p')
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
if [ "$code" = 200 ] && [ "$got" = "$k" ] && [ "${busy:-0}" -gt 0 ]; then ok cap "$open sockets held at the cap of 100 by slow clients; a push got through after $took s (retrying), stored; $busy slow connections cut early"
else fail cap "push HTTP $code after $took s, query found '$got' for n$k; busy evictions ${busy:-?}"; fi
kill "$s1" 2>/dev/null; wait "$s1" 2>/dev/null; s1=
sed 's/^/# slow at the cap: /' "$TMPDIR/slow.out"
kill "$pid"; wait "$pid"; rc=$?; pid=
[ "$rc" = 0 ] || fail exit "the server exited $rc: $(grep -m3 -i 'error' "$TMPDIR/log")"
exit $st
