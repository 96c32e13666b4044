#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes a large program with a 100 MB+ separate debug file for bench/symbolize_big.sh (no
# Debian -dbgsym package is reachable from the build machines): TUS translation units of NF
# functions and NS record types each (bench/gen_bigdebug.awk), compiled with -g (OPT, default
# -O0: about 0.3 MB of function DWARF per CPU second here, three times what -O2 gives, while
# keeping the inlined frames: the helpers are always_inline; types come at about 6 MB a
# second), linked, and split into big.stripped and big.debug. About a CPU-minute with the
# defaults (100 MB+ of DWARF, 20,000 functions). Kept under build/bench/bigdebug/ and reused
# while the generator and settings are the same.
#   bench/gen_bigdebug.sh         TUS=50 NF=400 NS=1500 OPT=-O0 JOBS=2
set -euo pipefail
cd "$(dirname "$0")/.."
tus=${TUS:-50} nf=${NF:-400} ns=${NS:-1500} opt=${OPT:--O0} jobs=${JOBS:-2}
out=build/bench/bigdebug
key="$tus $nf $ns $opt $(sha1sum bench/gen_bigdebug.awk bench/gen_bigdebug.sh | awk '{print $1}' | tr '\n' ' ')"
if [ -s $out/big.debug ] && [ "$(cat $out/key 2>/dev/null)" = "$key" ]; then exit 0; fi
rm -rf $out && mkdir -p $out
for ((t = 0; t < tus; t++)); do awk -v tu=$t -v nf="$nf" -v ns="$ns" -f bench/gen_bigdebug.awk >$out/t$t.c; done
{
  echo '#include <stdint.h>'
  echo '#include <stdio.h>'
  for ((t = 0; t < tus; t++)); do echo "struct big_$t; int64_t fn_${t}_0(struct big_$t *s, int64_t x);"; done
  echo 'int main(int argc, char **argv) { int64_t r = 0; (void)argv;'
  echo '  if (argc > 1000) /* never: the program is only symbolized, but keeps every unit linked */'
  for ((t = 0; t < tus; t++)); do echo "    r += fn_${t}_0(0, argc);"; done
  echo '  printf("%lld\n", (long long)r); return 0; }'
} >$out/main.c
seq 0 $((tus - 1)) | xargs -P "$jobs" -I{} cc $opt -g -fno-eliminate-unused-debug-types -c -o $out/t{}.o $out/t{}.c
cc $opt -g -Wl,--build-id -o $out/big $out/main.c $out/t*.o
objcopy --only-keep-debug $out/big $out/big.debug
cp $out/big $out/big.stripped && strip $out/big.stripped
rm -f $out/t*.o $out/t*.c
echo "$key" >$out/key
