# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/agent_*.sh: runs `strobe agent` against a `strobe server` on loopback.
# Sourcing it sources record.sh (verdicts, workloads) and server.sh (start_server) too.
#
#   agent_test NAME W...      the prologue every agent test shares: need_workloads W..., a SKIP
#                             NAME line and exit when curl is missing
#   kill_at_exit VAR...       empties these variables now and sets an EXIT trap that kill -9s
#                             the pids they hold at exit (start_server's $pid, start_agent's
#                             $apid, the test's workloads), so no process outlives a test
#   start_agent LOG ARGS...   $STROBE_FAST agent --server $url --admin 127.0.0.1:0 ARGS, stderr
#                             to LOG; waits for its admin port and sets apid and admin (the
#                             admin base URL); FAIL and exit when it does not come up
#   stop_agent                SIGTERM, then waits (the agent pushes its last interval first)
#   status_field PATH         a field of GET /status by key path, e.g. push.pushed
#   qfolded SEL FROM TO OUT   strobe query -t folded of SEL over [FROM, TO) into OUT
#   offcpu_vs_truth SEL FROM TO OUT TRUTH FN...
#                             queries SEL into OUT (qfolded) and compares each FN's off-CPU time
#                             with the workload's own measure in TRUTH, within 10 %; sets detail
#                             (each FN's ms and its truth's, or the query's error) and bad (the
#                             FNs off by more); true when every FN is within
_agent_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=record.sh
. "$_agent_lib/record.sh"
# shellcheck source=server.sh
. "$_agent_lib/server.sh"
# shellcheck source=admin_port.sh
. "$_agent_lib/admin_port.sh"

agent_test() {
	local name=$1
	shift
	need_workloads "$@"
	command -v curl >/dev/null || { echo "SKIP $name: curl is not installed"; exit 0; }
}
kill_at_exit() {
	local v
	_agent_kill_vars="$*"
	for v in "$@"; do printf -v "$v" %s ''; done
	trap '_agent_kill_all' EXIT
}
# The variables are read at exit, not when the trap is set: the pids come later.
_agent_kill_all() {
	local v
	for v in $_agent_kill_vars; do
		[ -n "${!v:-}" ] && kill -9 "${!v}" 2>/dev/null
	done
	return 0
}
start_agent() {
	local log=$1
	shift
	: >"$log" # made here: the background job's redirection may come after the first read below
	"$STROBE_FAST" agent --server "$url" --admin 127.0.0.1:0 "$@" 2>"$log" &
	apid=$!
	admin_port_wait "$log" "$apid" 200
	admin=http://127.0.0.1:$admin_port
	if [ -z "$admin_port" ] || ! curl -sf "$admin/status" >/dev/null; then
		echo "FAIL $(basename "$0" .sh)/start: the agent did not come up: $(head -5 "$log" | tr '\n' ' ')"
		exit 1
	fi
}
stop_agent() {
	[ -n "${apid:-}" ] || return 0
	kill -TERM "$apid" 2>/dev/null
	wait "$apid"
	local rc=$?
	apid=
	return $rc
}
# status_field a.b.c: prints the value (numbers, strings, true/false) of /status key path.
status_field() { curl -sf "$admin/status" | jqpath "$1"; }
# A tiny key-path reader for the agent's indented /status JSON (unique leaf names per object).
jqpath() {
	awk -v path="$1" '
	BEGIN { n = split(path, want, ".") }
	{
		line = $0
		if (match(line, /^ *"[^"]*": *\{/)) { k = line; sub(/^ *"/, "", k); sub(/".*/, "", k); stack[++d] = k; next }
		if (match(line, /^ *\},?$/)) { d--; next }
		if (match(line, /^ *"[^"]*": */)) {
			k = line; sub(/^ *"/, "", k); sub(/".*/, "", k)
			v = line; sub(/^ *"[^"]*": */, "", v); sub(/,$/, "", v); gsub(/^"|"$/, "", v)
			if (d + 1 != n) next
			ok = 1
			for (i = 1; i <= d; i++) if (stack[i] != want[i]) ok = 0
			if (ok && k == want[n]) { print v; exit }
		}
	}'
}
qfolded() {
	"$STROBE_FAST" query -s "$url" -t folded --from "$2" --to "$3" -o "$4" "$1" 2>"$4.err"
}
offcpu_vs_truth() {
	local sel=$1 from=$2 to=$3 out=$4 truthf=$5 fn s got want
	shift 5
	bad="" detail=""
	if ! qfolded "$sel" "$from" "$to" "$out"; then
		detail="query failed: $(errof "$out.err")"
		return 1
	fi
	s=$(shares "$out" "$@")
	for fn in "$@"; do
		got=$(field "$s" "$fn"); want=$(truth "$truthf" "$fn")
		detail+="$fn $(awk -v g="${got:-0}" 'BEGIN { printf "%.0f", g / 1e6 }') ms (truth $(awk -v w="${want:-0}" 'BEGIN { printf "%.0f", w / 1e6 }')) "
		within_rel "${got:-0}" "$want" 10 || bad+="$fn "
	done
	detail=${detail% }
	[ -z "$bad" ]
}
