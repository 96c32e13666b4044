#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record` (CPU) against the truth. build/workloads/cpu_split burns 60/30/10% of its CPU
# in burn_60/burn_30/burn_10 and writes what its thread CPU clock measured; a profile of it must
# give each function's inclusive share of the process's CPU within ±3 percentage points of that,
# and as many samples as the CPU the workload got makes at 999 Hz (±10-15%): what it got, not
# what an idle machine would give it, so that the cases hold on a loaded machine (run.sh --load).
# Cases:
#   cmd     record -F 999 -o r.pb.gz -- cpu_split -c 3 (one burner thread, until it has used
#           3 s of CPU: >= 2000 samples however busy the machine); also the pid, thread and
#           process labels of its samples
#   pid     record -p PID -d 4 of a running two-thread instance (both threads seen); the samples
#           against the CPU the workload logged inside the profile's time window (cpu_split -l)
#   system  record -a -d 4 of a running two-thread instance, narrowed to the workload with
#           convert --tagfocus pid=^N$, judged the same way
#   perf    the peer: perf record -e cpu-clock -F 999 -g on the same workload, collapsed by
#           strobe; its shares within ±3 pp of its truth and of strobe's (cmd case)
#   go      go tool pprof -raw reads the profile: sample types samples/count and cpu/nanoseconds,
#           labels pid, tid, thread, process, and the same sample total as strobe's fold
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads cpu_split
FNS=(burn_60 burn_30 burn_10)
TOL_PP=3

check_burns() { # NAME FOLDED TRUTH: every burn share within TOL_PP of the truth; sets detail
	local name=$1 folded=$2 tf=$3 s fn got want bad=""
	detail=""
	s=$(shares "$folded" "${FNS[@]}") || { fail "$name" "folded output unreadable"; return 1; }
	for fn in "${FNS[@]}"; do
		got=$(pct "$s" "$fn"); want=$(truth_share "$tf" "$fn")
		detail+="$fn ${got}% (truth ${want}%) "
		within_pp "$got" "$want" "$TOL_PP" || bad+="$fn "
	done
	if [ -n "$bad" ]; then fail "$name" "share off by more than ${TOL_PP} pp for ${bad}: $detail"; return 1; fi
	detail=${detail% }
}

samples_total() { # PPROF [convert options] -> total of samples/count
	local in=$1 out
	shift
	out=$TMPDIR/samples.$RANDOM.folded
	fold "$in" "$out" samples "$@" || return 1
	field "$(shares "$out")" total
}

# NAME PPROF LOG N: N samples are what the CPU the workload got inside the profile's window
# makes at 999 Hz, within 15% (fails or skips with the reason otherwise; needs go for the window)
enough_samples() {
	local name=$1 cpu want
	if ! cpu=$(window_cpu "$2" "$3"); then
		fail "$name" "cannot tell the workload's CPU in the profile's window (go tool pprof -raw, $3)"; return 1
	fi
	want=$(awk -v c="$cpu" 'BEGIN { printf "%.0f", c * 999 / 1e9 }')
	if [ "$want" -lt 1000 ]; then
		skip "$name" "the workload got only $((cpu / 1000000)) ms of CPU in the 4 s window: too loaded to judge shares"; return 1
	fi
	if ! within_rel "${4:-0}" "$want" 15; then
		fail "$name" "${4:-no} samples, but the workload used $((cpu / 1000000)) ms of CPU in the window: about $want at 999 Hz"; return 1
	fi
	detail+=" ($((cpu / 1000000)) ms of CPU in the window)"
}

# ---- cmd: record -- CMD ----------------------------------------------------------------------
name=record_cpu/cmd
cmd_ok=0
if ! rec "$name" 120 -F 999 -o "$TMPDIR/cmd.pb.gz" -- "$WL/cpu_split" -c 3 -o "$TMPDIR/cmd.truth" 100; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/cmd.truth" ]; then
	fail "$name" "the workload wrote no truth (was it run?)"
elif ! fold "$TMPDIR/cmd.pb.gz" "$TMPDIR/cmd.folded" cpu; then
	fail "$name" "convert --sample-index cpu failed: $(errof "$TMPDIR/cmd.folded.err")"
