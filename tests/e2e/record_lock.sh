#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record -e lock` (futex waits summed in the kernel by agent/locks.bpf.c) against the
# truth. build/workloads/lock_contend-nofp (built without frame pointers: the stacks come from the
# unwind tables) has 4 threads queueing on one mutex, each timing its own pthread_mutex_lock,
# and calling uncontended_lock (a mutex nobody else takes) 1000 times a round.
#   delay        delay/nanoseconds under contend_lock within ±10% of the time the workload
#                measured inside pthread_mutex_lock
#   stack        >= 95% of that delay in complete stacks (start_thread;waiter;contend_lock;
#                ...pthread_mutex_lock...)
#   roots        >= 99.9% of all the delay in stacks rooted at _start or clone3 (the first waits
#                of the new process too: its tables are asked for at the wait's start)
#   lock-addr    >= 99% of contend_lock's delay carries lock_addr = the mutex's address
#   uncontended  no sample names uncontended_lock
#   types        the profile's sample types are contentions/count and delay/nanoseconds, and
#                contentions under contend_lock are at least 1 and at most 3 per lock call
#   pid          -p PID on a lock_contend that starts its threads once the recorder is attached:
#                contend_lock's delay within ±10% of its truth
#   all          the same with -a (the whole host), that process's samples (--tagfocus pid)
# Needs root, kernel BTF and the syscalls tracepoints; SKIPs otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads lock_contend-nofp
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP record_lock: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
tp=""
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -e "$d/events/syscalls/sys_enter_futex" ] && tp=$d
done
[ -n "$tp" ] || { echo "SKIP record_lock: no syscalls:sys_enter_futex tracepoint (CONFIG_FTRACE_SYSCALLS)"; exit 0; }
TOL=10
W=$WL/lock_contend-nofp

# ---- delay -------------------------------------------------------------------------------------
name=record_lock/delay
have=0
if ! rec "$name" 60 -e lock -o "$TMPDIR/lk.pb.gz" -- "$W" -o "$TMPDIR/lk.truth" 3; then
	fail "$name" "strobe record -e lock failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/lk.truth" ]; then
	fail "$name" "the workload wrote no truth (was it run?)"
elif ! fold "$TMPDIR/lk.pb.gz" "$TMPDIR/lk.folded" delay; then
	fail "$name" "convert --sample-index delay failed: $(errof "$TMPDIR/lk.folded.err")"
else
	have=1
	got=$(sum "$TMPDIR/lk.folded" '(^|;)contend_lock(;|$)')
	want=$(truth "$TMPDIR/lk.truth" contend_lock)
	detail="contend_lock $(awk -v g="$got" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }') ms, $(ratio_pct "$got" "$want")%)"
	if within_rel "$got" "$want" "$TOL"; then ok "$name" "$detail"; else fail "$name" "off by more than ${TOL}%: $detail"; fi
fi

# ---- stack: complete without frame pointers ----------------------------------------------------
name=record_lock/stack
if [ $have = 1 ]; then
	c=$(complete "$TMPDIR/lk.folded" contend_lock '(^|;)start_thread;waiter;contend_lock;[^;]*pthread_mutex_lock')
	if atleast "$c" 95; then ok "$name" "$c% of contend_lock's delay under start_thread;waiter;contend_lock;...pthread_mutex_lock"
	else fail "$name" "only $c% of contend_lock's delay in complete stacks: $(sort -t' ' -k2 -nr "$TMPDIR/lk.folded" | head -3 | cut -c1-300 | tr '\n' '|')"; fi
fi

# ---- roots: no stack walked before the process's tables were in ----------------------------------
name=record_lock/roots
if [ $have = 1 ]; then
	all=$(sum "$TMPDIR/lk.folded" '.')
	good=$(sum "$TMPDIR/lk.folded" '^(_start|_*clone3?);')
	p=$(ratio_pct "$good" "$all")
	if atleast "$p" 99.9; then ok "$name" "$p% of all delay in stacks rooted at _start or clone3"
	else fail "$name" "only $p% of the delay in stacks rooted at _start or clone3: $(grep -Ev '^(_start|_*clone3?);' "$TMPDIR/lk.folded" | head -3 | cut -c1-200 | tr '\n' '|')"; fi
fi

# ---- lock-addr ---------------------------------------------------------------------------------
name=record_lock/lock-addr
if [ $have = 1 ]; then
	addr=$(truth "$TMPDIR/lk.truth" hot_addr)
	if ! fold "$TMPDIR/lk.pb.gz" "$TMPDIR/lk-addr.folded" delay --tagfocus "lock_addr=^${addr}\$"; then
		fail "$name" "convert --tagfocus lock_addr failed: $(errof "$TMPDIR/lk-addr.folded.err")"
	else
		a=$(sum "$TMPDIR/lk-addr.folded" '(^|;)contend_lock(;|$)')
		all=$(sum "$TMPDIR/lk.folded" '(^|;)contend_lock(;|$)')
		p=$(ratio_pct "$a" "$all")
		if atleast "$p" 99; then ok "$name" "$p% of contend_lock's delay has lock_addr=$addr"
		else fail "$name" "only $p% of contend_lock's delay has lock_addr=$addr"; fi
	fi
