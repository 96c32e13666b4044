#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record`'s behaviour at the edges:
#   usage      an unknown -e, -p of a pid that does not exist (named in the message), and `--`
#              with no command each give exit 2 and exactly one line on stderr, nothing recorded
#   help       --help exits 0 and documents -F -e -a -p -d -o --label --min-block
#   sigint     SIGINT to a recording of a long workload after 2 s: exit 0 within 10 s, and the
#              output file is a readable profile of the workload (burn_60, >= 500 samples)
#   nonroot    as user nobody with kernel.perf_event_paranoid >= 2, a system-wide recording is
#              refused with exit 2 and a message naming perf_event_paranoid or CAP_PERFMON
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads cpu_split

usage_case() { # NAME WANT-IN-MESSAGE ARGS...
	local name=$1 want=$2 out=$TMPDIR/usage.pb.gz
	shift 2
	rm -f "$out"
	timeout -k 5 30 "$STROBE" record -o "$out" "$@" >"$TMPDIR/u.out" 2>"$TMPDIR/u.err"
	local rc=$? lines
	lines=$(wc -l <"$TMPDIR/u.err")
	if [ $rc != 2 ]; then
		fail "$name" "exit $rc, want 2: $(errof "$TMPDIR/u.err")"
	elif [ "$lines" != 1 ]; then
		fail "$name" "$lines lines on stderr, want one: $(errof "$TMPDIR/u.err")"
	elif [ -n "$want" ] && ! grep -qF -- "$want" "$TMPDIR/u.err"; then
		fail "$name" "the message does not name '$want': $(errof "$TMPDIR/u.err")"
	elif [ -e "$out" ]; then
		fail "$name" "an output file was written anyway"
	else
		ok "$name" "$(cat "$TMPDIR/u.err")"
	fi
}

usage_case record_errors/unknown-event bogus -e bogus -- "$WL/cpu_split" 1
nopid=4194000
while [ -e "/proc/$nopid" ]; do nopid=$((nopid - 1)); done
usage_case record_errors/no-such-pid "$nopid" -p "$nopid" -d 1
usage_case record_errors/missing-command "" --

name=record_errors/help
if ! timeout 30 "$STROBE" record --help >"$TMPDIR/help" 2>"$TMPDIR/help.err"; then
	fail "$name" "exit $?: $(errof "$TMPDIR/help.err")"
else
	miss=""
	for o in -F -e -a -p -d -o --label --min-block; do grep -qw -- "$o" "$TMPDIR/help" || miss+="$o "; done
	if ! grep -q 'usage: strobe record' "$TMPDIR/help"; then fail "$name" "no 'usage: strobe record' line"
	elif [ -n "$miss" ]; then fail "$name" "--help does not mention $miss"
	else ok "$name" "$(wc -l <"$TMPDIR/help") lines"; fi
fi

# ---- SIGINT mid-run: the profile is still written ------------------------------------------
name=record_errors/sigint
"$STROBE_FAST" record -F 999 -o "$TMPDIR/int.pb.gz" -- "$WL/cpu_split" 60 >"$TMPDIR/int.out" 2>"$TMPDIR/int.err" &
spid=$!
# the 2 s start when the workload runs: loading the eBPF program (the default path) takes a
# second or more before the command is let go, several on a loaded machine
for _ in $(seq 300); do
	k=$(cat /proc/$spid/task/*/children 2>/dev/null | awk '{ print $1 }')
	[ -n "$k" ] && [ "$(proc_cpu_ms "$k" 2>/dev/null || echo 0)" -gt 50 ] && break
	sleep 0.1
done
sleep 2
kids=$(cat /proc/$spid/task/*/children 2>/dev/null)
kill -INT "$spid" 2>/dev/null
for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$spid" 2>/dev/null; then
	kill -KILL "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	fail "$name" "strobe record still running 10 s after SIGINT"
else
	wait "$spid"
	rc=$?
	if [ $rc != 0 ]; then
		fail "$name" "exit $rc after SIGINT, want 0: $(errof "$TMPDIR/int.err")"
	elif ! fold "$TMPDIR/int.pb.gz" "$TMPDIR/int.folded" samples; then
		fail "$name" "the output is not a readable profile: $(errof "$TMPDIR/int.folded.err")"
	else
		s=$(shares "$TMPDIR/int.folded" burn_60)
		n=$(field "$s" total)
		if ! [ "${n:-0}" -ge 500 ] 2>/dev/null || ! [ "$(field "$s" burn_60)" -gt 0 ] 2>/dev/null; then
			fail "$name" "the profile has ${n:-0} samples, $(field "$s" burn_60) in burn_60 (want >= 500 from 2 s at 999 Hz)"
		else
			ok "$name" "$n samples after 2 s"
		fi
	fi
fi
# The workload may outlive the recorder: end the one we started (by its pid).
for k in $kids; do kill -TERM "$k" 2>/dev/null; done

# ---- not root ----------------------------------------------------------------------------------
name=record_errors/nonroot
par=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo "")
if [ -z "$par" ] || [ "$par" -lt 2 ]; then
	skip "$name" "kernel.perf_event_paranoid is '${par:-unreadable}', not >= 2"
elif ! command -v setpriv >/dev/null || [ "$(id -u)" != 0 ]; then
	skip "$name" "cannot switch to user nobody (needs root and setpriv)"
elif ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$STROBE_FAST"; then
	skip "$name" "user nobody cannot run $STROBE_FAST (permissions of its path)"
else
	chmod o+x "$TMPDIR"
	mkdir -m 777 "$TMPDIR/nobody"
	setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$TMPDIR/nobody" \
		timeout -k 5 30 "$STROBE_FAST" record -a -d 1 -o "$TMPDIR/nobody/x.pb.gz" >"$TMPDIR/nr.out" 2>"$TMPDIR/nr.err"
	rc=$?
	if [ $rc != 2 ]; then
		fail "$name" "exit $rc as nobody with perf_event_paranoid=$par, want 2: $(errof "$TMPDIR/nr.err")"
	elif ! grep -qE 'perf_event_paranoid|CAP_PERFMON' "$TMPDIR/nr.err"; then
		fail "$name" "the message names neither perf_event_paranoid nor CAP_PERFMON: $(errof "$TMPDIR/nr.err")"
	else
		ok "$name" "$(head -1 "$TMPDIR/nr.err")"
	fi
fi
# ---- -e cycles: works where there is a PMU, else one clear line and exit 2 ----------------------
name=record_errors/cycles
"$STROBE" record -e cycles -o "$TMPDIR/cy.pb.gz" -- "$WL/cpu_split" 1 >/dev/null 2>"$TMPDIR/cy.err"
code=$?
if [ $code -eq 0 ]; then
	if "$STROBE" top --sample-index cycles "$TMPDIR/cy.pb.gz" 2>/dev/null | grep -q burn_60; then
		ok "$name" "hardware cycles sampled; burn_60 in the cycles profile"
	else
		fail "$name" "exit 0 but no cycles profile naming burn_60"
	fi
elif [ $code -eq 2 ] && [ "$(wc -l < "$TMPDIR/cy.err")" -eq 1 ] && grep -q 'no hardware cycle counter' "$TMPDIR/cy.err"; then
	ok "$name" "no PMU here: $(cat "$TMPDIR/cy.err")"
else
	fail "$name" "exit $code: $(errof "$TMPDIR/cy.err")"
fi
exit $st
