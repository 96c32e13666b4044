#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's controls, on a running cpu_split (a busy process, 60/30/10% in burn_60/30/10):
#   pause-http    POST /pause: /status says paused and the sample count stops; POST /resume:
#                 running again and it grows by at least half what the CPU the workload got in
#                 those 2 s makes at 99 Hz (its CPU from /proc: the machine may be loaded)
#   pause-signal  the same with SIGUSR1 / SIGUSR2
#   capture       GET /debug/pprof/profile?pid=&seconds=3&hz=499 returns a pprof of that process
#                 with the workload's shares (±5 pp: ~1500 samples on an idle machine) and only
#                 its pid, and at least 60% of the samples the CPU it got in those 3 s makes
#   capture-args  bad parameters give 400 with a message, an absent pid 404
#   metrics       /metrics is Prometheus text with the same sample count as /status
#   budget        an agent with --max-cpu 0.001 (far below what it needs) lowers its frequency,
#                 then turns off-CPU off, and says so in /status (budget_note, frequency_hz); with
#                 the eBPF on-CPU program, a frequency step retunes its events in place: only
#                 the off-CPU step reopens the sampler (a reopen reads every process again,
#                 which cost more than the step saved)
#   loopback      --admin 0.0.0.0:0 without a token is refused (loopback-only; agent_admin_token.sh
#                 tests the token)
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_control cpu_split
kill_at_exit apid pid wpid

start_server
"$WL/cpu_split" -o "$TMPDIR/cpu.truth" 60 & wpid=$!
start_agent "$TMPDIR/agent.log" -F 99 -i 1 --pid "$wpid" --max-cpu 50
sleep 2
samples() { status_field samples.on_cpu; }

pause_check() { # NAME HOW-TO-PAUSE HOW-TO-RESUME
	local name=$1 s1 s2 s3 st1 st2
	eval "$2" >/dev/null
	for _ in $(seq 40); do [ "$(status_field state)" = paused ] && break; sleep 0.05; done
	st1=$(status_field state); sleep 0.3; s1=$(samples); sleep 2; s2=$(samples)
	eval "$3" >/dev/null
	for _ in $(seq 40); do [ "$(status_field state)" = running ] && break; sleep 0.05; done
	st2=$(status_field state); c0=$(proc_cpu_ms "$wpid"); sleep 2; s3=$(samples); c1=$(proc_cpu_ms "$wpid")
	local want=$(( (${c1:-0} - ${c0:-0}) * 99 / 1000 ))
	if [ "$st1" != paused ] || [ "$st2" != running ]; then
		fail "$name" "state after pause '$st1', after resume '$st2'"
	elif [ "$s2" != "$s1" ]; then
		fail "$name" "samples went on while paused: $s1 -> $s2"
	elif [ "$want" -lt 20 ]; then
		skip "$name" "the workload got only $((c1 - c0)) ms of CPU in 2 s: too loaded to tell a resume"
	elif ! [ "$s3" -gt $((s2 + want / 2)) ] 2>/dev/null; then
		fail "$name" "samples did not resume: $s2 -> $s3 in 2 s at 99 Hz (the workload used $((c1 - c0)) ms of CPU: about $want)"
	else
		ok "$name" "paused at $s1 samples (still $s2 2 s later), resumed to $s3"
	fi
}
pause_check agent_control/pause-http "curl -sf -X POST $admin/pause" "curl -sf -X POST $admin/resume"
pause_check agent_control/pause-signal "kill -USR1 $apid" "kill -USR2 $apid"

# ---- capture ---------------------------------------------------------------------------------
name=agent_control/capture
c0=$(proc_cpu_ms "$wpid")
code=$(curl -s -o "$TMPDIR/cap.pb.gz" -w '%{http_code}' "$admin/debug/pprof/profile?pid=$wpid&seconds=3&hz=499")
c1=$(proc_cpu_ms "$wpid")
expect=$(( (${c1:-0} - ${c0:-0}) * 499 / 1000 ))
if [ "$code" != 200 ]; then
	fail "$name" "HTTP $code: $(head -c 300 "$TMPDIR/cap.pb.gz")"
elif ! fold "$TMPDIR/cap.pb.gz" "$TMPDIR/cap.folded" cpu; then
	fail "$name" "the capture is not a readable profile: $(errof "$TMPDIR/cap.folded.err")"
