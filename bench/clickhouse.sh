#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ClickHouse store against the SQLite store, side by side in one run (docs/clickhouse.md):
#  0. the insert format: the point rows of a day (below) inserted into an empty table as
#     RowBinary and as TabSeparated, gzip'd as the server sends them: bytes and ClickHouse's time;
#  1. ingest, profiles/s (bench/server_load.c push, CLIENTS clients for SECONDS_PER_RUN s, median
#     of RUNS): SQLite; one strobe server on a 1-shard ClickHouse; two strobe servers on 2 shards
#     (two load generators at once, half the clients each, their sum);
#  2. bytes on disk per profile after a simulated day of one service (DAY profiles 10 s apart):
#     SQLite's file at rest against ClickHouse's active parts (system.parts) after OPTIMIZE FINAL;
#  3. query latency on that day (median of RUNS): the 24 h flame graph (SVG), a range over 24 h
#     grouped by service (step 1 h), and the label names of the day.
# Everything shares this machine's cores: the strobe servers, the ClickHouse servers and the load
# generators (the numbers are stated with the core count and the load average).
#
#   bench/clickhouse.sh [RESULTS]
#   RUNS=3 CLIENTS=8 SECONDS_PER_RUN=10 DAY=2000   (the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
load=$root/build/bench/server_load
results=${1:-/dev/stdout}
runs=${RUNS:-3} clients=${CLIENTS:-8} secs=${SECONDS_PER_RUN:-10} day=${DAY:-2000}
note() { echo "bench: $*" >&2; }
for b in "$strobe" "$load"; do [ -x "$b" ] || { note "missing $b: run make bench"; exit 2; }; done
command -v clickhouse-server >/dev/null || { note "SKIP clickhouse: clickhouse-server is not installed (scripts/deps.sh check)"; exit 0; }
TMPDIR=$(mktemp -d /tmp/strobe-bench-ch.XXXXXX)
export TMPDIR
declare -a ch_pid ch_http ch_tcp
# shellcheck source=../tests/e2e/lib/clickhouse.sh
. "$root/tests/e2e/lib/clickhouse.sh"
spids=()
trap 'for p in "${spids[@]}"; do kill "$p" 2>/dev/null; done; ch_cleanup; rm -rf "$TMPDIR"' EXIT
ch_start 2 || { note "ClickHouse did not start: $ch_why"; exit 1; }

kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
load_avg() { cut -d' ' -f1 /proc/loadavg; }
serve() { # DATA [--store URL]: starts a strobe server, sets url; its pid goes to spids
  local d=$1 port= i log
  shift
  log=$d.log
  : >"$log"
  "$strobe" server --data "$d" --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  spids+=($!)
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { note "server did not start: $(cat "$log")"; exit 1; }
  url=http://127.0.0.1:$port
}
stop_all() { local p; for p in "${spids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done; spids=(); }
n=0
fresh() { n=$((n + 1)); db=b$n; } # a fresh database name per ClickHouse run

# ---- 1. ingest ---------------------------------------------------------------------------------
sq=() one=() two=()
for ((i = 0; i < runs; i++)); do
  serve "$TMPDIR/sq$i"; u=$url
  la=$(load_avg)
  line=$("$load" "$u" push -c "$clients" -s "$secs"); stop_all
  sq+=("$(kv profiles_per_s "$line")"); note "ingest sqlite run $((i + 1)): $line (load $la)"
  fresh
  serve "$TMPDIR/c1$i" --store "clickhouse://127.0.0.1:${ch_http[1]}/$db"; u=$url
  line=$("$load" "$u" push -c "$clients" -s "$secs"); stop_all
  one+=("$(kv profiles_per_s "$line")"); note "ingest 1 server / 1 shard run $((i + 1)): $line"
  fresh
  serve "$TMPDIR/c2a$i" --store "clickhouse://127.0.0.1:${ch_http[1]},127.0.0.1:${ch_http[2]}/$db?cluster=strobe"; u1=$url
  serve "$TMPDIR/c2b$i" --store "clickhouse://127.0.0.1:${ch_http[1]},127.0.0.1:${ch_http[2]}/$db?cluster=strobe"; u2=$url
  "$load" "$u1" push -c $((clients / 2)) -s "$secs" -S 1 >"$TMPDIR/l1" &
  l1=$!
  "$load" "$u2" push -c $((clients / 2)) -s "$secs" -S 2 >"$TMPDIR/l2"
  wait "$l1"; stop_all
  a=$(kv profiles_per_s "$(cat "$TMPDIR/l1")") b=$(kv profiles_per_s "$(cat "$TMPDIR/l2")")
  two+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a + b }')")
  note "ingest 2 servers / 2 shards run $((i + 1)): $a + $b profiles/s"
