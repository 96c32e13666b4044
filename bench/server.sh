#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server's benchmarks: ingest throughput, bytes on disk per profile, query latency and RSS of
# `strobe server`, with the load generator bench/server_load.c (realistic 10-second Go-style CPU
# profiles, see there). Appends markdown to RESULTS (stdout when not given); bench/run.sh calls
# it under BENCH_ONLY=server (or all) and writes the result into docs/BENCHMARKS.md.
#
#  1. ingest: a fresh server (default config: synchronous=FULL, every 200 durable); CLIENTS
#     concurrent clients push for SECONDS; profiles/s and pprof samples/s, median of RUNS runs;
#     the server's CPU time per profile and pushes per fsync (from its /metrics).
#  2. storage: a fresh server gets a simulated day of one steady service, 8,640 profiles 10 s
#     apart (timestamps simulated, ending now); then compaction (POST /api/v1/admin/compact),
#     as the server's maintenance would have done along the way; the store's files on disk
#     (at rest, after a clean stop; and while running) against the gzipped pprof bytes received.
#  3. query, on that day: the whole 24 h merged into a flame graph (format=svg), one hour (an
#     hour not aligned to the roll-up buckets: roll-ups for the whole minutes, raw points at the
#     edges), and the diff of two such hours (format=svg); curl's total time, median of RUNS.
#  4. RSS: the server's peak resident memory (VmHWM) after the ingest runs and after the day.
#
# No peer runs here: Pyroscope and Parca are not installable from Debian, so these are absolute
# numbers on a shared 2-core machine, stated with the load average of the moment.
#
#   bench/server.sh [RESULTS]
#   RUNS=3 CLIENTS=16 SECONDS_PER_RUN=10 DAY=8640   (the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
load=$root/build/bench/server_load
results=${1:-/dev/stdout}
runs=${RUNS:-3} clients=${CLIENTS:-16} secs=${SECONDS_PER_RUN:-10} day=${DAY:-8640}
need_bins "$strobe" "$load"
command -v curl >/dev/null || { note "missing curl"; exit 2; }
work=$(mktemp -d /tmp/strobe-bench-server.XXXXXX)
spid=
trap 'server_stop; rm -rf "$work"' EXIT