else
	s=$(shares "$TMPDIR/cap.folded" burn_60 burn_30 burn_10)
	n=$(awk -v t="$(field "$s" total)" 'BEGIN { printf "%.0f", t * 499 / 1e9 }')
	other=$(fold "$TMPDIR/cap.pb.gz" "$TMPDIR/other.folded" samples --tagignore "pid=^$wpid\$" && cat "$TMPDIR/other.folded" | wc -l)
	bad="" detail=""
	for fn in burn_60 burn_30 burn_10; do
		want=${fn#burn_}; got=$(pct "$s" "$fn")
		detail+="$fn ${got}% "
		within_pp "$got" "$want" 5 || bad+="$fn "
	done
	if [ "$expect" -lt 300 ]; then skip "$name" "the workload got only $((c1 - c0)) ms of CPU in the 3 s capture: too loaded to judge shares"
	elif [ -n "$bad" ]; then fail "$name" "shares off by more than 5 pp for $bad: $detail"
	elif ! [ "$n" -ge $((expect * 6 / 10)) ]; then fail "$name" "only $n samples in 3 s at 499 Hz; the workload used $((c1 - c0)) ms of CPU: about $expect"
	elif [ "${other:-1}" != 0 ]; then fail "$name" "$other stacks of other processes"
	else ok "$name" "$n samples; ${detail% }"; fi
fi

name=agent_control/capture-args
bad=""
for q in "pid=abc" "pid=$wpid&seconds=0" "pid=$wpid&hz=99999" "pid=$wpid&type=heap" ""; do
	code=$(curl -s -o "$TMPDIR/e.json" -w '%{http_code}' "$admin/debug/pprof/profile?$q")
	[ "$code" = 400 ] && grep -q '"error"' "$TMPDIR/e.json" || bad+="?$q gave $code $(head -c 100 "$TMPDIR/e.json"); "
done
code=$(curl -s -o "$TMPDIR/e.json" -w '%{http_code}' "$admin/debug/pprof/profile?pid=2147483000&seconds=1")
[ "$code" = 404 ] || bad+="an absent pid gave $code; "
code=$(curl -s -o /dev/null -w '%{http_code}' "$admin/pause")
[ "$code" = 405 ] || bad+="GET /pause gave $code (want 405); "
if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "400 with a message for 5 bad requests, 404 for an absent pid, 405 for GET /pause"; fi

name=agent_control/metrics
m=$(curl -s "$admin/metrics")
ms=$(awk '$1 == "strobe_agent_samples_total" { print $2 }' <<<"$m")
ss=$(samples)
if ! grep -q '^# TYPE strobe_agent_samples_total counter' <<<"$m"; then
	fail "$name" "no TYPE line for strobe_agent_samples_total: $(head -c 200 <<<"$m")"
elif ! [ "${ms:-0}" -gt 0 ] || ! [ "$ms" -le "$ss" ]; then
	fail "$name" "strobe_agent_samples_total ${ms:-?}, /status samples.on_cpu $ss"
else
	ok "$name" "samples_total $ms, $(grep -c '^# TYPE' <<<"$m") metrics"
fi
stop_agent

# ---- budget ----------------------------------------------------------------------------------
name=agent_control/budget
start_agent "$TMPDIR/budget.log" -F 99 -i 1 --offcpu --max-cpu 0.001
for _ in $(seq 40); do [ "$(status_field sampling.offcpu)" = false ] && break; sleep 0.5; done
hz=$(status_field sampling.frequency_hz); off=$(status_field sampling.offcpu)
note=$(status_field sampling.budget_note); level=$(status_field sampling.budget_level)
reopens=$(status_field export.sampler_reopens); ocmode=$(status_field oncpu.mode)
if ! [ "${hz:-99}" -lt 99 ] 2>/dev/null; then
	fail "$name" "frequency still ${hz:-?} Hz with a 0.001% budget: $(tail -3 "$TMPDIR/budget.log" | tr '\n' ' ')"
elif [ "$off" != false ]; then
	fail "$name" "off-CPU still on at $hz Hz after 20 s over budget (note: $note)"
elif ! grep -q "over budget" <<<"$note" || ! grep -q "budget: over budget" "$TMPDIR/budget.log"; then
	fail "$name" "/status budget_note '$note' or the log does not say it is over budget"
elif [ "$ocmode" = bpf ] && ! [ "${reopens:-9}" -le 1 ] 2>/dev/null; then
	fail "$name" "the sampler was reopened ${reopens:-?} times for $level budget steps (on-CPU mode bpf: only the off-CPU step should reopen it)"
else
	ok "$name" "down to $hz Hz, off-CPU off, level $level, $reopens reopens (on-CPU $ocmode): $note"
fi
stop_agent

name=agent_control/loopback
if "$STROBE_FAST" agent --server "$url" --admin 0.0.0.0:0 2>"$TMPDIR/lb.err"; then
	fail "$name" "--admin 0.0.0.0:0 was accepted"
elif ! grep -q "loopback-only" "$TMPDIR/lb.err"; then
	fail "$name" "the refusal does not say why: $(errof "$TMPDIR/lb.err")"
else
	ok "$name" "$(head -1 "$TMPDIR/lb.err" | cut -c1-100)"
fi
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit $st
