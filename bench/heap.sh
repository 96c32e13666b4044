#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What libstrobe-heap.so costs, side by side in one run with its peers: no profiler, heaptrack
# (records every allocation), and jemalloc's own profiler at the same mean
# (MALLOC_CONF=prof:true,lg_prof_sample:19, 512 KiB) against jemalloc alone. Appends markdown to
# RESULTS (stdout when not given); bench/run.sh calls it under BENCH_ONLY=heap (or all).
#
# Modes: plain; strobe (the library at its defaults: R = 512 KiB, stacks by the unwind-step
# cache); strobe-libgcc (the same, every stack walked by libgcc: STROBE_HEAP_UNWIND_CACHE=0);
# strobe-off (the wrappers only: STROBE_HEAP_RATE=0, STROBE_LOCK_SAMPLE_NS=0); floor (a preload
# library that only forwards the malloc family to glibc, bench/null_interposer.c: what any preload
# profiler pays before doing anything); jemalloc;
# jemalloc-prof; strobe-on-jemalloc; heaptrack. The modes are interleaved round by round, RUNS
# rounds, and medians reported, the machine being shared.
#
#  1. build/bench/heap_micro: per-thread CPU ns per malloc/free pair (16..527 B, one thread, then
#     4 at once) and per uncontended mutex and rwlock lock/unlock pair (best of 5 inside each
#     run), and its peak RSS.
#  2. real programs: python3 running an allocation-heavy script and sort -S 64M of 400 000 lines:
#     CPU seconds (user + system, what the program itself used: the wall time of a shared
#     machine mostly measures waiting), wall seconds, and peak RSS.
# A missing peer (heaptrack; libjemalloc2) is reported and its rows skipped.
#
#   bench/heap.sh [RESULTS]        RUNS=5 (rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
lib=$root/build/libstrobe-heap.so
micro=$root/build/bench/heap_micro
floor=$root/build/bench/null_interposer.so
results=${1:-/dev/stdout}
runs=${RUNS:-5}
for b in "$lib" "$micro" "$floor" /usr/bin/time; do
  [ -e "$b" ] || { note "missing $b (make bench; Debian package time)"; exit 2; }
done
work=$(mktemp -d /tmp/strobe-heap-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
je=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1 || true)
[ -n "$je" ] || note "SKIP jemalloc rows: libjemalloc2 is not installed"
command -v heaptrack >/dev/null || note "SKIP heaptrack rows: heaptrack is not installed"
py=$(command -v python3 || true)
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# mode NAME: runs "$@" the way mode NAME says
run_mode() {
  local m=$1
  shift
  case $m in
    plain) "$@" ;;
    strobe) STROBE_HEAP_DIR=$work LD_PRELOAD=$lib "$@" ;;
    strobe-libgcc) STROBE_HEAP_DIR=$work STROBE_HEAP_UNWIND_CACHE=0 LD_PRELOAD=$lib "$@" ;;
    strobe-off) STROBE_HEAP_DIR=$work STROBE_HEAP_RATE=0 STROBE_LOCK_SAMPLE_NS=0 LD_PRELOAD=$lib "$@" ;;
    floor) LD_PRELOAD=$floor "$@" ;;
    jemalloc) LD_PRELOAD=$je "$@" ;;
    jemalloc-prof) MALLOC_CONF=prof:true,lg_prof_sample:19 LD_PRELOAD=$je "$@" ;;
    strobe-on-jemalloc) STROBE_HEAP_DIR=$work LD_PRELOAD=$lib:$je "$@" ;;
    heaptrack) heaptrack -o "$work/ht.$RANDOM" "$@" 2>/dev/null ;;
  esac
}
modes=(plain strobe strobe-libgcc strobe-off floor)
[ -n "$je" ] && modes+=(jemalloc jemalloc-prof strobe-on-jemalloc)
command -v heaptrack >/dev/null && modes+=(heaptrack)
clean() { rm -f "$work"/strobe-heap.* "$work"/ht.* "$work"/jeprof.* jeprof.*.heap; }
# /usr/bin/time inside the mode (the program's own figures), but outside heaptrack: its preload
# library does not follow an exec, so inside it would time an untraced program. heaptrack's
# figures thus include its wrapper script and heaptrack_interpret, which decodes the trace while
# the program runs (part of what heaptrack costs); its peak RSS is that of its largest process.
timed() { # MODE OUT CMD...
  local m=$1 out=$2
  shift 2
  if [ "$m" = heaptrack ]; then
    /usr/bin/time -f "$m %e %U %S %M" -a -o "$out" heaptrack -o "$work/ht.$RANDOM" "$@" 2>/dev/null
  else
    run_mode "$m" /usr/bin/time -f "$m %e %U %S %M" -a -o "$out" "$@"
  fi
}

# ---- 1. microbenchmark ----
for ((r = 0; r < runs; r++)); do
  for m in "${modes[@]}"; do
    timed "$m" "$work/micro.rss" "$micro" -t 4 -r 5 | grep -v '^heaptrack' | sed "s/^/$m /" >>"$work/micro"
    clean
  done
