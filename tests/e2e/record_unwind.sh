#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Complete stacks without frame pointers: `strobe record --call-graph auto|dwarf` (unwind tables,
# libdwfl) against the truth, on workloads whose callers sit under Debian's glibc (built without
# frame pointers) or are built with -O2 -fomit-frame-pointer themselves (build/workloads/*-nofp).
#   qsort        qsort_cmp (frame pointers in our code, none in glibc's merge sort): cmp_hot's CPU
#                share within ±3 pp of the truth, and >= 99% of its samples under the whole chain
#                main;sort_rounds;sort_once;...qsort...;cmp_hot rooted at _start. The same
#                workload with --call-graph fp is the control: its share of complete stacks is
#                printed (a frame-pointer walk loses everything above glibc's frames). No sample of
#                cmp_hot may have a frame below a named caller left as a raw address
#   late-libc    qsort_cmp run four times in a row for 0.3 s, each with an LD_LIBRARY_PATH of 3000
#                absent directories, so that ld.so maps libc 0.1 to 0.3 s after the exec: no sample
#                of cmp_hot has a frame left as a raw address below a named caller, and >= 95% of
#                them are complete as in qsort. Stacks summed in the kernel are named when read,
#                ahead of the held MMAP2 of libc: the recorder reads the process's maps again, and
#                the exec's records replayed after that read must not empty what it read (before:
#                7 to 47 of some 800 samples had raw libc frames, in every run). The kernel's walk
#                asks for the mappings again when a return address a table row found is in none of
#                them (before: it waited for a leaf in libc, and 13% of the samples stopped there)
#   many-maps    --mode bpf, qsort_cmp -x 80: 80 anonymous executable mappings below the program,
#                so its code and libc's lie beyond the 64 mappings the kernel walk's table of a
#                process holds (as in a process with many libraries), and no sample is copied
#                for the recorder to unwind (STROBE_TEST_NO_COPIES: the kernel's walk alone):
#                >= 99% of cmp_hot's samples complete, the frames found by their file (the
#                program's from its mm, libc's by bpf_find_vma; the binaries' rows by device and
#                inode; STROBE_DEBUG's file-rows > 0). Without: 0% (the walk ends at cmp_hot)
#   qsort-nofp   the same on qsort_cmp-nofp (no frame pointers anywhere), --call-graph dwarf
#   split-nofp   cpu_split-nofp: the 60/30/10 split within ±3 pp, and >= 99% of the burn
#                samples under clone3/start_thread;thread_main;run_rounds;burn_X
#   offcpu       offcpu_block, -e offcpu: each blocking function (site_nanosleep, site_mutex_lock,
#                site_read) directly above its libc frame, with its off-CPU time within ±10% of
#                the time the workload measured around the call
#   debug-frame  cpu_split-dbgframe (built -g -fno-asynchronous-unwind-tables: the workload's own
#                functions have CFI in .debug_frame only), --call-graph dwarf: the split within
#                ±3 pp and >= 99% of the burn samples complete, as split-nofp, with frames stepped
#                by .debug_frame counted by strobe (STROBE_DEBUG's debug-frame > 0)
#   deep         deep_recurse-nofp: 100 frames of recursion (about 30 KiB of stack, past the 16 KiB
#                copy), --call-graph auto: >= 97% of the samples in spin() have the whole chain
#                _start;...;main;run;recurse x100;spin (the rest: the last samples, processed after
#                the workload exited, when its stack can no longer be read on: truncated)
#   hole         stack_hole-nofp: a frame with a 12 KiB buffer whose middle pages were never touched,
#                so the kernel's stack copy stops short at them (copy_from_user_nmi cannot fault a
#                page in), --call-graph auto: >= 97% of the samples in spin() have the whole chain
#                clone3;start_thread;thread_main;hole;spin (the walk reads the rest from the
#                process, as for a copy too small). SKIP when the pages were present after all
#   perf         the peer: perf record --call-graph dwarf on qsort_cmp-nofp, cmp_hot's share within
#                ±3 pp of its truth and of strobe's (qsort-nofp)
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads qsort_cmp qsort_cmp-nofp cpu_split-nofp offcpu_block cpu_split-dbgframe deep_recurse-nofp \
	stack_hole-nofp
TOL_PP=3
TOL=10
if [ "$(uname -m)" != x86_64 ]; then
	skip record_unwind "unwinding with tables is implemented for x86-64 only"
	exit 0
fi

# Complete = unwound from cmp_hot through glibc's qsort to _start, every frame named.
QSORT_RE='^_start;[^;]*libc_start_main[^;]*;([^;]*;)?main;sort_rounds;sort_once;[^;]*qsort[^;]*;(.*;)?cmp_hot(;|$)'
# raw_below FOLDED: the samples of cmp_hot with a frame below a named caller left as a raw address
# (in no mapping the recorder knew when it named the stack); a raw root is where a walk stopped
raw_below() { awk '/(^|;)cmp_hot[; ]/ { n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";"); for (i = 2; i <= k; i++) if (f[i] ~ /^0x[0-9a-f]+$/) { s += n; break } } END { print s + 0 }' "$1"; }

