#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The recorder's benchmarks: what `strobe record` costs the host it runs on, against
# `perf record` doing the same job in the same run. Appends markdown to RESULTS (stdout when not
# given); bench/run.sh calls it and writes the result into docs/BENCHMARKS.md.
#
#  1. on-CPU overhead: bench/cpu_work (one busy thread per CPU, fixed integer kernel) alone, beside
#     `strobe record -a -F 99`, beside `perf record -a -g -F 99`; throughput and loss.
#  2. off-CPU overhead: bench/pingpong (two threads passing a token through pipes) alone, beside
#     `strobe record -a -e offcpu`, beside `perf record -a -g -e sched:sched_switch`.
#  3. peak RSS of `strobe record -a` (and of perf record -a -g, at the same time) on a busy host:
#     cpu_work, a process churn loop (`sh -c true`) and gzip.
#
# The modes of a round run one after the other, in an order that rotates from round to round, so
# that drift in the (shared, noisy) machine's load falls on all of them alike. Each recorder
# starts 1 s before the benchmark and stops 1 s after it; its own CPU time (user + sys, from
# /usr/bin/time, including writing its output) is reported per second it ran.
#
#   bench/record.sh [RESULTS]
#   ROUNDS=10 CPU_SECONDS=8 PINGPONG_SECONDS=5 RSS_SECONDS=60   (the defaults)
#   BENCH_QUICK=1: 4 rounds of 5 s and 3 s, RSS over 15 s
#
# Every loss is given as the median of the per-round losses (each run against the baseline of
# its own round) with their range, and the on-CPU comparison says in how many rounds strobe
# cost less than perf: on a shared machine one round proves little, the spread says how much.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
cpu_work=$root/build/bench/cpu_work
pingpong=$root/build/bench/pingpong
results=${1:-/dev/stdout}

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  rounds=${ROUNDS:-4} cpu_s=${CPU_SECONDS:-5} pp_s=${PINGPONG_SECONDS:-3} rss_s=${RSS_SECONDS:-15}
else
  rounds=${ROUNDS:-10} cpu_s=${CPU_SECONDS:-8} pp_s=${PINGPONG_SECONDS:-5} rss_s=${RSS_SECONDS:-60}
fi
for b in "$strobe" "$cpu_work" "$pingpong"; do
  [ -x "$b" ] || { note "missing $b: run make bench (or make $b)"; exit 2; }
done
[ -x /usr/bin/time ] || { note "missing /usr/bin/time (Debian package time)"; exit 2; }
if command -v perf >/dev/null && perf record -B -q -a -e cpu-clock -o /dev/null -- true \
     >/dev/null 2>&1; then have_perf=1
else
  have_perf=0; note "SKIP perf comparisons: perf not found or perf record -a does not work here"
fi
work=$(mktemp -d /tmp/strobe-record-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

loss() { awk -v w="$1" -v b="$2" 'BEGIN { if (w == "-" || b <= 0) print "-"; else printf "%.2f", 100 * (1 - w / b) }'; }
fmt() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.0f", x }'; }

# recorder MODE SECONDS: the recorder command of a mode, for a recording of SECONDS.
recorder() {
  case $1 in
    strobe-cpu) echo "$strobe record -a -F 99 -d $2 -o $work/strobe.pb.gz" ;;
    perf-cpu) echo "perf record -B -a -g -F 99 -e cpu-clock -o $work/perf.data -- sleep $2" ;;
    strobe-offcpu) echo "$strobe record -a -e offcpu -d $2 -o $work/strobe.pb.gz" ;;
    perf-offcpu) echo "perf record -B -a -g -e sched:sched_switch -o $work/perf.data -- sleep $2" ;;
  esac
}

