#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Naming on the server (issue 23): a 24-hour flame graph of profiles pushed as bare addresses
# and named at query time from an uploaded binary (server/late_names.c), against the same
# workload pushed already named, on one server in one run:
#   - the workload: `strobe flamegraph` of a synthetic 200,000-sample pprof, run in a loop and
#     recorded twice by strobe record at 999 Hz: --no-symbolize (service "raw") and named on the
#     host (service "named"); each recording pushed every 5 minutes over the last 24 h (288 each);
#   - build/strobe (symbol table and DWARF) uploaded with `strobe debuginfo upload`;
#   - GET /api/v1/query format=json over 24 h: "named"; "raw" cold (the first query after the
#     upload, on a restarted server: debug file opened, tables built, names written to the
#     naming cache), warm (RUNS more), and cold again after a second restart (the first query
#     of a fresh process: names read from the naming cache, server/name_cache.c).
# Also the server's peak RSS (VmHWM) before and after naming, for what symbolizing costs in
# memory. Appends markdown to RESULTS (stdout when not given); bench/run.sh calls it under
# BENCH_ONLY=symbolize (or all). Needs perf_event (root) for the recordings.
#
#   bench/symbolize.sh [RESULTS]    RUNS=5 (warm queries per service)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
results=${1:-/dev/stdout}
runs=${RUNS:-5}
work=$(mktemp -d /tmp/strobe-bench-sym.XXXXXX)
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$root/build/bench/gen_pprof" "$work/big.pb.gz" 200000 42
cat >"$work/loop.sh" <<SH
end=\$((\$(date +%s) + 4)); while [ \$(date +%s) -lt \$end ]; do "$strobe" flamegraph -o /dev/null "$work/big.pb.gz"; done
SH
"$strobe" record --no-symbolize -F 999 -o "$work/raw.pb.gz" -- bash "$work/loop.sh" 2>/dev/null
"$strobe" record -F 999 -o "$work/named.pb.gz" -- bash "$work/loop.sh" 2>/dev/null

start() { server_start "$work/data" "$work/server.log"; }
stop() { server_stop; }
start
now=$(date +%s)
for ((i = 0; i < 288; i++)); do
  t=$((now - 86400 + i * 300))
  "$strobe" push -s "$url" --service raw --time "$t" "$work/raw.pb.gz" >/dev/null
  "$strobe" push -s "$url" --service named --time "$t" "$work/named.pb.gz" >/dev/null
done
"$strobe" debuginfo upload -s "$url" "$strobe" >/dev/null
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
q() { # SERVICE: seconds to answer a 24-h flame graph
  curl -s -o "$work/q.json" -w '%{time_total}\n' -G "$url/api/v1/query" \
    --data-urlencode "query=$SEL{service_name=\"$1\"}" -d from=now-25h -d format=json
}
stop; start # nothing cached: the cold query opens the debug file
hwm0=$(awk '/^VmHWM:/ {print $2}' /proc/$spid/status)
cold=$(q raw)
cp "$work/q.json" "$work/sym.json" # named by the symbolizer, to compare with the cache's answer
grep -q "strobe_" "$work/q.json" || note "the raw query was not named: $(head -c 300 "$work/q.json")"
warm=$(for ((i = 0; i < runs; i++)); do q raw; done | median)
named=$(for ((i = 0; i < runs; i++)); do q named; done | median)
hwm1=$(awk '/^VmHWM:/ {print $2}' /proc/$spid/status)
stop; start # the names are in the naming cache now: no debug file is opened
hwm2=$(awk '/^VmHWM:/ {print $2}' /proc/$spid/status)
q raw >/dev/null
hwm3=$(awk '/^VmHWM:/ {print $2}' /proc/$spid/status)
cmp -s "$work/q.json" "$work/sym.json" || note "the answer from the naming cache differs from the symbolizer's"
# The first query of a fresh process, RUNS restarts each, alternated: named on the host; bare
# addresses with the naming cache; bare addresses without it (its file deleted before the start).
for ((i = 0; i < runs; i++)); do
  stop; start; echo "named $(q named)"
  stop; start; echo "cached $(q raw)"
  stop; rm -f "$work/data/debuginfo/names.sqlite"*; start; echo "nocache $(q raw)"
done >"$work/first"
first() { awk -v k="$1" '$1 == k {print $2}' "$work/first" | median; }
fnamed=$(first named) cached=$(first cached) nocache=$(first nocache)
locs=$("$strobe" top -n 100000 "$work/raw.pb.gz" 2>/dev/null | grep -c '\[' || true)
ratio=$(awk -v a="$warm" -v b="$named" 'BEGIN {printf "%.2f", a / b}')
note "24 h flame graph: named $named s, raw cold $cold s, warm $warm s (x$ratio), first of a fresh process: named $fnamed s, bare with the naming cache $cached s, without $nocache s; server VmHWM $hwm0 -> $hwm1 KB, after the restart $hwm2 -> $hwm3 KB"
{
  echo "24 h of one service (288 profiles of a 4-s \`strobe record -F 999\` of \`strobe flamegraph\` in a loop), \`GET /api/v1/query format=json\`, median of $runs; one server, one run:"
  echo
  echo "| data | time to answer | vs named on the host | goal |"
  echo "|---|---|---|---|"
  printf '| named on the host | %.3f s | 1.00 | |\n' "$named"
  printf '| bare addresses, first query after the upload (cold: debug file opened, tables built, names cached) | %.3f s | %.2f | stated |\n' "$cold" "$(awk -v a="$cold" -v b="$named" 'BEGIN {print a / b}')"
  printf '| bare addresses, warm | %.3f s | %s | <= 1.5: %s |\n' "$warm" "$ratio" "$(awk -v r="$ratio" 'BEGIN {print (r <= 1.5) ? "met" : "**missed**"}')"
  echo
  echo "Server peak RSS (VmHWM) at the restart: $((hwm0 / 1024)) MB; after the cold and warm queries: $((hwm1 / 1024)) MB (build/strobe, $(($(stat -c %s "$strobe") / 1048576)) MB with its DWARF, opened by the tenant's symbolizer under its 256 MiB DWARF budget). After a restart: $((hwm2 / 1024)) MB, and $((hwm3 / 1024)) MB after the query named from the naming cache (the debug file is not opened)."
  echo
  echo "The first query of a freshly started server (its caches empty), median of $runs restarts each, alternated:"
  echo
  echo "| data | first query after a restart | vs named on the host |"
  echo "|---|---|---|"
  printf '| named on the host | %.3f s | 1.00 |\n' "$fnamed"
  printf '| bare addresses, names in the naming cache (no debug file opened) | %.3f s | %.2f |\n' "$cached" "$(awk -v a="$cached" -v b="$fnamed" 'BEGIN {print a / b}')"
  printf '| bare addresses, naming cache deleted (debug file opened, tables built) | %.3f s | %.2f |\n' "$nocache" "$(awk -v a="$nocache" -v b="$fnamed" 'BEGIN {print a / b}')"
  echo
  echo "Reproduce: \`BENCH_ONLY=symbolize bench/run.sh\` (or \`bench/symbolize.sh\`)."
  echo
} >>"$results"
