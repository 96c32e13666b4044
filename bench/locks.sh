#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the agent's lock-contention program (--locks: agent/locks.bpf.c on the syscalls futex
# tracepoints) costs at the goal's 50,000 futex waits a second, measured as the off-CPU
# program's goal is (bench/agent.sh, "the goal as worded"): bench/cpu_work (one busy thread per
# CPU) alone, beside `strobe agent -F 19` and beside `strobe agent -F 19 --locks`, while two
# background bench/futex_pingpong -r 20000 make the host's ~50,000 futex waits a second in every
# run, alone too. Interleaved rounds in rotating order, medians. Estimated loss = cpu_work's
# loss per CPU-second (against the same round's run alone) + (the agent's own CPU + the extra
# CPU the background pingpongs took beside it: the programs run at each of their futex calls
# and are charged to them) / CPUs. The --locks row less the plain agent's row is the program's
# share. Then, with kernel.bpf_stats_enabled, each program's ns per run (bpftool), the steadiest
# figure on a shared machine, and the host's waits per second the agent summed (/status).
#
#   bench/locks.sh [RESULTS]
#   ROUNDS=5 CPU_SECONDS=5 FUTEX_RATE=20000 (round trips/s of each of the two pingpongs);
#   AGENT_ARGS=extra agent options for both agent modes (e.g. --call-graph fp)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
cpu_work=$root/build/bench/cpu_work
fpp=$root/build/bench/futex_pingpong
results=${1:-/dev/stdout}
rounds=${ROUNDS:-5} cpu_s=${CPU_SECONDS:-5} rate=${FUTEX_RATE:-20000}
for b in "$strobe" "$cpu_work" "$fpp"; do
  [ -x "$b" ] || { note "missing $b: run make bench"; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then note "SKIP lock benchmarks: need root (eBPF)"; exit 0; fi
work=$(mktemp -d /tmp/strobe-locks-bench.XXXXXX)
spid= apid=
bg=()
old_stats=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
  for p in $apid $spid "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  sysctl -qw kernel.bpf_stats_enabled="$old_stats" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

BENCH_SERVER_BIN="$strobe" server_start "$work/data" "$work/server.log"

oncpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {printf "%.0f\n", n}'; }
bg_ns() { local n=0 p; for p in "${bg[@]}"; do n=$((n + $(oncpu_ns "$p"))); done; echo $n; }
waits() { curl -sf "$admin/status" | awk '/"locks_bpf"/ {f = 1} f && /"waits":/ {gsub(/[,"]/, "", $2); print $2; exit}'; }

# one MODE: appends "mode rate rate_per_cpu agent_cpu_share bg_cpu_share waits_per_s" to rows
one() {
  local mode=$1 out c0 c1 t0 t1 b0 b1 share=- w0='' w1 wps=-
  case $mode in
    base) ;;
    # shellcheck disable=SC2086 # AGENT_ARGS: extra words for both agents (--call-graph fp)
    agent) agent_start -F 19 -i 2 --max-cpu 100 ${AGENT_ARGS:-} ;;
    # shellcheck disable=SC2086
    locks) agent_start -F 19 -i 2 --max-cpu 100 --locks ${AGENT_ARGS:-} ;;
  esac
  sleep 6 # three export intervals: start-up (the host's symbol tables, the verifier) is over
  [ "$mode" != base ] && c0=$(oncpu_ns "$apid")
  [ "$mode" = locks ] && w0=$(waits)
  b0=$(bg_ns)
  t0=$(date +%s.%N)
  out=$("$cpu_work" -s "$cpu_s" | awk '{print $2, $4}')
  t1=$(date +%s.%N)
  b1=$(bg_ns)
  pct() { awk -v a="$1" -v b="$2" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", 100 * (b - a) / 1e9 / (t1 - t0) }'; }
  if [ "$mode" != base ]; then
    c1=$(oncpu_ns "$apid"); share=$(pct "$c0" "$c1")
    if [ -n "$w0" ]; then
      sleep 2.2 # the sums of the run's last interval
      w1=$(waits)
      wps=$(awk -v a="$w0" -v b="$w1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.0f", (b - a) / (t1 - t0 + 2.2) }')
    fi
    agent_stop
  fi
  local bshare
  bshare=$(pct "$b0" "$b1")
  note "$mode: $out; agent CPU $share % of a core; background CPU $bshare %; waits/s $wps"
  echo "$mode $out $share $bshare $wps" >> "$work/rows"
}
med() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$work/rows" | median; }
paired() { # MODE COL: median over rounds of the loss against the same round's base, in %
  awk -v m="$1" -v c="$2" '$1 == "base" {b[++nb] = $c} $1 == m {w[++nw] = $c}
    END {for (i = 1; i <= nw && i <= nb; i++) print 100 * (1 - w[i] / b[i])}' "$work/rows" |
    median | awk '{ if ($1 == "-") print; else printf "%.2f\n", $1 }'
}

