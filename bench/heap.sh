#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What libstrobe-heap.so costs, side by side in one run with its peers: no profiler, heaptrack
# (records every allocation), and jemalloc's own profiler at the same mean
# (MALLOC_CONF=prof:true,lg_prof_sample:19, 512 KiB) against jemalloc alone. Appends markdown to
# RESULTS (stdout when not given); bench/run.sh calls it under BENCH_ONLY=heap (or all).
#
#  1. build/bench/heap_micro: ns per malloc/free pair (16..527 B, one thread, then 4 at once) and
#     per uncontended mutex and rwlock lock/unlock pair, best of 5 inside each run, median of
#     RUNS runs per mode, the modes interleaved round by round.
#  2. a real program: python3 running an allocation-heavy script, wall time median of RUNS
#     and peak RSS, per mode.
# A missing peer (heaptrack; libjemalloc2) is reported and its rows skipped.
#
#   bench/heap.sh [RESULTS]        RUNS=3
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
lib=$root/build/libstrobe-heap.so
micro=$root/build/bench/heap_micro
results=${1:-/dev/stdout}
runs=${RUNS:-3}
for b in "$lib" "$micro" /usr/bin/time; do
  [ -e "$b" ] || { note "missing $b (make bench; Debian package time)"; exit 2; }
done
work=$(mktemp -d /tmp/strobe-heap-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
je=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1 || true)
[ -n "$je" ] || note "SKIP jemalloc rows: libjemalloc2 is not installed"
command -v heaptrack >/dev/null || note "SKIP heaptrack rows: heaptrack is not installed"
py=$(command -v python3 || true)

# mode NAME: runs "$@" the way mode NAME says
run_mode() {
  local m=$1
  shift
  case $m in
    plain) "$@" ;;
    strobe) STROBE_HEAP_DIR=$work LD_PRELOAD=$lib "$@" ;;
    strobe-off) STROBE_HEAP_DIR=$work STROBE_HEAP_RATE=0 STROBE_LOCK_SAMPLE_NS=0 LD_PRELOAD=$lib "$@" ;;
    jemalloc) LD_PRELOAD=$je "$@" ;;
    jemalloc-prof) MALLOC_CONF=prof:true,lg_prof_sample:19 LD_PRELOAD=$je "$@" ;;
    strobe-on-jemalloc) STROBE_HEAP_DIR=$work LD_PRELOAD=$lib:$je "$@" ;;
    heaptrack) heaptrack -o "$work/ht.$RANDOM" "$@" 2>/dev/null ;;
  esac
}
modes=(plain strobe strobe-off)
[ -n "$je" ] && modes+=(jemalloc jemalloc-prof strobe-on-jemalloc)
command -v heaptrack >/dev/null && modes+=(heaptrack)


# ---- 1. microbenchmark ----
for ((r = 0; r < runs; r++)); do
  for m in "${modes[@]}"; do
    run_mode "$m" "$micro" -t 4 -r 5 | grep -v '^heaptrack' | sed "s/^/$m /" >>"$work/micro"
    rm -f "$work"/strobe-heap.* "$work"/ht.* "$work"/jeprof.*
  done
done
val() { awk -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3 }' "$work/micro" | median; }
{
  echo "heap_micro (ns, median of $runs runs of best-of-5; lower is better):"
  echo
  echo "| mode | malloc+free, 1 thread | malloc+free, 4 threads | mutex lock+unlock | rwlock wr+unlock |"
  echo "|---|---|---|---|---|"
  for m in "${modes[@]}"; do
    echo "| $m | $(val "$m" malloc_free_1thread) | $(val "$m" malloc_free_4threads) | $(val "$m" mutex_pair) | $(val "$m" rwlock_wr_pair) |"
  done
  echo
} >>"$results"

# ---- 2. python3 ----
if [ -n "$py" ]; then
  cat >"$work/a.py" <<'PY'
import collections, json
d = collections.defaultdict(list)
for i in range(600000):
    d[i % 1000].append(("x" * (i % 200), i, [i] * (i % 7)))
s = json.dumps({k: len(v) for k, v in d.items()})
blobs = [bytes(i % 5000) for i in range(40000)]
print(len(s))
PY
  for ((r = 0; r < runs; r++)); do
    for m in "${modes[@]}"; do
      run_mode "$m" /usr/bin/time -f "$m %e %M" -o "$work/t" "$py" "$work/a.py" >/dev/null
      cat "$work/t" >>"$work/py"
      rm -f "$work"/strobe-heap.* "$work"/ht.* "$work"/jeprof.*
    done
  done
  {
    echo "python3, an allocation-heavy script (median of $runs):"
    echo
    echo "| mode | wall s | peak RSS MB |"
    echo "|---|---|---|"
    for m in "${modes[@]}"; do
      echo "| $m | $(awk -v m="$m" '$1 == m { print $2 }' "$work/py" | median) | $(awk -v m="$m" '$1 == m { printf "%.1f\n", $3 / 1024 }' "$work/py" | median) |"
    done
    echo
  } >>"$results"
fi
