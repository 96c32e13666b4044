#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PGO from strobe's profiles (docs/pgo.md). A workload (bench/pgo_kernels.c: LZ77 + Huffman, a
# tokenizer, a register VM with non-inlined handlers; PGO_SRC=bench/pgo_vm.c for the older
# interpreter) built plain -O2, then rebuilt with the AutoFDO profile that `strobe pgo autofdo`
# made from a `strobe record` of the plain build, then BOLTed with `strobe pgo bolt`'s fdata:
#   plain      clang -O2 -g
#   dip        clang -O2 -g -fdebug-info-for-profiling (no profile: the training build of afdo_dip)
#   afdo       plain's profile, final build -fprofile-sample-use
#   afdo_dip   dip's profile (its lines carry discriminators), final build
#              -fdebug-info-for-profiling -fprofile-sample-use
#   bolt       plain, llvm-bolt -data=`strobe pgo bolt` of plain's recording
#   afdo_bolt  afdo_dip, re-recorded, then llvm-bolt
#   perf_bolt  the peer: perf record + perf2bolt -nl + llvm-bolt
# Every binary must print the same checksum. Timing: user+system CPU seconds of each run (bash's
# time), the variants interleaved round by round (the order rotated each round) so that load on
# a shared machine falls on all alike; per variant the median, speed-up = plain's median / its
# median, and the rounds in which it used less CPU than plain in the same round (paired), with
# a two-sided sign test.
#   bench/pgo.sh OUT.md      (RUNS=15, PGO_SCALE: the workload's size, ~1 s a run by default)
#   PGO_KEEP=DIR keeps the binaries and the list; bench/pgo_rounds.sh DIR OUT.md times them
#   again (on another machine, say).
set -euo pipefail
out=${1:?usage: bench/pgo.sh OUT.md}
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
src=$root/${PGO_SRC:-bench/pgo_kernels.c}
case $src in *pgo_vm.c) scale=${PGO_SCALE:-60} ;; *) scale=${PGO_SCALE:-200} ;; esac
for d in /usr/lib/llvm-16/bin /usr/lib/llvm-15/bin; do [ -d $d ] && PATH=$PATH:$d; done
note() { echo "bench/pgo: $*" >&2; }
w=${PGO_KEEP:-$(mktemp -d /tmp/strobe-pgo.XXXXXX)}
mkdir -p "$w"
[ -n "${PGO_KEEP:-}" ] || trap 'rm -rf "$w"' EXIT
cd "$w"
# non-PIE: llvm-bolt 16 cannot rewrite a PIC jump table ("failed to post-process indirect
# branches"); --emit-relocs lets it move functions. perf record --no-buildid: Debian 12's perf 6.1
# aborted now and then collecting build IDs ("stack smashing detected"); perf2bolt matches by name
flags=(-O2 -g -fno-pie -no-pie -Wl,--emit-relocs)
dip=(-fdebug-info-for-profiling)
clang "${flags[@]}" -o plain "$src"
clang "${flags[@]}" "${dip[@]}" -o dip "$src"
names=(plain dip) notes=()
# Training runs: 3x the timed size at -F 4999, ~15-20k samples (at -F 999 and 1x, ~1000 samples
# left most branches of the lexer with a handful of counts each, and the builds varied by +-25 %
# on that kernel from one profile to the next)
tscale=$((scale * ${PGO_TRAIN_X:-3}))
record() { "$strobe" record -q -F 4999 -o "$2" -- ./"$1" "$tscale" >/dev/null 2>>rec.err || { cat rec.err >&2; exit 1; }; }

