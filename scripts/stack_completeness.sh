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
#   KEEP=DIR: keep the folded profiles and logs; SUMMARY_ONLY=DIR: summarise those again
#   TOP=N: list N outermost frames of the incomplete stacks (4)
#
# Runs a busy workload of Debian binaries (gzip, sort, sha256sum, python3, cc1 compiling) and
# samples it system-wide, one after the other, with `strobe record -a --call-graph fp`, `dwarf`
# and `auto`, and with `perf record -a --call-graph fp` and `dwarf` where perf is installed
# (MODES="strobe:auto perf:dwarf" picks some), each for SECONDS at 199 Hz, and prints for each
# the share of complete stacks and the outermost frames of the incomplete ones. MODES may also
# name agent:auto and agent:fp: `strobe agent --offcpu` (the eBPF off-CPU mode, whose program
# walks user stacks in the kernel: by unwind tables, or frame pointers only) pushing to a
# `strobe server` on loopback for SECONDS, and its off-CPU profile of the workload's processes
# queried back; there the shares are of off-CPU time, not of samples. agentcpu:auto and
# agentcpu:fp are the agent's on-CPU samples (eBPF, 199 Hz) the same way. Samples of kernel
# threads (stacks rooted in kthread, ret_from_fork, the idle loop) are left out: they have no user
# stack; so are those of strobe and perf themselves.
#
# The incomplete stacks are sorted into three kinds, counted the same way for every tool:
#  - no user stack: a user process's sample with nothing of its user stack to walk - its root is
#    a kernel entry point (entry_SYSCALL_64..., asm_exc_...: the kernel gave no user frame), or it
#    was taken while the process's address space was being torn down (__mmput, __mmdrop or
#    exit_mmap under do_exit or execve's begin_new_exec), or in execve past its point of no return
#    (load_elf_binary's work after begin_new_exec: elf_load, setup_arg_pages, create_elf_tables
#    and what they call): the old image's memory is gone, the registers still point into it, and
#    the kernel copies no stack of it. No unwinder can complete these. The second ratio printed
#    leaves them out of the total.
#  - at the depth limit: MAX_STACK (127, the kernel's perf_event_max_stack default, which strobe
#    and perf both apply) frames or more: cut by the limit, not by a failed unwind.
#  - the rest: unwinding failed.
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
# Stripped binaries (gzip, sort, ...) have no name for _start: an unnamed root frame within 64
# bytes of its binary's ELF entry point counts as _start ("[gzip+0x3e1a]" from strobe,
# "[gzip <3e19>]" from perf --addrs).
entries=""
ldso=$(readelf -lW /bin/sh 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
for b in gzip sort sha256sum /usr/bin/python3 seq head cc as ld sh env $ldso "$(cc -print-prog-name=cc1 2>/dev/null)"; do
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
  awk -v name="$1" -v entries="$entries" -v maxstack="${MAX_STACK:-127}" -v what="${3:-user samples}" '
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
    nf = split(stack, f, ";"); first = f[1]
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
    if (first in root) { ok += n; next }
    if (first ~ /^(entry_SYSCALL_64|entry_INT80|asm_|ret_from_fork|do_syscall_64|x64_sys_call)/ ||
        stack ~ /(^|;)(do_exit|begin_new_exec);(.*;)?(__mmput|__mmdrop|exit_mmap)(;|$)/ ||
        stack ~ /;load_elf_binary;(begin_new_exec|setup_new_exec|setup_arg_pages|elf_load|elf_map|set_brk|create_elf_tables|load_elf_interp|finalize_exec|_copy_to_user|strnlen_user|clear_user|padzero|__check_object_size|from_kuid_munged|vm_brk_flags)(;|$)/) {
      nouser += n; first = "(no user stack) " first }
    else if (nf >= maxstack) { capped += n; first = "(depth limit) " first }
    bad[first] += n
  }
  END {
    if (!total) { printf "%-14s no user samples\n", name; exit }
    printf "%-14s complete stacks: %5.1f%% of %.0f %s; %5.1f%% of the %.0f with a user stack\n",
      name, 100 * ok / total, total, what, (total > nouser ? 100 * ok / (total - nouser) : 0), total - nouser
    printf "                 incomplete: %.2f%% no user stack, %.2f%% at the depth limit (%d frames), %.2f%% failed\n",
      100 * nouser / total, 100 * capped / total, maxstack, 100 * (total - ok - nouser - capped) / total
    m = 0
    for (b in bad) top[++m] = sprintf("%6.2f%%  %s", 100 * bad[b] / total, b)
    cmd = "sort -rn | head -" (ENVIRON["TOP"] ? ENVIRON["TOP"] : 4)
    for (i = 1; i <= m; i++) print "                 " top[i] | cmd
    close(cmd)
  }' "$2"
}

