#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole-host and fleet queries (issue 21): a host's worth of data and a fleet's, then the range
# API over 24 h grouped by service, the flame graph of the whole host over an hour, and the two
# API calls of the UI's first screen together, timed against `strobe server` built from this
# tree and, side by side on the same store, one built from an older tree (OLD_STROBE), so the
# effect of the per-point totals (store/query.c range_totals) is measured on one machine in one
# run. Appends markdown to RESULTS (stdout when not given); bench/run.sh calls it under
# BENCH_ONLY=fleet (or all).
#
# The data is written straight into store directories by bench/fleet_load.c (the store's own
# push call, one transaction per time step for every series, as group commit batches agents'
# pushes), small CPU profiles (12 stacks of 3-8 frames, one sample type), then compacted as a
# running server would have along the way:
#   host:  500 processes (service_name=proc-NNN, host=host-0), every 10 s for 24 h: 4.32 M
#          profiles, the size the issue asks for;
#   fleet: 20 services x 50 hosts, every FLEET_INTERVAL s (60) for 24 h: 1.44 M profiles, a
#          sixth of the 8.64 M of a 10-s interval, which take too long to write on a shared
#          2-core machine; the series count (what the range and flame-graph costs scale with
#          first) is the issue's.
# The stores are kept in FLEET_DIR (default /tmp/strobe-bench-fleet) between runs: writing the
# host's takes about 10-15 minutes here. The ingest cost of the totals (throughput and bytes on
# disk) is measured separately, on an hour of the host (180,000 profiles) written by both
# builds' loaders (OLD_LOAD: bench/fleet_load.c built against the older tree's libstrobe.a).
#
#   bench/fleet.sh [RESULTS]
#   RUNS=3 OLD_STROBE=/path/to/old/strobe OLD_LOAD=/path/to/old/fleet_load FLEET_DIR=...
#   HOST_INTERVAL=S (default 10): the host's push interval (60 on a machine too busy to write
#   4.32 M profiles in time; written once per FLEET_DIR, so say it with a fresh one)
#   INGEST_RUNS=N (default RUNS): runs of the ingest part, each an hour of the host per build
#   (0: skipped); FLEET_SETS="host fleet" (default): the data sets measured
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
load=$root/build/bench/fleet_load
results=${1:-/dev/stdout}
runs=${RUNS:-3}
fdir=${FLEET_DIR:-/tmp/strobe-bench-fleet}
fint=${FLEET_INTERVAL:-60}
hint=${HOST_INTERVAL:-10}
old=${OLD_STROBE:-}
old_load=${OLD_LOAD:-}
note() { echo "bench: $*" >&2; }
for b in "$strobe" "$load"; do
  [ -x "$b" ] || { note "missing $b: run make bench"; exit 2; }