done
m_sq=$(printf '%s\n' "${sq[@]}" | median) m_one=$(printf '%s\n' "${one[@]}" | median) m_two=$(printf '%s\n' "${two[@]}" | median)

# ---- 2. a day, on disk -------------------------------------------------------------------------
serve "$TMPDIR/sqday"; u=$url
line=$("$load" "$u" day -n "$day" -c 8); sent=$(kv bytes_sent "$line")
us=$u
dday=day$$
serve "$TMPDIR/chday" --store "clickhouse://127.0.0.1:${ch_http[1]}/$dday"; uc=$url
linec=$("$load" "$uc" day -n "$day" -c 8); note "day: sqlite $line; clickhouse $linec"

# ---- 3. query ----------------------------------------------------------------------------------
sel='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="day"}'
end=$(( $(date +%s) / 10 * 10 ))
qt() { # URL ARGS...: median of RUNS of curl's total time
  local t=() i out
  for ((i = 0; i < runs; i++)); do
    out=$(curl -s -o "$TMPDIR/q.out" -w '%{time_total} %{http_code}' -G "$@")
    [ "${out##* }" = 200 ] || { note "query $* failed: $out $(head -c 300 "$TMPDIR/q.out")"; exit 1; }
    t+=("${out%% *}")
  done
  printf '%s\n' "${t[@]}" | median
}
ms() { awk -v s="$1" 'BEGIN { printf "%.0f ms", s * 1000 }'; }
declare -A Q
for b in s c; do
  [ $b = s ] && u=$us || u=$uc
  Q[$b.flame]=$(qt "$u/api/v1/query" --data-urlencode "query=$sel" -d "from=$((end - 86400 - 60))" -d "to=$((end + 60))" -d format=svg)
  Q[$b.range]=$(qt "$u/api/v1/range" --data-urlencode "query=process_cpu:cpu:nanoseconds:cpu:nanoseconds" -d "from=$((end - 86400))" -d "to=$((end + 60))" -d step=3600 -d group_by=service_name)
  Q[$b.labels]=$(qt "$u/api/v1/labels" -d "from=$((end - 86400))" -d "to=$((end + 60))")
done
a=$(curl -s -G "$us/api/v1/query" --data-urlencode "query=$sel" -d "from=$((end - 86400 - 60))" -d "to=$((end + 60))" -d format=folded | sort | md5sum)
b=$(curl -s -G "$uc/api/v1/query" --data-urlencode "query=$sel" -d "from=$((end - 86400 - 60))" -d "to=$((end + 60))" -d format=folded | sort | md5sum)
[ "$a" = "$b" ] && same=yes || same=NO
stop_all
disk_sq=0
for f in strobe.db strobe.db-wal; do [ -f "$TMPDIR/sqday/$f" ] && disk_sq=$((disk_sq + $(stat -c %s "$TMPDIR/sqday/$f"))); done
ch_sql 1 "OPTIMIZE TABLE $dday.points_l FINAL" >/dev/null || true
for t in stacks_l locations_l functions_l series_l; do ch_sql 1 "OPTIMIZE TABLE $dday.$t FINAL" >/dev/null || true; done
ch_sql 1 "OPTIMIZE TABLE $dday.\`.inner.points_1m_l\` FINAL" >/dev/null || true
disk_ch=$(ch_sql 1 "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '$dday' AND active")
by_tab=$(ch_sql 1 "SELECT table, sum(bytes_on_disk) FROM system.parts WHERE database = '$dday' AND active GROUP BY table ORDER BY table FORMAT TSV" | awk '{ printf "%s %s, ", $1, $2 }')
rows=$(ch_sql 1 "SELECT count() FROM $dday.points_l")
# The layout the points replaced, on the same day's data: a row per (point, stack), and its
# roll-ups a row per (minute, stack), made from the points and merged the same way.
ch_sql 1 "CREATE TABLE $dday.old_l (tenant String, type String, series UInt64, time Int64, stack UInt64, value Int64, slabels String, shard UInt64) ENGINE = MergeTree PARTITION BY intDiv(time, 86400000000000) ORDER BY (tenant, type, series, time, stack)" >/dev/null
ch_sql 1 "INSERT INTO $dday.old_l SELECT tenant, type, series, time, stack, value, slabels, shard FROM $dday.points_l ARRAY JOIN stacks AS stack, values AS value" >/dev/null
ch_sql 1 "CREATE TABLE $dday.old_1m_l (tenant String, type String, series UInt64, minute Int64, stack UInt64, value Int64) ENGINE = SummingMergeTree PARTITION BY intDiv(minute, 86400000000000) ORDER BY (tenant, type, series, minute, stack)" >/dev/null
ch_sql 1 "INSERT INTO $dday.old_1m_l SELECT tenant, type, series, intDiv(time, 60000000000) * 60000000000 AS minute, stack, sum(value) FROM $dday.old_l GROUP BY tenant, type, series, minute, stack" >/dev/null
for t in old_l old_1m_l; do ch_sql 1 "OPTIMIZE TABLE $dday.$t FINAL" >/dev/null || true; done
disk_old() { ch_sql 1 "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '$dday' AND active AND table = '$1'"; }
old_pts=$(disk_old old_l) old_1m=$(disk_old old_1m_l) old_rows=$(ch_sql 1 "SELECT count() FROM $dday.old_l")
new_pts=$(disk_old points_l) new_1m=$(disk_old .inner.points_1m_l)

