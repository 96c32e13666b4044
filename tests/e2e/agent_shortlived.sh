#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A process shorter than one of the agent's intervals is labelled by its own identity. cpu_split
# runs for 1.2 s with STROBE_SERVICE=brief while the agent exports every 5 s: by the interval's
# end the process, and the environment that names it, are gone, so the agent must have read its
# identity when it first saw it sampled.
#   service   the store holds the CPU it used under service_name="brief", with its pid, and
#             nothing of that pid under another service (its executable's name, cpu_split, is
#             what an identity read after its exit gives)
#   cpu       what the store holds for it is the CPU the workload measured itself, within 35 %
#             (at 299 Hz, about 350 samples of 1.2 s of CPU)
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_shortlived cpu_split
kill_at_exit apid pid wpid
need_perf_events
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

start_server
t0=$(date +%s)
start_agent "$TMPDIR/agent.log" -F 299 -i 5 --max-cpu 100 --comm '^cpu_split$'
sleep 1
STROBE_SERVICE=brief "$WL/cpu_split" -t 0 -o "$TMPDIR/cpu.truth" 1.2 & wpid=$!
wpidv=$wpid
wait "$wpid"; wpid=
# the interval that holds it ends after the process: wait for two exports past its exit
i0=$(status_field export.intervals)
for _ in $(seq 150); do [ "$(status_field export.intervals)" -ge $((i0 + 2)) ] 2>/dev/null && break; sleep 0.1; done
stop_agent || fail agent_shortlived/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))

lv() { # LABEL SELECTOR: the label's values over the run, one per line
	curl -s -G "$url/api/v1/label/$1/values" --data-urlencode "query=$2" \
		--data-urlencode "from=$t0" --data-urlencode "to=$t1" | grep -o '"[^"]*"' | tr -d '"' | grep -v '^data$\|^status$\|^success$'
}
name=agent_shortlived/service
svcs=$(lv service_name "$CPU{pid=\"$wpidv\"}" | sort -u | tr '\n' ' ')
pids=$(lv pid "$CPU{service_name=\"brief\"}" | tr '\n' ' ')
if [ "$svcs" != "brief " ]; then
	fail "$name" "pid $wpidv is stored under service(s) '${svcs% }', want brief alone (agent log: $(errof "$TMPDIR/agent.log"))"
elif [ "$pids" != "$wpidv " ]; then
	fail "$name" "service brief holds pid(s) '${pids% }', want $wpidv"
else
	ok "$name" "pid $wpidv, 1.2 s long, stored as service_name=brief"
fi

name=agent_shortlived/cpu
if ! qfolded "$CPU{service_name=\"brief\"}" "$t0" "$t1" "$TMPDIR/brief.folded"; then
	fail "$name" "query failed: $(errof "$TMPDIR/brief.folded.err")"
else
	got=$(awk '{ s += $NF } END { printf "%.0f", s }' "$TMPDIR/brief.folded")
	want=$(truth "$TMPDIR/cpu.truth" process_cpu_ns)
	if within_rel "${got:-0}" "${want:-0}" 35; then
		ok "$name" "$(awk -v g="$got" 'BEGIN { printf "%.0f", g / 1e6 }') ms stored, $(awk -v w="$want" 'BEGIN { printf "%.0f", w / 1e6 }') ms measured by the workload"
	else
		fail "$name" "$(awk -v g="${got:-0}" 'BEGIN { printf "%.0f", g / 1e6 }') ms stored under brief, the workload measured $(awk -v w="${want:-0}" 'BEGIN { printf "%.0f", w / 1e6 }') ms"
	fi
fi
exit $st