# one MODE BENCH SECONDS: runs BENCH for SECONDS, beside MODE's recorder (none for "base"), and
# appends a row to $work/rows: "mode rate rate_per_cpu_s cpu steady records lost" where rate is
# the benchmark's own figure per second of wall time, rate_per_cpu_s per second of its CPU time
# (cpu_work only), cpu the recorder's CPU seconds per second over its whole run (start-up and
# writing the output included, /usr/bin/time) and steady the same while the benchmark ran
# (/proc/PID/task/*/schedstat, in ns).
oncpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {print n + 0}'; }
now() { date +%s.%N; }
one() {
  local mode=$1 bench=$2 secs=$3 rec_pid="" pid="" out cpu=- steady=- lost=- records=- t0 t1 c0 c1
  rm -f "$work/perf.data" "$work/strobe.pb.gz" "$work/rec.err" "$work/rec.time"
  if [ "$mode" != base ]; then
    # shellcheck disable=SC2046
    /usr/bin/time -f '%U %S %e' -o "$work/rec.time" $(recorder "$mode" $((secs + 2))) \
      > /dev/null 2> "$work/rec.err" &
    rec_pid=$!
  fi
  sleep 1
  # the recorder itself is the child of /usr/bin/time
  [ -n "$rec_pid" ] && pid=$(pgrep -P "$rec_pid" | head -1) && c0=$(oncpu_ns "$pid")
  t0=$(now)
  out=$("$bench" -s "$secs" | awk '{print $2, ($3 == "ops_per_cpu_s" ? $4 : "-")}')
  if [ -n "$pid" ]; then
    c1=$(oncpu_ns "$pid"); t1=$(now)
    steady=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" \
      'BEGIN { printf "%.5f", (b - a) / 1e9 / (t1 - t0) }')
  fi
  if [ -n "$rec_pid" ]; then
    wait "$rec_pid" || { note "$mode failed:"; cat "$work/rec.err" >&2; exit 1; }
    cpu=$(awk '{ printf "%.5f", ($1 + $2) / $3 }' "$work/rec.time")
    case $mode in
      strobe-*)
        lost=$(sed -n 's/.*, \([0-9]*\) lost,.*/\1/p' "$work/rec.err" | tail -1)
        records=$(sed -n 's/.*after [0-9.]* s: \([0-9]*\) .*/\1/p' "$work/rec.err" | tail -1) ;;
      perf-*)
        perf report -i "$work/perf.data" --stats > "$work/stats" 2>/dev/null || true
        lost=$(awk '/LOST(_SAMPLES)? events:/ {n += $3} END {print n + 0}' "$work/stats")
        records=$(awk '/^ *SAMPLE events:/ {print $3; exit}' "$work/stats") ;;
    esac
  fi
  note "$mode: $out per s (wall, CPU), recorder $cpu CPU s/s ($steady while the benchmark ran)," \
    "${records:--} records, ${lost:--} lost"
  echo "$mode $out $cpu $steady ${records:--} ${lost:--}" >> "$work/rows"
}

# run_rounds NAME BENCH SECONDS MODE...: $rounds interleaved rounds, the order rotating.
run_rounds() {
  local name=$1 bench=$2 secs=$3; shift 3
  local modes=("$@") n=$# r i
  : > "$work/rows"
  for ((r = 0; r < rounds; r++)); do
    note "$name round $((r + 1))/$rounds"
    for ((i = 0; i < n; i++)); do one "${modes[(i + r) % n]}" "$bench" "$secs"; done
  done
}
col() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$work/rows"; }
med() { col "$1" "$2" | median; }
# losses MODE COL: the per-round losses (%) against the same round's baseline, one a line
losses() {
  awk -v m="$1" -v c="$2" '$1 == "base" {b[++nb] = $c} $1 == m {w[++nw] = $c}
    END {for (i = 1; i <= nw && i <= nb; i++) print 100 * (1 - w[i] / b[i])}' "$work/rows"
}
# paired MODE COL: their median and range, "0.21, -0.40 to 0.90"
paired() {
  losses "$1" "$2" | sort -g | awk '{a[NR] = $1} END {
    if (!NR) print "-"; else printf "%.2f, %.2f to %.2f\n", a[int((NR + 1) / 2)], a[1], a[NR] }'
}
# fewer COL: in how many rounds strobe-cpu lost less than perf-cpu, "7 of 10"
fewer() {
  paste <(losses strobe-cpu "$1") <(losses perf-cpu "$1") |
    awk '{n++; if ($1 < $2) k++} END {printf "%d of %d", k, n}'
}
# spread COL: the baseline's range, as "min-max (+-half the range against the median, %)"
spread() {
  col base "$1" | sort -g | awk '{a[NR] = $1} END {
    printf "%.0f-%.0f (+-%.1f %%)", a[1], a[NR], 50 * (a[NR] - a[1]) / a[int((NR + 1) / 2)] }'
}
# row WORKLOAD METRIC COL STROBE_MODE PERF_MODE: medians and losses of one metric
row() {
  local c=$3 base s p=- sl pl=- sp pp=-
  base=$(med base "$c"); s=$(med "$4" "$c"); sl=$(loss "$s" "$base"); sp=$(paired "$4" "$c")
  if [ $have_perf = 1 ]; then p=$(med "$5" "$c"); pl=$(loss "$p" "$base"); pp=$(paired "$5" "$c"); fi
  printf '| %s | %s | %s, %s | %s | %s %% (%s %%) | %s | %s %% (%s %%) |\n' "$1" "$2" "$(fmt "$base")" \
    "$(spread "$c")" "$(fmt "$s")" "$sl" "$sp" "$(fmt "$p")" "$pl" "$pp" >> "$results"
}
# estimate MODE: loss per CPU-second of the workload + the recorder's steady share of the CPUs
estimate() {
  awk -v l="$(loss "$(med "$1" 3)" "$(med base 3)")" -v c="$(med "$1" 5)" -v n="$(nproc)" \
    'BEGIN { if (l == "-" || c == "-") print "-"; else printf "%.2f", l + 100 * c / n }'
}
# cost NAME MODE: the recorder's own CPU time, records and losses (medians over the rounds)
cost() {
  local cpu steady
  cpu=$(med "$2" 4)
  [ "$cpu" = - ] && return 0
  steady=$(med "$2" 5)
  printf '| %s | %s | %s %% | %s | %s | %s |\n' "$1" \
    "$(awk -v c="$steady" 'BEGIN{printf "%.2f ms", c * 1000}')" \
    "$(awk -v c="$steady" -v n="$(nproc)" 'BEGIN{printf "%.3f", 100 * c / n}')" \
    "$(awk -v c="$cpu" 'BEGIN{printf "%.1f ms", c * 1000}')" "$(med "$2" 6)" \
    "$(col "$2" 7 | sort -g | tail -1)" >> "$results"
}

