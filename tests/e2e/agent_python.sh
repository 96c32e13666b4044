#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Python frames in the agent's on-CPU stacks (--on-cpu-mode bpf; agent/python.bpf.h reads the
# interpreter's frames at sample time, agent/python.c names and merges them), through a real
# server:
#   split     tests/workloads/python/hot_py.py: hot_py_alpha and hot_py_beta burn 2:1 and
#             measure their own thread CPU time; their shares within ±5 points of that truth,
#             each frame named module.function with the file and a line inside the function
#   order     the stacks read <module>;main;hot_py_alpha (Python frames in place of
#             _PyEval_EvalFrameDefault, in call order), and no sample of the workload keeps
#             an evaluation frame
#   mixed     a Python program calling a C extension built here (cc against Python.h) that
#             burns CPU: its stacks read Python -> C (burn_c) in that order
#   unknown   an interpreter binary whose Py_Version is patched to 3.99: native frames only,
#             and the agent's log says once that it does not know 3.99
#   churn     multiprocessing (a pool forking children that exit) and processes exiting
#             mid-interval: the agent keeps running, the forked children's frames are named or
#             counted as unreadable, and it still answers /status
# Needs root, kernel BTF and python3 (SKIP without; FAIL without python3 when CI=true).
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_python
[ "$(id -u)" = 0 ] || { echo "SKIP agent_python: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP agent_python: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
# Debian's interpreter first (a shim elsewhere on PATH, pyenv's, is a script)
PY=${PYTHON3:-$(if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3 || true; fi)}
if [ -z "$PY" ]; then
	if [ "${CI:-}" = true ]; then echo "FAIL agent_python: python3 is not installed (scripts/deps.sh check)"; exit 1; fi
	echo "SKIP agent_python: python3 is not installed"; exit 0
fi
kill_at_exit apid pid tpid
HERE=$(cd "$(dirname "$0")/../workloads/python" && pwd)
SECS=${AGENT_PYTHON_SECONDS:-6}
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

# run TAG CMD...: CMD as service py$TAG under an agent following it (-p on a shell that execs
# CMD once the agent is up), -F 499, an export a second
run() {
	local tag=$1
	shift
	rm -f "$TMPDIR/go"
	mkfifo "$TMPDIR/go"
	STROBE_SERVICE=py$tag bash -c 'read -r _ <"$1"; shift; exec "$@"' _ "$TMPDIR/go" "$@" & tpid=$!
	t0=$(date +%s)
	start_agent "$TMPDIR/agent-$tag.log" --on-cpu-mode bpf -i 1 -F 499 --max-cpu 100 -p "$tpid" ${AGENT_EXTRA:-}
	echo go >"$TMPDIR/go"
	wait "$tpid"
	tpid=
	sleep 1.5 # (the last interval's export)
	curl -sf "$admin/status" >"$TMPDIR/status-$tag.json"
	stop_agent || fail "agent_python/$tag-stop" "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent-$tag.log")"
	t1=$(($(date +%s) + 1))
}

# folded TAG: the service's CPU profile, folded with file:line (lines granularity)
folded() {
	"$STROBE_FAST" query -s "$url" -t pprof --from "$t0" --to "$t1" -o "$TMPDIR/$1.pb.gz" \
		"$CPU{service_name=\"py$1\"}" 2>"$TMPDIR/$1.err" &&
		"$STROBE_FAST" convert -f folded --granularity lines -o "$TMPDIR/$1.lines.folded" "$TMPDIR/$1.pb.gz" 2>>"$TMPDIR/$1.err" &&
		"$STROBE_FAST" convert -f folded -o "$TMPDIR/$1.folded" "$TMPDIR/$1.pb.gz" 2>>"$TMPDIR/$1.err"
}

start_server

# ---- split, order -----------------------------------------------------------------------------
run split "$PY" "$HERE/hot_py.py" "$TMPDIR/split.truth" "$SECS"
name=agent_python/split
if ! folded split; then
	fail "$name" "query failed: $(errof "$TMPDIR/split.err")"
