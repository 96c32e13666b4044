#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record` on the eBPF programs (--mode bpf: cli/record_bpf.c) and on the perf path
# (--mode perf), the same truth workloads through each, so that the two paths are held to the
# same tolerances:
#   cpu-MODE     record -F 999 -e cpu -- cpu_split -c 3: each burner's share within ±3 points of
#                what its thread CPU clock measured; as many samples as 3 s of CPU make at
#                999 Hz, within 15 %
#   periodic-MODE  record -F 99 -- cpu_split -P 10101010: three threads, each in one function,
#                running 60/30/10 % of every 10.1 ms (the sampling period) and sleeping the
#                rest; each function's share within ±5 points of its thread CPU clock. An event
#                on each CPU's wall clock meets each thread at one phase of its cycle every
#                time (one function took 50-100 % of the samples); per-thread events do not
#   nofp-MODE    record -F 999 -- cpu_split-nofp (no frame pointers anywhere, through glibc's
#                start_thread): the split, and >= 99 % of each burner's samples under
#                start_thread;thread_main;run_rounds;burn_X
#   offcpu-MODE  record -e offcpu -- offcpu_block 2: each blocking site's off-CPU time within
#                ±10 % of the truth, its function directly above its libc frame
#   path         bpf's summary says the kernel summed the samples and intervals (and perf's does
#                not): each mode really took its own path
#   copies       bpf, every sample sent to user space with its stack copy (STROBE_TEST_COPY_ALL)
#                and unwound there: nofp's split and complete stacks, every sample copied
#   copies-full  the same at 999 Hz, where the ring of copies fills between two reads: the rest
#                is summed as walked, and the samples are as many as the CPU used makes
# Needs root and kernel BTF for the bpf cases (SKIPs otherwise).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads cpu_split cpu_split-nofp offcpu_block
need_perf_events record_bpf
MODES="perf bpf"
if [ "$(id -u)" != 0 ] || [ ! -r /sys/kernel/btf/vmlinux ]; then
	skip record_bpf/bpf "needs root and kernel BTF (/sys/kernel/btf/vmlinux)"
	MODES=perf
fi

# burn_split FOLDED TRUTH POINTS: burn_60/30/10's shares against the truth file's into bad/detail, the
# shares themselves into s
burn_split() {
	local fn got want
	bad="" detail=""
	s=$(shares "$1" burn_60 burn_30 burn_10)
	for fn in burn_60 burn_30 burn_10; do
		got=$(pct "$s" "$fn"); want=$(truth_share "$2" "$fn")
		detail+="$fn ${got}% (truth ${want}%) "
		within_pp "$got" "$want" "$3" || bad+="$fn "
	done
}

for m in $MODES; do
	# ---- cpu --------------------------------------------------------------------------------
	name=record_bpf/cpu-$m
	if ! rec "$name" 60 --mode "$m" -F 999 -o "$TMPDIR/cpu-$m.folded" -- "$WL/cpu_split" -c 3 -o "$TMPDIR/cpu-$m.truth" 100; then
		fail "$name" "record failed ($rc): $(recerr "$name")"
	else
		burn_split "$TMPDIR/cpu-$m.folded" "$TMPDIR/cpu-$m.truth" 3
		n=$(awk -v t="$(field "$s" total)" 'BEGIN { printf "%.0f", t / 1001001 }') # ns / period
		want=$(awk -v c="$(truth "$TMPDIR/cpu-$m.truth" process_cpu_ns)" 'BEGIN { printf "%.0f", c * 999 / 1e9 }')
		if [ -n "$bad" ]; then fail "$name" "share off by more than 3 pp for $bad: $detail"
		elif ! within_rel "$n" "$want" 15; then fail "$name" "$n samples for $want expected from the CPU the workload used: $detail"
		else ok "$name" "$n samples ($want expected); ${detail% }"; fi
	fi
	err_cpu=$TMPDIR/$(_fname "$name").err

	# ---- periodic: a workload whose cycle is the sampling period ------------------------------
	name=record_bpf/periodic-$m
	if ! rec "$name" 60 --mode "$m" -F 99 -o "$TMPDIR/per-$m.folded" -- "$WL/cpu_split" -P 10101010 -c 4 -o "$TMPDIR/per-$m.truth" 100; then
		fail "$name" "record failed ($rc): $(recerr "$name")"
	else
		burn_split "$TMPDIR/per-$m.folded" "$TMPDIR/per-$m.truth" 5
		if [ -n "$bad" ]; then fail "$name" "share off by more than 5 pp for $bad(sampled at one phase of the cycle?): $detail"
		else ok "$name" "${detail% }"; fi
	fi

	# ---- nofp -------------------------------------------------------------------------------
	name=record_bpf/nofp-$m
	if ! rec "$name" 60 --mode "$m" -F 999 -o "$TMPDIR/nofp-$m.folded" -- "$WL/cpu_split-nofp" -c 2 -o "$TMPDIR/nofp-$m.truth" 100; then
		fail "$name" "record failed ($rc): $(recerr "$name")"
	else
		bad="" detail=""
		split_complete "$TMPDIR/nofp-$m.folded" "$TMPDIR/nofp-$m.truth" 3
		if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
	fi

	# ---- offcpu -----------------------------------------------------------------------------
	name=record_bpf/offcpu-$m
	if ! rec "$name" 60 --mode "$m" -e offcpu -o "$TMPDIR/off-$m.folded" -- "$WL/offcpu_block" -o "$TMPDIR/off-$m.truth" 2; then
		fail "$name" "record failed ($rc): $(recerr "$name")"
	else
		bad="" detail=""
		sites_above_libc "$TMPDIR/off-$m.folded" "$TMPDIR/off-$m.truth" 10
		if [ -n "$bad" ]; then fail "$name" "not within 10% directly above libc for $bad: $detail"; else ok "$name" "${detail% }"; fi
	fi
	err_off=$TMPDIR/$(_fname "$name").err

	# ---- path -------------------------------------------------------------------------------
	name=record_bpf/path-$m
	kc=$(grep -c "on-CPU samples summed in the kernel" "$err_cpu")
	ko=$(grep -c "off-CPU intervals summed in the kernel" "$err_off")
	if [ "$m" = bpf ] && { [ "$kc" = 0 ] || [ "$ko" = 0 ]; }; then
		fail "$name" "--mode bpf did not sum in the kernel: $(errof "$err_cpu") / $(errof "$err_off")"
	elif [ "$m" = perf ] && [ "$kc$ko" != 00 ]; then
		fail "$name" "--mode perf summed in the kernel: $(errof "$err_cpu") / $(errof "$err_off")"
	else
		ok "$name" "$(grep -c "summed in the kernel" "$err_cpu" "$err_off" | awk -F: "{ s += \$2 } END { print s }") summary lines of kernel sums"
	fi
