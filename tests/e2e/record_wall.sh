#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record -e wall` against the truth. build/workloads/wall_request runs four worker threads
# whose "requests" spend ~20 ms of CPU in req_compute and ~280 ms asleep under req_wait_outer, and
# measures both. A wall profile holds every sample type in one file, so the two halves of a
# request can be read side by side:
#   cpu    cpu/nanoseconds of req_compute within ±10% of its measured CPU time
#   off    off_cpu/nanoseconds of req_wait_outer within ±10% of its measured sleeping time
#   ratio  in the one profile, req_wait_outer's off-CPU over req_compute's CPU within ±15% of the
#          true ratio (~14), and both under handle_request
#   types  samples, cpu, off_cpu, blocked and runqueue are all there
#   perf   the peer for the off-CPU half: perf sched_switch stacks + switch events on the same
#          workload, req_wait_outer within ±10% of its truth
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads wall_request
TOL=10
ms() { awk -v v="${1:-0}" 'BEGIN { printf "%.1f ms", v / 1e6 }'; }

name=record_wall/cpu
have=0
if ! rec "$name" 60 -e wall -F 999 -o "$TMPDIR/wall.pb.gz" -- "$WL/wall_request" -o "$TMPDIR/wall.truth" 4; then
	fail "$name" "strobe record -e wall failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/wall.truth" ]; then
	fail "$name" "the workload wrote no truth (was it run?)"
elif ! fold "$TMPDIR/wall.pb.gz" "$TMPDIR/cpu.folded" cpu; then
	fail "$name" "convert --sample-index cpu failed: $(errof "$TMPDIR/cpu.folded.err")"
else
	have=1
	sc=$(shares "$TMPDIR/cpu.folded" req_compute handle_request)
	got=$(field "$sc" req_compute); want=$(truth "$TMPDIR/wall.truth" req_compute)
	if within_rel "$got" "$want" "$TOL"; then ok "$name" "req_compute $(ms "$got") of CPU (truth $(ms "$want"))"
	else fail "$name" "req_compute has $(ms "$got") of CPU, truth $(ms "$want") (±${TOL}%)"; fi
fi

name=record_wall/off
if [ $have != 1 ]; then
	fail "$name" "no wall profile"
elif ! fold "$TMPDIR/wall.pb.gz" "$TMPDIR/off.folded" off_cpu; then
	fail "$name" "convert --sample-index off_cpu failed: $(errof "$TMPDIR/off.folded.err")"
else
	so=$(shares "$TMPDIR/off.folded" req_wait_outer handle_request)
	got=$(field "$so" req_wait_outer); want=$(truth "$TMPDIR/wall.truth" req_wait_outer)
	if within_rel "$got" "$want" "$TOL"; then ok "$name" "req_wait_outer $(ms "$got") off CPU (truth $(ms "$want"))"
	else fail "$name" "req_wait_outer has $(ms "$got") off CPU, truth $(ms "$want") (±${TOL}%)"; fi
fi

name=record_wall/ratio
if [ $have != 1 ] || [ ! -s "$TMPDIR/off.folded" ]; then
	fail "$name" "no wall profile"
else
	c=$(field "$sc" req_compute); o=$(field "$so" req_wait_outer)
	# the same two functions, counted only in stacks that have handle_request above them
	fold "$TMPDIR/wall.pb.gz" "$TMPDIR/hc.folded" cpu --focus '^handle_request$' &&
		hc=$(field "$(shares "$TMPDIR/hc.folded" req_compute)" req_compute) || hc=0
	fold "$TMPDIR/wall.pb.gz" "$TMPDIR/ho.folded" off_cpu --focus '^handle_request$' &&
		ho=$(field "$(shares "$TMPDIR/ho.folded" req_wait_outer)" req_wait_outer) || ho=0
	got=$(awk -v o="$o" -v c="$c" 'BEGIN { if (c > 0) printf "%.3f", o / c }')
	want=$(awk -v o="$(truth "$TMPDIR/wall.truth" req_wait_outer)" -v c="$(truth "$TMPDIR/wall.truth" req_compute)" \
		'BEGIN { if (c > 0) printf "%.3f", o / c }')
	if ! within_rel "$got" "$want" 15; then
		fail "$name" "off-CPU/CPU of a request is ${got:-undefined}, truth $want (±15%)"
	elif ! within_rel "$hc" "$c" 1 || ! within_rel "$ho" "$o" 1; then
		fail "$name" "req_compute and req_wait_outer are not both under handle_request ($(ms "$hc") of $(ms "$c") CPU, $(ms "$ho") of $(ms "$o") off)"
	else
		ok "$name" "off-CPU/CPU $got, truth $want"
	fi
fi

name=record_wall/types
if [ $have != 1 ]; then
	fail "$name" "no wall profile"
else
	bad=""
	for t in samples cpu off_cpu blocked runqueue; do
		fold "$TMPDIR/wall.pb.gz" "$TMPDIR/t.folded" "$t" || bad+="$t ($(errof "$TMPDIR/t.folded.err")) "
	done
	if [ -n "$bad" ]; then fail "$name" "sample types missing: $bad"; else ok "$name" "samples cpu off_cpu blocked runqueue"; fi
fi

name=record_wall/perf
if ! command -v perf >/dev/null; then
	skip "$name" "perf is not installed"
elif ! perf_offcpu_folded "$TMPDIR/perf.folded" "$WL/wall_request" -o "$TMPDIR/perf.truth" 3 ||
	! [ -s "$TMPDIR/perf.folded" ]; then
	skip "$name" "perf record -e sched:sched_switch does not work here: $(errof "$TMPDIR/perf.folded.log")"
else
	got=$(field "$(shares "$TMPDIR/perf.folded" req_wait_outer)" req_wait_outer)
	want=$(truth "$TMPDIR/perf.truth" req_wait_outer)
	if ! within_rel "$got" "$want" "$TOL"; then
		fail "$name" "perf sees $(ms "$got") under req_wait_outer, truth $(ms "$want") (the workload or the peer is broken)"
	elif [ $have != 1 ] || [ ! -s "$TMPDIR/off.folded" ]; then
		fail "$name" "perf $(ms "$got") (truth $(ms "$want")); no strobe profile to compare"
	else
		a=$(ratio_pct "$(field "$so" req_wait_outer)" "$(truth "$TMPDIR/wall.truth" req_wait_outer)")
		b=$(ratio_pct "$got" "$want")
		if within_pp "$a" "$b" "$TOL"; then ok "$name" "req_wait_outer: strobe ${a}%, perf ${b}% of truth"
		else fail "$name" "req_wait_outer: strobe ${a}%, perf ${b}% of truth"; fi
	fi
fi
exit $st