done
val() { awk -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3 }' "$work/micro" | median; }
rss() { awk -v m="$1" '$1 == m { printf "%.1f\n", $5 / 1024 }' "$2" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }
{
  echo "heap_micro: per-thread CPU ns, median of $runs runs of best-of-5 (lower is better); ratio to plain:"
  echo
  echo "| mode | malloc+free, 1 thread | ratio | malloc+free, 4 threads | ratio | mutex lock+unlock | rwlock wr+unlock | peak RSS MB |"
  echo "|---|---|---|---|---|---|---|---|"
  p1=$(val plain malloc_free_1thread); p4=$(val plain malloc_free_4threads)
  for m in "${modes[@]}"; do
    v1=$(val "$m" malloc_free_1thread); v4=$(val "$m" malloc_free_4threads)
    echo "| $m | $v1 | $(ratio "$v1" "$p1") | $v4 | $(ratio "$v4" "$p4") | $(val "$m" mutex_pair) | $(val "$m" rwlock_wr_pair) | $(rss "$m" "$work/micro.rss") |"
  done
  echo
} >>"$results"

# ---- 2. real programs ----
cat >"$work/a.py" <<'PY'
import collections, json
d = collections.defaultdict(list)
for i in range(600000):
    d[i % 1000].append(("x" * (i % 200), i, [i] * (i % 7)))
s = json.dumps({k: len(v) for k, v in d.items()})
blobs = [bytes(i % 5000) for i in range(40000)]
print(len(s))
PY
awk 'BEGIN { srand(7); for (i = 0; i < 400000; i++) printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26) }' >"$work/big.txt"
for ((r = 0; r < runs; r++)); do
  for m in "${modes[@]}"; do
    if [ -n "$py" ]; then
      timed "$m" "$work/py" "$py" "$work/a.py" >/dev/null
      clean
    fi
    timed "$m" "$work/sort" sort -S 64M "$work/big.txt" >/dev/null
    clean
  done
done
cpu() { awk -v m="$1" '$1 == m { print $3 + $4 }' "$2" | median; }
wall() { awk -v m="$1" '$1 == m { print $2 }' "$2" | median; }
{
  for prog in py sort; do
    [ -s "$work/$prog" ] || continue
    if [ "$prog" = py ]; then
      echo "python3, an allocation-heavy script (600 000 appends to dicts of lists, json.dumps, 40 000 byte strings), median of $runs:"
    else
      echo "sort -S 64M of 400 000 lines (22 MB), median of $runs:"
    fi
    echo
    echo "| mode | CPU s (user+sys) | ratio to plain | wall s | peak RSS MB | RSS over plain |"
    echo "|---|---|---|---|---|---|"
    pc=$(cpu plain "$work/$prog"); pr=$(rss plain "$work/$prog")
    for m in "${modes[@]}"; do
      c=$(cpu "$m" "$work/$prog"); rs=$(rss "$m" "$work/$prog")
      echo "| $m | $c | $(ratio "$c" "$pc") | $(wall "$m" "$work/$prog") | $rs | $(awk -v a="$rs" -v b="$pr" 'BEGIN { printf "%+.1f MB\n", a - b }') |"
    done
    echo
  done
  echo "Load average before: $load0; after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)."
  echo
} >>"$results"

# ---- 3. instructions (callgrind): what the library adds, independent of the machine's load ----
# The CPU seconds above move by several % between identical runs on a shared machine, more than
# the library costs a real program. Instructions executed (valgrind's callgrind, every process of
# the command) do not depend on load: plain, the forwarding-only floor, the wrappers alone and the
# library at its defaults, on the same programs plus gcc compiling a file of this tree. CPython's
# count moves by ~0.1 % between runs of the same mode (its layout depends on addresses), so its
# hash seed is fixed. Instructions are not time (the wrappers' calls cost more than their
# instruction count says: see the microbenchmark), but they resolve the per-cent goal.
if command -v valgrind >/dev/null; then
  icount() { # MODE CMD...: total instructions of CMD and its children under MODE
    local m=$1
    shift
    run_mode "$m" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
      awk '/Collected/ { s += $NF } END { printf "%.0f\n", s }'
  }
  imodes=(plain floor strobe-off strobe)
  {
    echo "Instructions executed (valgrind --tool=callgrind, all processes of the command; one run each, load-independent):"
    echo
    echo "| program | plain | floor (forwarding only) | wrappers only | library, default |"
    echo "|---|---|---|---|---|"
    progs=("heap_micro -t 1 -r 1|$micro -t 1 -r 1" "sort -S 64M, 400 000 lines|sort -S 64M $work/big.txt"
      "gcc -O2 -c store/groups.c|gcc -O2 -I$root/include -I$root/store -c -o $work/g.o $root/store/groups.c")
    [ -n "$py" ] && progs+=("python3 (PYTHONHASHSEED=0)|env PYTHONHASHSEED=0 $py $work/a.py")
    for p in "${progs[@]}"; do
      name=${p%%|*} cmd=${p#*|}
      row="| $name |" base=
      for m in "${imodes[@]}"; do
        # shellcheck disable=SC2086
        n=$(icount "$m" $cmd)
        clean
        [ -z "$base" ] && base=$n
        row+=" $n$(awk -v a="$n" -v b="$base" 'BEGIN { if (a != b && b > 0) printf " (%+.2f %%)", 100 * (a - b) / b }') |"
      done
      echo "$row"
    done
    echo
  } >>"$results"
else
  note "SKIP instruction counts: valgrind is not installed"
fi