else
	total=$(sum "$TMPDIR/split.folded" .)
	a=$(sum "$TMPDIR/split.folded" ';hot_py_alpha(;|$)')
	b=$(sum "$TMPDIR/split.folded" ';hot_py_beta(;|$)')
	ta=$(awk '$1 == "hot_py_alpha" { print $2 }' "$TMPDIR/split.truth")
	tb=$(awk '$1 == "hot_py_beta" { print $2 }' "$TMPDIR/split.truth")
	got=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a + b) printf "%.1f", 100 * a / (a + b); else print "nan" }')
	want=$(awk -v a="$ta" -v b="$tb" 'BEGIN { if (a + b) printf "%.1f", 100 * a / (a + b); else print "nan" }')
	# each function's frames carry hot_py.py and a line of its body
	lines_bad=""
	for fn in hot_py_alpha hot_py_beta; do
		read -r _ _ lo hi < <(grep "^line $fn " "$TMPDIR/split.truth")
		n_in=$(grep -o "$fn [^;]*hot_py.py:[0-9]*" "$TMPDIR/split.lines.folded" | sed 's/.*://' |
			awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 <= hi { n++ } END { print n + 0 }')
		n_all=$(grep -o "$fn[^;]*" "$TMPDIR/split.lines.folded" | wc -l)
		[ "$n_in" -gt 0 ] && [ "$n_in" = "$n_all" ] || lines_bad+="$fn: $n_in of $n_all frames at hot_py.py lines $lo-$hi; "
	done
	if [ "$got" = nan ]; then fail "$name" "no sample under hot_py_alpha or hot_py_beta (of $total): $(head -3 "$TMPDIR/split.folded" | cut -c1-300)"
	elif ! within_pp "$got" "$want" 5; then fail "$name" "hot_py_alpha ${got}% of the two, truth ${want}% (alpha $a, beta $b samples)"
	elif [ -n "$lines_bad" ]; then fail "$name" "$lines_bad (e.g. $(grep -o 'hot_py_[a-z]*[^;]*' "$TMPDIR/split.lines.folded" | sort -u | head -3 | tr '\n' ' '))"
	else ok "$name" "hot_py_alpha ${got}% of the two, truth ${want}%; $((a + b)) of $total samples; lines $(grep -o 'hot_py_alpha [^;]*' "$TMPDIR/split.lines.folded" | sort | uniq -c | sort -rn | head -1 | awk '{ print $NF }')"; fi
fi
name=agent_python/order
evalleft=$(sum "$TMPDIR/split.folded" '_PyEval_EvalFrameDefault')
ordered=$(sum "$TMPDIR/split.folded" ';<module>;main;hot_py_(alpha|beta)(;|$)')
if [ "${total:-0}" -le 0 ] 2>/dev/null; then fail "$name" "no samples"
elif [ "$(awk -v a="$ordered" -v t="$total" 'BEGIN { print (a >= 0.9 * t) }')" != 1 ]; then fail "$name" "only $ordered of $total under <module>;main;hot_py_*: $(grep -v ';main;hot_py' "$TMPDIR/split.folded" | sort -t' ' -k2 -rn | head -2 | cut -c1-300)"
else ok "$name" "$ordered of $total samples under <module>;main;hot_py_*, $evalleft still in _PyEval_EvalFrameDefault (before the interpreter was found)"; fi

# ---- mixed ------------------------------------------------------------------------------------
name=agent_python/mixed
if ! cc -shared -fPIC -O1 -fno-omit-frame-pointer $("$PY" -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])') \
	-o "$TMPDIR/burnmod$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" "$HERE/burnmod.c" 2>"$TMPDIR/cc.err"; then
	skip "$name" "cannot build the C extension (Python.h: python3-dev): $(errof "$TMPDIR/cc.err")"
else
	run mixed "$PY" "$HERE/mixed.py" "$TMPDIR" 4
	if ! folded mixed; then fail "$name" "query failed: $(errof "$TMPDIR/mixed.err")"
	else
		mt=$(sum "$TMPDIR/mixed.folded" .)
		# Python (main, call_c) -> the interpreter's C call path -> burn_c, and nothing Python below
		mo=$(sum "$TMPDIR/mixed.folded" ';<module>;main;call_c;([^;]*;)*burn_c$')
		if [ "$(awk -v a="$mo" -v t="$mt" 'BEGIN { print (t > 0 && a >= 0.8 * t) }')" != 1 ]; then fail "$name" "$mo of $mt samples read <module>;main;call_c;...;burn_c: $(sort -t' ' -k2 -rn "$TMPDIR/mixed.folded" | head -2 | cut -c1-300)"
		else ok "$name" "$mo of $mt samples: $(grep -o 'call_c;.*burn_c' "$TMPDIR/mixed.folded" | head -1)"; fi
	fi