{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores ($(uname -r)), load average before it:"
  echo "$(cut -d' ' -f1-3 /proc/loadavg); $rounds interleaved rounds per workload; medians. Loss ="
  echo "1 - median(beside the recorder) / median(alone); in parentheses, the per-round losses (each"
  echo "run against the baseline of its own round): their median and range."
  echo
} >> "$results"

# ---- 1. on-CPU overhead ------------------------------------------------------------------------
modes=(base strobe-cpu); [ $have_perf = 1 ] && modes+=(perf-cpu)
run_rounds "cpu_work" "$cpu_work" "$cpu_s" "${modes[@]}"
cp "$work/rows" "$work/rows.cpu"

# ---- 2. off-CPU overhead -----------------------------------------------------------------------
modes=(base strobe-offcpu); [ $have_perf = 1 ] && modes+=(perf-offcpu)
run_rounds "pingpong" "$pingpong" "$pp_s" "${modes[@]}"
cp "$work/rows" "$work/rows.offcpu"

{
  echo "| workload | metric | alone: median, range | beside strobe | strobe loss | beside perf | perf loss |"
  echo "|---|---|---|---|---|---|---|"
} >> "$results"
cp "$work/rows.cpu" "$work/rows"
row "cpu_work, $(nproc) threads, ${cpu_s} s; \`-F 99\`" "chunks/s (wall clock)" 2 strobe-cpu perf-cpu
row "" "chunks per CPU-second of its own" 3 strobe-cpu perf-cpu
s_est=$(estimate strobe-cpu); p_est=-; [ $have_perf = 1 ] && p_est=$(estimate perf-cpu)
printf '| | estimated loss: per CPU-second + the recorder'"'"'s own CPU share | | | %s %% | | %s %% |\n' \
  "$s_est" "$p_est" >> "$results"
cp "$work/rows.offcpu" "$work/rows"
row "pingpong, ${pp_s} s; off-CPU" "round trips/s (wall clock)" 2 strobe-offcpu perf-offcpu
{
  echo
  cp "$work/rows.cpu" "$work/rows"
  if [ $have_perf = 1 ]; then
    echo "Rounds in which strobe cost cpu_work less than perf did: $(fewer 3) per CPU-second,"
    echo "$(fewer 2) in wall-clock throughput."
    echo
  fi
  echo "On-CPU goal, loss < 1 % and below perf's, on the estimate: $(awk -v s="$s_est" -v p="$p_est" 'BEGIN {
    v = (s < 1) ? "**met** (< 1 %" : "**missed** (not < 1 %"
    if (p == "-") v = v "; perf skipped)"; else v = v ((s < p) ? ", < perf)" : "; **not < perf**)")
    print v }')."
  echo
  echo "| recorder | its CPU time per second, while the workload ran | of the $(nproc) CPUs | per second, whole run (start-up, output) | records (median) | lost (most) |"
  echo "|---|---|---|---|---|---|"
} >> "$results"
cp "$work/rows.cpu" "$work/rows"
cost "\`strobe record -a -F 99\` (beside cpu_work)" strobe-cpu
cost "\`perf record -a -g -F 99\` (beside cpu_work)" perf-cpu
cp "$work/rows.offcpu" "$work/rows"
cost "\`strobe record -a -e offcpu\` (beside pingpong)" strobe-offcpu
cost "\`perf record -a -g -e sched:sched_switch\` (beside pingpong)" perf-offcpu
{
  echo
  echo "<details><summary>Every run (rate/s wall, per CPU-second, recorder CPU s/s whole and steady, records, lost)</summary>"
  echo
  echo '```'
  cat "$work/rows.cpu" "$work/rows.offcpu"
  echo '```'
  echo "</details>"
} >> "$results"

