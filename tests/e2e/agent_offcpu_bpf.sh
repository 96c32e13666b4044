#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's in-kernel off-CPU collection (--off-cpu-mode bpf, agent/offcpu.bpf.c), through
# a real server:
#   mode      /status says sampling.offcpu_mode "bpf" and the kernel program counted intervals;
#             --off-cpu-mode perf says "perf" (the other path really is another one)
#   truth     build/workloads/offcpu_block (sleeps, mutex waits, pipe reads that it measures
#             itself), started as a child of the -p target after the agent: the off_cpu query
#             gives each site's blocked time within ±10% of the truth (so the pid filter
#             followed the fork, and the stacks were named through the user-space symbolizer)
#   blocked   the same sites' blocked time (off-CPU less the run-queue wait after the wake-up,
#             which the program takes from the scheduler's sched_info) within ±10% of the
#             truth too, and not above their off-CPU time
#   alternate build/workloads/offcpu_alternate, a second child of the target: one thread blocking
#             turn about at two sites whose stacks differ only two frames up (same ip, sp, bp
#             and innermost frame record at each switch-out): each site's blocked time within
#             ±10% of its truth, so the kernel's reuse of a thread's last user stack
#             (user_stack_key) did not give one site's time to the other
#   long      a third child sleeping 3 s a round while the agent exports every 2 s: each sleep
#             spans a rotation of the stack maps or two, so its stacks must have been saved
#             from the switch-out records (the task iterator off_threads) before their map was
#             cleared; its blocked time within ±10% of the truth
#   filter    a second offcpu_block that is not under the -p target is not in the store
#   counters  no intervals or stacks dropped for full maps, no stacks missing
# Needs root and kernel BTF (/sys/kernel/btf/vmlinux); SKIPs otherwise.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_offcpu_bpf offcpu_block offcpu_alternate
[ "$(id -u)" = 0 ] || { echo "SKIP agent_offcpu_bpf: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP agent_offcpu_bpf: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
kill_at_exit apid pid tpid opid
SECS=${AGENT_BPF_SECONDS:-8}
OFF='process_cpu:off_cpu:nanoseconds:cpu:nanoseconds'

start_server

# ---- mode: perf is another path -------------------------------------------------------------
start_agent "$TMPDIR/perf.log" --offcpu --off-cpu-mode perf -i 1 --max-cpu 100 --comm '^nothing$'
m=$(status_field sampling.offcpu_mode)
stop_agent
[ "$m" = perf ] && ok agent_offcpu_bpf/perf-mode "offcpu_mode $m" ||
	fail agent_offcpu_bpf/perf-mode "/status says offcpu_mode '$m', not perf"

# ---- truth, through a -p target whose child is the workload ---------------------------------
# The target: a shell that waits until the agent is up, then runs the workload as its child.
bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done
	STROBE_SERVICE=bpfalt "$5" -o "$6" "$4" &
	STROBE_SERVICE=bpflong "$2" -s 3000 -o "$7" "$4" &
	STROBE_SERVICE=bpftruth "$2" -o "$3" "$4"; wait' \
	_ "$TMPDIR/go" "$WL/offcpu_block" "$TMPDIR/off.truth" "$SECS" "$WL/offcpu_alternate" "$TMPDIR/alt.truth" \
	"$TMPDIR/long.truth" & tpid=$!
t0=$(date +%s)
start_agent "$TMPDIR/agent.log" --offcpu --off-cpu-mode bpf -F 19 -i 2 --max-cpu 100 -p "$tpid"
name=agent_offcpu_bpf/mode
m=$(status_field sampling.offcpu_mode)
if [ "$m" != bpf ]; then
	fail "$name" "/status says offcpu_mode '$m', not bpf: $(errof "$TMPDIR/agent.log")"
	exit 1
fi
# an unrelated process blocking the same way, outside the target
STROBE_SERVICE=bpfother "$WL/offcpu_block" -o "$TMPDIR/other.truth" "$SECS" & opid=$!
touch "$TMPDIR/go"
wait $tpid $opid
tpid= opid=
sleep 0.5
n=$(status_field offcpu_bpf.intervals)
c_full=$(status_field offcpu_bpf.dropped_stacks_full)
t_full=$(status_field offcpu_bpf.dropped_threads_full)
s_err=$(status_field offcpu_bpf.stack_errors)
missing=$(status_field offcpu_bpf.stacks_missing)
stop_agent || fail agent_offcpu_bpf/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))
if [ "${n:-0}" -gt 0 ] 2>/dev/null; then ok "$name" "offcpu_mode bpf, $n intervals summed in the kernel"
else fail "$name" "offcpu_mode bpf but offcpu_bpf.intervals is '${n:-}'"; fi

