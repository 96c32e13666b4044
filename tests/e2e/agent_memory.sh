#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's peak memory (issue 23's goal): `strobe agent --symbolize server` profiling 200
# processes keeps its peak resident set (VmHWM, read from the agent's own /proc/PID/status)
# within AGENT_RSS_BOUND_KB (15360: 15 MB), start-up included, while it does its work: every
# one of the 200 tracked, profiles pushed and acknowledged (its /status), profiles of them in
# the store. The 200 are small programs built here (burn 1 ms of CPU, sleep 200 ms, niced), all
# children of one parent given with -p, so that what else runs on a busy host (compilers, JVMs:
# their unwind tables) is not what is measured.
#   What it guards: the on-CPU eBPF object loaded by a short-lived child (agent/bpf_load.c; in
#   the agent, libbpf's copy of the kernel BTF is an 11.6 MB transient: a peak near 18 MB), and
#   libssh2 kept from initialising libcrypto (net/curl_lazy.c: 1.5 MB for as long as it runs),
#   and the symbolizer's renewal (agent/agent.c; every 30 min by default, here every 3 s by
#   --symbolizer-renew 3): at least 2 renewals after the 200 are tracked are part of the run,
#   counted by the agent's /status (export.symbolizer_renewals).
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_memory
[ -r /sys/kernel/btf/vmlinux ] ||
	{ echo "SKIP agent_memory: no kernel BTF (the on-CPU eBPF program needs it)"; exit 0; }
command -v cc >/dev/null || { echo "SKIP agent_memory: no C compiler to build the workload"; exit 0; }
kill_at_exit apid pid par
BOUND=${AGENT_RSS_BOUND_KB:-15360}
N=200 SECS=${AGENT_MEMORY_SECONDS:-50}
cat >"$TMPDIR/memspin.c" <<'C'
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
	double end = now() + atoi(argv[1]);
	struct timespec nap = {0, 200000000};
	while (now() < end) {
		double t = now() + 0.001;
		while (now() < t) sink++;
		nanosleep(&nap, NULL);
	}
	return 0;
}
C
cc -O1 -fno-omit-frame-pointer -o "$TMPDIR/memspin" "$TMPDIR/memspin.c" ||
	{ fail agent_memory/build "cannot build the workload"; exit 1; }

start_server
# The parent waits for the agent before it starts the 200: -p PID follows its children from
# their fork on.
mkfifo "$TMPDIR/go"
bash -c "read -r _ <'$TMPDIR/go'; for i in \$(seq $N); do nice -n 19 '$TMPDIR/memspin' $SECS & done; wait" &
par=$!
RENEW=${AGENT_MEMORY_RENEW:-3}
start_agent "$TMPDIR/agent.log" --symbolize server -F 19 -i 2 --max-cpu 100 -p "$par" \
	--symbolizer-renew "$RENEW"
echo go >"$TMPDIR/go"
# Until it has tracked the 200 and had 3 pushes acknowledged and 2 renewals of its symbolizer
# after that (a deadline, no fixed sleep: a busy host starts 200 processes slowly).
tracked=0 pushed=0 renewed=0 base= rbase=
deadline=$(($(date +%s) + 45))
while [ "$(date +%s)" -lt "$deadline" ]; do
	js=$(curl -sf "$admin/status") # one read for the three fields
	tracked=$(jqpath samples.processes_tracked <<<"$js")
	pushed=$(jqpath export.intervals <<<"$js")
	renewed=$(jqpath export.symbolizer_renewals <<<"$js")
	if [ "${tracked:-0}" -ge "$N" ] && [ -z "$base" ]; then base=${pushed:-0} rbase=${renewed:-0}; fi
	[ -n "$base" ] && [ "${pushed:-0}" -ge $((base + 3)) ] && [ "${renewed:-0}" -ge $((rbase + 2)) ] && break
	kill -0 "$apid" 2>/dev/null || break
	sleep 0.1
done
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$apid/status" 2>/dev/null)
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$apid/status" 2>/dev/null)
failed=$(status_field push.failed)
t1=$(($(date +%s) + 1))
stop_agent || fail agent_memory/stop "status $?: $(errof "$TMPDIR/agent.log")"
pkill -P "$par" 2>/dev/null # (its children: the 200, by their parent's pid)
kill "$par" 2>/dev/null
par=

# the agent did its work: all tracked, pushes acknowledged, the 200's profiles stored
if [ "${tracked:-0}" -lt "$N" ] || [ -z "$base" ] || [ "${pushed:-0}" -lt $((base + 3)) ]; then
	fail agent_memory/work "tracked ${tracked:-?} of $N processes, ${pushed:-?} intervals exported (${failed:-?} pushes failed) within 45 s: $(errof "$TMPDIR/agent.log")"
	exit 1
fi
# the symbolizer was renewed while the 200 were tracked: its peak is in VmHWM
if [ "${renewed:-0}" -lt $((${rbase:-0} + 2)) ]; then
	fail agent_memory/renewal "$((${renewed:-0} - ${rbase:-0})) renewals of the symbolizer (every $RENEW s) after the $N were tracked, want 2, within 45 s: $(errof "$TMPDIR/agent.log")"
	exit 1
fi
qfolded 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="memspin"}' $((t1 - 120)) "$t1" "$TMPDIR/q.folded" ||
	{ fail agent_memory/query "$(errof "$TMPDIR/q.folded.err")"; exit 1; }
stored=$(awk '{ n += $NF } END { printf "%.0f\n", n / 1e6 }' "$TMPDIR/q.folded") # ms
[ "$stored" -gt 0 ] || fail agent_memory/work "no CPU time of the workload in the store"

detail="VmHWM ${hwm:-?} kB (bound $BOUND kB), VmRSS at the end ${rss:-?} kB, $tracked processes tracked, $pushed intervals exported, $renewed renewals of the symbolizer ($((renewed - rbase)) with the $N tracked), $stored ms of their CPU stored"
if [ -n "$hwm" ] && [ "$hwm" -le "$BOUND" ]; then ok agent_memory/peak-200-processes "$detail"
else fail agent_memory/peak-200-processes "$detail"; fi
exit $st
