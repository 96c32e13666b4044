#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What unwinding with unwind tables costs (`strobe record --call-graph auto`, the default),
# against frame pointers (`--call-graph fp`) and against `perf record --call-graph dwarf` doing the
# same job in the same run. Appends markdown to RESULTS (stdout when not given); bench/run.sh
# calls it under BENCH_ONLY=unwind (or all).
#
#  1. throughput of bench/cpu_work (one busy thread per CPU) alone and beside each recorder at
#     -a -F 99, in interleaved rounds (the order rotating); loss = 1 - median beside / median
#     alone, on the work per wall second and per CPU-second the workload got (the kernel's
#     sample work, the stack copy included, is charged to the interrupted thread), and the
#     recorder's own CPU time per second.
#  2. the unwinder's cost per sample, p50 and p99 (strobe times each unwind call with
#     clock_gettime and prints the percentiles with STROBE_DEBUG=1), and the peak of its cache
#     estimate (bounded by --unwind-cache, 64 MiB by default), from the auto runs.
#
#  3. stack completeness (scripts/stack_completeness.sh, one run: the same busy workload of Debian
#     binaries sampled by strobe fp/dwarf/auto and perf fp/dwarf, one after the other, every
#     tool's stacks counted by the same awk): the share of complete stacks of all user samples,
#     and of those with a user stack (leaving out samples of processes in exit or execve with no
#     user memory left, which no unwinder can complete), with the kinds of the incomplete ones.
#     COMPLETENESS_SECONDS=8 per mode; COMPLETENESS_SECONDS=0 skips it.
#
#   bench/unwind.sh [RESULTS]          ROUNDS=5 CPU_SECONDS=8 (BENCH_QUICK=1: 3 rounds of 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=${STROBE:-$root/build/strobe}
before=${STROBE_BEFORE:-}  # another build of strobe, run as one more mode (strobe-auto-before)
cpu_work=$root/build/bench/cpu_work
results=${1:-/dev/stdout}
note() { echo "bench: $*" >&2; }
if [ "${BENCH_QUICK:-0}" = 1 ]; then rounds=${ROUNDS:-3} secs=${CPU_SECONDS:-5}
else rounds=${ROUNDS:-5} secs=${CPU_SECONDS:-8}; fi
for b in "$strobe" "$cpu_work" /usr/bin/time; do
  [ -x "$b" ] || { note "missing $b (make bench; Debian package time)"; exit 2; }
done
have_perf=0
if command -v perf >/dev/null && perf record -B -q -a -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then
  have_perf=1
