#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the agent's off-CPU eBPF programs (agent/offcpu.bpf.c) cost per run, from the kernel's own
# accounting: with kernel.bpf_stats_enabled=1 the kernel sums each program's run time and run
# count (bpftool prog show: run_time_ns, run_cnt). This is the steadiest measure of the
# per-switch cost on a shared machine, where throughput comparisons are noisy: it counts only
# the programs' own time, whatever else runs. (The accounting itself adds two clock reads per
# run, some tens of ns, to every figure.)
#
# Starts `strobe agent --offcpu --off-cpu-mode bpf` (no server: pushes fail and are spooled,
# which does not touch the programs), waits WARMUP s, runs `pingpong -r RATE -s SECONDS_RUN`, and
# prints the per-run ns of each of the agent's programs over the pingpong run (the whole host's
# switches: pingpong's and everyone else's), then restores the sysctl.
#
#   bench/offcpu_prog_ns.sh [STROBE_BINARY]
#   RATE=25000 SECONDS_RUN=10 WARMUP=3 REPEAT=1 (defaults); AGENT_ARGS=extra agent options
set -euo pipefail
cd "$(dirname "$0")/.."
strobe=${1:-$PWD/build/strobe}
pingpong=$PWD/build/bench/pingpong
rate=${RATE:-25000} secs=${SECONDS_RUN:-10} warmup=${WARMUP:-3} repeat=${REPEAT:-1}
[ "$(id -u)" = 0 ] || { echo "SKIP offcpu_prog_ns: needs root" >&2; exit 0; }
command -v bpftool >/dev/null || { echo "SKIP offcpu_prog_ns: no bpftool" >&2; exit 0; }
command -v jq >/dev/null || { echo "SKIP offcpu_prog_ns: no jq" >&2; exit 0; }
old=$(sysctl -n kernel.bpf_stats_enabled)
work=$(mktemp -d)
apid=
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
  sysctl -qw kernel.bpf_stats_enabled="$old"
  rm -rf "$work"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
# snap: "name run_time_ns run_cnt" of the agent's programs: those loaded since `before` (this
# bpftool does not always say which process holds a program; other agents may run here)
ids() { bpftool -j prog show | jq -r '.[].id' | sort; }
snap() {
  bpftool -j prog show | jq -r --argjson old "$(jq -Rs 'split("\n") | map(select(. != "") | tonumber)' "$work/before")" \
    '.[] | select(.name | startswith("on_")) | select(.id as $i | $old | index($i) | not) | "\(.name) \(.run_time_ns // 0) \(.run_cnt // 0)"'
}
for ((r = 0; r < repeat; r++)); do
  ids > "$work/before"
  # shellcheck disable=SC2086 # AGENT_ARGS: extra words
  "$strobe" agent --server http://127.0.0.1:9 --spool "$work/spool" --admin 127.0.0.1:0 --log-level error \
    -F 19 -i 2 --offcpu --off-cpu-mode bpf --max-cpu 100 ${AGENT_ARGS:-} 2>"$work/agent.log" &
  apid=$!
  sleep "$warmup"
  snap > "$work/a"
  pp=$("$pingpong" -r "$rate" -s "$secs")
  snap > "$work/b"
  kill "$apid"; wait "$apid" 2>/dev/null || true; apid=
  awk -v pp="$pp" -v s="$secs" 'NR == FNR {t[$1] = $2; c[$1] = $3; next}
    { dc = $3 - c[$1]; printf "%s %.0f ns/run %.0f runs/s", $1, dc ? ($2 - t[$1]) / dc : 0, dc / s; n++;
      printf "\n" }
    END { print "pingpong: " pp }' "$work/a" "$work/b"
done
