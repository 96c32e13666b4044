#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How many recorded stacks are complete: the share of on-CPU samples of user processes whose
# outermost frame is a thread's true root (_start, __libc_start_main, __libc_start_call_main,
# main, start_thread, clone, clone3; and _dl_start_user, the dynamic loader's entry code after
# its _start, which runs the libraries' initializers before the program's _start). Frame-pointer unwinding through code built without frame
# pointers (Debian's glibc and most of its libraries) loses the frames above the first such
# function, and the stack then starts somewhere in the middle.
#
#   scripts/stack_completeness.sh [SECONDS] [-- extra strobe record options]
#
# Runs a busy workload of Debian binaries (gzip, sort, sha256sum, python3, cc1 compiling) and
# samples it system-wide, one after the other, with `strobe record -a --call-graph fp`, `dwarf`
# and `auto`, and with `perf record -a --call-graph fp` and `dwarf` where perf is installed
# (MODES="strobe:auto perf:dwarf" picks some), each for SECONDS at 199 Hz, and prints for each
# the share of complete stacks and the outermost frames of the incomplete ones. Samples of kernel
# threads (stacks rooted in kthread, ret_from_fork, the idle loop) are left out: they have no user
# stack; so are those of strobe and perf themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
shift || true
[ "${1:-}" = "--" ] && shift
strobe=${STROBE:-build/strobe}
work=$(mktemp -d)
# KEEP=DIR keeps the folded profiles and logs there, to look at the incomplete stacks.
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

busy() {
  # the whole run: every mode one after the other (perf script takes as long again)
  local n; n=$(echo ${MODES:-strobe:fp strobe:dwarf strobe:auto perf:fp perf:dwarf} | wc -w)
  local end=$((SECONDS + (secs + 6) * n * 2 + 2))
  printf 'int main(void){return 0;}\n' > "$work/t.c"
  while [ $SECONDS -lt $end ]; do
    head -c 5000000 /dev/urandom | gzip -6 | gzip -dc | sha256sum > /dev/null
    seq 1 200000 | sort -R | sort -n > /dev/null
    /usr/bin/python3 -c 'sum(i*i for i in range(300000))'
    cc -O2 -c -o "$work/t.o" "$work/t.c" 2> /dev/null || true
  done
}
busy & busy &
sleep 1

