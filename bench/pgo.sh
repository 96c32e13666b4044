#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PGO from strobe's profiles (docs/pgo.md): bench/pgo_vm.c, a bytecode interpreter, built plain
# -O2, then rebuilt with the AutoFDO profile `strobe pgo autofdo` made from a `strobe record` of
# it, then BOLTed with `strobe pgo bolt`'s fdata, and both (AutoFDO, re-recorded, then BOLT).
# The peers run the same flow from `perf record`: perf2bolt -nl for BOLT, create_llvm_prof
# (Debian's autofdo) for AutoFDO where it produces a profile.
# Every binary must print the same checksum. Timing: user+system CPU seconds of each run
# (bash's time, in ms), the variants interleaved round by round so that load on this shared machine
# falls on all of them alike; medians and the speed-up against plain -O2 (>1 = faster).
#   bench/pgo.sh OUT.md      (RUNS=9, PGO_SCALE=60: the workload's size, ~1-2 s a run)
set -euo pipefail
out=${1:?usage: bench/pgo.sh OUT.md}
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
runs=${RUNS:-9}
[ "$runs" -lt 5 ] && runs=5
scale=${PGO_SCALE:-60}
for d in /usr/lib/llvm-16/bin /usr/lib/llvm-15/bin; do [ -d $d ] && PATH=$PATH:$d; done
note() { echo "bench/pgo: $*" >&2; }
w=$(mktemp -d /tmp/strobe-pgo.XXXXXX)
trap 'rm -rf "$w"' EXIT
cd "$w"
# non-PIE: llvm-bolt 16 cannot rewrite the interpreter's PIC jump table ("failed to
# post-process indirect branches"); --emit-relocs lets it move functions
flags=(-O2 -g -fno-pie -no-pie -Wl,--emit-relocs)
src=$root/bench/pgo_vm.c
clang "${flags[@]}" -o plain "$src"
want=$(./plain "$scale")
names=(plain) notes=()

"$strobe" record -q -F 999 -o train.pb.gz -- ./plain "$scale" >/dev/null 2>rec.err || { cat rec.err >&2; exit 1; }
"$strobe" pgo autofdo -o strobe.afdo train.pb.gz 2>>notes.txt
clang "${flags[@]}" -fprofile-sample-use=strobe.afdo -o afdo "$src"
names+=(afdo)
if command -v llvm-bolt >/dev/null; then
  "$strobe" pgo bolt --binary plain -o strobe.fdata train.pb.gz 2>>notes.txt
  # no function splitting: with block counts inferred from sampled addresses (no LBR), moving
  # "cold" blocks out was measured slower here than leaving them
  bolt_opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -dyno-stats)
  llvm-bolt plain -o bolt -data=strobe.fdata "${bolt_opts[@]}" >bolt.log 2>&1
  names+=(bolt)
  "$strobe" record -q -F 999 -o train2.pb.gz -- ./afdo "$scale" >/dev/null 2>>rec.err
  "$strobe" pgo bolt --binary afdo -o strobe2.fdata train2.pb.gz 2>>notes.txt
  llvm-bolt afdo -o afdo_bolt -data=strobe2.fdata "${bolt_opts[@]}" >bolt2.log 2>&1
  names+=(afdo_bolt)
  if command -v perf >/dev/null && command -v perf2bolt >/dev/null &&
     perf record -q -F 999 -e cpu-clock -o perf.data -- ./plain "$scale" >/dev/null 2>perf.err &&
     perf2bolt -nl -p perf.data -o perf.fdata plain >p2b.log 2>&1 &&
     llvm-bolt plain -o perf_bolt -data=perf.fdata "${bolt_opts[@]}" >bolt3.log 2>&1; then
    names+=(perf_bolt)
  else notes+=("perf record + perf2bolt -nl failed here: $(tail -1 perf.err p2b.log 2>/dev/null | tr '\n' ' ' | cut -c1-200)"); fi