elif check_burns "$name" "$TMPDIR/cmd.folded" "$TMPDIR/cmd.truth"; then
	n=$(samples_total "$TMPDIR/cmd.pb.gz")
	cpu=$(field "$(shares "$TMPDIR/cmd.folded")" total)
	pcpu=$(truth "$TMPDIR/cmd.truth" process_cpu_ns)
	if ! [ "${n:-0}" -ge 2000 ] 2>/dev/null; then
		fail "$name" "only ${n:-no} samples (want >= 2000 at 999 Hz for 3 s of CPU)"
	elif ! within_rel "$cpu" "$pcpu" 10; then
		fail "$name" "cpu/nanoseconds total $cpu is not within 10% of the process's CPU $pcpu"
	elif ! within_rel "$n" "$(awk -v c="$pcpu" 'BEGIN { printf "%.0f", c * 999 / 1e9 }')" 10; then
		fail "$name" "$n samples, but $pcpu ns of CPU at 999 Hz makes about $((pcpu * 999 / 1000000000))"
	else
		ok "$name" "$n samples; $detail"
		cmd_ok=1
	fi
fi

# labels of the cmd profile, seen through strobe's own filter
name=record_cpu/cmd-labels
if [ $cmd_ok = 1 ]; then
	wpid=$(truth "$TMPDIR/cmd.truth" pid)
	all=$(samples_total "$TMPDIR/cmd.pb.gz")
	bad=""
	for kv in "pid=^$wpid\$" "process=^cpu_split\$" "thread=^burner-0\$" "tid=^[0-9]+\$"; do
		got=$(samples_total "$TMPDIR/cmd.pb.gz" --tagfocus "$kv")
		# the burner thread does all but a few ms of the work, so >= 95% of samples carry its labels
		within_rel "${got:-0}" "$all" 5 || bad+="--tagfocus $kv keeps ${got:-0} of $all samples; "
	done
	if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "pid, process, thread, tid on >= 95% of $all samples"; fi
else
	fail "$name" "no profile from the cmd case"
fi

# ---- pid: record -p PID of a running two-thread instance ------------------------------------
name=record_cpu/pid
rm -f "$TMPDIR/pid.ready"
"$WL/cpu_split" -t 2 -r "$TMPDIR/pid.ready" -l "$TMPDIR/pid.log" -o "$TMPDIR/pid.truth" 6 &
wpid=$!
for _ in $(seq 50); do [ -s "$TMPDIR/pid.ready" ] && break; sleep 0.1; done
sleep 0.3
if ! rec "$name" 60 -F 999 -p "$wpid" -d 4 -o "$TMPDIR/pid.pb.gz"; then
	fail "$name" "strobe record -p $wpid -d 4 failed (exit $rc): $(recerr "$name")"
	wait "$wpid"
else
	wait "$wpid"
	if ! fold "$TMPDIR/pid.pb.gz" "$TMPDIR/pid.folded" cpu; then
		fail "$name" "convert failed: $(errof "$TMPDIR/pid.folded.err")"
	elif check_burns "$name" "$TMPDIR/pid.folded" "$TMPDIR/pid.truth"; then
		n=$(samples_total "$TMPDIR/pid.pb.gz")
		t0=$(samples_total "$TMPDIR/pid.pb.gz" --tagfocus 'thread=^burner-0$')
		t1=$(samples_total "$TMPDIR/pid.pb.gz" --tagfocus 'thread=^burner-1$')
		if ! enough_samples "$name" "$TMPDIR/pid.pb.gz" "$TMPDIR/pid.log" "$n"; then
			:
		elif ! [ $(( ${t0:-0} * 4 )) -ge "$n" ] || ! [ $(( ${t1:-0} * 4 )) -ge "$n" ]; then
			fail "$name" "both threads must be sampled (>= 25% each): burner-0 ${t0:-0}, burner-1 ${t1:-0} of $n"
		else
			ok "$name" "$n samples, burner-0 $t0, burner-1 $t1; $detail"
		fi
	fi
fi

# ---- system: record -a, narrowed to the workload's pid --------------------------------------
name=record_cpu/system
"$WL/cpu_split" -t 2 -l "$TMPDIR/sys.log" -o "$TMPDIR/sys.truth" 6 &
wpid=$!
sleep 0.5
if ! rec "$name" 60 -F 999 -a -d 4 -o "$TMPDIR/sys.pb.gz"; then
	fail "$name" "strobe record -a -d 4 failed (exit $rc): $(recerr "$name")"
	wait "$wpid"