check_qsort() { # NAME FOLDED TRUTH: sets detail, returns 1 on failure (after a FAIL line)
	local name=$1 f=$2 tf=$3 got want c
	got=$(pct "$(shares "$f" cmp_hot)" cmp_hot); want=$(truth_share "$tf" cmp_hot)
	c=$(complete "$f" cmp_hot "$QSORT_RE")
	detail="cmp_hot ${got}% (truth ${want}%), ${c}% of its samples under main;...;qsort;...;cmp_hot"
	if ! within_pp "$got" "$want" "$TOL_PP"; then fail "$name" "share off by more than $TOL_PP pp: $detail"; return 1; fi
	if ! atleast "$c" 99; then fail "$name" "stacks incomplete: $detail"; return 1; fi
}

# ---- qsort: auto, with the fp control --------------------------------------------------------
name=record_unwind/qsort
if ! rec "$name" 60 -F 999 -o "$TMPDIR/q.pb.gz" -- "$WL/qsort_cmp" -o "$TMPDIR/q.truth" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/q.pb.gz" "$TMPDIR/q.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/q.folded.err")"
elif raw=$(raw_below "$TMPDIR/q.folded") && [ "$raw" != 0 ]; then
	fail "$name" "$raw samples of cmp_hot have a frame below a named caller left as a raw address: $(grep -m1 ';0x[0-9a-f]*;.*cmp_hot' "$TMPDIR/q.folded" | cut -c1-160)"
elif check_qsort "$name" "$TMPDIR/q.folded" "$TMPDIR/q.truth"; then
	ctl=""
	if rec "$name-fp" 60 -F 999 --call-graph fp -o "$TMPDIR/qfp.pb.gz" -- "$WL/qsort_cmp" 2 &&
		fold "$TMPDIR/qfp.pb.gz" "$TMPDIR/qfp.folded" samples; then
		ctl="; --call-graph fp: $(complete "$TMPDIR/qfp.folded" cmp_hot "$QSORT_RE")% complete"
	fi
	ok "$name" "$detail$ctl"
fi

# ---- late-libc: libc mapped 0.1 to 0.3 s after the exec, four times --------------------------
name=record_unwind/late-libc
llp=$(awk 'BEGIN { for (i = 0; i < 3000; i++) printf "/nx%d:", i }')
# (the first 2 s of a recording read the kernel's sums every 20 to 100 ms: four chances there)
if ! rec "$name" 60 -F 999 -o "$TMPDIR/ll.pb.gz" -- sh -c \
	'for i in 1 2 3 4; do env LD_LIBRARY_PATH="$0" "$1" 0.3 || exit 1; done' "$llp" "$WL/qsort_cmp"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/ll.pb.gz" "$TMPDIR/ll.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/ll.folded.err")"
else
	all=$(sum "$TMPDIR/ll.folded" '(^|;)cmp_hot(;|$)') raw=$(raw_below "$TMPDIR/ll.folded")
	c=$(complete "$TMPDIR/ll.folded" cmp_hot "$QSORT_RE")
	if [ "$all" -lt 100 ]; then
		fail "$name" "only $all samples of cmp_hot (the workload did not run?)"
	elif [ "$raw" != 0 ]; then
		fail "$name" "$raw of $all samples of cmp_hot have a frame below a named caller left as a raw address: $(grep -m1 ';0x[0-9a-f]*;.*cmp_hot' "$TMPDIR/ll.folded" | cut -c1-160)"
	elif ! atleast "$c" 95; then
		fail "$name" "only ${c}% of $all samples of cmp_hot complete: $(grep -v '^_start;' "$TMPDIR/ll.folded" | grep -m1 'cmp_hot' | cut -c1-160)"
	else
		ok "$name" "$all samples of cmp_hot, none with a raw address below a named caller, ${c}% complete"
	fi
fi

# ---- many-maps: libc beyond the kernel walk's 64 mappings of a process -----------------------
name=record_unwind/many-maps
if [ "$(id -u)" != 0 ] || [ ! -r /sys/kernel/btf/vmlinux ]; then
	skip "$name" "needs root and kernel BTF (/sys/kernel/btf/vmlinux) for the eBPF walk"