name=agent_offcpu_bpf/truth
if offcpu_vs_truth "$OFF{service_name=\"bpftruth\"}" "$t0" "$t1" "$TMPDIR/off.folded" \
	"$TMPDIR/off.truth" site_nanosleep_outer site_mutex_outer site_read_outer; then
	# the kernel part of the stacks is there and starts at the scheduler
	if ! grep -q 'site_read_outer;.*;vfs_read;.*;__schedule ' "$TMPDIR/off.folded"; then
		fail "$name" "no kernel frames down to __schedule under site_read_outer: $(grep -m1 site_read_outer "$TMPDIR/off.folded" | cut -c1-300)"
	else ok "$name" "$detail"; fi
elif [ -n "$bad" ]; then fail "$name" "off by more than 10% for $bad: $detail"
else fail "$name" "$detail"; fi

name=agent_offcpu_bpf/blocked
BLK='process_cpu:blocked:nanoseconds:cpu:nanoseconds'
if offcpu_vs_truth "$BLK{service_name=\"bpftruth\"}" "$t0" "$t1" "$TMPDIR/blk.folded" \
	"$TMPDIR/off.truth" site_nanosleep_outer site_mutex_outer site_read_outer; then
	over=$(awk 'NR == FNR { off += $NF; next } { blk += $NF } END { if (blk > off) print blk - off }' \
		"$TMPDIR/off.folded" "$TMPDIR/blk.folded")
	if [ -n "$over" ]; then fail "$name" "blocked exceeds off_cpu by $over ns"
	else ok "$name" "$detail"; fi
elif [ -n "$bad" ]; then fail "$name" "off by more than 10% for $bad: $detail"
else fail "$name" "$detail"; fi

name=agent_offcpu_bpf/alternate
if offcpu_vs_truth "$OFF{service_name=\"bpfalt\"}" "$t0" "$t1" "$TMPDIR/alt.folded" \
	"$TMPDIR/alt.truth" site_alt_a_outer site_alt_b_outer; then
	ok "$name" "$detail"
elif [ -n "$bad" ]; then fail "$name" "off by more than 10% for $bad: $detail"
else fail "$name" "$detail"; fi

name=agent_offcpu_bpf/long
if offcpu_vs_truth "$OFF{service_name=\"bpflong\"}" "$t0" "$t1" "$TMPDIR/long.folded" \
	"$TMPDIR/long.truth" site_nanosleep_outer; then
	ok "$name" "$detail"
elif [ -n "$bad" ]; then fail "$name" "off by more than 10% for $bad (its stacks lost in a rotation?): $detail"
else fail "$name" "$detail"; fi

name=agent_offcpu_bpf/filter
"$STROBE_FAST" query -s "$url" -t folded --from "$t0" --to "$t1" -o "$TMPDIR/other.folded" \
	"$OFF{service_name=\"bpfother\"}" 2>"$TMPDIR/other.err"
if [ -s "$TMPDIR/other.folded" ]; then
	fail "$name" "a process outside -p $tpid is in the store: $(head -c 200 "$TMPDIR/other.folded")"
elif ! [ -s "$TMPDIR/off.folded" ]; then
	fail "$name" "nothing for the target either"
else
	ok "$name" "the process outside the -p target was not collected"
fi

name=agent_offcpu_bpf/counters
if [ "${c_full:-x}${t_full:-x}${s_err:-x}" != 000 ]; then
	fail "$name" "drops: stacks_full ${c_full:-?}, threads_full ${t_full:-?}, stack_errors ${s_err:-?}"
else
	ok "$name" "no drops; ${missing:-?} stacks missing (threads that woke during a rotation)"
fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit ${st:-0}
