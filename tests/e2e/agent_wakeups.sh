#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How often strobe agent's threads wake up in the steady state, server down, counted by the
# kernel (voluntary context switches of every thread, /proc/PID/task/*/status): the agent's
# own CPU beside many processes is mostly fixed costs per wakeup, not per sample.
#   wakeups  --on-cpu-mode bpf -F 99 -i 2 with -p on a busy build/workloads/cpu_split, pushing
#            to a port nothing listens on (every push fails: the sender backs off), over 10 s
#            from its steady state on: its threads other than the sampling loop (the main thread)
#            sleep fewer than 5 times a second together. The unwind tables' loader sleeps until
#            its next scan (1 a second; it polled its ring every 100 ms before), the sender sleeps
#            through its backoff in one wait (it woke every 50 ms before: 20 a second while the
#            server was down), the admin server waits for requests.
#   loop     over the same 10 s, the sampling loop (the main thread) sleeps fewer than 3 times a
#            second: with the samples summed in the kernel it sleeps until the next export (every
#            2 s), a new process or a request, where it woke every 100 ms (10 a second) to look
#            for new processes. The window holds no /status request, which would wake it.
# Needs root and kernel BTF; SKIPs otherwise.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_wakeups cpu_split
name=agent_wakeups/wakeups
[ "$(id -u)" = 0 ] || { skip "$name" "needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { skip "$name" "no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
kill_at_exit apid tpid
st=0
"$WL/cpu_split" -o "$TMPDIR/truth" 60 >/dev/null 2>&1 & tpid=$!
url=http://127.0.0.1:9 # discard: nothing listens there
start_agent "$TMPDIR/agent.log" --on-cpu-mode bpf -F 99 -i 2 --max-cpu 100 --no-preload -p "$tpid"
# voluntary context switches of the agent's threads other than the main one (ARG: other), or of
# the main one (ARG: main)
sleeps() {
	local t s=0 n
	for t in /proc/"$apid"/task/*; do
		if [ "$1" = main ] && [ "${t##*/}" != "$apid" ]; then continue; fi
		if [ "$1" = other ] && [ "${t##*/}" = "$apid" ]; then continue; fi
		n=$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)
		s=$((s + ${n:-0}))
	done
	echo "$s"
}
# past the program's load and the first failed pushes: the steady state
for ((i = 0; i < 200; i++)); do
	[ "$(status_field oncpu.mode)" = bpf ] && [ "$(status_field push.failed)" -gt 0 ] 2>/dev/null && break
	sleep 0.1
done
if [ "$(status_field oncpu.mode)" != bpf ]; then
	skip "$name" "the eBPF on-CPU program did not load: $(status_field oncpu.fallback)"
	exit 0
fi
sleep 2
s0=$(sleeps other) m0=$(sleeps main) t0=$(date +%s%N)
sleep 10
s1=$(sleeps other) m1=$(sleeps main) t1=$(date +%s%N)
failed=$(status_field push.failed)
per_s=$(awk -v a="$s0" -v b="$s1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", (b - a) / ((t1 - t0) / 1e9) }')
detail="$((s1 - s0)) sleeps of the other threads (the sampling loop: $((m1 - m0))) in $(awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", (t1 - t0) / 1e9 }') s ($per_s a second), $failed pushes failed"
if ! [ "${failed:-0}" -gt 0 ] 2>/dev/null; then fail "$name" "no push failed: the sender never backed off ($detail)"
elif awk -v p="$per_s" 'BEGIN { exit !(p >= 5) }'; then fail "$name" "$detail; want under 5 a second"
else ok "$name" "$detail"; fi
loop_s=$(awk -v a="$m0" -v b="$m1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", (b - a) / ((t1 - t0) / 1e9) }')
if awk -v p="$loop_s" 'BEGIN { exit !(p >= 3) }'; then
	fail agent_wakeups/loop "the sampling loop slept $((m1 - m0)) times in 10 s ($loop_s a second); want under 3"
else
	ok agent_wakeups/loop "the sampling loop slept $((m1 - m0)) times in 10 s ($loop_s a second; exports every 2 s)"
fi
stop_agent || fail "agent_wakeups/stop" "the agent exited with status $? on SIGTERM: $(tail -3 "$TMPDIR/agent.log" | tr '\n' ' ')"
exit $st