record plain train.pb.gz
"$strobe" pgo autofdo -o strobe.afdo train.pb.gz 2>>notes.txt
clang "${flags[@]}" -fprofile-sample-use=strobe.afdo -o afdo "$src"
record dip train_dip.pb.gz
"$strobe" pgo autofdo -o strobe_dip.afdo train_dip.pb.gz 2>>notes_dip.txt
clang "${flags[@]}" "${dip[@]}" -fprofile-sample-use=strobe_dip.afdo -o afdo_dip "$src"
names+=(afdo afdo_dip)
if command -v llvm-bolt >/dev/null; then
  "$strobe" pgo bolt --binary plain -o strobe.fdata train.pb.gz 2>>notes.txt
  # no function splitting: with block counts inferred from sampled addresses (no LBR), moving
  # "cold" blocks out was measured slower on bench/pgo_vm.c than leaving them
  bolt_opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -dyno-stats)
  llvm-bolt plain -o bolt -data=strobe.fdata "${bolt_opts[@]}" >bolt.log 2>&1
  names+=(bolt)
  record afdo_dip train2.pb.gz
  "$strobe" pgo bolt --binary afdo_dip -o strobe2.fdata train2.pb.gz 2>>notes.txt
  llvm-bolt afdo_dip -o afdo_bolt -data=strobe2.fdata "${bolt_opts[@]}" >bolt2.log 2>&1
  names+=(afdo_bolt)
  if command -v perf >/dev/null && command -v perf2bolt >/dev/null &&
     perf record -q -F 4999 -e cpu-clock --no-buildid -o perf.data -- ./plain "$tscale" >/dev/null 2>perf.err &&
     perf2bolt -nl -p perf.data -o perf.fdata plain >p2b.log 2>&1 &&
     llvm-bolt plain -o perf_bolt -data=perf.fdata "${bolt_opts[@]}" >bolt3.log 2>&1; then
    names+=(perf_bolt)
  else notes+=("perf record + perf2bolt -nl failed here: $(tail -q -n1 perf.err p2b.log 2>/dev/null | tr '\n' ' ' | cut -c1-200 || true)"); fi
else notes+=("llvm-bolt is not installed (bolt-16): no BOLT rows"); fi
if command -v create_llvm_prof >/dev/null && [ -s perf.data ]; then
  create_llvm_prof --binary=plain --profile=perf.data --out=perf.afdo --format=text --use_lbr=false >cl.log 2>&1 || true
  if [ -s perf.afdo ] && llvm-profdata show --sample perf.afdo >/dev/null 2>&1; then
    clang "${flags[@]}" -fprofile-sample-use=perf.afdo -o perf_afdo "$src"
    names+=(perf_afdo)
  else notes+=("create_llvm_prof (autofdo $(dpkg-query -W -f='${Version}' autofdo 2>/dev/null)) wrote $(stat -c %s perf.afdo 2>/dev/null || echo 0) bytes from a perf record without LBR (--use_lbr=false): no profile to build with. It needs LBR branch stacks, which this VM does not have (perf stat -e cycles: not supported)"); fi
else notes+=("create_llvm_prof is not installed (Debian: autofdo)"); fi

{
  echo "$(basename "$src") at scale $scale, clang $(clang --version | sed -n 's/.*version \([0-9.]*\).*/\1/p;q'), $(llvm-bolt --version 2>/dev/null | sed -n 's/.*LLVM version \([0-9.]*\).*/BOLT \1/p' | head -1);"
  echo "profiles: \`strobe record -F 4999\` of one run at scale $tscale;"
  echo "plain's: $(grep -h 'autofdo' notes.txt | head -1 | sed 's/.*(\(.*\))/\1/'); $(grep -h 'line 0' notes.txt | head -1 | sed 's/^strobe pgo: //')"
  echo "dip's: $(grep -h 'autofdo' notes_dip.txt | head -1 | sed 's/.*(\(.*\))/\1/'); $(grep -h 'line 0' notes_dip.txt | head -1 | sed 's/^strobe pgo: //')"
  grep -h 'non-empty execution profile' bolt.log 2>/dev/null | sed 's/^/- strobe fdata: /'
  grep -h 'non-empty execution profile' bolt3.log 2>/dev/null | sed 's/^/- perf2bolt fdata: /'
  for x in "${notes[@]}"; do echo "- $x"; done
} >about.md
printf '%s\n' "${names[@]}" >names.txt
echo "$scale" >scale.txt
bash "$root/bench/pgo_rounds.sh" "$w" "$out"
