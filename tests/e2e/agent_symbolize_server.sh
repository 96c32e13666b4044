#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent --symbolize server: user frames leave the host as addresses with their build IDs
# and the server names them from its debug-info store.
#   A stripped copy of build/workloads/cpu_split runs under the agent (service "ssym"); its
#   separate debug file is uploaded to the server. A query of the service gives burn_60/30/10
#   within 4 points of the CPU each thread measured, under thread_main;run_rounds — named by the
#   server, since the stripped binary has nothing on the host to name them with; and the
#   queried pprof's mapping carries the binary's build ID, which the agent read from the file.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_symbolize_server cpu_split
command -v objcopy >/dev/null && command -v strip >/dev/null ||
	{ echo "SKIP agent_symbolize_server: objcopy/strip are not installed (binutils)"; exit 0; }
kill_at_exit apid pid w
SECS=${AGENT_SYM_SECONDS:-15}
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
mkdir -p "$TMPDIR/bin"
cp "$WL/cpu_split" "$TMPDIR/bin/cpu_split" && strip "$TMPDIR/bin/cpu_split" &&
	objcopy --only-keep-debug "$WL/cpu_split" "$TMPDIR/cpu_split.debug" ||
	{ fail agent_symbolize_server/build "cannot make the stripped copy"; exit 1; }

start_server
out=$("$STROBE" debuginfo upload --server "$url" "$TMPDIR/cpu_split.debug" 2>&1) ||
	fail agent_symbolize_server/upload "$out"
t0=$(date +%s)
start_agent "$TMPDIR/agent.log" --symbolize server -F 299 -i 3 --max-cpu 100 --comm '^cpu_split$'
sleep 1
STROBE_SERVICE=ssym "$TMPDIR/bin/cpu_split" -o "$TMPDIR/truth" "$SECS" & w=$!
wait $w; w=
sleep 0.5
stop_agent || fail agent_symbolize_server/stop "status $?: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))

qfolded "$CPU{service_name=\"ssym\"}" "$t0" "$t1" "$TMPDIR/q.folded" ||
	{ fail agent_symbolize_server/query "$(errof "$TMPDIR/q.folded.err")"; exit 1; }
detail= bad=
s=$(shares "$TMPDIR/q.folded" burn_60 burn_30 burn_10)
for fn in burn_60 burn_30 burn_10; do
	got=$(pct "$s" "$fn"); want=$(truth_share "$TMPDIR/truth" "$fn")
	c=$(complete "$TMPDIR/q.folded" "$fn" ";thread_main;run_rounds;$fn(;|\$)")
	detail+="$fn ${got}% (truth ${want}%, ${c}% under thread_main;run_rounds) "
	within_pp "$got" "$want" 4 || bad+="$fn share; "
	atleast "$c" 99 || bad+="$fn stacks; "
done
if [ -z "$bad" ]; then ok agent_symbolize_server/named-by-server "$detail"
else fail agent_symbolize_server/named-by-server "$bad: $detail"; fi

bid=$(readelf -n "$TMPDIR/cpu_split.debug" 2>/dev/null | awk '/Build ID/ {print $3}')
"$STROBE_FAST" query -s "$url" -f pprof --from "$t0" --to "$t1" -o "$TMPDIR/q.pb.gz" "$CPU{service_name=\"ssym\"}" 2>/dev/null
if command -v go >/dev/null && go tool pprof -raw "$TMPDIR/q.pb.gz" 2>/dev/null | grep -q "$bid"; then
	ok agent_symbolize_server/build-id "the mapping carries the binary's build ID $bid"
elif ! command -v go >/dev/null; then skip agent_symbolize_server/build-id "go is not installed"
else fail agent_symbolize_server/build-id "no mapping with build ID $bid in the queried pprof"; fi
exit $st