for _ in 1 2; do "$fpp" -r "$rate" -s 100000 >/dev/null & bg+=($!); done
sleep 1
: > "$work/rows"
modes=(base agent locks)
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < 3; i++)); do one "${modes[(i + r) % 3]}"; done
done

# the programs' own time per run, with the kernel's accounting on (a separate run: the
# accounting adds two clock reads to every run of every program)
prog_ns=-
if command -v bpftool >/dev/null && command -v jq >/dev/null && sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null; then
  agent_start -F 19 -i 2 --max-cpu 100 --locks
  sleep 6
  snap() { bpftool -j prog show | jq -r '.[] | select(.name == "futex_enter" or .name == "futex_exit") | "\(.id) \(.name) \(.run_time_ns // 0) \(.run_cnt // 0)"' | sort; }
  snap > "$work/s0"; sleep 5; snap > "$work/s1"
  agent_stop
  sysctl -qw kernel.bpf_stats_enabled="$old_stats"
  # this agent's programs: the ids in both snapshots with the most runs
  # join on the id: "id name t0 c0 name t1 c1"
  prog_ns=$(join "$work/s0" "$work/s1" | awk '{ dc = $7 - $4; if (dc > 0) { t[$2] += $6 - $3; c[$2] += dc } }
    END { for (k in t) printf "%s %.0f ns/run %.0f runs/s; ", k, t[k] / c[k], c[k] / 5 }')
fi
kill "${bg[@]}" 2>/dev/null || true; wait "${bg[@]}" 2>/dev/null || true; bg=()

n=$(nproc)
bgbase=$(med base 5)
{
  echo
  echo "Run of $(date -u +%Y-%m-%d) on $n cores ($(uname -r)); $rounds interleaved rounds; two background"
  echo "futex_pingpong -r $rate in every run; the agent profiles the whole host and pushes every 2 s."
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| workload | agent | alone (median) | beside the agent (median) | loss per CPU-second | agent CPU, % of a core | host futex waits/s | estimated loss | goal |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for m in agent locks; do
    lc=$(paired $m 3); bgm=$(med $m 5)
    extra=$(awk -v a="$bgm" -v b="$bgbase" 'BEGIN { printf "%.3f", a - b }')
    est=$(awk -v l="$lc" -v c="$(med $m 4)" -v x="$extra" -v n="$n" 'BEGIN {
      if (l == "-" || c == "-") print "-"; else printf "%.2f", l + (c + (x > 0 ? x : 0)) / n }')
    echo "$m $est" >> "$work/est"
    what='`-F 19`'; [ $m = locks ] && what='`-F 19 --locks`'
    printf '| cpu_work, %s threads, %s s | %s | %.0f ops/CPU-s | %.0f ops/CPU-s | %s %% | %s (+%s background) | %s | %s %% | %s |\n' \
      "$n" "$cpu_s" "$what" "$(med base 3)" "$(med $m 3)" "$lc" "$(med $m 4)" "$extra" "$(med $m 6)" "$est" \
      "$([ $m = locks ] && echo '<= 2 %' || echo '-')" 
  done
  d=$(awk '$1 == "agent" {a = $2} $1 == "locks" {l = $2} END { if (a == "-" || l == "-") print "-"; else printf "%.2f", l - a }' "$work/est")
  echo
  echo "The --locks program's share (locks row less the plain agent's): $d %; goal <= 2 %: $(awk -v d="$d" 'BEGIN { print (d != "-" && d <= 2) ? "met" : "**missed**" }')."
  echo "Programs' own time (kernel.bpf_stats_enabled, 5 s beside the background): $prog_ns"
  echo
  printf '<details><summary>Every run (mode, ops/s wall, per CPU-second, agent CPU %%, background CPU %%, waits/s)</summary>\n\n```\n%s\n```\n</details>\n' "$(cat "$work/rows")"
} >> "$results"
