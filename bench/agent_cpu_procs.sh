#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's own CPU beside many busy processes (issue 27's "200 busy processes" goal), for one
# or more agent binaries side by side: NPROCS niced `cpu_work -t 1`, then for each round and each
# binary (in an order that rotates from round to round) `strobe agent -F HZ --on-cpu-mode MODE
# -i IV` with no server (pushes fail, as in bench/oncpu.sh part 4), WARMUP_SECONDS to get past
# its start (it reads every process once), then its utime + stime from /proc/PID/stat over
# WINDOW_SECONDS. The agent's own ticks are what is compared: on a shared machine they move less
# with the load than any rate of the workload does. Prints a markdown table to RESULTS (stdout
# when not given), and every window's figures on stderr.
#
#   bench/agent_cpu_procs.sh [RESULTS]
#   AGENTS="before:/tmp/strobe-old after:build/strobe"   (default: after:build/strobe)
#   NPROCS=200 HZ=99 MODE=bpf IV=10 ROUNDS=3 WARMUP_SECONDS=12 WINDOW_SECONDS=30 (defaults)
#   SERVER=1: push to a strobe server on loopback (bench/lib.sh) rather than to nothing
#   ONLY_BUSY=1: the agent given the busy processes (-p PID,...) rather than the whole host: on a
#   machine shared with other work, whose new processes the agent would read (identity,
#   mappings, unwind tables) and export, that work's churn is kept out of the measure
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
. bench/lib.sh
cpu_work=$root/build/bench/cpu_work
results=${1:-/dev/stdout}
nprocs=${NPROCS:-200} hz=${HZ:-99} mode=${MODE:-bpf} iv=${IV:-10} rounds=${ROUNDS:-3}
warm_s=${WARMUP_SECONDS:-12} win_s=${WINDOW_SECONDS:-30}
read -r -a agents <<<"${AGENTS:-after:$strobe}"
need_bins "$cpu_work" "$strobe"
for a in "${agents[@]}"; do need_bins "${a#*:}"; done
if [ "$(id -u)" -ne 0 ]; then note "SKIP agent_cpu_procs: needs root"; exit 0; fi
work=$(mktemp -d /tmp/strobe-agentcpu.XXXXXX)
apid= spid= bgp=()
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
  [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
  for p in "${bgp[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# run time in ns of every thread of process $1 (the scheduler's own account, /proc/PID/task/*/
# schedstat; ticks are 10 ms, a few of them in a window): the agent's threads live as long as it
runns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
url=http://127.0.0.1:9
if [ "${SERVER:-0}" = 1 ]; then server_start "$work/data" "$work/server.log"; fi
for ((k = 0; k < nprocs; k++)); do
  nice -n 19 "$cpu_work" -t 1 -s 3600 >/dev/null &
  bgp+=($!)
done
sleep 2
target=()
if [ "${ONLY_BUSY:-0}" = 1 ]; then target=(-p "$(IFS=,; echo "${bgp[*]}")"); fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#agents[@]}; i++)); do
    a=${agents[$(((i + r) % ${#agents[@]}))]}
    name=${a%%:*} bin=${a#*:}
    "$bin" agent --server "$url" --log-level error -F "$hz" -i "$iv" --max-cpu 100 \
      --on-cpu-mode "$mode" --no-preload "${target[@]}" 2>"$work/agent.log" &
    apid=$!
    sleep "$warm_s"
    kill -0 "$apid" 2>/dev/null || { note "$name: the agent exited: $(head -c 1000 "$work/agent.log")"; exit 1; }
    a0=$(ticks "$apid"); r0=$(runns "$apid"); t0=$(date +%s.%N)
    sleep "$win_s"
    a1=$(ticks "$apid"); r1=$(runns "$apid"); t1=$(date +%s.%N)
    kill "$apid"; wait "$apid" 2>/dev/null || true; apid=
    # name, ticks, ms/s and % of a core from the ticks, ms/s and % of a core from schedstat
    line=$(awk -v m="$name" -v a="$a0" -v b="$a1" -v t="$tck" -v w0="$t0" -v w1="$t1" -v r0="$r0" -v r1="$r1" \
      'BEGIN { w = w1 - w0; printf "%s %d %.3f %.4f %.3f %.4f", m, b - a, 1000 * (b - a) / t / w, 100 * (b - a) / t / w, (r1 - r0) / 1e6 / w, (r1 - r0) / 1e7 / w }')
    note "round $r: $line (ticks, ms/s, % of a core; schedstat ms/s, % of a core; load $(cut -d' ' -f1 /proc/loadavg))"
    echo "$line" >>"$work/runs.txt"
  done
done
{
  echo "Agent's own CPU beside $nprocs busy processes (niced cpu_work -t 1), \`-F $hz --on-cpu-mode $mode -i $iv\`,"
  echo "$( [ "${SERVER:-0}" = 1 ] && echo "pushing to a strobe server on loopback" || echo "no server (pushes fail)")$( [ "${ONLY_BUSY:-0}" = 1 ] && echo ", the agent given the busy processes (-p)"), $rounds interleaved rounds of ${win_s} s after a ${warm_s} s warm-up, medians;"
  echo "load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end. Ticks (utime + stime,"
  echo "/proc/PID/stat) are 1/$tck s; schedstat is the scheduler's run time of the agent's threads in ns"
  echo "(/proc/PID/task/*/schedstat), what the medians are of."
  echo
  echo "| agent | ticks per window (each) | ms of CPU per s, schedstat (each) | median | % of a core |"
  echo "|---|---|---|---|---|"
  for a in "${agents[@]}"; do
    name=${a%%:*}
    each=$(awk -v m="$name" '$1 == m { printf "%s%s", s, $2; s = ", " }' "$work/runs.txt")
    each_ms=$(awk -v m="$name" '$1 == m { printf "%s%s", s, $5; s = ", " }' "$work/runs.txt")
    echo "| $name | $each | $each_ms | $(awk -v m="$name" '$1 == m { print $5 }' "$work/runs.txt" | median) | $(awk -v m="$name" '$1 == m { print $6 }' "$work/runs.txt" | median) % |"
  done
  echo
} >>"$results"
