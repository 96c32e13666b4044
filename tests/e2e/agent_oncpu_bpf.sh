#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's on-CPU samples summed in the kernel (--on-cpu-mode bpf, agent/oncpu.bpf.c),
# through a real server, the target build/workloads/cpu_split (its threads burn 60/30/10 % of
# its CPU, each at many addresses: many distinct stacks):
#   exact     -F 999, an export a second: every sample the program summed (its own counter,
#             /status oncpu.samples) is in the store, no more and no fewer (the samples sample
#             type summed over the service), so the drains lost nothing while the program kept
#             adding (the generation switch and grace period of agent/oncpu.c); none dropped
#   split     the same run's 60/30/10 within ±3 points of what the workload measured
#   overflow  --on-cpu-entries 4 (a map of 4 sums per interval): samples of new stacks were
#             dropped and counted (oncpu.dropped_sums_full > 0, and a warning naming them in
#             the log), and the samples already summed were all delivered (store = summed)
#   verifier  the sampling program is loaded (bpftool prog show) and the verifier processed
#             under half its million-instruction limit; the counts are printed
# Needs root and kernel BTF; SKIPs otherwise.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_oncpu_bpf cpu_split
[ "$(id -u)" = 0 ] || { echo "SKIP agent_oncpu_bpf: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP agent_oncpu_bpf: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
kill_at_exit apid pid tpid
SECS=${AGENT_ONCPU_SECONDS:-6}
SAMPLES='process_cpu:samples:count:cpu:nanoseconds'
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

# run TAG [AGENT ARGS]: cpu_split as service oc$TAG under an agent following it (-p on a shell
# that starts it once the agent is up); /status saved when the workload is over
run() {
	local tag=$1
	shift
	rm -f "$TMPDIR/go"
	mkfifo "$TMPDIR/go"
	# blocked in a read of the fifo until the agent is up, then the workload itself (no child,
	# no polling: every sample of the target pid is the service's)
	STROBE_SERVICE=oc$tag bash -c 'read -r _ <"$1"; exec "$2" -o "$3" "$4"' \
		_ "$TMPDIR/go" "$WL/cpu_split" "$TMPDIR/$tag.truth" "$SECS" & tpid=$!
	t0=$(date +%s)
	start_agent "$TMPDIR/agent-$tag.log" --on-cpu-mode bpf -i 1 --max-cpu 100 "$@" -p "$tpid"
	m=$(status_field oncpu.mode)
	[ "$m" = bpf ] || fail "agent_oncpu_bpf/$tag-mode" "/status says oncpu.mode '$m', not bpf"
	if [ "$tag" = exact ]; then verifier; fi
	echo go >"$TMPDIR/go"
	wait "$tpid"
	tpid=
	curl -sf "$admin/status" >"$TMPDIR/status-$tag.json"
	stop_agent || fail "agent_oncpu_bpf/$tag-stop" "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent-$tag.log")"
	t1=$(($(date +%s) + 1))
}

# stored TAG: the samples of service ocTAG in the store
stored() {
	qfolded "$SAMPLES{service_name=\"oc$1\"}" "$t0" "$t1" "$TMPDIR/$1.samples.folded" || {
		echo "query failed: $(errof "$TMPDIR/$1.samples.folded.err")"
		return
	}
	sum "$TMPDIR/$1.samples.folded" .
}

verifier() {
	local name=agent_oncpu_bpf/verifier
	local f id="" xl="" vi=""
	# the agent's perf-event program (type 7) among its fds: its id, and the verifier's count,
	# which the program fd's fdinfo gives (this bpftool does not print it)
	for f in /proc/"$apid"/fdinfo/*; do
		if grep -q '^prog_type:	7$' "$f" 2>/dev/null; then
			id=$(sed -n 's/^prog_id:\t*//p' "$f")
			vi=$(sed -n 's/^verified_insns:\t*//p' "$f")
			break
		fi
	done
	if [ -z "$id" ]; then fail "$name" "the agent holds no perf_event program"; return; fi
	command -v bpftool >/dev/null &&
		xl=$(bpftool -j prog show id "$id" | sed -n 's/.*"bytes_xlated":\([0-9]*\).*/\1/p')
	if [ -z "$vi" ]; then
		skip "$name" "the kernel does not say how many instructions it verified (fdinfo)"
	elif [ "$vi" -ge 500000 ]; then
		fail "$name" "program $id: $vi instructions processed by the verifier, not under half its limit of 1000000"
	else
		ok "$name" "program $id: $((${xl:-0} / 8)) instructions, $vi processed by the verifier (limit 1000000)"
	fi
}

start_server

# ---- exact, split ------------------------------------------------------------------------
run exact -F 999
summed=$(jqpath oncpu.samples <"$TMPDIR/status-exact.json")
dropped=$(jqpath oncpu.dropped_sums_full <"$TMPDIR/status-exact.json")
got=$(stored exact)
name=agent_oncpu_bpf/exact
if ! [ "${summed:-0}" -gt 500 ] 2>/dev/null; then fail "$name" "the program summed '${summed:-}' samples (want > 500)"
elif [ "$got" != "$summed" ]; then fail "$name" "the store holds $got samples, the program summed $summed"
elif [ "$dropped" != 0 ]; then fail "$name" "$dropped samples dropped for a full map"
else ok "$name" "$summed samples summed in the kernel, $got in the store, none dropped, $(jqpath oncpu.drains <"$TMPDIR/status-exact.json") drains"; fi
name=agent_oncpu_bpf/split
if ! qfolded "$CPU{service_name=\"ocexact\"}" "$t0" "$t1" "$TMPDIR/exact.cpu.folded"; then
	fail "$name" "query failed: $(errof "$TMPDIR/exact.cpu.folded.err")"
else
	bad="" detail=""
	split_complete "$TMPDIR/exact.cpu.folded" "$TMPDIR/exact.truth" 3
	if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
fi

# ---- overflow ------------------------------------------------------------------------------
run overflow -F 499 --on-cpu-entries 4
summed=$(jqpath oncpu.samples <"$TMPDIR/status-overflow.json")
dropped=$(jqpath oncpu.dropped_sums_full <"$TMPDIR/status-overflow.json")
got=$(stored overflow)
name=agent_oncpu_bpf/overflow
if ! [ "${dropped:-0}" -gt 0 ] 2>/dev/null; then fail "$name" "no sample dropped with a map of 4 sums ($(sed -n '/"oncpu"/,/}/p' "$TMPDIR/status-overflow.json" | tr -d ' \n'))"
elif ! grep -q "on-CPU: [0-9]* on-CPU samples of this interval .* were dropped" "$TMPDIR/agent-overflow.log"; then fail "$name" "no warning of the drop in the log: $(tail -3 "$TMPDIR/agent-overflow.log" | tr '\n' ' ')"
elif ! [ "${summed:-0}" -gt 0 ] 2>/dev/null || [ "$got" != "$summed" ]; then fail "$name" "the store holds $got samples, the program summed ${summed:-}"
else ok "$name" "$dropped samples dropped and counted, the $summed summed all in the store"; fi
exit $st