done

# ---- copies: samples the kernel's walk could not finish, unwound in user space -------------------
# A sample walked before its process's tables were in (or stopped at a row the program cannot
# follow) goes to user space with its registers and its stack copy (oncpu.bpf.c copy_sample);
# STROBE_TEST_COPY_ALL sends every sample that way, so code without frame pointers is complete
# only if the copy's registers, stack and kernel part are right and the unwinder gets them.
# copied NAME FREQ SECONDS TOL: record cpu_split-nofp with every sample copied; the split and
# completeness into bad/detail, the walk's counters into user copied unwound full; 1 when the
# record failed (said)
copied() {
	local name=$1 f=$TMPDIR/$(_fname "$1")
	bad="" detail="" user="" copied="" unwound="" full=""
	if ! STROBE_DEBUG=1 STROBE_TEST_COPY_ALL=1 rec "$name" 60 -F "$2" -o "$f.folded" -- "$WL/cpu_split-nofp" -c "$3" -o "$f.truth" 100; then
		fail "$name" "record failed ($rc): $(recerr "$name")"
		return 1
	fi
	split_complete "$f.folded" "$f.truth" "$4"
	read -r user copied unwound full <<<"$(sed -n 's/.*on-CPU walks: user \([0-9]*\) .* copied \([0-9]*\) (unwound \([0-9]*\), ring full \([0-9]*\)).*/\1 \2 \3 \4/p' "$f.err")"
}
if [[ " $MODES " == *" bpf "* ]]; then
	name=record_bpf/copies
	if copied "$name" 149 4 5; then
		if [ -z "$user" ] || [ "$user" = 0 ] || [ "$copied" != "$user" ] || [ "$unwound" != "$copied" ]; then
			fail "$name" "not every sample went through a copy: user ${user:-?} copied ${copied:-?} unwound ${unwound:-?} ($(recerr "$name"))"
		elif [ -n "$bad" ]; then fail "$name" "${bad}: $detail"
		else ok "$name" "$copied samples copied and unwound in user space: ${detail% }"; fi
	fi
	# the ring of copies full (999 Hz, rounds of a second): the rest summed as walked, none lost
	name=record_bpf/copies-full
	if copied "$name" 999 5 3; then
		f=$TMPDIR/$(_fname "$name")
		n=$(awk '{ t += $NF } END { printf "%.0f", t / 1001001 }' "$f.folded")
		want=$(awk -v c="$(truth "$f.truth" process_cpu_ns)" 'BEGIN { printf "%.0f", c * 999 / 1e9 }')
		if [ "${full:-0}" = 0 ]; then
			skip "$name" "the ring never filled (user ${user:-?} copied ${copied:-?}): nothing to judge"
		elif [ -n "$bad" ]; then fail "$name" "${bad}: $detail"
		elif ! within_rel "$n" "$want" 15; then fail "$name" "$n samples for $want expected from the CPU the workload used (ring full $full)"
		else ok "$name" "$copied copied, $full summed as walked with the ring full; $n samples ($want expected)"; fi
	fi
fi
exit $st