done
mkdir -p "$fdir"
work=$(mktemp -d /tmp/strobe-bench-fleet-run.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
ms() { awk -v s="$1" 'BEGIN { printf "%.0f ms", s * 1000 }'; }
verdict() { [ -n "$1" ] || return 0; awk -v v="$1" -v g="$2" 'BEGIN { print v <= g ? "met" : "**missed**" }'; }

# ---- data -----------------------------------------------------------------------------------------
gen() { # NAME ARGS...: the store FLEET_DIR/NAME, written once
  local name=$1; shift
  if [ ! -f "$fdir/$name.done" ]; then
    rm -rf "${fdir:?}/$name"
    note "writing the $name data set ($*): minutes"
    "$load" "$fdir/$name" "$@" -c > "$fdir/$name.log"
    touch "$fdir/$name.done"
  fi
  note "$name: $(cat "$fdir/$name.log"), $(du -sh "$fdir/$name" | cut -f1) on disk"
}
end=$(cat "$fdir/end" 2>/dev/null || true)
[ -n "$end" ] || { end=$(( $(date +%s) / 10 * 10 )); echo "$end" > "$fdir/end"; }
sets=${FLEET_SETS:-host fleet}
[[ " $sets " = *" host "* ]] && gen host host -i "$hint" -e "$end"
[[ " $sets " = *" fleet "* ]] && gen fleet fleet -i "$fint" -e "$end"

# ---- servers ---------------------------------------------------------------------------------------
# Maintenance off for the run (compaction already done; a running server's pass over millions of
# raw rows every minute would land in some timings and not others).
echo '{"maintenance_interval": "24h", "limits": {"max_query_profiles": 100000000}}' > "$work/cfg.json"
start() { # BINARY STORE: sets pid, url
  "$1" server --data "$2" --listen 127.0.0.1:0 --config "$work/cfg.json" 2>"$work/log" & pid=$!
  local port= i
  for ((i = 0; i < 600; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    sleep 0.2
  done
  url=http://127.0.0.1:$port
  curl -sf "$url/ready" >/dev/null || { note "server did not start: $(cat "$work/log")"; exit 1; }
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
tq() { # ARGS...: seconds of one GET, failing loudly
  local out
  out=$(curl -s --max-time 300 -o "$work/q.out" -w '%{time_total} %{http_code}' -G "$@")
  [ "${out##* }" = 200 ] || { note "query failed: $* -> $out $(head -c 300 "$work/q.out")"; echo 999; return; }
  echo "${out%% *}"
}
cpu='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
# Windows as the UI asks them: now-24h and now-1h, i.e. not aligned to minutes or steps.
from24=$((end - 86400 + 7)) to24=$((end + 7)) from1=$((end - 3600 + 7))
range24() { tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d step=360s -d group_by=service_name; }
flame1() { tq "$url/api/v1/query" --data-urlencode "query=$1" -d "from=$from1" -d "to=$to24" -d format=flat; }
# The flame graph of the whole host (or fleet) over the UI's now-24h: hour roll-ups inside, minute
# roll-ups and raw points at its unaligned edges.
flame24() { tq "$url/api/v1/query" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d format=flat; }
# The UI's first screen (ui/app.js): a range probe (step 1d), then the range at its ~240-step
# step (600 s for 24 h) and the flame graph (format=flat) of the window; the two last are sent
# at once by the browser, timed here one after the other (an upper bound on what it waits for).
screen() { local a b c
  a=$(tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d step=1d -d group_by=service_name)
  b=$(tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d step=600s -d group_by=service_name)
  c=$(tq "$url/api/v1/query" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d format=flat)
  awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { print a + b + c }'; }
# The UI's default window is the last hour (ui/app.js): its first screen is the probe, the range at
# 15 s and the hour's flame graph.
screen1() { local a b c
  a=$(tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from1" -d "to=$to24" -d step=1d -d group_by=service_name)
  b=$(tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from1" -d "to=$to24" -d step=15s -d group_by=service_name)
  c=$(tq "$url/api/v1/query" --data-urlencode "query=$1" -d "from=$from1" -d "to=$to24" -d format=flat)
  awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { print a + b + c }'; }
# The 24-h range with the window on whole minutes: no minute is cut, no point read one by one.
range24a() { tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$(( (end - 86400) / 60 * 60 ))" -d "to=$(( end / 60 * 60 + 60 ))" -d step=360s -d group_by=service_name; }
med_of() { # FUNCTION ARG: the median of RUNS calls
  local t=() i
  for ((i = 0; i < runs; i++)); do t+=("$("$1" "$2")"); done
  note "$1 $2: ${t[*]} s"
  printf '%s\n' "${t[@]}" | median
}
declare -A R
measure() { # LABEL BINARY
  local b=$2 set
  for set in $sets; do
    start "$b" "$fdir/$set"
    if [ $set = host ]; then sel="$cpu{host=\"host-0\"}"; else sel="$cpu{}"; fi
    R[$1,$set,range]=$(med_of range24 "$sel")
    cp "$work/q.out" "$work/range-$1-$set.json" # the answers of the two builds are compared
    R[$1,$set,flame]=$(med_of flame1 "$sel")
    R[$1,$set,flame24]=$(med_of flame24 "$sel")
    cp "$work/q.out" "$work/flame24-$1-$set.txt" # compared between the builds too
    R[$1,$set,screen]=$(med_of screen "$sel")
    R[$1,$set,screen1]=$(med_of screen1 "$sel")
    R[$1,$set,rangea]=$(med_of range24a "$sel")
    [ $set = fleet ] && R[$1,$set,flamehost]=$(med_of flame1 "$cpu{host=\"host-07\"}")
    stop
  done
}
la=$(cut -d' ' -f1 /proc/loadavg)
measure new "$strobe"
[ -n "$old" ] && measure old "$old"

# ---- ingest cost --------------------------------------------------------------------------------
ingest() { # LOADER: "profiles_per_s bytes" for one hour of the host, median of INGEST_RUNS
  local p=() d=() i line
  for ((i = 0; i < ${INGEST_RUNS:-$runs}; i++)); do
    rm -rf "$work/ing"
    line=$("$1" "$work/ing" host -d 3600 -e "$end")
    p+=("$(kv profiles_per_s "$line")")
    d+=("$(du -sb "$work/ing" | cut -f1)")
  done
  note "ingest $1: ${p[*]} profiles/s, ${d[*]} bytes"
  echo "$(printf '%s\n' "${p[@]}" | median) $(printf '%s\n' "${d[@]}" | median)"
}
ing_new=- disk_new=- ing_old=- disk_old=-
if [ "${INGEST_RUNS:-$runs}" -gt 0 ]; then
  read -r ing_new disk_new < <(ingest "$load")
  [ -n "$old_load" ] && read -r ing_old disk_old < <(ingest "$old_load")
fi
# and what the totals take in the big stores
tot_host=$(sqlite3 "$fdir/host/strobe.db" "SELECT sum(pgsize) FROM dbstat WHERE name IN ('totals', 'sqlite_autoindex_totals_1')" 2>/dev/null || echo '?')
all_host=$(stat -c %s "$fdir/host/strobe.db" 2>/dev/null || echo "?")
unr_host=$(sqlite3 "$fdir/host/strobe.db" "SELECT sum(pgsize) FROM dbstat WHERE name='points_unrolled'" 2>/dev/null || echo '?')

same= fsame=
for set in $sets; do
  [ -f "$work/range-old-$set.json" ] || continue
  if cmp -s "$work/range-old-$set.json" "$work/range-new-$set.json"; then same+="$set: identical; "
  else same+="$set: **different**; "; note "the two builds' ranges differ on $set"; fi
  # flat flame graphs: the same rows, in whatever order
  if cmp -s <(sort "$work/flame24-old-$set.txt") <(sort "$work/flame24-new-$set.txt"); then fsame+="$set: identical; "
  else fsame+="$set: **different**; "; note "the two builds' 24-h flame graphs differ on $set"; fi
done
cell() { [ -n "${R[$1]:-}" ] && ms "${R[$1]}" || echo "not run"; }
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores (shared; load average $la before), medians of $runs runs, curl's total time on loopback. Before: \`${old:-(OLD_STROBE not set)}\`; after: this tree. Same stores for both (written by this tree's bench/fleet_load, compacted; the older server ignores the totals table). Host: $(kv profiles "$(cat "$fdir/host.log")") profiles of 500 series over 24 h every $hint s; fleet: $(kv profiles "$(cat "$fdir/fleet.log")") profiles of 1,000 series (20 services x 50 hosts) over 24 h every $fint s (scaled down 6x in time, see bench/fleet.sh)."
  echo
  echo "| query | before | after | goal | |"
  echo "|---|---|---|---|---|"
  echo "| host: range 24 h, 240 steps, grouped by service (500 series) | $(cell old,host,range) | $(cell new,host,range) | <= 200 ms | $(verdict "${R[new,host,range]:-}" 0.2) |"
  echo "| host: the same, window on whole minutes | $(cell old,host,rangea) | $(cell new,host,rangea) | <= 200 ms | $(verdict "${R[new,host,rangea]:-}" 0.2) |"
  echo "| host: flame graph of the whole host, 1 h (format=flat) | $(cell old,host,flame) | $(cell new,host,flame) | <= 300 ms | $(verdict "${R[new,host,flame]:-}" 0.3) |"
  echo "| host: flame graph of the whole host, 24 h (format=flat) | $(cell old,host,flame24) | $(cell new,host,flame24) | | |"
  echo "| host: UI's first screen, its default last hour (range probe + range + flame graph, sequential) | $(cell old,host,screen1) | $(cell new,host,screen1) | <= 1 s | $(verdict "${R[new,host,screen1]:-}" 1) |"
  echo "| host: UI's first screen over 24 h (range probe + range + flame graph, sequential) | $(cell old,host,screen) | $(cell new,host,screen) | <= 1 s | $(verdict "${R[new,host,screen]:-}" 1) |"
  echo "| fleet: range 24 h, 240 steps, grouped by service (1,000 series) | $(cell old,fleet,range) | $(cell new,fleet,range) | <= 200 ms | $(verdict "${R[new,fleet,range]:-}" 0.2) |"
  echo "| fleet: the same, window on whole minutes | $(cell old,fleet,rangea) | $(cell new,fleet,rangea) | <= 200 ms | $(verdict "${R[new,fleet,rangea]:-}" 0.2) |"
  echo "| fleet: flame graph of one host (20 series), 1 h | $(cell old,fleet,flamehost) | $(cell new,fleet,flamehost) | <= 300 ms | $(verdict "${R[new,fleet,flamehost]:-}" 0.3) |"
  echo "| fleet: flame graph of the whole fleet (1,000 series), 1 h | $(cell old,fleet,flame) | $(cell new,fleet,flame) | | |"
  echo "| fleet: flame graph of the whole fleet (1,000 series), 24 h | $(cell old,fleet,flame24) | $(cell new,fleet,flame24) | | |"
  echo "| fleet: UI's first screen, last hour, whole fleet | $(cell old,fleet,screen1) | $(cell new,fleet,screen1) | <= 1 s | $(verdict "${R[new,fleet,screen1]:-}" 1) |"
  echo "| fleet: UI's first screen over 24 h, whole fleet | $(cell old,fleet,screen) | $(cell new,fleet,screen) | <= 1 s | $(verdict "${R[new,fleet,screen]:-}" 1) |"
  [ -n "$same" ] && { echo; echo "The 24-h range answers of the two builds, byte for byte: ${same%; }. The 24-h flame graphs (format=flat, rows sorted): ${fsame%; }."; }
  echo
  echo "Ingest cost of the totals, one hour of the host (180,000 profiles of 12 stacks, one push of 500 profiles per time step, synchronous=NORMAL), medians of ${INGEST_RUNS:-$runs}: before $ing_old profiles/s and $disk_old bytes on disk, after $ing_new profiles/s and $disk_new bytes. In the 24-h host store the totals table and its key take $tot_host of $all_host bytes, the partial index of raw points not yet rolled up (points_unrolled; compacted, so nearly empty) $unr_host bytes."
} >> "$results"

# ---- Grafana's flame graph call against the native one (issue 22) ---------------------------------
if [ "${FLEET_CONNECT:-1}" = 1 ]; then
  { echo; echo "**Connect's SelectMergeStacktraces against /api/v1/query** (bench/connect.sh):"; echo; } >> "$results"
  bash bench/connect.sh "$results"
fi