# ---- 0. the insert format ------------------------------------------------------------------------
cols='tenant, type, series, time, stacks, values, slabels, shard'
for f in RowBinary TabSeparated; do ch_sql 1 "SELECT $cols FROM $dday.points_l FORMAT $f" | gzip -6 >"$TMPDIR/rows.$f.gz"; done
fmt() { # FORMAT: "gzip_bytes median_seconds"
  local t=() i
  for ((i = 0; i < runs; i++)); do
    ch_sql 1 "DROP TABLE IF EXISTS $dday.fmt" >/dev/null
    ch_sql 1 "CREATE TABLE $dday.fmt AS $dday.points_l" >/dev/null
    t+=("$(curl -s -o /dev/null -w '%{time_total}' -H 'Content-Encoding: gzip' --data-binary @"$TMPDIR/rows.$1.gz" \
      "http://127.0.0.1:${ch_http[1]}/?query=$(printf 'INSERT%%20INTO%%20%s.fmt%%20FORMAT%%20%s' "$dday" "$1")")")
  done
  echo "$(stat -c %s "$TMPDIR/rows.$1.gz") $(printf '%s\n' "${t[@]}" | median)"
}
rb=$(fmt RowBinary) tsv=$(fmt TabSeparated)

per() { awk -v d="$1" -v n="$day" 'BEGIN { printf "%.0f", d / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores shared by everything (the strobe servers, clickhouse-server $(ch_sql 1 'SELECT version()') and the load generators; load average $(load_avg) at the end), medians of $runs runs. Profiles from bench/server_load.c (about 1,500 distinct stacks, 31 KB gzipped each)."
  echo
  echo "| benchmark | SQLite | ClickHouse | ClickHouse / SQLite |"
  echo "|---|---|---|---|"
  echo "| ingest, $clients clients, ${secs} s: 1 strobe server, 1 shard | $m_sq profiles/s | $m_one profiles/s | $(ratio "$m_one" "$m_sq") |"
  echo "| ingest, $clients clients, ${secs} s: 2 strobe servers, 2 shards (sum) | (one server: $m_sq) | $m_two profiles/s | $(ratio "$m_two" "$m_sq") |"
  echo "| bytes on disk per profile, a day of one service ($day profiles, $(awk -v s="$sent" 'BEGIN { printf "%.1f", s / 1048576 }') MB gzipped pprof) | $(per "$disk_sq") | $(per "$disk_ch") | $(ratio "$disk_ch" "$disk_sq") |"
  echo "| query: 24 h flame graph (SVG; same folded answer: $same) | $(ms "${Q[s.flame]}") | $(ms "${Q[c.flame]}") | $(ratio "${Q[c.flame]}" "${Q[s.flame]}") |"
  echo "| query: range over 24 h grouped by service, step 1 h | $(ms "${Q[s.range]}") | $(ms "${Q[c.range]}") | $(ratio "${Q[c.range]}" "${Q[s.range]}") |"
  echo "| query: label names of the day | $(ms "${Q[s.labels]}") | $(ms "${Q[c.labels]}") | $(ratio "${Q[c.labels]}" "${Q[s.labels]}") |"
  echo
  echo "ClickHouse's day: $rows point rows ($(awk -v r="$rows" -v n="$day" 'BEGIN { printf "%.1f", r / n }') per profile: one per sample type), by table after OPTIMIZE FINAL: ${by_tab%, }."
  echo
  echo "Layouts on the same day's data (bytes on disk after OPTIMIZE FINAL): points (a row per point, arrays of stacks and values) $new_pts, its roll-ups (a row per series and minute, a nested map) $new_1m; the row per (point, stack) it replaced ($old_rows rows) $old_pts, its roll-ups (a row per minute and stack) $old_1m: $(ratio "$old_pts" "$new_pts") and $(ratio "$old_1m" "$new_1m") times the new layout's bytes."
  echo
  echo "Insert format, the day's point rows ($rows) gzip'd as the server sends them, into an empty table: RowBinary $(cut -d' ' -f1 <<<"$rb") bytes in $(ms "$(cut -d' ' -f2 <<<"$rb")"), TabSeparated $(cut -d' ' -f1 <<<"$tsv") bytes in $(ms "$(cut -d' ' -f2 <<<"$tsv")")."
} >> "$results"
