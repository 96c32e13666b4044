#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record -e offcpu` against the truth. build/workloads/offcpu_block has threads that block
# in nanosleep (50 ms a round, thread "sleeper"), on a mutex another thread holds 150 ms a round
# ("mtx-waiter") and in a pipe read fed every 100 ms ("pipe-reader"), each under a function
# site_X_outer, and measures the CLOCK_MONOTONIC time each site spent in its blocking call.
#   sites     off_cpu/nanoseconds under each site within ±10% of the measured time
#   parts     sample types blocked and runqueue exist, add up to off_cpu for each site (±2%),
#             and these sleeps are mostly blocked (>= 80%)
#   threads   each site's time carries its thread label (>= 95% of it)
#   kernel    kernel frames are in the stacks: do_nanosleep under site_nanosleep_outer, schedule
#             under every site (>= 90% of their time)
#   min-block --min-block 80ms drops the 50 ms sleeps (< 5% of the time of those the workload
#             measured under 80 ms left: a loaded machine runs some late) and keeps the
#             150 ms mutex waits and 100 ms pipe reads (±10%)
#   perf      the peer: perf sched_switch stacks + switch events (lib/perf_offcpu.awk) on the same
#             workload, each site within ±10% of its truth and of strobe's ratio to truth
# Why site_X_outer and not the function that calls libc: see tests/workloads/offcpu_block.c
# (glibc has no frame pointers, so its direct caller is skipped by a frame-pointer unwind).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads offcpu_block
SITES=(site_nanosleep_outer site_mutex_outer site_read_outer)
declare -A THREAD=([site_nanosleep_outer]=sleeper [site_mutex_outer]=mtx-waiter [site_read_outer]=pipe-reader)
TOL=10

check_sites() { # NAME FOLDED TRUTH [SITES...]: each site's value within TOL% of the truth; sets detail
	local name=$1 folded=$2 tf=$3 s fn got want bad=""
	detail=""
	shift 3
	s=$(shares "$folded" "$@") || { fail "$name" "folded output unreadable"; return 1; }
	for fn in "$@"; do
		got=$(field "$s" "$fn"); want=$(truth "$tf" "$fn")
		detail+="$fn $(awk -v g="$got" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }')) "
		within_rel "$got" "$want" "$TOL" || bad+="$fn "
	done
	if [ -n "$bad" ]; then fail "$name" "off by more than ${TOL}% for ${bad}: $detail"; return 1; fi
	detail=${detail% }
}

# ---- sites -------------------------------------------------------------------------------------
name=record_offcpu/sites
have=0
if ! rec "$name" 60 -e offcpu -o "$TMPDIR/off.pb.gz" -- "$WL/offcpu_block" -o "$TMPDIR/off.truth" 4; then
	fail "$name" "strobe record -e offcpu failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/off.truth" ]; then
	fail "$name" "the workload wrote no truth (was it run?)"
elif ! fold "$TMPDIR/off.pb.gz" "$TMPDIR/off.folded" off_cpu; then
	fail "$name" "convert --sample-index off_cpu failed: $(errof "$TMPDIR/off.folded.err")"
elif check_sites "$name" "$TMPDIR/off.folded" "$TMPDIR/off.truth" "${SITES[@]}"; then
	ok "$name" "$detail"
	have=1
else
	have=1 # the profile is there; the other cases can still say what else is right or wrong
fi

# ---- parts: blocked + runqueue = off_cpu -------------------------------------------------------
name=record_offcpu/parts
if [ $have = 1 ]; then
	if ! fold "$TMPDIR/off.pb.gz" "$TMPDIR/blocked.folded" blocked; then
		fail "$name" "no sample type blocked: $(errof "$TMPDIR/blocked.folded.err")"
	elif ! fold "$TMPDIR/off.pb.gz" "$TMPDIR/runq.folded" runqueue; then
		fail "$name" "no sample type runqueue: $(errof "$TMPDIR/runq.folded.err")"
	else
		so=$(shares "$TMPDIR/off.folded" "${SITES[@]}")
		sb=$(shares "$TMPDIR/blocked.folded" "${SITES[@]}")
		sr=$(shares "$TMPDIR/runq.folded" "${SITES[@]}")
		bad="" detail=""
		for fn in "${SITES[@]}"; do
			o=$(field "$so" "$fn"); b=$(field "$sb" "$fn"); r=$(field "$sr" "$fn")
			detail+="$fn blocked $(ratio_pct "$b" "$o")% runqueue $(ratio_pct "$r" "$o")% "
			within_rel "$(awk -v b="$b" -v r="$r" 'BEGIN { printf "%.0f", b + r }')" "$o" 2 ||
				bad+="$fn: blocked $b + runqueue $r != off_cpu $o; "
			awk -v b="$b" -v o="$o" 'BEGIN { exit !(o > 0 && b >= 0.8 * o) }' ||
				bad+="$fn: blocked is only $(ratio_pct "$b" "$o")% of its off-CPU time; "
		done
		if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "${detail% }"; fi
	fi
else
	fail "$name" "no profile from the sites case"
fi

# ---- threads: the thread label of each site ----------------------------------------------------
name=record_offcpu/threads
if [ $have = 1 ]; then
	so=$(shares "$TMPDIR/off.folded" "${SITES[@]}")
	bad="" detail=""
	for fn in "${SITES[@]}"; do
		th=${THREAD[$fn]}
		if ! fold "$TMPDIR/off.pb.gz" "$TMPDIR/th.folded" off_cpu --tagfocus "thread=^$th\$"; then
			bad+="convert --tagfocus thread=^$th\$ failed: $(errof "$TMPDIR/th.folded.err"); "; continue
		fi
		got=$(field "$(shares "$TMPDIR/th.folded" "$fn")" "$fn"); all=$(field "$so" "$fn")
		detail+="$fn on $th $(ratio_pct "$got" "$all")% "
		within_rel "$got" "$all" 5 || bad+="only $(ratio_pct "$got" "$all")% of $fn is labelled thread=$th; "
	done
	if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "${detail% }"; fi
