#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's stacks through code without frame pointers (docs/record.md, --call-graph auto,
# the default): a real server on loopback, a real agent following a -p target whose children are
# the workloads, with --off-cpu-mode perf (switch-outs with a copy of the user stack, unwound
# with the binaries' tables; the eBPF mode walks user stacks by frame pointers only):
#   cpu      build/workloads/cpu_split-nofp (-O2 -fomit-frame-pointer: no frame pointers at all):
#            the 60/30/10 split within ±3 points of its truth, and >= 99% of each burner's
#            samples under start_thread;thread_main;run_rounds;burn_X
#   offcpu   build/workloads/offcpu_block (its functions keep frame pointers, glibc has none):
#            each blocking function directly above its libc frame (site_nanosleep above
#            nanosleep: a frame-pointer walk skips it) with its off-CPU time within ±10% of the
#            truth
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_unwind cpu_split-nofp offcpu_block
if [ "$(uname -m)" != x86_64 ]; then
	skip agent_unwind "unwinding with tables is implemented for x86-64 only"
	exit 0
fi
kill_at_exit apid pid tpid
SECS=${AGENT_UNWIND_SECONDS:-6}
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
OFF='process_cpu:off_cpu:nanoseconds:cpu:nanoseconds'

start_server
bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done
	STROBE_SERVICE=uwcpu "$2" -o "$3" "$6" &
	STROBE_SERVICE=uwoff "$4" -o "$5" "$6"; wait' \
	_ "$TMPDIR/go" "$WL/cpu_split-nofp" "$TMPDIR/cpu.truth" "$WL/offcpu_block" "$TMPDIR/off.truth" \
	"$SECS" & tpid=$!
t0=$(date +%s)
# --dwarf: functions named as strobe record names them (cpu_split-nofp's burners are
# burn_60.constprop.0 and so on in its symbol table)
start_agent "$TMPDIR/agent.log" --offcpu --off-cpu-mode perf --dwarf -F 499 -i 2 --max-cpu 100 \
	-p "$tpid"
m=$(status_field sampling.offcpu_mode)
[ "$m" = perf ] || fail agent_unwind/mode "/status says offcpu_mode '$m', not perf"
sleep 1 # the sampler is open once the admin port answers; a moment for its first poll
touch "$TMPDIR/go"
wait "$tpid"
tpid=
sleep 0.5
stop_agent || fail agent_unwind/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))

# ---- cpu: no frame pointers anywhere ----------------------------------------------------------
name=agent_unwind/cpu
if ! qfolded "$CPU{service_name=\"uwcpu\"}" "$t0" "$t1" "$TMPDIR/cpu.folded"; then
	fail "$name" "query failed: $(errof "$TMPDIR/cpu.folded.err")"
else
	bad="" detail=""
	split_complete "$TMPDIR/cpu.folded" "$TMPDIR/cpu.truth" 3
	if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
fi

# ---- offcpu: the caller of libc, directly above it --------------------------------------------
name=agent_unwind/offcpu
if ! qfolded "$OFF{service_name=\"uwoff\"}" "$t0" "$t1" "$TMPDIR/off.folded"; then
	fail "$name" "query failed: $(errof "$TMPDIR/off.folded.err")"
else
	bad="" detail=""
	sites_above_libc "$TMPDIR/off.folded" "$TMPDIR/off.truth" 10
	if [ -n "$bad" ]; then
		fail "$name" "not within 10% directly above the libc frame for $bad: $detail; stacks: $(grep -m2 site_ "$TMPDIR/off.folded" | cut -c1-200 | tr '\n' ' ')"
	else ok "$name" "${detail% }"; fi
fi
exit $st
