#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Overload: 1000 concurrent clients pushing on loopback (build/tools/push_storm, one connection
# per client, a bounded count and time) against the optimised server with the default limits
# but limits.max_inflight_bytes lowered to 4 MiB, so both admission limits are crossed:
#   refused      beyond capacity, 503 (or 429) with Retry-After, named in /metrics
#   answers      /ready and a query keep answering during the storm (each measured)
#   ledger       every 200 is stored with its value, and nothing refused is stored
#   rss          the server's peak RSS (VmHWM) stays under 256 MiB (see the bound below)
#   asan         a smaller storm against the ASan build: the same ledger, a clean exit
#   stop         SIGTERM to the ASan build in the middle of a storm, then a restart on its data:
#                the store holds exactly the acknowledged pushes. A stop waits for the requests
#                being answered and refuses new ones (503); before, it closed their connections
#                unanswered after the store had taken them, and an agent counted such a push
#                failed (stored twice, or dropped from its full spool and stored: issue 27's
#                CI flake agent_outage/accounting, "missing -1")
set -u
name=server_overload
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
storm=$(dirname "$STROBE")/tools/push_storm
if ! [ -x "$storm" ]; then echo "FAIL $name/setup: $storm is not built (make build/tools/push_storm)"; exit 1; fi
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid= spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; [ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
T='samples:samples:count:samples:count'

start() { # BINARY CONFIG: sets pid and url
  rm -rf "$TMPDIR/data"
  launch_server "$1" "$TMPDIR/data" --config "$2" || { fail start "server did not come up: $(head -c 400 "$TMPDIR/log")"; exit 1; }
}
field() { sed -n "s/.* $1 \([0-9]*\).*/\1/p" "$TMPDIR/storm.out"; }
# Compares the acknowledged pushes with what the store holds: prints "" when they are the same.
ledger_diff() {
  curl -s -m 60 -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"storm\"}" \
    -d format=folded -d from=now-10m -d until=now+1m >"$TMPDIR/q" || { echo "query failed"; return; }
  awk 'NR == FNR { acked["storm;" $1] = $2; next }
       $1 ~ /^storm;c[0-9]+_r[0-9]+$/ { stored[$1] = $2 }
       END {
         for (k in acked) if (!(k in stored) || stored[k] != acked[k]) { printf "acknowledged but missing: %s; ", k; if (++n > 5) exit }
         for (k in stored) if (!(k in acked)) { printf "stored but not acknowledged: %s; ", k; if (++n > 5) exit }
       }' "$TMPDIR/ids" "$TMPDIR/q"
}

# ---- the storm against the optimised build ---------------------------------------------------------
echo '{ "limits": { "max_inflight_bytes": 4194304 } }' >"$TMPDIR/cfg.json"
start "$STROBE_FAST" "$TMPDIR/cfg.json"
"$storm" --port "$port" --clients 1000 --requests 5 --pad 100000 --seconds 60 --ids "$TMPDIR/ids" >"$TMPDIR/storm.out" 2>&1 & spid=$!
# While it runs: /ready and a query, each timed (a 15 s cap: an answer, not a speed).
probes=0 probe_ok=0 probe_times=
while kill -0 "$spid" 2>/dev/null && [ "$probes" -lt 10 ]; do
  r=$(curl -s -m 15 -o /dev/null -w '%{http_code} %{time_total}' "$url/ready")
  q=$(curl -s -m 15 -o /dev/null -w '%{http_code} %{time_total}' -G "$url/api/v1/query" \
    --data-urlencode "query=$T{service_name=\"storm\"}" -d format=folded -d from=now-10m)
  probes=$((probes + 1))
  [ "${r%% *}" = 200 ] && [ "${q%% *}" = 200 ] && probe_ok=$((probe_ok + 1))
  probe_times="$probe_times ready ${r#* }s query ${q#* }s;"
done
wait "$spid"; spid=
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
cat "$TMPDIR/storm.out" | sed 's/^/# /'
ok200=$(field ok200) r429=$(field r429) r503=$(field r503) other=$(field other) errors=$(field errors) noretry=$(field no_retry_after) unfinished=$(field unfinished)
refused=$((r429 + r503))
metr=$(curl -s "$url/metrics")
mrej=$(awk '/^strobe_rejected_total\{reason="max_(inflight_pushes|inflight_bytes|connections)"\}/ { t += $2 } END { print t + 0 }' <<<"$metr")
reasons=$(grep -o 'strobe_rejected_total{reason="max_[a-z_]*"} [0-9]*' <<<"$metr" | tr '\n' ' ')
if [ "${ok200:-0}" -gt 0 ] && [ "$refused" -gt 0 ] && [ "$noretry" = 0 ] && [ "$other" = 0 ] && [ "$mrej" = "$refused" ]; then
  ok refused "5000 pushes from 1000 clients: $ok200 stored, $refused refused with Retry-After ($reasons), $errors connection errors"
else fail refused "200: $ok200, 429/503: $refused (metrics say $mrej), without Retry-After: $noretry, other: $other"; fi
if [ "$errors" = 0 ] && [ "$unfinished" = 0 ]; then ok all-answered; else fail all-answered "$errors connection errors, $unfinished unfinished"; fi
if [ "$probes" -gt 0 ] && [ "$probe_ok" = "$probes" ]; then ok answers "$probes rounds during the storm:$probe_times"
elif [ "$probes" = 0 ]; then echo "SKIP $name/answers: the storm ended before a probe could run"
else fail answers "$probe_ok of $probes rounds answered 200:$probe_times"; fi
d=$(ledger_diff)
if [ -z "$d" ]; then ok ledger "$(wc -l <"$TMPDIR/ids") acknowledged, each stored with its value, nothing else"; else fail ledger "$d"; fi
# The bound: the process at rest (~20 MB) + a thread and an MHD memory pool per connection (1000 x
# ~100 KB touched) + the bodies held (max_inflight_bytes 4 MiB, buffers grown by doubling) + 64
# pushes decoding (a few MB each at most for these bodies) + SQLite's page caches.
bound=$((256 * 1024))
if [ -n "$hwm" ] && [ "$hwm" -lt "$bound" ]; then ok rss "VmHWM $((hwm / 1024)) MiB < $((bound / 1024)) MiB, peak connections $(sed -n 's/^strobe_connections{state="peak"} //p' <<<"$metr")"
else fail rss "VmHWM ${hwm:-?} kB, bound $bound kB"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# ---- a smaller storm against the ASan build: the same promises, and no memory error ---------------
echo '{ "limits": { "max_inflight_pushes": 4 } }' >"$TMPDIR/cfg2.json"
start "$STROBE" "$TMPDIR/cfg2.json"
"$storm" --port "$port" --clients 200 --requests 2 --pad 2000 --seconds 60 --ids "$TMPDIR/ids" >"$TMPDIR/storm.out" 2>&1
ok200=$(field ok200) r503=$(field r503) errors=$(field errors)
d=$(ledger_diff)
kill "$pid"; wait "$pid"; rc=$?; pid=
if [ -z "$d" ] && [ "${ok200:-0}" -gt 0 ] && [ "${r503:-0}" -gt 0 ] && [ "$rc" = 0 ]; then
  ok asan "200: $ok200, 503: $r503, ledger exact, clean exit"
else fail asan "200: $ok200, 503: $r503, ledger: ${d:-exact}, exit $rc: $(grep -m3 -i 'error\|leak' "$TMPDIR/log")"; fi

# ---- stop: SIGTERM in the middle of a storm ------------------------------------------------------
start "$STROBE" "$TMPDIR/cfg2.json"
: >"$TMPDIR/ids"
"$storm" --port "$port" --clients 100 --requests 30 --pad 20000 --seconds 60 --ids "$TMPDIR/ids" >"$TMPDIR/storm.out" 2>&1 & spid=$!
for _ in $(seq 300); do # until some pushes are acknowledged (at most 30 s)
  [ "$(wc -l <"$TMPDIR/ids")" -ge 30 ] && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.1
done
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
wait "$spid"; spid=
ok200=$(field ok200) r503=$(field r503) errors=$(field errors)
if ! launch_server "$STROBE" "$TMPDIR/data" --config "$TMPDIR/cfg2.json"; then
  fail stop "the server did not come up again on its data: $(head -c 400 "$TMPDIR/log")"
else
  d=$(ledger_diff)
  if [ -z "$d" ] && [ "${ok200:-0}" -gt 0 ] && [ "${errors:-0}" -gt 0 ] && [ "$rc" = 0 ]; then
    ok stop "200: $ok200, 503: $r503, cut off by the stop: $errors, ledger exact after a restart"
  else fail stop "200: $ok200, 503: $r503, connection errors: $errors, ledger: ${d:-exact}, exit $rc"; fi
fi
exit $st
