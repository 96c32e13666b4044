# SPDX-License-Identifier: Apache-2.0
# Off-CPU time from perf, the peer for the off-CPU recorder's tests. Reads the text of
#   perf record -g -e sched:sched_switch --switch-events -o P -- CMD...   (or -p PID)
#   perf script -i P --ns --show-switch-events -F comm,tid,time,event,trace,ip,sym
# and prints folded stacks "comm;root;...;leaf NANOSECONDS": each time a thread is switched out,
# the stack of its sched_switch sample is charged the time until its next switch-in (blocked and
# run-queue time together, as bcc's offcputime counts). The switch-in comes from the
# PERF_RECORD_SWITCH IN records that --switch-events adds in the task's own context; the
# sched_switch tracepoint alone does not do (its switch-in side fires in the context of the task
# being replaced, which a per-process recording does not see, and system-wide recording on this
# VM was seen to lose most of one CPU's events).
function flush(   i, st) {
	if (!have) return
	st = comm
	for (i = nf; i >= 1; i--) st = st ";" fr[i]
	stack[tid] = st; outt[tid] = t
	have = 0; nf = 0
}
function head(   s) { # comm, tid and time of an event line
	if (!match($0, / +[0-9]+ +[0-9]+\.[0-9]+: /)) return 0
	comm = substr($0, 1, RSTART - 1); gsub(/;/, ":", comm)
	s = substr($0, RSTART, RLENGTH)
	split(s, a, " "); tid = a[1] + 0; t = a[2] + 0
	return 1
}
/ PERF_RECORD_SWITCH(_CPU_WIDE)? IN/ {
	flush()
	if (head() && (tid in stack)) {
		printf "%s %.0f\n", stack[tid], (t - outt[tid]) * 1e9
		delete stack[tid]; delete outt[tid]
	}
	next
}
/ PERF_RECORD_SWITCH/ { flush(); next }
/ sched:sched_switch: / {
	flush()
	if (head()) { have = 1; nf = 0 }
	next
}
have && /^[ \t]+[0-9a-f]+ / {
	s = $0
	sub(/^[ \t]+[0-9a-f]+ /, "", s)
	sub(/ \([^()]*\)$/, "", s)
	sub(/\+0x[0-9a-f]+$/, "", s)
	if (s == "") s = "[unknown]"
	gsub(/;/, ":", s)
	fr[++nf] = s
	next
}
/^[ \t]*$/ { flush() }
END { flush() }
