#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record` of processes that exec and exit while it runs. build/workloads/fork_exec runs
# ten children one after another, each burning 200 ms of CPU and exiting: the even ones exec a
# copy of the program named fe_child (so their process name differs from the parent's) and burn
# in exec_child_burn, after 100 ms in pre_exec_burn between their fork and their exec (the
# parent's image, which the exec replaces before the eBPF path's sums are read), the odd ones only
# fork and burn in fork_child_burn. By the time the profile is written every child is gone, so
# their symbols must have been resolved from what the recorder kept (mappings, build IDs), not
# from /proc/PID.
#   names   exec_child_burn, pre_exec_burn and fork_child_burn are named and have their measured
#           CPU (±15%)
#   labels  exec_child_burn's samples carry process=fe_child and the pids of the exec'd children;
#           fork_child_burn's the pids of the forked ones (>= 90% of each)
#   perf    the peer sees the same (±15% of its own run's truth)
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads fork_exec
TOL=15
ms() { awk -v v="${1:-0}" 'BEGIN { printf "%.1f ms", v / 1e6 }'; }
cp "$WL/fork_exec" "$TMPDIR/fe_child"

check_burns() { # NAME FOLDED TRUTH: both burns within TOL% of the truth; sets detail
	local s fn got want bad=""
	detail=""
	s=$(shares "$2" exec_child_burn fork_child_burn pre_exec_burn) || { fail "$1" "folded output unreadable"; return 1; }
	for fn in exec_child_burn fork_child_burn pre_exec_burn; do
		got=$(field "$s" "$fn"); want=$(truth "$3" "$fn")
		detail+="$fn $(ms "$got") (truth $(ms "$want")) "
		within_rel "$got" "$want" "$TOL" || bad+="$fn "
	done
	if [ -n "$bad" ]; then fail "$1" "CPU off by more than ${TOL}% (or not named) for ${bad}: $detail"; return 1; fi
	detail=${detail% }
}

name=record_exec/names
have=0
if ! rec "$name" 60 -F 999 -o "$TMPDIR/ex.pb.gz" -- "$WL/fork_exec" -x "$TMPDIR/fe_child" -n 10 -b 200 -p 100 -o "$TMPDIR/ex.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/ex.truth" ]; then
	fail "$name" "the workload wrote no truth (was it run?)"
elif ! fold "$TMPDIR/ex.pb.gz" "$TMPDIR/ex.folded" cpu; then
	fail "$name" "convert --sample-index cpu failed: $(errof "$TMPDIR/ex.folded.err")"
else
	have=1
	if check_burns "$name" "$TMPDIR/ex.folded" "$TMPDIR/ex.truth"; then ok "$name" "$detail"; fi
fi

name=record_exec/labels
if [ $have != 1 ]; then
	fail "$name" "no profile"
else
	all=$(shares "$TMPDIR/ex.folded" exec_child_burn fork_child_burn)
	epids=$(truth "$TMPDIR/ex.truth" exec_pids | tr ',' '|'); fpids=$(truth "$TMPDIR/ex.truth" fork_pids | tr ',' '|')
	bad="" detail=""
	for spec in "exec_child_burn process=^fe_child\$" "exec_child_burn pid=^($epids)\$" "fork_child_burn pid=^($fpids)\$"; do
		fn=${spec%% *}; tag=${spec#* }
		if ! fold "$TMPDIR/ex.pb.gz" "$TMPDIR/l.folded" cpu --tagfocus "$tag"; then
			bad+="convert --tagfocus $tag failed: $(errof "$TMPDIR/l.folded.err"); "; continue
		fi
		got=$(field "$(shares "$TMPDIR/l.folded" "$fn")" "$fn")
		p=$(ratio_pct "$got" "$(field "$all" "$fn")")
		detail+="$fn with ${tag%%=*} of the children: ${p}%; "
		within_pp "$p" 100 10 || bad+="only ${p}% of $fn has $tag; "
	done
	if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "${detail%; }"; fi
fi

name=record_exec/perf
if ! command -v perf >/dev/null; then
	skip "$name" "perf is not installed"
elif ! perf_cpu_folded "$TMPDIR/perf.folded" "$WL/fork_exec" -x "$TMPDIR/fe_child" -n 10 -b 200 -p 100 -o "$TMPDIR/perf.truth"; then
	skip "$name" "perf record does not work here: $(errof "$TMPDIR/perf.folded.log")"
elif check_burns "$name (perf against truth)" "$TMPDIR/perf.folded" "$TMPDIR/perf.truth" && pdetail=$detail; then
	if ! grep -q '^fe_child;.*;exec_child_burn ' "$TMPDIR/perf.folded"; then
		fail "$name" "perf does not show exec_child_burn under process fe_child"
	else
		ok "$name" "perf: $pdetail"
	fi
fi
exit $st