elif ! STROBE_DEBUG=1 STROBE_TEST_NO_COPIES=1 rec "$name" 60 --mode bpf -F 999 -o "$TMPDIR/mm.pb.gz" -- "$WL/qsort_cmp" -x 80 -o "$TMPDIR/mm.truth" 2; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/mm.pb.gz" "$TMPDIR/mm.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/mm.folded.err")"
elif check_qsort "$name" "$TMPDIR/mm.folded" "$TMPDIR/mm.truth"; then
	fr=$(grep -o 'file-rows [0-9]*' "$TMPDIR/$(_fname "$name").err" | awk '{ print $2 }')
	if ! [ "${fr:-0}" -gt 0 ]; then fail "$name" "complete, but no frame's row was found by its file (file-rows ${fr:-?}): did libc lie beyond the 64 mappings? $detail"
	else ok "$name" "$detail; $fr frames' rows found by their file"; fi
fi

# ---- qsort-nofp: dwarf, no frame pointers anywhere ------------------------------------------
name=record_unwind/qsort-nofp
qn_ok=0
if ! rec "$name" 60 -F 999 --call-graph dwarf -o "$TMPDIR/qn.pb.gz" -- "$WL/qsort_cmp-nofp" -o "$TMPDIR/qn.truth" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/qn.pb.gz" "$TMPDIR/qn.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/qn.folded.err")"
elif check_qsort "$name" "$TMPDIR/qn.folded" "$TMPDIR/qn.truth"; then
	ok "$name" "$detail"
	qn_ok=1
fi

# ---- split-nofp: the 60/30/10 split built -O2 -fomit-frame-pointer ---------------------------
name=record_unwind/split-nofp
if ! rec "$name" 60 -F 999 -o "$TMPDIR/s.pb.gz" -- "$WL/cpu_split-nofp" -o "$TMPDIR/s.truth" 4; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/s.pb.gz" "$TMPDIR/s.folded" cpu; then
	fail "$name" "convert failed: $(errof "$TMPDIR/s.folded.err")"
else
	bad="" detail=""
	split_complete "$TMPDIR/s.folded" "$TMPDIR/s.truth" "$TOL_PP"
	if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
fi

# ---- debug-frame: CFI only in .debug_frame -----------------------------------------------------
name=record_unwind/debug-frame
if ! readelf -SW "$WL/cpu_split-dbgframe" 2>/dev/null | grep -q '\.debug_frame'; then
	fail "$name" "$WL/cpu_split-dbgframe has no .debug_frame (the compiler put its CFI elsewhere?)"
elif ! STROBE_DEBUG=1 rec "$name" 60 -F 999 --call-graph dwarf -o "$TMPDIR/df.pb.gz" -- "$WL/cpu_split-dbgframe" -o "$TMPDIR/df.truth" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/df.pb.gz" "$TMPDIR/df.folded" cpu; then
	fail "$name" "convert failed: $(errof "$TMPDIR/df.folded.err")"
else
	dframes=$(sed -n 's/.* debug-frame \([0-9]*\).*/\1/p' "$TMPDIR/$(_fname "$name").err" | tail -1)
	bad="" detail="frames stepped by .debug_frame: ${dframes:-none}; "
	split_complete "$TMPDIR/df.folded" "$TMPDIR/df.truth" "$TOL_PP"
	[ "${dframes:-0}" -gt 0 ] || bad+="no frame stepped by .debug_frame; "
	if [ -n "$bad" ]; then fail "$name" "${bad}: $detail"; else ok "$name" "${detail% }"; fi
fi

# ---- deep: a stack deeper than the copy ------------------------------------------------------
name=record_unwind/deep
# deep_complete FOLDED: % of the samples in spin whose stack is _start;...;main;run, then exactly
# 100 recurse and spin (compared as a string: mawk's regular expressions have no {n} and give up
# on one spelled out that long)
deep_complete() {
	awk -v want="$(printf 'recurse;%.0s' {1..100})spin" '
		{ sp = match($0, / [0-9]+$/); if (!sp) next
		  v = substr($0, sp + 1) + 0; st = substr($0, 1, sp - 1)
		  if (index(";" st ";", ";spin;") == 0) next
		  all += v
		  if (sub(/^_start;[^;]*libc_start_main[^;]*;([^;]*;)?main;run;/, "", st) &&
		      (st == want || index(st, want ";") == 1)) good += v }
		END { if (!all) { print "nan"; exit 1 } printf "%.2f\n", 100 * good / all }' "$1"
}
if ! rec "$name" 60 -F 999 -o "$TMPDIR/dr.pb.gz" -- "$WL/deep_recurse-nofp" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/dr.pb.gz" "$TMPDIR/dr.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/dr.folded.err")"
else
	c=$(deep_complete "$TMPDIR/dr.folded")
	detail="${c}% of the samples in spin under _start;...;main;run;recurse x100;spin"
	if atleast "$c" 97; then ok "$name" "$detail"; else fail "$name" "stacks incomplete: $detail"; fi
fi