# ---- 3. peak RSS on a busy host ----------------------------------------------------------------
note "peak RSS: recording a busy host for ${rss_s} s"
busy_pids=()
"$cpu_work" -s $((rss_s + 2)) > /dev/null & busy_pids+=($!)
( end=$((SECONDS + rss_s + 2)); n=0
  while [ $SECONDS -lt $end ]; do sh -c true; n=$((n + 1)); done; echo "$n" > "$work/churn" ) &
busy_pids+=($!)
( end=$((SECONDS + rss_s + 2))
  while [ $SECONDS -lt $end ]; do head -c 20000000 /dev/urandom | gzip -6 > /dev/null; done ) &
busy_pids+=($!)
sleep 1
/usr/bin/time -f '%M %U %S %e' -o "$work/strobe.rss" "$strobe" record -a -d "$rss_s" \
  -o "$work/rss.pb.gz" 2> "$work/strobe.rss.err" & s_pid=$!
if [ $have_perf = 1 ]; then
  /usr/bin/time -f '%M %U %S %e' -o "$work/perf.rss" perf record -B -a -g -F 99 -e cpu-clock \
    -o "$work/rss.data" -- sleep "$rss_s" > /dev/null 2>&1 & p_pid=$!
fi
# the peak so far 1 s before the end: what recording takes, before the profile is written
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
s_child=$(pgrep -P "$s_pid" | head -1)
sleep $((rss_s - 1))
s_hwm=$(hwm "$s_child")
wait "$s_pid" || { note "strobe record failed:"; cat "$work/strobe.rss.err" >&2; exit 1; }
perf_ok=$have_perf
if [ $have_perf = 1 ] && ! wait "$p_pid"; then
  note "perf record (beside strobe, for its RSS) failed: $(tail -1 "$work/perf.rss")"; perf_ok=0
fi
wait "${busy_pids[@]}" || true
read -r s_rss s_u s_s s_e < "$work/strobe.rss"
summary=$(sed -n 's/^strobe record: [^:]*: \(.*\); wrote.*/\1/p' "$work/strobe.rss.err")
note "strobe record -a: peak RSS ${s_rss} KB (${s_hwm} KB before writing); $summary; $(cat "$work/churn") sh -c true spawned"
# shellcheck disable=SC2016 # the backquotes are markdown
{
  echo
  echo "| ${rss_s} s on a busy host | peak RSS | peak RSS 1 s before the end | CPU s per s | recorded | goal: < 30 MB |"
  echo "|---|---|---|---|---|---|"
  printf '| `strobe record -a` | %s MB | %s MB | %s | %s; %s short-lived processes spawned | %s |\n' \
    "$(awk -v k="$s_rss" 'BEGIN{printf "%.1f", k / 1024}')" \
    "$(awk -v k="$s_hwm" 'BEGIN{printf "%.1f", k / 1024}')" \
    "$(awk -v u="$s_u" -v s="$s_s" -v e="$s_e" 'BEGIN{printf "%.3f", (u + s) / e}')" \
    "$summary" "$(cat "$work/churn")" \
    "$(awk -v k="$s_rss" 'BEGIN{print (k < 30 * 1024) ? "met" : "**missed**"}')"
  if [ $perf_ok = 1 ]; then
    read -r p_rss p_u p_s p_e < "$work/perf.rss"
    printf '| `perf record -a -g -F 99` (at the same time) | %s MB | - | %s | %s MB perf.data | - |\n' \
      "$(awk -v k="$p_rss" 'BEGIN{printf "%.1f", k / 1024}')" \
      "$(awk -v u="$p_u" -v s="$p_s" -v e="$p_e" 'BEGIN{printf "%.3f", (u + s) / e}')" \
      "$(awk -v b="$(stat -c %s "$work/rss.data")" 'BEGIN{printf "%.1f", b / 1048576}')"
  elif [ $have_perf = 1 ]; then
    echo "| perf record (failed in this run) | - | - | - | - | - |"
  else
    echo "| perf record (skipped: perf not found) | - | - | - | - | - |"
  fi
} >> "$results"