else notes+=("llvm-bolt is not installed (bolt-16): no BOLT rows"); fi
if command -v create_llvm_prof >/dev/null && [ -s perf.data ]; then
  create_llvm_prof --binary=plain --profile=perf.data --out=perf.afdo --format=text --use_lbr=false >cl.log 2>&1 || true
  if [ -s perf.afdo ] && llvm-profdata show --sample perf.afdo >/dev/null 2>&1; then
    clang "${flags[@]}" -fprofile-sample-use=perf.afdo -o perf_afdo "$src"
    names+=(perf_afdo)
  else notes+=("create_llvm_prof (autofdo $(dpkg-query -W -f='${Version}' autofdo 2>/dev/null)) wrote $(stat -c %s perf.afdo 2>/dev/null || echo 0) bytes from a perf record without LBR (--use_lbr=false): no profile to build with. It needs LBR branch stacks, which this VM does not have (perf stat -e cycles: not supported)"); fi
else notes+=("create_llvm_prof is not installed (Debian: autofdo)"); fi

for n in "${names[@]}"; do
  got=$(./"$n" "$scale")
  [ "$got" = "$want" ] || { note "$n prints '$got', plain '$want'"; exit 1; }
done
declare -A t
for ((r = 0; r < runs; r++)); do
  for n in "${names[@]}"; do
    s=$( { TIMEFORMAT='%3U %3S'; time ./"$n" "$scale" >/dev/null; } 2>&1 | awk '{printf "%.3f", $1 + $2}')
    t[$n]+="$s "
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
base=$(med "${t[plain]}")
desc() {
  case $1 in
  plain) echo "clang -O2 (no profile)" ;;
  afdo) echo "clang -O2 -fprofile-sample-use=\`strobe pgo autofdo\`" ;;
  bolt) echo "plain, then llvm-bolt -data=\`strobe pgo bolt\`" ;;
  afdo_bolt) echo "AutoFDO build, re-recorded, then llvm-bolt" ;;
  perf_bolt) echo "peer: perf record, perf2bolt -nl, llvm-bolt" ;;
  perf_afdo) echo "peer: perf record, create_llvm_prof" ;;
  esac
}
{
  echo "bench/pgo_vm.c (bytecode interpreter: sieve, recursive fib, FNV hash, insertion sort) at scale $scale,"
  echo "clang $(clang --version | sed -n 's/.*version \([0-9.]*\).*/\1/p;q'), $(llvm-bolt --version 2>/dev/null | sed -n 's/.*LLVM version \([0-9.]*\).*/BOLT \1/p' | head -1);"
  echo "profiles: \`strobe record -F 999\` of one run at the same scale ($(awk '/samples/ {print $0; exit}' notes.txt | sed 's/.*(\(.*\))/\1/'))."
  echo "CPU seconds (user+sys) per run, median of $runs interleaved rounds on $(nproc) shared cores; speed-up = plain / variant."
  echo
  echo "| build | median CPU s | speed-up vs -O2 | runs (s) |"
  echo "|---|---:|---:|---|"
  for n in "${names[@]}"; do
    m=$(med "${t[$n]}")
    printf '| %s | %.3f | %.3f | %s|\n' "$(desc "$n")" "$m" "$(awk -v a="$base" -v b="$m" 'BEGIN {print a / b}')" "${t[$n]}"
  done
  echo
  grep -h 'non-empty execution profile' bolt.log 2>/dev/null | sed 's/^/- strobe fdata: /'
  grep -h 'non-empty execution profile' bolt3.log 2>/dev/null | sed 's/^/- perf2bolt fdata: /'
  for x in "${notes[@]}"; do echo "- $x"; done
  echo
  echo "Reproduce: \`bash bench/pgo.sh OUT.md\` (or \`BENCH_ONLY=pgo bench/run.sh\`)."
} >"$out"
cat "$out"
