#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent --locks (futex waits summed in the kernel by agent/locks.bpf.c), through a real
# server:
#   on        /status says locks_bpf.on and the kernel program summed waits (beside --offcpu
#             in bpf mode, whose unwind-table maps and loader it shares)
#   truth     build/workloads/lock_contend-nofp (4 threads queueing on one mutex, timing their
#             own waits), started as a child of the -p target after the agent: the server's
#             mutex:delay:nanoseconds series has contend_lock's delay within ±10% of the truth,
#             in complete stacks (start_thread;waiter;contend_lock) without frame pointers
#   types     the pushed types are Pyroscope's mutex:contentions:count and mutex:delay:nanoseconds
#   uncontended  no sample names uncontended_lock
#   pause     while the agent is paused (POST /pause) a second run's waits are not collected
# Needs root, kernel BTF and the syscalls tracepoints; SKIPs otherwise.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_locks_bpf lock_contend-nofp
[ "$(id -u)" = 0 ] || { echo "SKIP agent_locks_bpf: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP agent_locks_bpf: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
[ -e /sys/kernel/tracing/events/syscalls/sys_enter_futex ] || [ -e /sys/kernel/debug/tracing/events/syscalls/sys_enter_futex ] ||
	{ echo "SKIP agent_locks_bpf: no syscalls:sys_enter_futex tracepoint (CONFIG_FTRACE_SYSCALLS)"; exit 0; }
kill_at_exit apid pid tpid
SECS=${AGENT_LOCKS_SECONDS:-4}
DELAY='mutex:delay:nanoseconds:contentions:count'
COUNT='mutex:contentions:count:contentions:count'

start_server

# ---- truth, through a -p target whose child is the workload ---------------------------------
bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done
	STROBE_SERVICE=locktruth "$2" -o "$3" "$4"
	while [ ! -e "$5" ]; do sleep 0.05; done
	STROBE_SERVICE=lockpaused "$2" -o "$6" 2' \
	_ "$TMPDIR/go" "$WL/lock_contend-nofp" "$TMPDIR/lk.truth" "$SECS" "$TMPDIR/go2" "$TMPDIR/paused.truth" & tpid=$!
t0=$(date +%s)
# --offcpu too (bpf): the lock program then shares the off-CPU program's unwind-table maps and
# loader (strobe_offcpu_table_maps); record_lock.sh tests the program with its own
start_agent "$TMPDIR/agent.log" --locks --offcpu --off-cpu-mode bpf -F 19 -i 2 --max-cpu 100 -p "$tpid"
name=agent_locks_bpf/on
on=$(status_field locks_bpf.on)
if [ "$on" != true ]; then
	fail "$name" "/status says locks_bpf.on '$on' ($(status_field locks_bpf.why_off)): $(errof "$TMPDIR/agent.log")"
	exit 1
fi
touch "$TMPDIR/go"
while [ ! -s "$TMPDIR/lk.truth" ] && kill -0 "$tpid" 2>/dev/null; do sleep 0.1; done
n=$(status_field locks_bpf.waits)
# ---- pause: the second run's waits are not collected (POST /pause answers once obeyed) -------
curl -sf -X POST "$admin/pause" >/dev/null || fail agent_locks_bpf/pause "POST /pause failed"
touch "$TMPDIR/go2"
wait $tpid
tpid=
curl -sf -X POST "$admin/resume" >/dev/null
sleep 2.5 # one more export
full=$(status_field locks_bpf.dropped_sums_full)
missing=$(status_field locks_bpf.stacks_missing)
stop_agent || fail agent_locks_bpf/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))
if [ "${n:-0}" -gt 0 ] 2>/dev/null; then ok "$name" "$n futex waits summed in the kernel; ${full:-?} dropped for full maps, ${missing:-?} stacks missing"
else fail "$name" "locks_bpf.on but locks_bpf.waits is '${n:-}'"; fi

name=agent_locks_bpf/truth
if ! qfolded "$DELAY{service_name=\"locktruth\"}" "$t0" "$t1" "$TMPDIR/lk.folded"; then
	fail "$name" "query $DELAY failed: $(errof "$TMPDIR/lk.folded.err")"
else
	got=$(sum "$TMPDIR/lk.folded" '(^|;)contend_lock(;|$)')
	want=$(truth "$TMPDIR/lk.truth" contend_lock)
	c=$(complete "$TMPDIR/lk.folded" contend_lock '(^|;)start_thread;waiter;contend_lock;')
	detail="contend_lock $(awk -v g="${got:-0}" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }') ms, $(ratio_pct "$got" "$want")%), $c% in complete stacks"
	if within_rel "${got:-0}" "$want" 10 && atleast "$c" 95; then ok "$name" "$detail"; else fail "$name" "$detail"; fi
fi

name=agent_locks_bpf/types
if qfolded "$COUNT{service_name=\"locktruth\"}" "$t0" "$t1" "$TMPDIR/lkn.folded" && [ -s "$TMPDIR/lkn.folded" ]; then
	ok "$name" "$COUNT: $(sum "$TMPDIR/lkn.folded" '(^|;)contend_lock(;|$)') contentions under contend_lock for $(truth "$TMPDIR/lk.truth" contend_lock_calls) lock calls"
else
	fail "$name" "no $COUNT series: $(errof "$TMPDIR/lkn.folded.err")"
fi

name=agent_locks_bpf/uncontended
if [ -s "$TMPDIR/lk.folded" ] && ! grep -q uncontended_lock "$TMPDIR/lk.folded"; then
	ok "$name" "no sample under uncontended_lock ($(truth "$TMPDIR/lk.truth" uncontended_lock_calls) calls)"
else
	fail "$name" "$(grep -c uncontended_lock "$TMPDIR/lk.folded" 2>/dev/null) stacks name uncontended_lock"
fi

name=agent_locks_bpf/pause
qfolded "$DELAY{service_name=\"lockpaused\"}" "$t0" "$t1" "$TMPDIR/paused.folded"
pv=$(sum "$TMPDIR/paused.folded" '(^|;)contend_lock(;|$)' 2>/dev/null)
if [ ! -s "$TMPDIR/paused.truth" ]; then
	fail "$name" "the paused run did not finish"
elif [ "${pv:-0}" = 0 ]; then
	ok "$name" "no waits collected while paused ($(truth "$TMPDIR/paused.truth" contend_lock_calls) lock calls ran)"
else
	fail "$name" "paused, yet ${pv:-?} ns collected under contend_lock"
fi
exit $st