start() { rm -rf "$work/data"; server_start "$work/data" "$work/log"; } # a fresh server: sets spid, url
stop() { server_stop; }
metric() { curl -s "$url/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
hwm() { awk '/VmHWM/ { print $2 }' "/proc/$spid/status"; }
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
load_avg() { cut -d' ' -f1 /proc/loadavg; }

# ---- 1. ingest ----------------------------------------------------------------------------------
pps=() sps=() cpu=() batch=() rss=0 line=
for ((i = 0; i < runs; i++)); do
  start
  la=$(load_avg)
  line=$("$load" "$url" push -c "$clients" -s "$secs")
  n=$(kv profiles "$line")
  c=$(metric process_cpu_seconds_total)
  k=$(metric strobe_store_commits_total)
  p=$(metric strobe_store_committed_pushes_total)
  h=$(hwm)
  [ "$h" -gt "$rss" ] && rss=$h
  stop
  pps+=("$(kv profiles_per_s "$line")")
  sps+=("$(kv samples_per_s "$line")")
  cpu+=("$(awk -v c="$c" -v n="$n" 'BEGIN { printf "%.2f", n ? c * 1000 / n : 0 }')")
  batch+=("$(awk -v p="$p" -v k="$k" 'BEGIN { printf "%.1f", k ? p / k : 0 }')")
  note "ingest run $((i + 1)): $line (load average before: $la; server CPU ${cpu[-1]} ms/profile, ${batch[-1]} pushes per commit)"
done
gz=$(kv avg_gzip_bytes "$line")
stacks=$(kv avg_stacks "$line")
m_pps=$(printf '%s\n' "${pps[@]}" | median)
m_sps=$(printf '%s\n' "${sps[@]}" | median)
m_cpu=$(printf '%s\n' "${cpu[@]}" | median)
m_batch=$(printf '%s\n' "${batch[@]}" | median)
ingest_rss=$rss

# ---- 2. storage ---------------------------------------------------------------------------------
start
la_day=$(load_avg)
line=$("$load" "$url" day -n "$day" -c 8)
sent=$(kv bytes_sent "$line")
day_s=$(kv seconds "$line")
note "day: $line"
compact=$(curl -s -X POST "$url/api/v1/admin/compact")
note "compaction: $compact"
files() { local d=0 f; for f in strobe.db strobe.db-wal strobe.db-shm; do
  [ -f "$work/data/$f" ] && d=$((d + $(stat -c %s "$work/data/$f"))); done; echo $d; }
live=$(files) # with the WAL of the compaction of a whole day at once, which a running server
              # (compacting every minute) never has
rows=$(curl -s "$url/metrics" | awk '/^strobe_store_rows/ { sub(/.*table="/, ""); sub(/"}/, ""); printf "%s %s, ", $1, $2 }')

# ---- 3. query -----------------------------------------------------------------------------------
sel='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="day"}'
now=$(date +%s)
end=$((now / 10 * 10)) # the day's last profile is at the last 10-s mark before the load started
h1a=$((end - 3 * 3600 - 1234)) h1b=$((end - 2 * 3600 - 1234)) h2b=$((end - 3600 - 1234))
tq() { # ARGS...: curl's total seconds for GET /api/v1/... (prints "seconds bytes")
  curl -s -o "$work/q.out" -w '%{time_total} %{size_download} %{http_code}\n' -G "$@"
}
qtimes() { # NAME ARGS...: the median of RUNS
  local t=() i out
  for ((i = 0; i < runs; i++)); do
    out=$(tq "$@")
    [ "${out##* }" = 200 ] || { note "$1 failed: $out $(head -c 300 "$work/q.out")"; exit 1; }
    t+=("${out%% *}")
  done
  note "query $*: ${t[*]} s, $(stat -c %s "$work/q.out") bytes"
  printf '%s\n' "${t[@]}" | median
}
q24=$(qtimes "$url/api/v1/query" --data-urlencode "query=$sel" -d "from=$((end - 86400 - 60))" -d "to=$((end + 60))" -d format=svg)
q24stacks=$(curl -s -G "$url/api/v1/query" --data-urlencode "query=$sel" -d "from=$((end - 86400 - 60))" -d "to=$((end + 60))" -d format=folded | wc -l)
q1=$(qtimes "$url/api/v1/query" --data-urlencode "query=$sel" -d "from=$h1a" -d "to=$h1b" -d format=svg)
qd=$(qtimes "$url/api/v1/diff" --data-urlencode "base=$sel" -d "base_from=$h1a" -d "base_to=$h1b" \
  --data-urlencode "new=$sel" -d "new_from=$h1b" -d "new_to=$h2b" -d format=svg)
day_rss=$(hwm)
stop
disk=$(files) # at rest: a clean stop checkpoints and removes the WAL
ratio=$(awk -v d="$disk" -v s="$sent" 'BEGIN { printf "%.1f", 100 * d / s }')
ratio_live=$(awk -v d="$live" -v s="$sent" 'BEGIN { printf "%.1f", 100 * d / s }')
per=$(awk -v d="$disk" -v n="$day" 'BEGIN { printf "%.0f", d / n }')

ms() { awk -v s="$1" 'BEGIN { printf "%.0f ms", s * 1000 }'; }
verdict() { awk -v v="$1" -v g="$2" -v dir="$3" 'BEGIN { ok = dir == "ge" ? v >= g : v <= g; print ok ? "met" : "**missed**" }'; }
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores (shared; load average $la before the last ingest run, $la_day before the day), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); medians of $runs runs. The profiles: $stacks distinct stacks and $gz bytes gzipped on average (bench/server_load.c)."
  echo
  echo "| benchmark | result | goal | |"
  echo "|---|---|---|---|"
  echo "| ingest, $clients concurrent clients, synchronous=FULL | $m_pps profiles/s, $m_sps samples/s | >= 2,000 profiles/s | $(verdict "$m_pps" 2000 ge) |"
  echo "| ingest: server CPU per profile; pushes per commit (fsync) | $m_cpu ms; $m_batch | | |"
  echo "| storage after a simulated day ($day profiles, $(awk -v s="$sent" 'BEGIN { printf "%.1f", s / 1048576 }') MB gzipped pprof received in $day_s s) | $ratio% of the received bytes on disk at rest, roll-ups included ($per bytes per profile); $ratio_live% while running, right after compacting the whole day at once (WAL) | <= 25% | $(verdict "$ratio" 25 le) |"
  echo "| query: 24 h merged to a flame graph (SVG, $q24stacks stacks) | $(ms "$q24") | <= 1 s | $(verdict "$q24" 1 le) |"
  echo "| query: 1 h merged to a flame graph (SVG) | $(ms "$q1") | <= 100 ms | $(verdict "$q1" 0.1 le) |"
  echo "| query: diff of two hours (SVG) | $(ms "$qd") | <= 200 ms | $(verdict "$qd" 0.2 le) |"
  echo "| server peak RSS: ingest runs; the day and its queries | $((ingest_rss / 1024)) MB; $((day_rss / 1024)) MB | stated | |"
  echo
  echo "Store after the day: ${rows%, }."
} >> "$results"
