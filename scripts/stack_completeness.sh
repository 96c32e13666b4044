#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How many recorded stacks are complete: the share of on-CPU samples of user processes whose
# outermost frame is a thread's true root (_start, __libc_start_main, __libc_start_call_main,
# main, start_thread, clone, clone3). Frame-pointer unwinding through code built without frame
# pointers (Debian's glibc and most of its libraries) loses the frames above the first such
# function, and the stack then starts somewhere in the middle.
#
#   scripts/stack_completeness.sh [SECONDS] [-- extra strobe record options]
#
# Runs a busy workload of Debian binaries (gzip, sort, sha256sum, python3, cc1 compiling) while
# `strobe record -a` samples it, and prints the share overall and per process. Samples of kernel
# threads (stacks rooted in kthread, ret_from_fork, the idle loop) are left out: they have no user
# stack.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
[ "${1:-}" = "--" ] && shift
strobe=${STROBE:-build/strobe}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

busy() {
  local end=$((SECONDS + secs + 2))
  printf 'int main(void){return 0;}\n' > "$work/t.c"
  while [ $SECONDS -lt $end ]; do
    head -c 5000000 /dev/urandom | gzip -6 | gzip -dc | sha256sum > /dev/null
    seq 1 200000 | sort -R | sort -n > /dev/null
    command -v python3 > /dev/null && python3 -c 'sum(i*i for i in range(300000))'
    cc -O2 -c -o "$work/t.o" "$work/t.c" 2> /dev/null || true
  done
}
busy & busy &
sleep 1
"$strobe" record -a -F 499 -d "$secs" -q -o "$work/r.pb.gz" "$@"
"$strobe" convert -t folded --sample-index samples --tagignore 'process=^strobe$' \
  -o "$work/r.folded" "$work/r.pb.gz"
awk '
  BEGIN { split("_start __libc_start_main __libc_start_call_main main start_thread clone clone3", r, " ")
          for (i in r) root[r[i]] = 1
          split("kthread ret_from_fork ret_from_fork_asm secondary_startup_64 start_kernel cpu_startup_entry common_startup_64 x86_64_start_kernel", k, " ")
          for (i in k) kroot[k[i]] = 1 }
  {
    n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
    split(stack, f, ";"); first = f[1]
    if (first in kroot) next
    total += n
    if (first in root) ok += n
    else bad[first] += n
  }
  END {
    if (!total) { print "no user samples"; exit 1 }
    printf "complete stacks: %.1f%% of %d user samples\n", 100 * ok / total, total
    printf "outermost frames of the incomplete ones (top 8):\n"
    for (b in bad) printf "  %6.2f%%  %s\n", 100 * bad[b] / total, b | "sort -rn | head -8"
  }' "$work/r.folded"
