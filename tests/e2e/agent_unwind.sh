#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's stacks through code without frame pointers (docs/record.md, --call-graph auto,
# the default): a real server on loopback, a real agent following a -p target whose children are
# the workloads, in each off-CPU mode: perf (switch-outs with a copy of the user stack, unwound
# in the agent with the binaries' tables) and bpf, the default (the program walks the stack in
# the kernel by rows made from the same tables, agent/offcpu_tables.c):
#   cpu      build/workloads/cpu_split-nofp (-O2 -fomit-frame-pointer: no frame pointers at all):
#            the 60/30/10 split within ±3 points of its truth, and >= 99% of each burner's
#            samples under start_thread;thread_main;run_rounds;burn_X
#   offcpu   build/workloads/offcpu_block (its functions keep frame pointers, glibc has none):
#            each blocking function directly above its libc frame (site_nanosleep above
#            nanosleep: a frame-pointer walk skips it) with its off-CPU time within ±10% of the
#            truth; with --call-graph fp (bpf mode), site_nanosleep must be missing (that the
#            check can fail)
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


# run MODE NAME [AGENT ARGS]: the two workloads under an agent in off-CPU mode MODE; the checks
# are named agent_unwind/NAME-cpu and NAME-offcpu.
run() {
	local mode=$1 tag=$2
	shift 2
	rm -f "$TMPDIR/go"
	bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done
		STROBE_SERVICE=uwcpu$7 "$2" -o "$3" "$6" &
		STROBE_SERVICE=uwoff$7 "$4" -o "$5" "$6"; wait' \
		_ "$TMPDIR/go" "$WL/cpu_split-nofp" "$TMPDIR/cpu.truth" "$WL/offcpu_block" \
		"$TMPDIR/off.truth" "$SECS" "$tag" & tpid=$!
	t0=$(date +%s)
	# --dwarf: functions named as strobe record names them (cpu_split-nofp's burners are
	# burn_60.constprop.0 and so on in its symbol table)
	start_agent "$TMPDIR/agent-$tag.log" --offcpu --off-cpu-mode "$mode" --on-cpu-mode "$mode" --dwarf -F 499 -i 2 \
		--max-cpu 100 "$@" -p "$tpid"
	m=$(status_field sampling.offcpu_mode)
	[ "$m" = "$mode" ] || fail "agent_unwind/$tag-mode" "/status says offcpu_mode '$m', not $mode"
	m=$(status_field oncpu.mode)
	[ "$m" = "$mode" ] || fail "agent_unwind/$tag-oncpu-mode" "/status says oncpu.mode '$m', not $mode"
	sleep 1 # the sampler is open once the admin port answers; a moment for its first poll
	touch "$TMPDIR/go"
	wait "$tpid"
	tpid=
	sleep 0.5
	curl -sf "$admin/status" >"$TMPDIR/status-$tag.json"
	stop_agent || fail "agent_unwind/$tag-stop" "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent-$tag.log")"
	t1=$(($(date +%s) + 1))
}

# check_cpu TAG: no frame pointers anywhere, the split and whole stacks
check_cpu() {
	local name=agent_unwind/$1-cpu
	if ! qfolded "$CPU{service_name=\"uwcpu$1\"}" "$t0" "$t1" "$TMPDIR/cpu-$1.folded"; then
		fail "$name" "query failed: $(errof "$TMPDIR/cpu-$1.folded.err")"
		return
	fi
	bad="" detail=""
	split_complete "$TMPDIR/cpu-$1.folded" "$TMPDIR/cpu.truth" 3
	if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
}

# check_offcpu TAG [expect-missing]: the caller of libc, directly above it
check_offcpu() {
	local name=agent_unwind/$1-offcpu f=$TMPDIR/off-$1.folded
	if ! qfolded "$OFF{service_name=\"uwoff$1\"}" "$t0" "$t1" "$f"; then
		fail "$name" "query failed: $(errof "$f.err")"
		return
	fi
	bad="" detail=""
	sites_above_libc "$f" "$TMPDIR/off.truth" 10
	if [ "${2:-}" = expect-missing ]; then
		# frame pointers only: glibc's nanosleep has none, so its caller is skipped
		case " $bad " in
		*site_nanosleep*) ok "$name" "site_nanosleep missing above libc, as a frame-pointer walk leaves it" ;;
		*) fail "$name" "site_nanosleep found above libc by a frame-pointer walk: the check cannot fail" ;;
		esac
	elif [ -n "$bad" ]; then
		fail "$name" "not within 10% directly above the libc frame for $bad: $detail; stacks: $(grep -m2 site_ "$f" | cut -c1-200 | tr '\n' ' ')"
	else ok "$name" "${detail% }"; fi
}

start_server
run perf perf
check_cpu perf
check_offcpu perf
run bpf bpf
check_cpu bpf
check_offcpu bpf
tables=$(sed -n '/"unwind_tables"/,/}/p' "$TMPDIR/status-bpf.json" | tr -d ' \n')
# frames stepped by tables in the kernel, and under 1% of the off-CPU time left with a stack
# walked before the process's tables were loaded (the workloads block within a millisecond of
# their exec: those walks are redone once the tables are in, agent/offcpu.bpf.c rewalk)
frames=$(jqpath offcpu_bpf.unwind_tables.frames <"$TMPDIR/status-bpf.json")
without=$(jqpath offcpu_bpf.unwind_tables.time_walked_without_pct <"$TMPDIR/status-bpf.json")
if ! [ "${frames:-0}" -gt 0 ] 2>/dev/null; then
	fail agent_unwind/bpf-tables "no frame stepped by tables: $tables"
elif ! awk -v w="${without:-100}" 'BEGIN { exit !(w < 1) }'; then
	fail agent_unwind/bpf-tables "${without}% of the off-CPU time has a stack walked without the tables: $tables"
else
	ok agent_unwind/bpf-tables "$frames frames stepped by tables in the kernel, ${without}% of the time walked without them: $tables"
fi
run bpf bpffp --call-graph fp
check_offcpu bpffp expect-missing
exit $st