else
	wait "$wpid"
	if ! fold "$TMPDIR/sys.pb.gz" "$TMPDIR/sys.folded" cpu --tagfocus "pid=^$wpid\$"; then
		fail "$name" "convert --tagfocus pid=^$wpid\$ failed: $(errof "$TMPDIR/sys.folded.err")"
	elif check_burns "$name" "$TMPDIR/sys.folded" "$TMPDIR/sys.truth"; then
		n=$(samples_total "$TMPDIR/sys.pb.gz" --tagfocus "pid=^$wpid\$")
		if ! enough_samples "$name" "$TMPDIR/sys.pb.gz" "$TMPDIR/sys.log" "$n"; then
			:
		else
			ok "$name" "$n samples of pid $wpid; $detail"
		fi
	fi
fi

# ---- perf: the peer on the same workload -----------------------------------------------------
name=record_cpu/perf
if ! command -v perf >/dev/null; then
	skip "$name" "perf is not installed"
elif ! perf_cpu_folded "$TMPDIR/perf.folded" "$WL/cpu_split" -o "$TMPDIR/perf.truth" 4; then
	skip "$name" "perf record does not work here: $(errof "$TMPDIR/perf.folded.log")"
elif check_burns "$name (perf against truth)" "$TMPDIR/perf.folded" "$TMPDIR/perf.truth" && pdetail=$detail; then
	if [ $cmd_ok != 1 ]; then
		fail "$name" "perf: $pdetail; no strobe profile to compare (cmd case failed)"
	else
		ps=$(shares "$TMPDIR/perf.folded" "${FNS[@]}"); ss=$(shares "$TMPDIR/cmd.folded" "${FNS[@]}")
		bad="" detail=""
		for fn in "${FNS[@]}"; do
			detail+="$fn strobe $(pct "$ss" "$fn")% perf $(pct "$ps" "$fn")% "
			within_pp "$(pct "$ss" "$fn")" "$(pct "$ps" "$fn")" "$TOL_PP" || bad+="$fn "
		done
		if [ -n "$bad" ]; then fail "$name" "strobe and perf differ by more than $TOL_PP pp for $bad: $detail"
		else ok "$name" "${detail% }"; fi
	fi
fi

# ---- go: the profile as go tool pprof reads it ----------------------------------------------
name=record_cpu/go-pprof
if ! command -v go >/dev/null; then
	skip "$name" "go (golang-go) is not installed"
elif [ $cmd_ok != 1 ]; then
	fail "$name" "no profile from the cmd case"
else
	export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
	if ! go tool pprof -raw "$TMPDIR/cmd.pb.gz" >"$TMPDIR/raw" 2>"$TMPDIR/raw.err"; then
		fail "$name" "go tool pprof -raw failed: $(errof "$TMPDIR/raw.err")"
	else
		types=$(awk '/^Samples:/ { getline; print; exit }' "$TMPDIR/raw")
		# sum of the samples/count column over all samples, as go tool pprof lists them
		col=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "samples/count") { print i; exit } }' <<<"$types")
		gototal=$(awk -v c="${col:-0}" '/^Samples:/ { getline; s = 1; next } /^Locations/ { s = 0 }
			s && c && /^ *-?[0-9]+( +-?[0-9]+)*: / { sub(/:.*/, ""); split($0, v, " "); t += v[c] }
			END { printf "%.0f", t }' "$TMPDIR/raw")
		n=$(samples_total "$TMPDIR/cmd.pb.gz")
		bad=""
		for t in samples/count cpu/nanoseconds; do
			grep -qw "$t" <<<"$types" || bad+="no sample type $t (types: $types); "
		done
		for l in pid tid thread process; do
			grep -qE "(^|[[:space:]])$l:\[" "$TMPDIR/raw" || bad+="no label $l; "
		done
		[ "$gototal" = "$n" ] || bad+="go tool pprof counts $gototal samples, strobe $n; "
		if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "types: $types; labels pid tid thread process; $n samples"; fi
	fi
fi
exit $st