else note "SKIP perf: not found or perf record -a does not work here"; fi
work=$(mktemp -d /tmp/strobe-unwind-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

recorder() { # MODE SECONDS
  case $1 in
    strobe-fp) echo "$strobe record -a -F 99 --call-graph fp -d $2 -o $work/s.pb.gz" ;;
    strobe-auto) echo "$strobe record -a -F 99 --call-graph auto -d $2 -o $work/s.pb.gz" ;;
    strobe-auto-before) echo "$before record -a -F 99 --call-graph auto -d $2 -o $work/s.pb.gz" ;;
    perf-dwarf) echo "perf record -B -a -F 99 -e cpu-clock --call-graph dwarf -o $work/p.data -- sleep $2" ;;
  esac
}
oncpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {print n + 0}'; }
now() { date +%s.%N; }
: > "$work/rows"
one() { # MODE: a row "mode ops/s ops/cpu-s recorder_cpu_share p50 p99 cache lost"
  local mode=$1 rec="" pid="" c0 c1 t0 t1 out steady=- p50=- p99=- cache=- lost=-
  if [ "$mode" != base ]; then
    # shellcheck disable=SC2046
    STROBE_DEBUG=1 /usr/bin/time -f '%U %S %e' -o "$work/time" $(recorder "$mode" $((secs + 2))) \
      > /dev/null 2> "$work/err" &
    rec=$!
  fi
  sleep 1
  if [ -n "$rec" ]; then pid=$(pgrep -P "$rec" | head -1); c0=$(oncpu_ns "$pid"); fi
  t0=$(now)
  out=$("$cpu_work" -s "$secs" | awk '{print $2, $4}')
  if [ -n "$pid" ]; then
    c1=$(oncpu_ns "$pid"); t1=$(now)
    steady=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.5f", (b - a) / 1e9 / (t1 - t0) }')
  fi
  if [ -n "$rec" ]; then
    wait "$rec" || { note "$mode failed:"; cat "$work/err" >&2; exit 1; }
    if [ "${mode#strobe-auto}" != "$mode" ]; then
      read -r p50 p99 cache < <(sed -n 's/.*unwind-ns p50 \([0-9]*\) p99 \([0-9]*\) cache \([0-9]*\) bytes.*/\1 \2 \3/p' "$work/err") ||
        true # (none on the eBPF path, which unwinds in the kernel: set -e must not end the run)
    fi
    case $mode in
      strobe-*) lost=$(sed -n 's/.*, \([0-9]*\) lost,.*/\1/p' "$work/err" | tail -1) ;;
      perf-*) lost=$(perf report -i "$work/p.data" --stats 2>/dev/null | awk '/LOST(_SAMPLES)? events:/ {n += $3} END {print n + 0}') ;;
    esac
  fi
  note "$mode: $out ops/s, ops/cpu-s; recorder $steady CPU s/s; unwind p50 $p50 p99 $p99 ns; cache $cache; lost $lost"
  echo "$mode $out $steady ${p50:--} ${p99:--} ${cache:--} ${lost:--}" >> "$work/rows"
}
modes=(base strobe-fp strobe-auto); [ -n "$before" ] && modes+=(strobe-auto-before)
[ $have_perf = 1 ] && modes+=(perf-dwarf)
n=${#modes[@]}
for ((r = 0; r < rounds; r++)); do
  note "round $((r + 1))/$rounds"
  for ((i = 0; i < n; i++)); do one "${modes[(i + r) % n]}"; done
done

med() { awk -v m="$1" -v c="$2" '$1 == m && $c != "-" {print $c}' "$work/rows" | sort -g |
  awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }
loss() { awk -v w="$1" -v b="$2" 'BEGIN { if (w == "-" || b == "-" || b <= 0) print "-"; else printf "%.2f", 100 * (1 - w / b) }'; }
est() { # MODE: loss per CPU-second + the recorder's own share of the CPUs
  awk -v l="$(loss "$(med "$1" 3)" "$(med base 3)")" -v c="$(med "$1" 4)" -v n="$(nproc)" \
    'BEGIN { if (l == "-" || c == "-") print "-"; else printf "%.2f", l + 100 * c / n }'; }
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores ($(uname -r)), $rounds interleaved rounds of"
  echo "${secs} s, medians; bench/cpu_work with $(nproc) threads, recorders at \`-a -F 99\`."
  echo
  echo "| recorder | ops/s (wall) | loss | ops per CPU-second | loss | recorder CPU (s/s) | estimated loss | lost records (max) |"
  echo "|---|---|---|---|---|---|---|---|"
  for m in "${modes[@]}"; do
    label=$m
    case $m in base) label="none (alone)";; strobe-fp) label="\`strobe record --call-graph fp\`";;
      strobe-auto) label="\`strobe record --call-graph auto\`";;
      strobe-auto-before) label="\`strobe record --call-graph auto\` (before: \`$(basename "$before")\`)";; perf-dwarf) label="\`perf record --call-graph dwarf\`";; esac
    lw=-; lc=-; e=-
    [ "$m" != base ] && { lw="$(loss "$(med "$m" 2)" "$(med base 2)") %"; lc="$(loss "$(med "$m" 3)" "$(med base 3)") %"; e="$(est "$m") %"; }
    echo "| $label | $(med "$m" 2) | $lw | $(med "$m" 3) | $lc | $(med "$m" 4) | $e | $(awk -v m="$m" '$1 == m {print $8}' "$work/rows" | sort -g | tail -1) |"
  done
  echo
  echo "Unwinder (auto runs, medians of the runs): p50 $(med strobe-auto 5) ns, p99 $(med strobe-auto 6) ns"
  echo "per unwind (clock_gettime around each call; 1/8-octave buckets); cache estimate at its peak"
  echo "$(awk -v b="$(med strobe-auto 7)" 'BEGIN { if (b == "-") print "-"; else printf "%.1f MiB", b / 1048576 }') (bound: \`--unwind-cache\`, 64 MiB by default)."
  if [ -n "$before" ]; then
    echo "The build before (\`$(basename "$before")\`), same rounds: p50 $(med strobe-auto-before 5) ns, p99"
    echo "$(med strobe-auto-before 6) ns, cache estimate at its peak $(awk -v b="$(med strobe-auto-before 7)" 'BEGIN { if (b == "-") print "-"; else printf "%.1f MiB", b / 1048576 }')."
  fi
} >> "$results"

# ---- 3. stack completeness ----------------------------------------------------------------------
csecs=${COMPLETENESS_SECONDS:-8}
if [ "$csecs" != 0 ]; then
  cmodes="strobe:fp strobe:dwarf strobe:auto"
  [ $have_perf = 1 ] && cmodes+=" perf:fp perf:dwarf perf:dwarf,16384"
  note "stack completeness: $cmodes, $csecs s each"
  MODES=$cmodes STROBE=$strobe bash scripts/stack_completeness.sh "$csecs" > "$work/complete" 2>&1 ||
    note "stack_completeness.sh failed: $(tail -2 "$work/complete")"
  {
    echo
    echo "Stack completeness (\`scripts/stack_completeness.sh $csecs\`, run $(date -u +%Y-%m-%dT%H:%MZ), load"
    echo "average $(cut -d' ' -f1 /proc/loadavg) after it): the same busy workload (gzip, sort -R, sha256sum, python3, cc1)"
    echo "sampled system-wide at 199 Hz by each mode in turn, $csecs s each, its processes' user samples only;"
    echo "complete = rooted in _start, _dl_start_user, __libc_start_main, main, start_thread, clone or clone3."
    echo
    echo "| mode | complete, of all user samples | complete, of those with a user stack | no user stack | at the 127-frame limit | failed |"
    echo "|---|---|---|---|---|---|"
    awk '
      / complete stacks: / { m = $1; a = $4; n = $6; b = $9; u = $12 }
      /incomplete: / && m != "" {
        sub(/^ +incomplete: /, "")
        split($0, k, ", ")
        nu = k[1]; sub(/ no user stack/, "", nu); cap = k[2]; sub(/ at the depth limit.*/, "", cap)
        fl = k[3]; sub(/ failed/, "", fl)
        t = m; sub(/:/, " --call-graph ", t)
        printf "| `%s` | %s of %s | %s of %s | %s | %s | %s |\n", t, a, n, b, u, nu, cap, fl; m = "" }
      / crashed twice/ { t = $1; sub(/:/, " --call-graph ", t); printf "| `%s` | perf script crashed twice (perf 6.1) | | | | |\n", t }' "$work/complete"
  } >> "$results"
fi
