#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Python frames in `strobe record`'s eBPF on-CPU path (agent/python.bpf.h reads the interpreter's
# frames at sample time, agent/python.c names them), with tests/workloads/python/hot_py.py, whose
# hot_py_alpha and hot_py_beta burn CPU 2:1 and measure their own thread CPU time:
#   command   `strobe record --mode bpf -- python3 hot_py.py`: the two functions' shares within
#             ±5 points of the truth, under <module>;main
#   early     the command's interpreter is found soon after it starts, and its last samples
#             (read after it exited) keep their Python frames: at most 5 % of its
#             samples keep the native _PyEval_EvalFrameDefault in place of Python frames
#   pid       `strobe record -p PID` of a Python already running: the same split
# Needs root, kernel BTF and python3 (SKIP without; FAIL without python3 when CI=true).
set -u
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP record_python: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP record_python: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
PY=${PYTHON3:-$(if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3 || true; fi)}
if [ -z "$PY" ]; then
	if [ "${CI:-}" = true ]; then echo "FAIL record_python: python3 is not installed (scripts/deps.sh check)"; exit 1; fi
	echo "SKIP record_python: python3 is not installed"; exit 0
fi
HOT=$ROOT/tests/workloads/python/hot_py.py
TMPDIR=${TMPDIR:-/tmp}
ppid_=
trap '[ -n "$ppid_" ] && kill "$ppid_" 2>/dev/null' EXIT

# split NAME FOLDED TRUTH: alpha's share of the two against the truth's, into $got/$want
split() {
	local a b ta tb
	a=$(sum "$2" ';hot_py_alpha(;|$)')
	b=$(sum "$2" ';hot_py_beta(;|$)')
	ta=$(awk '$1 == "hot_py_alpha" { print $2 }' "$3")
	tb=$(awk '$1 == "hot_py_beta" { print $2 }' "$3")
	got=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a + b) printf "%.1f", 100 * a / (a + b); else print "nan" }')
	want=$(awk -v a="$ta" -v b="$tb" 'BEGIN { if (a + b) printf "%.1f", 100 * a / (a + b); else print "nan" }')
	if [ "$got" = nan ] || [ "$want" = nan ]; then fail "$1" "no samples under hot_py_alpha/beta, or no truth: $(head -2 "$2" | cut -c1-200)"
	elif ! within_pp "$got" "$want" 5; then fail "$1" "hot_py_alpha ${got}% of the two, truth ${want}% ($a, $b)"
	else ok "$1" "hot_py_alpha ${got}% of the two, truth ${want}%"; fi
}

# ---- command, early ---------------------------------------------------------------------------
rm -f "$TMPDIR/cmd.truth"
if ! "$STROBE_FAST" record --mode bpf -F 499 -q -o "$TMPDIR/cmd.pb.gz" -- "$PY" "$HOT" "$TMPDIR/cmd.truth" 4 \
	2>"$TMPDIR/cmd.err"; then
	if grep -qi 'cannot load\|not supported\|verifier' "$TMPDIR/cmd.err"; then
		skip record_python "the kernel refused the eBPF program: $(errof "$TMPDIR/cmd.err")"; exit 0
	fi
	fail record_python/command "strobe record failed: $(errof "$TMPDIR/cmd.err")"
elif ! "$STROBE_FAST" convert -f folded -o "$TMPDIR/cmd.folded" "$TMPDIR/cmd.pb.gz" 2>"$TMPDIR/conv.err"; then
	fail record_python/command "convert failed: $(errof "$TMPDIR/conv.err")"
else
	split record_python/command "$TMPDIR/cmd.folded" "$TMPDIR/cmd.truth"
	total=$(sum "$TMPDIR/cmd.folded" "^python|^$(basename "$(readlink -f "$PY")")")
	evalleft=$(sum "$TMPDIR/cmd.folded" '_PyEval_EvalFrameDefault')
	named=$(sum "$TMPDIR/cmd.folded" ';<module>')
	share=$(awk -v e="$evalleft" -v t="$((evalleft + named))" 'BEGIN { if (t) printf "%.1f", 100 * e / t; else print "nan" }')
	if [ "$share" = nan ]; then fail record_python/early "no Python samples ($total samples of the command)"
	elif ! awk -v s="$share" 'BEGIN { exit !(s <= 5) }'; then fail record_python/early "${share}% of the interpreter's samples ($evalleft of $((evalleft + named))) kept _PyEval_EvalFrameDefault, not Python frames"
	else ok record_python/early "${share}% of the interpreter's samples kept _PyEval_EvalFrameDefault ($evalleft of $((evalleft + named)))"; fi
fi

# ---- pid --------------------------------------------------------------------------------------
rm -f "$TMPDIR/pid.truth"
"$PY" "$HOT" "$TMPDIR/pid.truth" 6 & ppid_=$!
sleep 0.5
if ! "$STROBE_FAST" record --mode bpf -F 499 -q -d 3 -p "$ppid_" -o "$TMPDIR/pid.pb.gz" 2>"$TMPDIR/pid.err"; then
	fail record_python/pid "strobe record -p failed: $(errof "$TMPDIR/pid.err")"
else
	wait "$ppid_"; ppid_=
	if ! "$STROBE_FAST" convert -f folded -o "$TMPDIR/pid.folded" "$TMPDIR/pid.pb.gz" 2>"$TMPDIR/conv.err"; then
		fail record_python/pid "convert failed: $(errof "$TMPDIR/conv.err")"
	else
		split record_python/pid "$TMPDIR/pid.folded" "$TMPDIR/pid.truth"
	fi
fi
exit $st
