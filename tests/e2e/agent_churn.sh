#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent on a host with process churn: proc_churn starts 170 short-lived processes a second
# (fork + exec, each burning 1 ms of CPU; 10,200 a minute) for CHURN_SECONDS (20; `make soak`
# runs 300), and measures the rate it achieved and its children's CPU (wait4's rusage). The
# agent samples the whole host (19 Hz, its default 1 % budget, 2 s intervals) and sends only
# proc_churn's profiles (--comm).
#   budget     the agent's own CPU over the run (utime + stime from /proc/PID/stat, the first
#              interval, which reads every process, left out) is within --max-cpu, with 50 %
#              slack for the intervals a budget step takes to act
#   rss        its resident memory (VmRSS, polled every 0.5 s) stays within the 30 MB goal of
#              docs/agent.md: anonymous and file-backed pages alike (the binaries it maps to
#              unwind, which it hands back after each interval, and its own libraries); the
#              line also reports the anonymous part's peak, what churn itself could grow
#   accounted  the store's CPU for comm proc_churn over the run is the workload's own measure
#              (children's + parent's CPU) within 35 % (about 6 s of CPU seen at 19 Hz: a
#              hundred samples)
#   tracker    the sampler's process table forgets exited processes: at every poll,
#              processes_tracked in /status is at most the host's live processes plus every
#              process the host started in the last four intervals and 2 s (/proc/stat's
#              fork count: the agent sees the whole host, other jobs' churn included) plus
#              100 (plus, for the polls whose window reaches back to the agent's start, the processes
#              alive then), far below the number proc_churn started; and no renewal was for too
#              many processes (renewals for the mappings exited processes leave, every ~35 s
#              at this rate, are reported)
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_churn proc_churn
kill_at_exit apid pid wpid
SECS=${CHURN_SECONDS:-20}
RATE=170 IV=2 BUDGET=1 GOAL_MB=30
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
HZ_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null; }