# ---- hole: a copy that stops short, at a page of the stack never touched ------------------------
name=record_unwind/hole
if ! rec "$name" 60 -F 999 -o "$TMPDIR/sh.pb.gz" -- "$WL/stack_hole-nofp" -o "$TMPDIR/sh.truth" 2; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/sh.pb.gz" "$TMPDIR/sh.folded" samples; then
	fail "$name" "convert failed: $(errof "$TMPDIR/sh.folded.err")"
else
	absent=$(truth "$TMPDIR/sh.truth" absent_pages || echo 0)
	c=$(complete "$TMPDIR/sh.folded" spin '^((__)?clone3?;)?start_thread;thread_main;hole[^;]*;spin(;|$)')
	detail="${c}% of the samples in spin under start_thread;thread_main;hole;spin, $absent page(s) of hole's buffer not present"
	if [ "$absent" -lt 1 ]; then
		skip "$name" "the buffer's pages were all present (a compiler that probes the stack, or transparent huge pages on thread stacks): nothing to test; $detail"
	elif atleast "$c" 97; then ok "$name" "$detail"; else fail "$name" "stacks incomplete: $detail"; fi
fi

# ---- offcpu: the function that called libc, directly above it --------------------------------
name=record_unwind/offcpu
if ! rec "$name" 60 -e offcpu -o "$TMPDIR/o.pb.gz" -- "$WL/offcpu_block" -o "$TMPDIR/o.truth" 4; then
	fail "$name" "strobe record -e offcpu failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/o.pb.gz" "$TMPDIR/o.folded" off_cpu; then
	fail "$name" "convert failed: $(errof "$TMPDIR/o.folded.err")"
else
	bad="" detail=""
	sites_above_libc "$TMPDIR/o.folded" "$TMPDIR/o.truth" "$TOL"
	if [ -n "$bad" ]; then fail "$name" "not directly above libc for ±${TOL}% of the truth: $bad: $detail"
	else ok "$name" "${detail% }"; fi
fi

# perf record -B --call-graph dwarf, then perf script into $TMPDIR/p.script. perf 6.1 of Debian
# now and then aborts in its own build-id code, in record or in script ("stack smashing
# detected"): each step is tried twice, and a peer that keeps crashing is a SKIP, not a failure
# of strobe.
perf_peer() {
	local try
	for try in 1 2; do
		perf record -q -B -e cpu-clock -F 999 --call-graph dwarf -o "$TMPDIR/p.data" -- \
			"$WL/qsort_cmp-nofp" -o "$TMPDIR/p.truth" 3 >"$TMPDIR/p.log" 2>&1 || continue
		perf script -i "$TMPDIR/p.data" >"$TMPDIR/p.script" 2>>"$TMPDIR/p.log" && return 0
	done
	return 1
}

# ---- perf --call-graph dwarf, the peer --------------------------------------------------------
name=record_unwind/perf
if ! command -v perf >/dev/null; then
	skip "$name" "perf is not installed"
elif ! perf_peer; then
	skip "$name" "perf record --call-graph dwarf | perf script failed twice here (perf itself): $(errof "$TMPDIR/p.log")"
elif ! "$STROBE_FAST" collapse "$TMPDIR/p.script" >"$TMPDIR/p.folded" 2>>"$TMPDIR/p.log"; then
	fail "$name" "strobe collapse of perf script's output failed: $(errof "$TMPDIR/p.log")"
else
	pg=$(pct "$(shares "$TMPDIR/p.folded" cmp_hot)" cmp_hot); pw=$(truth_share "$TMPDIR/p.truth" cmp_hot)
	pc=$(complete "$TMPDIR/p.folded" cmp_hot 'main;sort_rounds;sort_once;.*qsort.*;cmp_hot')
	detail="perf: cmp_hot ${pg}% (truth ${pw}%), ${pc}% under main;...;qsort;...;cmp_hot"
	if ! within_pp "$pg" "$pw" "$TOL_PP"; then
		fail "$name" "perf itself is off the truth: $detail"
	elif [ $qn_ok != 1 ]; then
		fail "$name" "$detail; no strobe profile to compare (qsort-nofp failed)"
	else
		sg=$(pct "$(shares "$TMPDIR/qn.folded" cmp_hot)" cmp_hot)
		sw=$(truth_share "$TMPDIR/qn.truth" cmp_hot)
		# each against its own run's truth: the runs differ a little
		if within_pp "$(awk -v a="$pg" -v b="$pw" 'BEGIN { print a - b }')" "$(awk -v a="$sg" -v b="$sw" 'BEGIN { print a - b }')" "$TOL_PP"; then
			ok "$name" "$detail; strobe ${sg}% (truth ${sw}%)"
		else
			fail "$name" "strobe and perf differ from their truths by more than $TOL_PP pp apart: $detail; strobe ${sg}% (truth ${sw}%)"
		fi
	fi
fi
exit $st
