#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's admin port and its token. Without a token the port is loopback-only and open (as
# agent_control.sh tests); with one (--admin-token-file, config "admin_token"), it may listen
# off loopback, and on any address the endpoints that act or reveal stacks want it:
#   refused-off-loopback  --admin 0.0.0.0:0 without a token: refused, saying why and how
#   token-file-mode       a token file group/other can read is refused (chmod 600, named)
#   loopback-token        "admin_token" in the config, on 127.0.0.1: POST /pause without the
#                         token or with a wrong one gets 401 and changes nothing (/status says
#                         running); with it, paused then running; /status, /metrics, /ready open
#   off-loopback          --admin-token-file, on this host's non-loopback address (SKIP when it
#                         has none): reached there, /status and /metrics open, a capture without
#                         the token 401, with it a pprof of the workload
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_admin_token cpu_split
kill_at_exit apid pid wpid
n0=agent_admin_token

start_server
"$WL/cpu_split" -o "$TMPDIR/cpu.truth" 60 & wpid=$!

# ---- refusals ----------------------------------------------------------------------------------
name=$n0/refused-off-loopback
if timeout 20 "$STROBE_FAST" agent --server "$url" --pid "$wpid" --admin 0.0.0.0:0 2>"$TMPDIR/lb.err"; then
	fail "$name" "--admin 0.0.0.0:0 without a token was accepted"
elif ! grep -q "loopback-only" "$TMPDIR/lb.err" || ! grep -q -- "--admin-token-file" "$TMPDIR/lb.err"; then
	fail "$name" "the refusal does not say why and how: $(errof "$TMPDIR/lb.err")"
else
	ok "$name" "$(head -1 "$TMPDIR/lb.err" | cut -c1-120)..."
fi

name=$n0/token-file-mode
printf 's3cret-admin\n' >"$TMPDIR/tok"
chmod 644 "$TMPDIR/tok"
if timeout 20 "$STROBE_FAST" agent --server "$url" --pid "$wpid" --admin 127.0.0.1:0 --admin-token-file "$TMPDIR/tok" 2>"$TMPDIR/mode.err"; then
	fail "$name" "a token file of mode 644 was accepted"
elif ! grep -q "$TMPDIR/tok" "$TMPDIR/mode.err" || ! grep -q "chmod 600" "$TMPDIR/mode.err"; then
	fail "$name" "the refusal does not name the file and the fix: $(errof "$TMPDIR/mode.err")"
else
	ok "$name" "$(head -1 "$TMPDIR/mode.err" | cut -c1-120)"
fi
chmod 600 "$TMPDIR/tok"

# code METHOD URL [curl options]: the HTTP status
code() { local m=$1 u=$2; shift 2; curl -s -o "$TMPDIR/body" -w '%{http_code}' -X "$m" "$@" "$u"; }
state() { curl -sf "$1/status" | jqpath state; }

# checks BASE TOKEN: the token's rules on one admin port; appends what is wrong to $bad and
# what was seen to $detail.
checks() {
	local base=$1 tok=$2 c1 c2 c3 c4 c5 c6 s1 s2 s3
	c1=$(code POST "$base/pause")
	s1=$(state "$base")
	c2=$(code POST "$base/pause" -H "Authorization: Bearer wrong-$tok")
	c3=$(code POST "$base/pause" -H "Authorization: Bearer ${tok}x")
	s2=$(state "$base")
	[ "$c1 $c2 $c3" = "401 401 401" ] || bad+="pause without/wrong/longer token: $c1 $c2 $c3 (want 401); "
	[ "$s1 $s2" = "running running" ] || bad+="state after refused pauses: $s1 $s2; "
	grep -q '"error"' "$TMPDIR/body" || bad+="the 401 has no error message; "
	c4=$(code POST "$base/pause" -H "Authorization: Bearer $tok")
	s3=$(state "$base")
	c5=$(code POST "$base/resume" -H "Authorization: Bearer $tok")
	[ "$c4 $s3 $c5 $(state "$base")" = "200 paused 200 running" ] || bad+="with the token: pause $c4, state $s3, resume $c5, state $(state "$base"); "
	c6="$(code GET "$base/status") $(code GET "$base/metrics") $(code GET "$base/ready")"
	[ "$c6" = "200 200 200" ] || bad+="/status /metrics /ready without a token: $c6 (want 200s); "
	detail="pause: none $c1, wrong $c2, longer $c3, right $c4; open: $c6"
}

# ---- on loopback, the token from the config ----------------------------------------------------
name=$n0/loopback-token
printf '{"admin_token": "cfg-tok-%s"}\n' "$RANDOM" >"$TMPDIR/agent.json"
chmod 600 "$TMPDIR/agent.json"
ctok=$(sed 's/.*"admin_token": "\([^"]*\)".*/\1/' "$TMPDIR/agent.json")
start_agent "$TMPDIR/agent.log" -c "$TMPDIR/agent.json" -F 99 -i 1 --pid "$wpid" --max-cpu 50
bad="" detail=""
checks "$admin" "$ctok"
if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "$detail"; fi
stop_agent

# ---- off loopback, the token from a file ---------------------------------------------------------
name=$n0/off-loopback
hostip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.' | head -1)
if [ -z "$hostip" ]; then
	skip "$name" "this host has no non-loopback IPv4 address to bind the admin port to"
else
	"$STROBE_FAST" agent --server "$url" --admin "$hostip:0" --admin-token-file "$TMPDIR/tok" \
		-F 99 -i 1 --pid "$wpid" --max-cpu 50 2>"$TMPDIR/off.log" & apid=$!
	port=
	for _ in $(seq 200); do
		port=$(sed -n 's/.*admin listening on .* port \([0-9]*\).*/\1/p' "$TMPDIR/off.log" 2>/dev/null | head -1)
		[ -n "$port" ] && break
		kill -0 "$apid" 2>/dev/null || break
		sleep 0.05
	done
	base=http://$hostip:$port
	if [ -z "$port" ] || ! curl -sf "$base/status" >/dev/null; then
		fail "$name" "the agent did not come up on $hostip: $(errof "$TMPDIR/off.log")"
	else
		bad="" detail=""
		checks "$base" s3cret-admin
		cap=$(code GET "$base/debug/pprof/profile?pid=$wpid&seconds=1")
		capok=$(code GET "$base/debug/pprof/profile?pid=$wpid&seconds=1&hz=499" -H "Authorization: Bearer s3cret-admin")
		[ "$cap" = 401 ] || bad+="a capture without the token: $cap (want 401); "
		if [ "$capok" != 200 ]; then bad+="a capture with the token: $capok; "
		elif ! fold "$TMPDIR/body" "$TMPDIR/cap.folded" cpu || ! grep -q burn_60 "$TMPDIR/cap.folded"; then
			bad+="the capture with the token is not a profile of the workload: $(errof "$TMPDIR/cap.folded.err"); "
		fi
		grep -q 'admin token required' "$TMPDIR/off.log" || bad+="the start line does not say a token is required; "
		if [ -n "$bad" ]; then fail "$name" "on $hostip: $bad"; else ok "$name" "on $hostip: $detail; capture none $cap, right $capok"; fi
	fi
	stop_agent
fi
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit $st