# SUMMARY_ONLY=DIR: only the summaries of the folded profiles a run left there with KEEP=DIR.
if [ -n "${SUMMARY_ONLY:-}" ]; then
  for f in "$SUMMARY_ONLY"/*.folded; do
    m=$(basename "$f" .folded); summary "${m/-/:}" "$f"
  done
  exit 0
fi
busy & busy &
sleep 1

# Only the workload'"'"'s own processes: the host may be running anything else meanwhile.
procs='gzip|sort|sha256sum|python3|python3.11|cc|cc1|as|collect2|ld|seq|head'
modes=${MODES:-strobe:fp strobe:dwarf strobe:auto perf:fp perf:dwarf}
for m in $modes; do
  tool=${m%%:*} cg=${m#*:}
  out=$work/$tool-$cg
  if [ "$tool" = agent ] || [ "$tool" = agentcpu ]; then
    port=$((20000 + RANDOM % 20000))
    "$strobe" server --data "$work/srv-$tool-$cg" --listen "127.0.0.1:$port" > "$out.srv.log" 2>&1 &
    spid=$!
    sleep 1
    t0=$(date +%s)
    if [ "$tool" = agent ]; then
      args=(--offcpu --off-cpu-mode bpf) type=process_cpu:off_cpu:nanoseconds:cpu:nanoseconds
    else # on-CPU samples at the rate the recordings use, summed in the kernel
      args=(-F 199 --on-cpu-mode bpf) type=process_cpu:cpu:nanoseconds:cpu:nanoseconds
    fi
    "$strobe" agent --server "http://127.0.0.1:$port" "${args[@]}" -i 2 \
      --call-graph "$cg" --max-cpu 100 --admin 127.0.0.1:0 --log-level warn > "$out.log" 2>&1 &
    apid=$!
    sleep "$secs"
    kill -TERM "$apid"; wait "$apid" || true
    "$strobe" query -s "http://127.0.0.1:$port" -t folded --from "$t0" --to "$(($(date +%s) + 1))" \
      "$type{comm=~\"^($procs)\$\"}" 2>> "$out.log" |
      awk -v tool="$tool" '{ n = $NF; sub(/ [0-9]+$/, ""); printf "%s %.3f\n", $0, tool == "agent" ? n / 1e6 : n / (1e9 / 199) }' > "$out.folded"
    kill "$spid"; wait "$spid" 2>/dev/null || true
    if [ "$tool" = agent ]; then summary "$tool:$cg" "$out.folded" "ms off CPU"; else summary "$tool:$cg" "$out.folded"; fi
    continue
  elif [ "$tool" = strobe ]; then
    STROBE_DEBUG=1 "$strobe" record -a -F 199 -d "$secs" --call-graph "$cg" -o "$out.pb.gz" "$@" \
      2> "$out.log"
    "$strobe" convert -t folded --sample-index samples --tagfocus "process=^($procs)\$" \
      -o "$out.folded" "$out.pb.gz"
  else
    command -v perf > /dev/null || { echo "perf:$cg       perf is not installed"; continue; }
    perf record -q -B -a -F 199 --call-graph "$cg" -o "$out.data" -- sleep "$secs" > "$out.log" 2>&1 ||
      { echo "perf:$cg       perf record failed: $(head -1 "$out.log")"; continue; }
    # Debian's perf 6.1 now and then aborts in its own build-id code: tried twice, then reported
    perf script -i "$out.data" > "$out.script" 2> /dev/null ||
      perf script -i "$out.data" > "$out.script" 2> /dev/null ||
      { echo "perf:$cg       perf script crashed twice (perf itself): no result"; continue; }
    # "comm;root;...;leaf N": drop the comm, and perf's own samples
    # its values are periods (ns at 199 Hz): made sample counts like strobe's
    "$strobe" collapse --addrs "$out.script" | { grep -E "^($procs);" || true; } |
      sed 's/^[^;]*;//' | awk '{ n = $NF; sub(/ [0-9]+$/, ""); printf "%s %.0f\n", $0, n / (1e9 / 199) }' \
      > "$out.folded"
  fi
  summary "$tool:$cg" "$out.folded"
  [ "$tool" = strobe ] && sed -n 's/^strobe record: \(unwound .*\)/                 (\1)/p' "$out.log"
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.folded "$work"/*.log "$KEEP"/ 2>/dev/null || true; fi
true