else
	fail "$name" "no profile from the sites case"
fi

# ---- kernel: kallsyms frames above the user stack ----------------------------------------------
name=record_offcpu/kernel
if [ $have = 1 ]; then
	bad="" detail=""
	fold "$TMPDIR/off.pb.gz" "$TMPDIR/ns.folded" off_cpu --focus '^site_nanosleep_outer$' || bad+="convert --focus failed; "
	s=$(shares "$TMPDIR/ns.folded" do_nanosleep schedule)
	p=$(pct "$s" do_nanosleep)
	detail+="do_nanosleep in ${p}% of site_nanosleep_outer; "
	within_pp "$p" 100 10 || bad+="do_nanosleep is in only ${p:-0}% of site_nanosleep_outer's time; "
	for fn in "${SITES[@]}"; do
		fold "$TMPDIR/off.pb.gz" "$TMPDIR/k.folded" off_cpu --focus "^$fn\$" || bad+="convert --focus failed; "
		p=$(pct "$(shares "$TMPDIR/k.folded" schedule)" schedule)
		within_pp "$p" 100 10 || bad+="schedule is in only ${p:-0}% of $fn's time; "
	done
	if [ -n "$bad" ]; then fail "$name" "$bad"; else ok "$name" "${detail}schedule in >= 90% of every site"; fi
else
	fail "$name" "no profile from the sites case"
fi

# ---- min-block ---------------------------------------------------------------------------------
name=record_offcpu/min-block
if ! rec "$name" 60 -e offcpu --min-block 80ms -o "$TMPDIR/mb.pb.gz" -- "$WL/offcpu_block" -k 80 -o "$TMPDIR/mb.truth" 3; then
	fail "$name" "strobe record -e offcpu --min-block 80ms failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/mb.pb.gz" "$TMPDIR/mb.folded" off_cpu; then
	fail "$name" "convert failed: $(errof "$TMPDIR/mb.folded.err")"
elif check_sites "$name" "$TMPDIR/mb.folded" "$TMPDIR/mb.truth" site_mutex_outer site_read_outer; then
	got=$(field "$(shares "$TMPDIR/mb.folded" site_nanosleep_outer)" site_nanosleep_outer)
	want=$(truth "$TMPDIR/mb.truth" site_nanosleep_outer)
	# The sleeps that really took >= 80 ms (a loaded machine runs a woken thread late) are kept,
	# rightly: what is judged is the rest, the sleeps the workload measured under 80 ms.
	long=$(truth "$TMPDIR/mb.truth" long_site_nanosleep_outer)
	if awk -v l="${long:-0}" -v w="${want:-0}" 'BEGIN { exit !(w > 0 && l > 0.5 * w) }'; then
		skip "$name" "the machine is too loaded to judge: $(ratio_pct "$long" "$want")% of the 50 ms sleeps took >= 80 ms"
	elif awk -v g="${got:-0}" -v w="${want:-0}" -v l="${long:-0}" 'BEGIN { exit !(w > 0 && g <= l + 0.05 * (w - l)) }'; then
		ok "$name" "site_nanosleep_outer $(ratio_pct "$got" "$want")% of its 50 ms sleeps kept, $(ratio_pct "$long" "$want")% took >= 80 ms; $detail"
	else
		fail "$name" "--min-block 80ms kept $(ratio_pct "$got" "$want")% of site_nanosleep_outer's 50 ms sleeps; $(ratio_pct "$long" "$want")% took >= 80 ms (want at most that + 5% of the rest)"
	fi
fi

# ---- perf: the peer ------------------------------------------------------------------------------
name=record_offcpu/perf
if ! command -v perf >/dev/null; then
	skip "$name" "perf is not installed"
elif ! perf_offcpu_folded "$TMPDIR/perf.folded" "$WL/offcpu_block" -o "$TMPDIR/perf.truth" 3 ||
	! [ -s "$TMPDIR/perf.folded" ]; then
	skip "$name" "perf record -e sched:sched_switch does not work here: $(errof "$TMPDIR/perf.folded.log")"
elif check_sites "$name (perf against truth)" "$TMPDIR/perf.folded" "$TMPDIR/perf.truth" "${SITES[@]}" && pdetail=$detail; then
	if [ $have != 1 ]; then
		fail "$name" "perf: $pdetail; no strobe profile to compare"
	else
		ps=$(shares "$TMPDIR/perf.folded" "${SITES[@]}"); ss=$(shares "$TMPDIR/off.folded" "${SITES[@]}")
		bad="" detail=""
		for fn in "${SITES[@]}"; do
			# different runs, so compare each one's ratio to its own truth
			a=$(ratio_pct "$(field "$ss" "$fn")" "$(truth "$TMPDIR/off.truth" "$fn")")
			b=$(ratio_pct "$(field "$ps" "$fn")" "$(truth "$TMPDIR/perf.truth" "$fn")")
			detail+="$fn strobe ${a}% perf ${b}% of truth "
			within_pp "$a" "$b" "$TOL" || bad+="$fn "
		done
		if [ -n "$bad" ]; then fail "$name" "strobe and perf differ by more than $TOL% for $bad: $detail"
		else ok "$name" "${detail% }"; fi
	fi
fi
exit $st