# Stripped binaries (gzip, sort, ...) have no name for _start: an unnamed root frame within 64
# bytes of its binary's ELF entry point counts as _start ("[gzip+0x3e1a]" from strobe,
# "[gzip <3e19>]" from perf --addrs).
entries=""
for b in gzip sort sha256sum /usr/bin/python3 seq head cc as ld "$(cc -print-prog-name=cc1 2>/dev/null)"; do
  f=$(command -v "$b" 2>/dev/null || true)
  if [ -z "$f" ]; then continue; fi
  f=$(readlink -f "$f")
  e=$(readelf -h "$f" 2>/dev/null | awk '/Entry point/ { print $NF }')
  if [ -z "$e" ]; then continue; fi
  entries+="$(basename "$f")=$e "
  # strobe names an unnamed frame by file offset: the entry point's, through its PT_LOAD
  o=$(readelf -lW "$f" 2>/dev/null | awk -v e="$e" '
    function hex(h,   i, v) { v = 0; h = tolower(h); sub(/^0x/, "", h)
      for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
      return v }
    $1 == "LOAD" && hex($3) <= hex(e) && hex(e) < hex($3) + hex($6) { printf "0x%x", hex(e) - hex($3) + hex($2); exit }')
  if [ -n "$o" ] && [ "$o" != "$e" ]; then entries+="$(basename "$f")@=$o "; fi
done

# summary NAME FOLDED: the share of complete stacks (roots first in each line)
summary() {
  awk -v name="$1" -v entries="$entries" '
  function hex(h,   i, v, c) { v = 0; h = tolower(h); sub(/^0x/, "", h)
    for (i = 1; i <= length(h); i++) { c = index("0123456789abcdef", substr(h, i, 1)); v = v * 16 + c - 1 }
    return v }
  BEGIN { ne = split(entries, es, " "); for (i = 1; i <= ne; i++) { split(es[i], kv, "="); entry[kv[1]] = hex(kv[2]) }
          split("_start _dl_start_user __libc_start_main __libc_start_call_main main start_thread clone clone3", r, " ")
          for (i in r) root[r[i]] = 1
          split("kthread ret_from_fork ret_from_fork_asm secondary_startup_64 start_kernel cpu_startup_entry common_startup_64 x86_64_start_kernel", k, " ")
          for (i in k) kroot[k[i]] = 1 }
  {
    n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
    split(stack, f, ";"); first = f[1]
    if (first in kroot) next
    total += n
    if (!(first in root) && match(first, /^\[[^+ ]+(\+0x| <)[0-9a-f]+>?\]$/)) {
      bin = first; sub(/^\[/, "", bin); sub(/(\+0x| <).*/, "", bin)
      off = first; sub(/^[^+<]*(\+0x|<)/, "", off); sub(/>?\]$/, "", off)
      for (q = 0; q < 2; q++) {
        key = q ? bin "@" : bin
        if ((key in entry) && hex(off) - entry[key] >= 0 && hex(off) - entry[key] < 64) first = "_start"
      }
    }
    if (first in root) ok += n
    else bad[first] += n
  }
  END {
    if (!total) { printf "%-14s no user samples\n", name; exit }
    printf "%-14s complete stacks: %5.1f%% of %.0f user samples\n", name, 100 * ok / total, total
    m = 0
    for (b in bad) top[++m] = sprintf("%6.2f%%  %s", 100 * bad[b] / total, b)
    cmd = "sort -rn | head -4"
    for (i = 1; i <= m; i++) print "                 " top[i] | cmd
    close(cmd)
  }' "$2"
}

# Only the workload'"'"'s own processes: the host may be running anything else meanwhile.
procs='gzip|sort|sha256sum|python3|python3.11|cc|cc1|as|collect2|ld|seq|head'
modes=${MODES:-strobe:fp strobe:dwarf strobe:auto perf:fp perf:dwarf}
for m in $modes; do
  tool=${m%%:*} cg=${m#*:}
  out=$work/$tool-$cg
  if [ "$tool" = strobe ]; then
    STROBE_DEBUG=1 "$strobe" record -a -F 199 -d "$secs" --call-graph "$cg" -o "$out.pb.gz" "$@" \
      2> "$out.log"
    "$strobe" convert -t folded --sample-index samples --tagfocus "process=^($procs)\$" \
      -o "$out.folded" "$out.pb.gz"
  else
    command -v perf > /dev/null || { echo "perf:$cg       perf is not installed"; continue; }
    perf record -q -B -a -F 199 --call-graph "$cg" -o "$out.data" -- sleep "$secs" > "$out.log" 2>&1 ||
      { echo "perf:$cg       perf record failed: $(head -1 "$out.log")"; continue; }
    # "comm;root;...;leaf N": drop the comm, and perf's own samples
    # its values are periods (ns at 199 Hz): made sample counts like strobe's
    perf script -i "$out.data" 2> /dev/null | "$strobe" collapse --addrs | grep -E "^($procs);" |
      sed 's/^[^;]*;//' | awk '{ n = $NF; sub(/ [0-9]+$/, ""); printf "%s %.0f\n", $0, n / (1e9 / 199) }' \
      > "$out.folded"
  fi
  summary "$tool:$cg" "$out.folded"
  [ "$tool" = strobe ] && sed -n 's/^strobe record: \(unwound .*\)/                 (\1)/p' "$out.log"
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.folded "$work"/*.log "$KEEP"/ 2>/dev/null || true; fi
true
