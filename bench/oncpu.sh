#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What on-CPU sampling summed in the kernel (agent/oncpu.bpf.c) costs, against the perf path and
# the in-kernel aggregating peers (bcc's profile-bpfcc and offcputime-bpfcc, bpftrace), and
# `strobe record -e offcpu` on the eBPF program against the perf path, perf record and bcc.
# Appends markdown to RESULTS (stdout when not given); bench/run.sh calls it (BENCH_ONLY=oncpu).
#
#  1. total cost on a CPU-bound host, after a warm-up of WARMUP_SECONDS from the profiler's start
#     (its start reads every process once: not the steady state the goals are about): bench/cpu_work (one busy thread per CPU) alone and beside
#     `strobe agent` (no server: pushes fail, which does not touch sampling) at 19 and 99 Hz,
#     --on-cpu-mode bpf and perf, measured directly at each rate (not scaled), and beside the
#     peers at 99 Hz (bpftrace 'profile:hz:99 { @[kstack, ustack] = count(); }', profile-bpfcc
#     -F 99): the workload's lost CPU is the drop of its ops per CPU-second (the sampling
#     interrupts and the program run on its threads and are charged to them), the profiler's
#     own CPU is its utime + stime from /proc/PID/stat over the run; total = lost + own, in % of
#     the workload's CPU.
#  2. the eBPF walk per sample: kernel.bpf_stats_enabled=1 during the 99 Hz bpf runs,
#     run_time_ns / run_cnt of the program on_sample (as bench/offcpu_prog_ns.sh does).
#  3. kernel-side cost per sample at 999 Hz, the same way: `strobe record -a -e cpu -F 999`
#     (eBPF), `perf record -a -F 999 --call-graph dwarf` and `profile-bpfcc -F 999`; the
#     workload's lost share / 999 samples per CPU-second = ns charged to it per sample.
#  4. the agent's own CPU at 99 Hz beside 200 busy processes (200 niced cpu_work -t 1), bpf and
#     perf, in % of one core, measured after a 10 s warm-up (its start reads every process).
#  5. `strobe record -a -e offcpu` beside bench/pingpong (as fast as it goes): --mode bpf,
#     --mode perf, perf record -a -g -e sched:sched_switch and offcputime-bpfcc; throughput loss
#     against pingpong alone, the recorder's own CPU (utime + stime, % of a core) and the
#     records lost.
# Modes run one after another in each round, in an order that rotates from round to round.
# Peers that are not installed (scripts/deps.sh bench) are left out, and said so.
#
#   bench/oncpu.sh [RESULTS]
#   ROUNDS=3 CPU_SECONDS=10 PINGPONG_SECONDS=4 WARMUP_SECONDS=10 BUSY_SECONDS=30 AGENT_INTERVAL=10
#   (defaults). The agent runs at its default interval (10 s: what it costs as deployed; each
#   window of CPU_SECONDS after the warm-up then holds one export, BUSY_SECONDS three);
#   AGENT_INTERVAL=2 measures five times the export work. MODES="none bpf19 bpf99" runs only those
#   modes of parts 1-3 (none is required: the lost share of each run is paired with the baseline
#   run of its own round), e.g. with ROUNDS=12 CPU_SECONDS=20 to resolve the 19 Hz goal, whose
#   lost share is smaller than the rounds' spread at 3 rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
cpu_work=$root/build/bench/cpu_work
pingpong=$root/build/bench/pingpong
results=${1:-/dev/stdout}
rounds=${ROUNDS:-3} cpu_s=${CPU_SECONDS:-10} pp_s=${PINGPONG_SECONDS:-4} warm_s=${WARMUP_SECONDS:-10}
busy_s=${BUSY_SECONDS:-30} iv=${AGENT_INTERVAL:-10}
note() { echo "bench: $*" >&2; }
for b in "$strobe" "$cpu_work" "$pingpong"; do
  [ -x "$b" ] || { note "missing $b: run make bench"; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then note "SKIP on-CPU eBPF benchmarks: need root"; exit 0; fi
work=$(mktemp -d /tmp/strobe-oncpu-bench.XXXXXX)
apid= ppid_= bgp=()
old_stats=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
  [ -n "$ppid_" ] && kill -INT "$ppid_" 2>/dev/null && wait "$ppid_" 2>/dev/null
  for p in "${bgp[@]}"; do kill "$p" 2>/dev/null || true; done
  sysctl -qw kernel.bpf_stats_enabled="$old_stats" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime + stime of a process
median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "nan"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
prog_stats() { # run_time_ns run_cnt of the newest on_sample program
  bpftool -j prog show 2>/dev/null | jq -r '[.[] | select(.name == "on_sample")] | last | "\(.run_time_ns // 0) \(.run_cnt // 0)"'
}

have() { command -v "$1" >/dev/null; }
# wait_prog PID: until process PID holds a loaded eBPF program (bcc compiles its programs with
# clang first: seconds on a busy machine), at most 60 s; then 1 s for its attach
wait_prog() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -qs '^prog_type:' /proc/"$1"/fdinfo/* 2>/dev/null && { sleep 1; return 0; }
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
start_agent() { # HZ MODE [args]: the agent, 2 s to settle
  local hz=$1 mode=$2
  shift 2
  "$strobe" agent --server http://127.0.0.1:9 --log-level error -F "$hz" -i "$iv" --max-cpu 100 \
    --on-cpu-mode "$mode" --no-preload "$@" 2>"$work/agent.log" &
  apid=$!
  # the bpf mode's verifier takes seconds on a loaded machine: measured from its program's
  # load on (wait_prog), then 2 s more for the agent's start (it reads every process once)
  if [ "$mode" = bpf ]; then wait_prog "$apid" || true; fi
  sleep 2
}
stop_agent() { kill "$apid" 2>/dev/null; wait "$apid" 2>/dev/null || true; apid=; }
# start_peer MODE: a profiler of MODE (bpftrace99, bcc99, bcc999, rec999, perfdwarf999) in the
# background, attached; ppid_ = the pid whose CPU is its own
start_peer() {
  case $1 in
    bpftrace99) bpftrace -e 'profile:hz:99 { @[kstack, ustack] = count(); }' >"$work/peer.out" 2>&1 & ppid_=$!; wait_prog "$ppid_" ;;
    bcc99) profile-bpfcc -F 99 -f >"$work/peer.out" 2>&1 & ppid_=$!; wait_prog "$ppid_" ;;
    bcc999) profile-bpfcc -F 999 -f >"$work/peer.out" 2>&1 & ppid_=$!; wait_prog "$ppid_" ;;
    rec999) "$strobe" record -a -e cpu -F 999 --mode bpf -d 3600 -o "$work/rec.pb.gz" 2>"$work/peer.out" & ppid_=$!; wait_prog "$ppid_" ;;
    perfdwarf999) perf record -q -a -F 999 --call-graph dwarf -o "$work/perf.data" >"$work/peer.out" 2>&1 & ppid_=$!; sleep 2 ;;
  esac
}
stop_peer() { kill -INT "$ppid_" 2>/dev/null; wait "$ppid_" 2>/dev/null || true; ppid_=; rm -f "$work/perf.data"; }

# ---- 1, 2: cpu_work alone and beside the agent --------------------------------------------------
modes=(none bpf19 perf19 bpf99 perf99 rec999 perfdwarf999)
missing=""
if [ -n "${MODES:-}" ]; then
  # a chosen subset (e.g. MODES="none bpf19 bpf99" with more ROUNDS, to resolve the 19 Hz goal)
  read -r -a modes <<<"$MODES"
  [[ " ${modes[*]} " == *" none "* ]] || { note "MODES must include none (the baseline)"; exit 2; }
elif have bpftrace; then modes+=(bpftrace99); else missing+="bpftrace "; fi
# bcc compiles its programs at run time against the running kernel's headers
# (/lib/modules/$(uname -r)/build, or CONFIG_IKHEADERS): tried once, its reason kept
have_bcc=0
if [ -n "${MODES:-}" ]; then :
elif ! have profile-bpfcc || ! have offcputime-bpfcc; then missing+="bcc (profile-bpfcc, offcputime-bpfcc) "
elif timeout 120 profile-bpfcc -F 99 -f 1 >"$work/bcc.err" 2>&1; then have_bcc=1; modes+=(bcc99 bcc999)
else missing+="bcc (profile-bpfcc, offcputime-bpfcc) fails on this kernel ($(uname -r)): $(grep -m1 -i 'unable\|error' "$work/bcc.err" | cut -c1-160) "; fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
note "on-CPU: $rounds rounds of ${cpu_s} s x ${#modes[@]} modes"
have_stats=0
command -v bpftool >/dev/null && command -v jq >/dev/null && sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null && have_stats=1
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#modes[@]}; i++)); do
    m=${modes[$(((i + r) % ${#modes[@]}))]}
    own=0
    case $m in
      none) out=$("$cpu_work" -s "$cpu_s") ;;
      bpftrace*|bcc*|rec*|perfdwarf*)
        start_peer "$m"
        sleep "$warm_s" # (strobe record's start reads every process, as the agent's does)
        a0=$(ticks "$ppid_"); s0=$(prog_stats 2>/dev/null || echo "0 0")
        out=$("$cpu_work" -s "$cpu_s")
        a1=$(ticks "$ppid_"); s1=$(prog_stats 2>/dev/null || echo "0 0")
        own=$(awk -v a="$a0" -v b="$a1" -v t="$tck" 'BEGIN { printf "%.4f", (b - a) / t }')
        if [ "$m" = rec999 ] && [ "$have_stats" = 1 ]; then
          echo "$s0 $s1" | awk '{ if ($4 > $2) printf "%.0f\n", ($3 - $1) / ($4 - $2) }' >>"$work/walk999_ns"
        fi
        stop_peer ;;
      *)
        hz=${m//[a-z]/} mode=${m//[0-9]/}
        start_agent "$hz" "$mode"
        sleep "$warm_s" # the steady state: its start reads every process's identity (and tables)
        a0=$(ticks "$apid"); s0=$(prog_stats 2>/dev/null || echo "0 0")
        out=$("$cpu_work" -s "$cpu_s")
        a1=$(ticks "$apid"); s1=$(prog_stats 2>/dev/null || echo "0 0")
        own=$(awk -v a="$a0" -v b="$a1" -v t="$tck" 'BEGIN { printf "%.4f", (b - a) / t }')
        if [ "$m" = bpf99 ] && [ "$have_stats" = 1 ]; then
          echo "$s0 $s1" | awk '{ if ($4 > $2) printf "%.0f\n", ($3 - $1) / ($4 - $2) }' >>"$work/walk_ns"
        fi
        stop_agent ;;
    esac
    # ops_per_cpu_s and the workload's CPU seconds
    echo "$out" | awk -v m="$m" -v own="$own" -v r="$r" '{ for (i = 1; i < NF; i++) { if ($i == "ops_per_cpu_s") o = $(i + 1); if ($i == "cpu_s") c = $(i + 1) } }
      END { print m, o, c, own, r }' >>"$work/cpu.txt"
  done
done
base=$(awk '$1 == "none" { print $2 }' "$work/cpu.txt" | median)
{
  echo "### On-CPU sampling summed in the kernel (bench/oncpu.sh)"
  echo
  echo "bench/cpu_work, one busy thread per CPU ($(nproc) CPUs), ${cpu_s} s a run after a ${warm_s} s warm-up from the profiler's start, $rounds interleaved rounds, medians; the agent at \`-i $iv\` (its default interval: 10 s)."
  echo "The machine is shared: load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end of this part."
  echo "Lost: the drop in the workload's ops per CPU-second (work done in its time by the sampling"
  echo "interrupts and the program). Own: the agent's utime + stime over the run, in % of the"
  echo "workload's CPU. Total = lost + own."
  echo
  echo "Lost is paired: each run against the baseline run of its own round (adjacent in time), so"
  echo "that a drift of the machine between rounds cancels; the range of the rounds' values follows."
  echo
  echo "| agent | ops/CPU-s | lost | lost, rounds' range | own | total | goal |"
  echo "|---|---|---|---|---|---|---|"
  echo "| none | $base | | | | | |"
  # per round: lost (paired with that round's none) and own, both in % of the workload's CPU
  paired() { awk -v m="$1" '$1 == "none" { b[$5] = $2 } $1 == m { o[$5] = $2; own[$5] = ($3 > 0) ? 100 * $4 / $3 : 0 }
    END { for (r in o) if (b[r] > 0) printf "%.4f %.4f\n", 100 * (1 - o[r] / b[r]), own[r] }' "$work/cpu.txt"; }
  for m in bpf19 perf19 bpf99 perf99 bpftrace99 bcc99; do
    grep -q "^$m " "$work/cpu.txt" || continue
    ops=$(awk -v m="$m" '$1 == m { print $2 }' "$work/cpu.txt" | median)
    lost=$(paired "$m" | awk '{ print $1 }' | median)
    range=$(paired "$m" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f..%.2f %%", lo, hi }')
    own=$(awk -v m="$m" '$1 == m && $3 > 0 { printf "%.4f\n", 100 * $4 / $3 }' "$work/cpu.txt" | median)
    tot=$(paired "$m" | awk '{ printf "%.4f\n", $1 + $2 }' | median)
    goal=""
    case $m in bpf19) goal="<= 0.2 %" ;; bpf99) goal="<= 0.5 %" ;; esac
    name="strobe agent ${m//[0-9]/}"
    case $m in bpftrace99) name="bpftrace profile:hz" ;; bcc99) name="profile-bpfcc" ;; esac
    echo "| $name ${m//[a-z]/} Hz | $ops | ${lost} % | $range | ${own} % | ${tot} % | $goal |"
  done
  [ -z "$missing" ] || { echo; echo "Peers not run: $missing"; }
  if [ -s "$work/walk_ns" ]; then
    echo
    echo "eBPF walk per sample (kernel.bpf_stats_enabled, run_time_ns / run_cnt of on_sample, 99 Hz"
    echo "runs, median of $rounds): $(median <"$work/walk_ns") ns."
  fi
  if [ -s "$work/walk999_ns" ]; then
    echo "The same in \`strobe record -e cpu -F 999\`'s runs: $(median <"$work/walk999_ns") ns."
  fi
  echo
  echo "Kernel-side cost per sample at 999 Hz: the workload's lost share of its CPU / 999 samples per"
  echo "CPU-second (every CPU busy), in ns per sample; own: the profiler's utime + stime, % of the"
  echo "workload's CPU."
  echo
  echo "| profiler at 999 Hz | ops/CPU-s | lost | ns per sample | own | goal |"
  echo "|---|---|---|---|---|---|"
  for m in rec999 perfdwarf999 bcc999; do
    grep -q "^$m " "$work/cpu.txt" || continue
    ops=$(awk -v m="$m" '$1 == m { print $2 }' "$work/cpu.txt" | median)
    lost=$(paired "$m" | awk '{ print $1 }' | median)
    own=$(awk -v m="$m" '$1 == m && $3 > 0 { printf "%.4f\n", 100 * $4 / $3 }' "$work/cpu.txt" | median)
    ns=$(awk -v l="$lost" 'BEGIN { printf "%.0f", l / 100 * 1e9 / 999 }')
    name=$m goal=""
    case $m in rec999) name="strobe record -e cpu (eBPF)"; goal="<= perf dwarf's and <= bcc's" ;;
      perfdwarf999) name="perf record --call-graph dwarf" ;; bcc999) name="profile-bpfcc" ;; esac
    echo "| $name | $ops | ${lost} % | $ns | ${own} % | $goal |"
  done
  echo
} >>"$results"

# ---- 3: own CPU beside 200 busy processes ---------------------------------------------------------
note "on-CPU: own CPU beside 200 busy processes"
for ((k = 0; k < 200; k++)); do
  nice -n 19 "$cpu_work" -t 1 -s 3600 >/dev/null &
  bgp+=($!)
done
sleep 2
for ((r = 0; r < rounds; r++)); do
  for mode in bpf perf; do
    start_agent 99 "$mode"
    sleep "$warm_s" # (its start reads every process's identity and tables: not the steady state)
    a0=$(ticks "$apid"); t0=$(date +%s.%N)
    sleep "$busy_s"
    a1=$(ticks "$apid"); t1=$(date +%s.%N)
    stop_agent
    awk -v m="$mode" -v a="$a0" -v b="$a1" -v t="$tck" -v w0="$t0" -v w1="$t1" \
      'BEGIN { printf "%s %.4f\n", m, 100 * (b - a) / t / (w1 - w0) }' >>"$work/busy.txt"
  done
done
for p in "${bgp[@]}"; do kill "$p" 2>/dev/null || true; done
wait "${bgp[@]}" 2>/dev/null || true
bgp=()
{
  echo "Own CPU at 99 Hz with 200 busy processes (niced cpu_work -t 1), % of one core, median of $rounds"
  echo "runs of ${busy_s} s, each after a ${warm_s} s warm-up from the agent's start (\`-i $iv\`; CPU ticks of 1/$tck s: the resolution is $(awk -v t="$tck" -v s="$busy_s" 'BEGIN { printf "%.2f", 100 / t / s }') %):"
  echo
  echo "| agent | own CPU | goal |"
  echo "|---|---|---|"
  for mode in bpf perf; do
    echo "| $mode | $(awk -v m="$mode" '$1 == m { print $2 }' "$work/busy.txt" | median) % | $([ "$mode" = bpf ] && echo "<= 0.1 %") |"
  done
  echo
} >>"$results"

# ---- 4: record -e offcpu beside pingpong --------------------------------------------------------
note "record -e offcpu beside pingpong: $rounds rounds of ${pp_s} s"
rmodes=(none bpf perf perfrec)
[ "$have_bcc" = 1 ] && rmodes+=(bcc)
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#rmodes[@]}; i++)); do
    m=${rmodes[$(((i + r) % ${#rmodes[@]}))]}
    rp= own=0 lost=0
    case $m in
      bpf|perf) "$strobe" record -a -e offcpu --mode "$m" -d $((pp_s + warm_s + 2)) -o "$work/r.pb.gz" 2>"$work/rec.err" & rp=$! ;;
      perfrec) perf record -q -B -a -g -e sched:sched_switch -o "$work/perf.data" -- sleep $((pp_s + warm_s + 2)) >"$work/rec.err" 2>&1 & rp=$! ;;
      bcc) offcputime-bpfcc -f >"$work/rec.out" 2>"$work/rec.err" & rp=$! ;;
    esac
    # measured after the warm-up: strobe record's start reads every process (and loads the
    # eBPF programs), which is not the steady state the goals are about
    if [ "$m" = bcc ]; then wait_prog "$rp" || true; fi
    if [ -n "$rp" ]; then sleep "$warm_s"; fi
    if [ -n "$rp" ]; then
      # perf record: the recorder is the child of `perf`... its pid is rp itself
      a0=$(ticks "$rp" 2>/dev/null || echo 0)
    fi
    out=$("$pingpong" -s "$pp_s")
    if [ -n "$rp" ]; then
      a1=$(ticks "$rp" 2>/dev/null || echo 0)
      own=$(awk -v a="$a0" -v b="$a1" -v t="$tck" -v s="$pp_s" 'BEGIN { printf "%.2f", 100 * (b - a) / t / s }')
      [ "$m" = bcc ] && kill -INT "$rp" 2>/dev/null
      wait "$rp" 2>/dev/null || true
      lost=$(sed -n 's/.*, \([0-9]*\) lost,.*/\1/p; s/.*lost \([0-9]*\) chunks.*/\1/p' "$work/rec.err" | head -1)
    fi
    echo "$out" | awk -v m="$m" -v own="$own" -v lost="${lost:-0}" '{ for (i = 1; i < NF; i++) if ($i == "round_trips_per_s") o = $(i + 1) } END { print m, o, own, lost }' >>"$work/pp.txt"
  done
done
ppbase=$(awk '$1 == "none" { print $2 }' "$work/pp.txt" | median)
{
  echo "\`strobe record -a -e offcpu\` beside bench/pingpong (as fast as it goes), ${pp_s} s from ${warm_s} s after the recorder's start, $rounds interleaved"
  echo "rounds, medians. Own: the recorder's utime + stime over pingpong's run, % of one core."
  echo
  echo "| recorder | round trips/s | throughput loss | own CPU | lost records | goal |"
  echo "|---|---|---|---|---|---|"
  echo "| none | $ppbase | | | | |"
  for m in bpf perf perfrec bcc; do
    grep -q "^$m " "$work/pp.txt" || continue
    rt=$(awk -v m="$m" '$1 == m { print $2 }' "$work/pp.txt" | median)
    loss=$(awk -v m="$m" -v b="$ppbase" '$1 == m { printf "%.1f\n", 100 * (1 - $2 / b) }' "$work/pp.txt" | median)
    own=$(awk -v m="$m" '$1 == m { print $3 }' "$work/pp.txt" | median)
    lost=$(awk -v m="$m" '$1 == m { print $4 }' "$work/pp.txt" | median)
    name=$m; goal=""
    case $m in bpf) name="strobe --mode bpf"; goal="loss <= 15 %, own <= perf's, 0 lost" ;;
      perf) name="strobe --mode perf" ;; perfrec) name="perf record -e sched:sched_switch" ;;
      bcc) name="offcputime-bpfcc"; lost="n/a (sums in the kernel)" ;; esac
    echo "| $name | $rt | ${loss} % | ${own} % | $lost | $goal |"
  done
  echo
  [ -z "$missing" ] || { echo "Peers not run here (not installed: scripts/deps.sh bench): $missing"; echo; }
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
} >>"$results"