fi

# ---- unknown ----------------------------------------------------------------------------------
name=agent_python/unknown
real=$(readlink -f "$PY")
if ! "$PY" "$HERE/patch_version.py" "$real" "$TMPDIR/python3.99" 0x036300f0 2>"$TMPDIR/patch.err"; then
	skip "$name" "$real exports no Py_Version to patch (Python < 3.11)"
else
	chmod +x "$TMPDIR/python3.99"
	run unknown "$TMPDIR/python3.99" "$HERE/hot_py.py" "$TMPDIR/unknown.truth" 3
	said=$(grep -c 'is Python 3.99, whose layout strobe does not know' "$TMPDIR/agent-unknown.log")
	if ! folded unknown; then fail "$name" "query failed: $(errof "$TMPDIR/unknown.err")"
	else
		ut=$(sum "$TMPDIR/unknown.folded" .)
		un=$(sum "$TMPDIR/unknown.folded" 'hot_py_|<module>')
		ue=$(sum "$TMPDIR/unknown.folded" '_PyEval_EvalFrameDefault')
		if [ "$said" != 1 ]; then fail "$name" "the log says it $said times (want once): $(grep -i python "$TMPDIR/agent-unknown.log" | head -3 | tr '\n' ' ')"
		elif [ "$un" != 0 ] || [ "$ue" -le 0 ] || [ "$ut" -le 0 ]; then fail "$name" "$un samples with Python names, $ue in _PyEval_EvalFrameDefault, of $ut"
		else ok "$name" "native frames only ($ue of $ut samples in _PyEval_EvalFrameDefault); said once: $(grep -o 'Python: .*' "$TMPDIR/agent-unknown.log" | head -1 | cut -c1-160)"; fi
	fi
fi

# ---- off: --no-python leaves the interpreter's native frames ------------------------------------
name=agent_python/off
AGENT_EXTRA=--no-python run off "$PY" "$HERE/hot_py.py" "$TMPDIR/off.truth" 3
if ! folded off; then fail "$name" "query failed: $(errof "$TMPDIR/off.err")"
else
	ot=$(sum "$TMPDIR/off.folded" .)
	on=$(sum "$TMPDIR/off.folded" 'hot_py_|<module>')
	oe=$(sum "$TMPDIR/off.folded" '_PyEval_EvalFrameDefault')
	if [ "$on" != 0 ] || [ "$oe" -le 0 ] || [ "$ot" -le 0 ]; then fail "$name" "$on samples with Python names, $oe in _PyEval_EvalFrameDefault, of $ot"
	else ok "$name" "native frames only ($oe of $ot samples in _PyEval_EvalFrameDefault)"; fi
fi

# ---- churn ------------------------------------------------------------------------------------
name=agent_python/churn
run churn "$PY" "$HERE/churn.py" 4
named=$(jqpath oncpu.python.frames_named <"$TMPDIR/status-churn.json")
unread=$(jqpath oncpu.python.frames_unreadable <"$TMPDIR/status-churn.json")
if ! folded churn; then fail "$name" "query failed: $(errof "$TMPDIR/churn.err")"
else
	ct=$(sum "$TMPDIR/churn.folded" .)
	cc_=$(sum "$TMPDIR/churn.folded" ';churn_child(;|$)')
	cu=$(sum "$TMPDIR/churn.folded" 'python: code object unreadable')
	if ! [ "${named:-0}" -gt 0 ] 2>/dev/null || ! [ "$cc_" -gt 0 ] 2>/dev/null; then fail "$name" "no churn_child frames named ($cc_ samples of $ct; frames named ${named:-?}, unreadable ${unread:-?})"
	else ok "$name" "the agent ran on and stopped cleanly; $cc_ of $ct samples in forked children's churn_child; $cu samples under frames it could not read (frames unreadable: ${unread:-0})"; fi
fi
exit $st