start_server
# The workload under a name of this run's own (the comm is its executable's name): the agent
# profiles the whole host, and another test's proc_churn running at the same time (a second
# checkout's suite) would otherwise be counted here too.
churn=churn_$$
cp "$WL/proc_churn" "$TMPDIR/$churn"
start_agent "$TMPDIR/agent.log" -i "$IV" --max-cpu "$BUDGET" --comm "^$churn\$"
# the fork count when the agent started: the first polls' bound counts every process the host
# started since (other jobs' churn too: a compile beside the test), not none
seed_t=$(date +%s%3N) seed_f=$(awk '$1 == "processes" { print $2 }' /proc/stat)
seed_live=$(ls /proc | grep -c '^[0-9]') # ... and those alive then, which may have exited since
for _ in $(seq 100); do [ "$(status_field export.intervals)" -ge 1 ] 2>/dev/null && break; sleep 0.2; done
host_procs=$(status_field samples.processes_tracked)
rss0=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$apid/status")
c0=$(cpu_ticks "$apid") w0=$(date +%s%N) t0=$(date +%s)
"$TMPDIR/$churn" -r "$RATE" -b 1000 -o "$TMPDIR/churn.truth" "$SECS" & wpid=$!
maxtracked=0 maxanon=0 maxrss=0 over="" worst=""
hist_t=("$seed_t") hist_f=("$seed_f") base=0
WIN_MS=$(( (4 * IV + 2) * 1000 ))
while kill -0 "$wpid" 2>/dev/null; do
	n=$(status_field samples.processes_tracked)
	now=$(date +%s%3N) forks=$(awk '$1 == "processes" { print $2 }' /proc/stat)
	live=$(ls /proc | grep -c '^[0-9]')
	hist_t+=("$now") hist_f+=("$forks")
	# from the last poll at least WIN_MS ago (a stalled poll widens the window, never empties it)
	while [ $((base + 1)) -lt ${#hist_t[@]} ] && [ $((hist_t[base + 1] + WIN_MS)) -le "$now" ]; do base=$((base + 1)); done
	bound=$(( live + forks - hist_f[base] + 100 + (base == 0 ? seed_live : 0) ))
	[ -n "$n" ] && [ "$n" -gt "$bound" ] && [ -z "$over" ] && over="$n tracked with $live live and $((forks - hist_f[base])) started in the $(( (now - hist_t[base]) / 1000 )) s before"
	[ "${n:-0}" -gt "$maxtracked" ] && maxtracked=$n worst="bound $bound then"
	read -r n r < <(awk '$1 == "RssAnon:" { a = $2 } $1 == "VmRSS:" { r = $2 } END { print a + 0, r + 0 }' "/proc/$apid/status")
	[ "${n:-0}" -gt "$maxanon" ] && maxanon=$n
	[ "${r:-0}" -gt "$maxrss" ] && maxrss=$r
	sleep 0.5
done
wait "$wpid"; wrc=$? wpid=
c1=$(cpu_ticks "$apid") w1=$(date +%s%N)
hwm=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$apid/status")
file=$(awk '$1 == "RssFile:" { print $2 }' "/proc/$apid/status")
sleep $((IV + 1)) # the last interval's profiles
for _ in $(seq 100); do [ "$(status_field spool.items)" = 0 ] && break; sleep 0.2; done
t1=$(date +%s)
truth() { awk -v k="$1" '$1 == k { print $2 }' "$TMPDIR/churn.truth"; }
spawned=$(truth spawned) rate=$(truth rate)
reopens=$(status_field export.sampler_reopens) level=$(status_field sampling.budget_level)
hz=$(status_field sampling.frequency_hz)

name=agent_churn/workload
if [ "$wrc" != 0 ] || [ -z "$spawned" ]; then
	fail "$name" "proc_churn failed (exit $wrc): $(tr '\n' ' ' <"$TMPDIR/churn.truth" 2>/dev/null)"
	exit 1
fi
ok "$name" "$spawned processes in $(truth seconds) s: $rate a second ($(awk -v r="$rate" 'BEGIN { printf "%.0f", r * 60 }') a minute; asked $RATE), at most $(truth max_live) alive at once"

name=agent_churn/budget
pct=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ_TCK" -v w0="$w0" -v w1="$w1" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / ((w1 - w0) / 1e9) }')
if ! awk -v p="$pct" -v b="$BUDGET" 'BEGIN { exit !(p <= b * 1.5) }'; then
	fail "$name" "the agent used $pct % of a core over the churn (budget $BUDGET %; now ${hz:-?} Hz, level ${level:-?}): $(grep budget "$TMPDIR/agent.log" | tail -2 | tr '\n' ' ')"
else
	ok "$name" "$pct % of a core over the churn, $(awk -v a="$c0" -v b="$c1" -v hz="$HZ_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }') s of CPU (budget $BUDGET %; ends at $hz Hz, level $level)"
fi

name=agent_churn/rss
if ! [ "$maxrss" -gt 0 ] || ! [ "$maxrss" -le $((GOAL_MB * 1024)) ]; then
	fail "$name" "resident memory up to $((maxrss / 1024)) MB over the churn, over the $GOAL_MB MB goal (anonymous at most $((maxanon / 1024)) MB; RSS $((rss0 / 1024)) MB before the churn, $((file / 1024)) MB of mapped files at the end; VmHWM $((hwm / 1024)) MB)"
else
	ok "$name" "resident memory at most $((maxrss / 1024)) MB over the churn (goal $GOAL_MB MB), anonymous at most $((maxanon / 1024)) MB; RSS $((rss0 / 1024)) MB before the churn, $((file / 1024)) MB of mapped files at the end; VmHWM $((hwm / 1024)) MB"
fi

name=agent_churn/accounted
r=$(curl -s -G "$url/api/v1/range" --data-urlencode "query=$CPU{comm=\"$churn\"}" \
	--data-urlencode "from=$((t0 - 5))" --data-urlencode "to=$((t1 + 5))" --data-urlencode "step=$((t1 - t0 + 10))s")
got=$(grep -o '\[[0-9]*, *[0-9.e+]*\]' <<<"$r" | awk -F'[][, ]+' '{ s += $3 } END { printf "%.0f", s }')
want=$(( $(truth children_cpu_ns) + $(truth parent_cpu_ns) ))
pids=$(curl -s -G "$url/api/v1/label/pid/values" --data-urlencode "query=$CPU{comm=\"$churn\"}" \
	--data-urlencode "from=$((t0 - 5))" --data-urlencode "to=$((t1 + 5))" | grep -o '"[0-9]*"' | wc -l)
if ! within_rel "${got:-0}" "$want" 35; then
	fail "$name" "the store has $(awk -v g="${got:-0}" 'BEGIN { printf "%.2f", g / 1e9 }') s of CPU for proc_churn from $pids processes, the workload measured $(awk -v w="$want" 'BEGIN { printf "%.2f", w / 1e9 }') s (want within 35 %; agent: $(status_field samples.lost) records lost, $(status_field samples.processes_unnamed) processes exported as unknown, $(status_field samples.processes_unlooked) without an entry, $(status_field oncpu.dropped_sums_full) on-CPU sums dropped; log: $(grep -ci warn "$TMPDIR/agent.log") warnings, $(grep -i warn "$TMPDIR/agent.log" | tail -2 | cut -c1-160 | tr '\n' ' '))"
else
	ok "$name" "$(awk -v g="$got" 'BEGIN { printf "%.2f", g / 1e9 }') s of CPU in the store against $(awk -v w="$want" 'BEGIN { printf "%.2f", w / 1e9 }') s measured by the workload, from $pids processes"
fi

name=agent_churn/tracker
forgot=$(status_field samples.processes_forgotten)
byprocs=$(grep 'starting afresh' "$TMPDIR/agent.log" | awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "processes,") print $i }' | awk '$1 > 4096' | wc -l)
if [ -n "$over" ]; then
	fail "$name" "$over (at most $maxtracked tracked; $spawned started by proc_churn, $forgot forgotten)"
elif [ "$byprocs" != 0 ]; then
	fail "$name" "the sampler was renewed for too many processes: $(grep 'starting afresh' "$TMPDIR/agent.log" | tail -1)"
else
	ok "$name" "at most $maxtracked processes tracked ($worst; $host_procs before the churn, $spawned started, $forgot forgotten), $reopens renewals for the mappings left"
fi
stop_agent
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit "${st:-0}"
