#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's memory by --symbolize mode, one or more builds alternated in one run: each run
# starts 200 niced `cpu_work -t 1`, then `strobe agent -F 19 -i 5 --max-cpu 100 --symbolize MODE`
# pushing to one `strobe server` on loopback, and reads after RSS_SECONDS the agent's peak RSS
# (VmHWM), its RSS at the end split into anonymous and file-backed pages (/proc/PID/smaps), and
# its CPU ticks (utime + stime, and the children's it waited for: its eBPF loader process,
# cutime + cstime; /proc/PID/stat). A build whose strobe-agent lies beside it runs that (strobe
# agent execs it: the same pid). Builds and modes alternate within a round, and
# the order of the builds flips from round to round, so that drift in a shared machine's load
# falls on all alike. Prints a markdown table, one row per run, and the load average at each.
#
# Why a separate script: comparing builds (before/after a change) in one run is the only fair
# comparison on a shared host, and bench/agent.sh measures one build. With TARGETED=1 the agent
# profiles the 200 processes alone (-p their parent), so that the other processes of a busy
# host (compilers, JVMs: their unwind tables) do not dominate what is measured.
#
#   bench/agent_rss.sh [BIN...]          (default: build/strobe)
#   RSS_SECONDS=20 ROUNDS=2 MODES="server none local" TARGETED=0 (defaults)
#   STROBE_MALLOC_STATS=1: each agent prints glibc's per-arena view to its log when it ends
#   STROBE_AGENT_IN_STROBE=1: a build's agent runs in strobe itself, not in its strobe-agent
#   AGENT_ARGS="--symbolizer-renew 3": more agent options, word-split (e.g. a renewal of the
#   symbolizer at every export, to measure its peak: docs/BENCHMARKS.md, the agent's memory)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
cpu_work=$root/build/bench/cpu_work
secs=${RSS_SECONDS:-20} rounds=${ROUNDS:-2} modes=${MODES:-server none local}
targeted=${TARGETED:-0}
read -r -a extra <<<"${AGENT_ARGS:-}"
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/build/strobe")
need_bins "${bins[@]}" "$root/build/strobe" "$cpu_work"
if [ "$(id -u)" -ne 0 ]; then note "SKIP agent RSS: needs root (perf_event)"; exit 0; fi
work=$(mktemp -d /tmp/strobe-agent-rss.XXXXXX)
spid= apid=
bg=()
cleanup() {
  for p in $apid "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  server_stop
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

BENCH_SERVER_BIN="$root/build/strobe" server_start "$work/data" "$work/server.log"

# one BIN MODE: prints "hwm_kb end_kb anon_kb file_kb ticks child_ticks load1"
one() {
  local bin=$1 mode=$2 i target=()
  bg=()
  if [ "$targeted" = 1 ]; then
    # a parent that starts the 200 after the agent is up: -p PID follows its children
    bash -c "sleep 1.5; for i in \$(seq 200); do nice -n 19 '$cpu_work' -t 1 -s $((secs + 2)) >/dev/null & done; wait" &
    bg=($!)
    target=(-p "${bg[0]}")
  else
    for ((i = 0; i < 200; i++)); do nice -n 19 "$cpu_work" -t 1 -s $((secs + 4)) >/dev/null & bg+=($!); done
    sleep 1
  fi
  "$bin" agent --server "$url" --log-level warn -F 19 -i 5 --max-cpu 100 "${target[@]}" \
    --symbolize "$mode" "${extra[@]}" 2>>"$work/agent.log" & apid=$!
  sleep "$secs"
  local hwm end ticks kids anon
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$apid/status")
  end=$(awk '/^VmRSS:/ {print $2}' "/proc/$apid/status")
  anon=$(awk '/^Anonymous:/ {a += $2} END {print a + 0}' "/proc/$apid/smaps")
  ticks=$(awk '{print $14 + $15}' "/proc/$apid/stat")
  kids=$(awk '{print $16 + $17}' "/proc/$apid/stat")
  kill -TERM "$apid"; wait "$apid" || true; apid=
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${bg[@]}" 2>/dev/null || true
  bg=()
  echo "$hwm $end $anon $((end - anon)) $ticks $kids $(cut -d' ' -f1 /proc/loadavg)"
}

mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
echo "| round | build | mode | peak RSS (VmHWM) | RSS at the end | anonymous / file-backed | CPU ticks (10 ms): agent + its children | load average |"
echo "|---|---|---|---|---|---|---|---|"
n=${#bins[@]}
for ((r = 1; r <= rounds; r++)); do
  for mode in $modes; do
    for ((j = 0; j < n; j++)); do
      # builds in order in odd rounds, reversed in even ones
      if ((r % 2)); then b=${bins[j]}; else b=${bins[n - 1 - j]}; fi
      read -r h e a f t k l < <(one "$b" "$mode")
      note "round $r $b $mode: peak $h KB, end $e KB (anon $a, file $f), $t + $k ticks, load $l"
      echo "| $r | \`$(basename "$b")\` | $mode | $(mb "$h") MB | $(mb "$e") MB | $(mb "$a") / $(mb "$f") MB | $t + $k | $l |"
    done
  done
done