fi

# ---- uncontended -------------------------------------------------------------------------------
name=record_lock/uncontended
if [ $have = 1 ]; then
	n=$(grep -c 'uncontended_lock' "$TMPDIR/lk.folded")
	calls=$(truth "$TMPDIR/lk.truth" uncontended_lock_calls)
	if [ "$n" = 0 ] && [ "${calls:-0}" -gt 0 ]; then ok "$name" "no sample under uncontended_lock ($calls calls)"
	else fail "$name" "$n stacks name uncontended_lock ($calls calls)"; fi
fi

# ---- types -------------------------------------------------------------------------------------
name=record_lock/types
if [ $have = 1 ]; then
	if ! fold "$TMPDIR/lk.pb.gz" "$TMPDIR/lk-n.folded" contentions; then
		fail "$name" "no sample type contentions: $(errof "$TMPDIR/lk-n.folded.err")"
	else
		n=$(sum "$TMPDIR/lk-n.folded" '(^|;)contend_lock(;|$)')
		calls=$(truth "$TMPDIR/lk.truth" contend_lock_calls)
		if awk -v n="$n" -v c="$calls" 'BEGIN { exit !(n >= 1 && n <= 3 * c) }'; then
			ok "$name" "contentions/count and delay/nanoseconds; $n contentions under contend_lock for $calls lock calls"
		else fail "$name" "$n contentions under contend_lock for $calls lock calls"; fi
	fi
fi

# ---- pid ---------------------------------------------------------------------------------------
# The workload waits (-g) until the recorder's program is attached to the tracepoint
# (bpftool perf lists the recorder holding sys_enter_futex), so the recording covers its whole run
# and the truth holds.
name=record_lock/pid
rm -f "$TMPDIR/go"
"$W" -t 4 -g "$TMPDIR/go" -o "$TMPDIR/p.truth" 3 & wpid=$!
( rec "$name" 60 -e lock -p "$wpid" -o "$TMPDIR/p.pb.gz"; echo $? >"$TMPDIR/p.rc" ) &
for _ in $(seq 600); do
	bpftool perf show 2>/dev/null | grep -q sys_enter_futex && break
	sleep 0.05
done
touch "$TMPDIR/go"
wait
prc=$(cat "$TMPDIR/p.rc" 2>/dev/null || echo none)
if [ "$prc" != 0 ]; then
	fail "$name" "strobe record -e lock -p failed (exit $prc): $(recerr "$name")"
elif ! fold "$TMPDIR/p.pb.gz" "$TMPDIR/p.folded" delay; then
	fail "$name" "convert failed: $(errof "$TMPDIR/p.folded.err")"
else
	got=$(sum "$TMPDIR/p.folded" '(^|;)contend_lock(;|$)')
	want=$(truth "$TMPDIR/p.truth" contend_lock)
	detail="contend_lock $(awk -v g="$got" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }') ms, $(ratio_pct "$got" "$want")%)"
	if within_rel "$got" "$want" "$TOL"; then ok "$name" "$detail"; else fail "$name" "off by more than ${TOL}%: $detail"; fi
fi

# ---- all: -a, the whole host, the workload's waits among everyone's ------------------------------
name=record_lock/all
rm -f "$TMPDIR/go"
"$W" -t 4 -g "$TMPDIR/go" -o "$TMPDIR/a.truth" 2 & wpid=$!
( rec "$name" 60 -e lock -a -d 5 -o "$TMPDIR/a.pb.gz"; echo $? >"$TMPDIR/a.rc" ) &
for _ in $(seq 600); do
	bpftool perf show 2>/dev/null | grep -q sys_enter_futex && break
	sleep 0.05
done
touch "$TMPDIR/go"
wait
arc=$(cat "$TMPDIR/a.rc" 2>/dev/null || echo none)
if [ "$arc" != 0 ]; then
	fail "$name" "strobe record -e lock -a failed (exit $arc): $(recerr "$name")"
elif ! fold "$TMPDIR/a.pb.gz" "$TMPDIR/a.folded" delay --tagfocus "pid=^${wpid}\$"; then
	fail "$name" "convert failed: $(errof "$TMPDIR/a.folded.err")"
else
	got=$(sum "$TMPDIR/a.folded" '(^|;)contend_lock(;|$)')
	want=$(truth "$TMPDIR/a.truth" contend_lock)
	detail="contend_lock of pid $wpid $(awk -v g="$got" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }') ms, $(ratio_pct "$got" "$want")%)"
	if within_rel "$got" "$want" "$TOL"; then ok "$name" "$detail"; else fail "$name" "off by more than ${TOL}%: $detail"; fi
fi
exit $st
