#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whole-host and fleet queries (issue 21): a host's worth of data and a fleet's, then the range
# API over 24 h grouped by service, the flame graph of the whole host over an hour, and the two
# API calls of the UI's first screen together, timed against `strobe server` built from this
# tree and, side by side on the same store, one built from an older tree (OLD_STROBE), so the
# effect of the per-point totals (store/query.c range_totals) and the group totals
# (store/groups.c) is measured on one machine in one run: both servers run at once on the store
# and each query's calls alternate between them, so a load change lands on both. A store
# without group totals gets them at the new build's first open, which is timed. Appends
# markdown to RESULTS (stdout when not given); bench/run.sh calls it under BENCH_ONLY=fleet (or
# all).
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
trap 'for p in "${PID[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
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
declare -A PID URL
start() { # LABEL BINARY STORE: sets PID[LABEL], URL[LABEL]
  local log=$work/log-$1 port= i
  : > "$log" # read below before the server has opened it
  "$2" server --data "$3" --listen 127.0.0.1:0 --config "$work/cfg.json" 2>"$log" & PID[$1]=$!
  for ((i = 0; i < 3000; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    sleep 0.2
  done
  URL[$1]=http://127.0.0.1:$port
  curl -sf "${URL[$1]}/ready" >/dev/null || { note "server did not start: $(cat "$log")"; exit 1; }
}
stop() { kill "${PID[$1]}"; wait "${PID[$1]}" 2>/dev/null || true; PID[$1]=; }
url=
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
# The same range not grouped (one line for the whole fleet: its "all series" group totals), and
# one service's (its group's).
range24all() { tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d step=360s; }
range24svc() { tq "$url/api/v1/range" --data-urlencode "query=$1" -d "from=$from24" -d "to=$to24" -d step=360s -d group_by=service_name; }
declare -A R
# Both builds' servers run side by side on the same store, and each query's RUNS calls alternate
# between them (the first of each pair alternating too), so that a load change on this shared
# machine lands on both alike; the medians are of each build's calls.
pair() { # KIND FUNCTION ARG: R[new|old,SET,KIND]; the first answer of each kept as KIND-BUILD-SET.out
  local tn=() to=() i b order
  for ((i = 0; i < runs; i++)); do
    order="new old"; (( i % 2 )) && order="old new"
    for b in $order; do
      [ -n "${URL[$b]:-}" ] || continue
      url=${URL[$b]}
      local t; t=$("$2" "$3")
      [ $b = new ] && tn+=("$t") || to+=("$t")
      (( i == 0 )) && cp "$work/q.out" "$work/$1-$b-$set.out"
    done
  done
  note "$set $1 $3: new ${tn[*]} s; old ${to[*]:-} s"
  R[new,$set,$1]=$(printf '%s\n' "${tn[@]}" | median)
  [ ${#to[@]} -gt 0 ] && R[old,$set,$1]=$(printf '%s\n' "${to[@]}" | median)
  return 0
}
la=$(cut -d' ' -f1 /proc/loadavg)
declare -A OPEN
for set in $sets; do
  # A store from before the group totals gets them at open (store/groups.c): the first open
  # by this build is timed, once per store.
  if [ -z "$(sqlite3 "$fdir/$set/strobe.db" "SELECT 1 FROM sqlite_schema WHERE name='gtotals'" 2>/dev/null)" ]; then
    t0=$(date +%s.%N); start new "$strobe" "$fdir/$set"; t1=$(date +%s.%N); stop new
    OPEN[$set]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    note "$set: group totals built at open in ${OPEN[$set]} s"
    echo "${OPEN[$set]}" > "$fdir/$set.groups_open_s"
  fi
  start new "$strobe" "$fdir/$set"
  [ -n "$old" ] && start old "$old" "$fdir/$set"
  if [ $set = host ]; then sel="$cpu{host=\"host-0\"}"; else sel="$cpu{}"; fi
  pair range range24 "$sel"
  pair flame flame1 "$sel"
  pair flame24 flame24 "$sel"
  pair screen screen "$sel"
  pair screen1 screen1 "$sel"
  pair rangea range24a "$sel"
  if [ $set = fleet ]; then
    pair flamehost flame1 "$cpu{host=\"host-07\"}"
    pair rangeall range24all "$sel"
    pair rangesvc range24svc "$cpu{service_name=\"svc-03\"}"
  fi
  stop new
  [ -n "$old" ] && stop old
done
la2=$(cut -d' ' -f1 /proc/loadavg)

# ---- ingest cost --------------------------------------------------------------------------------
# One hour of the host per build's loader, the two alternating run by run.
ing_new=- disk_new=- ing_old=- disk_old=-
ingest1() { # LOADER: "profiles_per_s bytes" of one run
  rm -rf "$work/ing"
  local line; line=$("$1" "$work/ing" host -d 3600 -e "$end")
  echo "$(kv profiles_per_s "$line") $(du -sb "$work/ing" | cut -f1)"
}
if [ "${INGEST_RUNS:-$runs}" -gt 0 ]; then
  pn=() dn=() po=() dd=()
  for ((i = 0; i < ${INGEST_RUNS:-$runs}; i++)); do
    read -r a b < <(ingest1 "$load"); pn+=("$a"); dn+=("$b")
    [ -n "$old_load" ] && { read -r a b < <(ingest1 "$old_load"); po+=("$a"); dd+=("$b"); }
  done
  note "ingest new: ${pn[*]} profiles/s, ${dn[*]} bytes; old: ${po[*]:-} profiles/s, ${dd[*]:-} bytes"
  ing_new=$(printf '%s\n' "${pn[@]}" | median); disk_new=$(printf '%s\n' "${dn[@]}" | median)
  [ -n "$old_load" ] && { ing_old=$(printf '%s\n' "${po[@]}" | median); disk_old=$(printf '%s\n' "${dd[@]}" | median); }
fi
# and what the totals take in the big stores
dbsz() { sqlite3 "$fdir/$1/strobe.db" "SELECT sum(pgsize) FROM dbstat WHERE name IN ($2)" 2>/dev/null || echo '?'; }
tot_host=$(dbsz host "'totals', 'sqlite_autoindex_totals_1'")
grp_host=$(dbsz host "'gtotals', 'sqlite_autoindex_gtotals_1', 'rgroups'")
grp_fleet=$(dbsz fleet "'gtotals', 'sqlite_autoindex_gtotals_1', 'rgroups'")
tot_fleet=$(dbsz fleet "'totals', 'sqlite_autoindex_totals_1'")
all_host=$(stat -c %s "$fdir/host/strobe.db" 2>/dev/null || echo "?")
all_fleet=$(stat -c %s "$fdir/fleet/strobe.db" 2>/dev/null || echo "?")
unr_host=$(sqlite3 "$fdir/host/strobe.db" "SELECT sum(pgsize) FROM dbstat WHERE name='points_unrolled'" 2>/dev/null || echo '?')

same= fsame=
for set in $sets; do
  for k in range rangeall rangesvc; do
    [ -f "$work/$k-old-$set.out" ] || continue
    if cmp -s "$work/$k-old-$set.out" "$work/$k-new-$set.out"; then same+="$set $k: identical; "
    else same+="$set $k: **different**; "; note "the two builds' $k answers differ on $set"; fi
  done
  [ -f "$work/flame24-old-$set.out" ] || continue
  # flat flame graphs: the same rows, in whatever order
  if cmp -s <(sort "$work/flame24-old-$set.out") <(sort "$work/flame24-new-$set.out"); then fsame+="$set: identical; "
  else fsame+="$set: **different**; "; note "the two builds' 24-h flame graphs differ on $set"; fi
done
cell() { [ -n "${R[$1]:-}" ] && ms "${R[$1]}" || echo "not run"; }
ratio() { [ -n "${R[old,$1]:-}" ] && [ -n "${R[new,$1]:-}" ] && awk -v o="${R[old,$1]}" -v n="${R[new,$1]}" 'BEGIN { if (n > 0) printf "%.1fx", o / n }' || true; }
row() { # LABEL KEY GOAL(s or empty)
  local g=; [ -n "$3" ] && g="<= $(awk -v s="$3" 'BEGIN { printf "%.0f ms", s * 1000 }')"
  echo "| $1 | $(cell old,$2) | $(cell new,$2) | $(ratio "$2") | $g | $([ -n "$3" ] && verdict "${R[new,$2]:-}" "$3") |"
}
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores (shared; load average $la at the start, $la2 at the end of the queries), medians of $runs runs per build, the two builds' servers side by side on the same store and their calls alternating, curl's total time on loopback. Before: \`${old:-(OLD_STROBE not set)}\`; after: this tree. Host: $(kv profiles "$(cat "$fdir/host.log" 2>/dev/null)") profiles of 500 series over 24 h every $hint s; fleet: $(kv profiles "$(cat "$fdir/fleet.log" 2>/dev/null)") profiles of 1,000 series (20 services x 50 hosts) over 24 h every $fint s (scaled down 6x in time, see bench/fleet.sh)."
  echo
  echo "| query | before | after | before/after | goal | |"
  echo "|---|---|---|---|---|---|"
  row "host: range 24 h, 240 steps, grouped by service (500 series)" host,range 0.2
  row "host: the same, window on whole minutes" host,rangea 0.2
  row "host: flame graph of the whole host, 1 h (format=flat)" host,flame 0.3
  row "host: flame graph of the whole host, 24 h (format=flat)" host,flame24 ""
  row "host: UI's first screen, its default last hour (range probe + range + flame graph, sequential)" host,screen1 1
  row "host: UI's first screen over 24 h (range probe + range + flame graph, sequential)" host,screen 1
  row "fleet: range 24 h, 240 steps, grouped by service (1,000 series)" fleet,range 0.2
  row "fleet: the same, window on whole minutes" fleet,rangea 0.2
  row "fleet: range 24 h, 240 steps, not grouped (the whole fleet's one line)" fleet,rangeall 0.2
  row "fleet: range 24 h, 240 steps, one service (50 series)" fleet,rangesvc 0.2
  row "fleet: flame graph of one host (20 series), 1 h" fleet,flamehost 0.3
  row "fleet: flame graph of the whole fleet (1,000 series), 1 h" fleet,flame ""
  row "fleet: flame graph of the whole fleet (1,000 series), 24 h" fleet,flame24 ""
  row "fleet: UI's first screen, last hour, whole fleet" fleet,screen1 1
  row "fleet: UI's first screen over 24 h, whole fleet" fleet,screen 1
  [ -n "$same" ] && { echo; echo "The 24-h range answers of the two builds, byte for byte: ${same%; }. The 24-h flame graphs (format=flat, rows sorted): ${fsame%; }."; }
  echo
  echo "Ingest cost, one hour of the host (180,000 profiles of 12 stacks, one push of 500 profiles per time step, synchronous=NORMAL), medians of ${INGEST_RUNS:-$runs} runs per build, alternating: before $ing_old profiles/s and $disk_old bytes on disk, after $ing_new profiles/s and $disk_new bytes. In the 24-h host store the series' totals take $tot_host of $all_host bytes, the group totals $grp_host; in the fleet store the series' totals $tot_fleet of $all_fleet bytes, the group totals $grp_fleet. Group totals built at open (a store written before them; the first open by this build): host $(cat "$fdir/host.groups_open_s" 2>/dev/null || echo '?') s, fleet $(cat "$fdir/fleet.groups_open_s" 2>/dev/null || echo '?') s. The partial index of raw points not yet rolled up (points_unrolled; compacted, so nearly empty): $unr_host bytes in the host store."
} >> "$results"

# ---- Grafana's flame graph call against the native one (issue 22) ---------------------------------
if [ "${FLEET_CONNECT:-1}" = 1 ]; then
  { echo; echo "**Connect's SelectMergeStacktraces against /api/v1/query** (bench/connect.sh):"; echo; } >> "$results"
  bash bench/connect.sh "$results"
fi
