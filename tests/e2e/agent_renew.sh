#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The symbolizer's renewal names frames as before it (issue 23): `strobe agent --symbolize local
# --symbolizer-renew 6` (sanitized: a name or an object freed by the renewal and still used is
# an ASan report, and the agent's exit status says so) profiles two workloads through several
# renewals, and the profiles stored before the first renewal and after it name the same frames:
#   user     build/workloads/cpu_split as "renew_user": burn_60, burn_30 and burn_10 (user
#            frames, from the binary's symbol table, which the renewal drops and reopens) in
#            both windows
#   kernel   `dd if=/dev/zero of=/dev/zero` (its time is in the kernel's read and write paths):
#            every frame that holds >= 10 % of its CPU before the renewal is there, by the same
#            name, after it (the kernel's symbol table is kept across renewals), and no more of
#            its CPU is in stacks with an unnamed kernel frame after than before (+5 pp)
# The windows come from the agent's own count of renewals (/status export.symbolizer_renewals),
# polled with a deadline: a profile is stamped with its interval's start, and an interval's
# profiles are built after the renewal made at its export, so "before" ends 2 s before the
# first renewal was seen and "after" starts 1 s past it. 499 Hz and the workloads at nice -5,
# so that a busy shared host still gives each window enough samples (checked: >= 30 each).
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_renew cpu_split
kill_at_exit apid pid w1 w2
[ -c /dev/zero ] && command -v dd >/dev/null || { echo "SKIP agent_renew: no dd, or no /dev/zero"; exit 0; }
HZ=499 RENEW=6
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

start_server
t0=$(date +%s)
STROBE_SERVICE=renew_user nice -n -5 "$WL/cpu_split" 45 >/dev/null & w1=$!
nice -n -5 dd if=/dev/zero of=/dev/zero bs=64k 2>/dev/null & w2=$!
# the sanitized CLI runs the agent in itself (cli/agent_exec.c)
STROBE_FAST=$STROBE start_agent "$TMPDIR/agent.log" --symbolize local -F $HZ -i 1 --max-cpu 100 \
	--symbolizer-renew $RENEW -p "$w1,$w2"
# the first renewal, then two more and 4 s past the first (the "after" window)
r1= renewed=0 deadline=$(($(date +%s) + 40))
while [ "$(date +%s)" -lt "$deadline" ]; do
	renewed=$(status_field export.symbolizer_renewals)
	[ -z "$r1" ] && [ "${renewed:-0}" -ge 1 ] && r1=$(date +%s)
	[ -n "$r1" ] && [ "${renewed:-0}" -ge 3 ] && [ "$(date +%s)" -ge $((r1 + 5)) ] && break
	kill -0 "$apid" 2>/dev/null || break
	sleep 0.2
done
kill "$w1" "$w2" 2>/dev/null
wait "$w1" "$w2" 2>/dev/null
w1= w2=
stop_agent || fail agent_renew/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))
if grep -q "ERROR: AddressSanitizer\|runtime error:" "$TMPDIR/agent.log"; then
	fail agent_renew/sanitizer "$(grep -m1 "ERROR: AddressSanitizer\|runtime error:" "$TMPDIR/agent.log")"
fi
if [ -z "$r1" ] || [ "${renewed:-0}" -lt 3 ]; then
	fail agent_renew/renewals "${renewed:-0} renewals of the symbolizer (every $RENEW s) within 40 s, want 3: $(errof "$TMPDIR/agent.log")"
	exit 1
fi

# query SERVICE WINDOW FROM TO: the window's folded stacks into $TMPDIR/SERVICE.WINDOW.folded
query() {
	qfolded "$CPU{service_name=\"$1\"}" "$3" "$4" "$TMPDIR/$1.$2.folded" ||
		{ fail "agent_renew/query" "$1 $2: $(errof "$TMPDIR/$1.$2.folded.err")"; exit 1; }
}
# samples FOLDED: how many samples the stacks hold (values are CPU ns at $HZ Hz)
samples() { awk -v hz=$HZ '{ v += $NF } END { printf "%.0f\n", v * hz / 1e9 }' "$1"; }
# frames FOLDED MINPCT: each frame holding >= MINPCT % of the value, one a line
frames() {
	awk -v min="$2" '{ v = $NF; tot += v; sub(/ [0-9]+$/, ""); n = split($0, f, ";"); delete seen
		for (i = 1; i <= n; i++) if (!(f[i] in seen)) { seen[f[i]] = 1; by[f[i]] += v } }
		END { for (k in by) if (tot > 0 && 100 * by[k] / tot >= min) print k }' "$1" | sort
}
# unnamed FOLDED: % of the value in stacks with an unnamed kernel frame ([[kernel.kallsyms]+0xADDR])
unnamed() {
	awk '{ v = $NF; tot += v; sub(/ [0-9]+$/, ""); if (index($0, "[kernel.kallsyms]+0x")) u += v }
		END { printf "%.1f\n", (tot > 0 ? 100 * u / tot : 100) }' "$1"
}
for svc in renew_user dd; do
	query "$svc" before "$t0" $((r1 - 2))
	query "$svc" after $((r1 + 1)) "$t1"
done
few=
for f in renew_user.before renew_user.after dd.before dd.after; do
	n=$(samples "$TMPDIR/$f.folded")
	[ "$n" -ge 30 ] || few+="$f: $n samples "
done
if [ -n "$few" ]; then
	fail agent_renew/samples "too few samples to compare (want >= 30 in each window; a host too busy?): $few"
	exit 1
fi

missing=
for fn in burn_60 burn_30 burn_10; do
	for w in before after; do
		grep -q "\(^\|;\)$fn\(;\| \)" "$TMPDIR/renew_user.$w.folded" || missing+="$fn ($w) "
	done
done
detail="$(samples "$TMPDIR/renew_user.before.folded") samples before the first renewal, $(samples "$TMPDIR/renew_user.after.folded") after; $renewed renewals"
if [ -z "$missing" ]; then ok agent_renew/user "burn_60, burn_30, burn_10 named in both windows: $detail"
else fail agent_renew/user "not named: $missing($detail)"; fi

frames "$TMPDIR/dd.before.folded" 10 >"$TMPDIR/hot.before"
frames "$TMPDIR/dd.after.folded" 0 >"$TMPDIR/all.after"
gone=$(comm -23 "$TMPDIR/hot.before" "$TMPDIR/all.after" | tr '\n' ' ')
ub=$(unnamed "$TMPDIR/dd.before.folded") ua=$(unnamed "$TMPDIR/dd.after.folded")
hot=$(tr '\n' ' ' <"$TMPDIR/hot.before")
detail="$(wc -l <"$TMPDIR/hot.before") frames with >= 10 % before ($hot), CPU in stacks with an unnamed kernel frame ${ub}% before, ${ua}% after; $(samples "$TMPDIR/dd.before.folded") / $(samples "$TMPDIR/dd.after.folded") samples"
if [ ! -s "$TMPDIR/hot.before" ]; then fail agent_renew/kernel "no frame of dd before the renewal: $detail"
elif [ -n "$gone" ]; then fail agent_renew/kernel "frames named before the renewal and not after: $gone($detail)"
elif ! awk -v a="$ua" -v b="$ub" 'BEGIN { exit !(a <= b + 5) }'; then fail agent_renew/kernel "more unnamed after the renewal: $detail"
else ok agent_renew/kernel "$detail"; fi
exit $st
