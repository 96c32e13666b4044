#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent names JIT-compiled frames. A running JVM's, with no change to how the JVM was
# started: when its JIT frames go unnamed the agent asks it, through HotSpot's attach socket, to
# write its perf map (Compiler.perfmap, JDK 17+), and names them from the map from then on.
# Node's, from the perf map V8 writes under --perf-basic-prof; a Node without it is named in
# the agent's log.
#   split    tests/workloads/java/JitSplit.java (run60, run30, run10 burning 6:3:1 ms of every
#            10 on three threads, each measured by its own thread CPU clock), started as plain
#            `java -cp DIR JitSplit` under service "jtruth": each method's share of the three in
#            the server's profile is within 5 points of its share of the measured CPU
#   asked    /status counted the request the agent made and the map written; the log says so
#   quiet    the JVM printed no thread dump (SIGQUIT with the attach trigger starts the
#            listener silently; without the trigger it would dump every thread's stack)
#   record   `strobe record -p PID` of a plain JVM asks it the same way when it builds the
#            profile: the three methods are named in its output (a JVM started with the
#            others, so that a loaded machine has compiled its methods by then; the map the
#            agent had it write is removed first, so the recorder's own request is tested)
#   xrs      a JVM started with -Xrs -XX:+DisableAttachMechanism has no attach socket and does
#            not catch SIGQUIT, whose default action would kill it: the agent never sends it,
#            says why once, and that JVM runs to its end (with -Xrs alone the JVM opens its
#            attach socket at startup and is named like any other)
#   node     tests/workloads/node/split.js (alpha and beta burning 2:1, each measured by
#            process.cpuUsage) under `node --perf-basic-prof` as service "ntruth": each
#            function's share of the two within 5 points of its measured share
#   noflag   the same script without the flag: the agent's log names that node process and
#            the flag it lacks
# No java: SKIP (FAIL under CI=true, where deps.sh has installed openjdk-17-jdk-headless);
# no node: the node cases SKIP (FAIL under CI=true).
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
# shellcheck source=lib/shares.sh
. "$(dirname "$0")/lib/shares.sh"
name=agent_jit
agent_test "$name"
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
	if [ "${CI:-}" = true ]; then echo "FAIL $name: CI=true but java/javac (openjdk-17-jdk-headless) is not installed"; exit 1; fi
	echo "SKIP $name: java/javac is not installed (apt-get install openjdk-17-jdk-headless)"; exit 0
fi

kill_at_exit apid pid j1 j2 j3 n1 n2
SECS=${AGENT_JVM_SECONDS:-15}
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$TMPDIR/cls"
if ! javac -d "$TMPDIR/cls" "$here/../workloads/java/JitSplit.java" 2>"$TMPDIR/javac.err"; then
	fail "$name/javac" "$(errof "$TMPDIR/javac.err")"; exit 1
fi

# split_vs_truth NAMED TRUTH FN...: each FN's share of the FNs' summed value in the folded
# file NAMED against its share of the FNs' CPU in TRUTH, within 5 points; sets detail, bad and
# named (the FNs' share of all of NAMED)
split_vs_truth() {
	local f=$1 t=$2 fn s sum=0 got want
	shift 2
	s=$(shares "$f" "$@")
	for fn in "$@"; do sum=$(awk -v a="$sum" -v b="$(field "$s" "$fn")" 'BEGIN { print a + b }'); done
	bad="" detail=""
	for fn in "$@"; do
		got=$(ratio_pct "$(field "$s" "$fn")" "$sum")
		want=$(ratio_pct "$(truth "$t" "$fn")" "$(truth "$t" process_cpu_ns)")
		detail+="$fn ${got}% (truth ${want}%) "
		within_pp "$got" "$want" 5 || bad+="$fn "
	done
	named=$(ratio_pct "$sum" "$(field "$s" total)")
	[ -z "$bad" ]
}

start_server
t0=$(date +%s)
# -i 2: the first interval's Java frames are unnamed (that is what asks the JVM); the rest of
# the run is named. 299 Hz for enough samples of the 10 % method on a busy machine.
start_agent "$TMPDIR/agent.log" -F 299 -i 2 --max-cpu 100 --comm '^(java|node)$'
sleep 1
have_node=; command -v node >/dev/null && have_node=1
if [ -n "$have_node" ]; then
	# in TMPDIR: node writes a V8 log (isolate-*-v8.log) to its working directory
	(cd "$TMPDIR" && STROBE_SERVICE=ntruth exec node --perf-basic-prof "$here/../workloads/node/split.js" "$SECS" "$TMPDIR/ntruth") >"$TMPDIR/n1.out" 2>&1 & n1=$!
	(cd "$TMPDIR" && STROBE_SERVICE=nnoflag exec node "$here/../workloads/node/split.js" 5 "$TMPDIR/nnoflag") >"$TMPDIR/n2.out" 2>&1 & n2=$!
fi
STROBE_SERVICE=jtruth java -cp "$TMPDIR/cls" JitSplit "$SECS" "$TMPDIR/truth" >"$TMPDIR/j1.out" 2>&1 & j1=$!
# j3 burns until the record case kills it: under load the agent cases above can outlast any
# fixed margin, and a JVM whose burn threads ended leaves only its own service threads to record
java -cp "$TMPDIR/cls" JitSplit 600 "$TMPDIR/truth.rec" >"$TMPDIR/j3.out" 2>&1 & j3=$!
STROBE_SERVICE=jrs java -Xrs -XX:+DisableAttachMechanism -cp "$TMPDIR/cls" JitSplit 6 "$TMPDIR/truth.xrs" >"$TMPDIR/j2.out" 2>&1 & j2=$!
wait "$j2"; rs_rc=$?; j2=
wait "$j1"; j1_rc=$?; j1=
[ -z "$have_node" ] || { wait "$n1"; n1_rc=$?; wait "$n2"; rm -f "/tmp/perf-$n1.map"; n1= n2=; }
sleep 2.5 # one more interval: the last profiles with names
asked=$(status_field jvm_perfmaps.asked) written=$(status_field jvm_perfmaps.written)
stop_agent || fail "$name/stop" "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))

# ---- split -----------------------------------------------------------------------------------
FNS=(JitSplit.run60 JitSplit.run30 JitSplit.run10)
if [ "$j1_rc" != 0 ] || ! [ -s "$TMPDIR/truth" ]; then
	fail "$name/split" "the JVM exited with $j1_rc and no truth: $(errof "$TMPDIR/j1.out")"
elif ! qfolded "$CPU{service_name=\"jtruth\"}" "$t0" "$t1" "$TMPDIR/j.folded"; then
	fail "$name/split" "query failed: $(errof "$TMPDIR/j.folded.err")"
else
	# HotSpot names a method "RET CLASS.METHOD(ARGS)": its frames become CLASS.METHOD
	sed -E 's/(^|;)[^;]* (JitSplit\.run[0-9]+)\([^;]*\)/\1\2/g' "$TMPDIR/j.folded" >"$TMPDIR/j.named"
	if ! split_vs_truth "$TMPDIR/j.named" "$TMPDIR/truth" "${FNS[@]}"; then fail "$name/split" "off by more than 5 points for $bad: $detail(named: ${named}% of the JVM's samples)"
	else ok "$name/split" "${detail}; the three are ${named}% of the JVM's samples"; fi
fi

# ---- node ------------------------------------------------------------------------------------
if [ -z "$have_node" ]; then
	if [ "${CI:-}" = true ]; then fail "$name/node" "CI=true but node is not installed"
	else skip "$name/node" "node is not installed"; skip "$name/noflag" "node is not installed"; fi
elif [ "$n1_rc" != 0 ] || ! [ -s "$TMPDIR/ntruth" ]; then
	fail "$name/node" "node exited with $n1_rc and no truth: $(errof "$TMPDIR/n1.out")"
elif ! qfolded "$CPU{service_name=\"ntruth\"}" "$t0" "$t1" "$TMPDIR/n.folded"; then
	fail "$name/node" "query failed: $(errof "$TMPDIR/n.folded.err")"
else
	# V8 names a function "JS:*NAME FILE:LINE:COL" (* optimized, ^ baseline, ~ interpreted)
	sed -E 's/(^|;)JS:[*^~]?(alpha|beta) [^;]*:[0-9]+:[0-9]+/\1\2/g' "$TMPDIR/n.folded" >"$TMPDIR/n.named"
	if ! split_vs_truth "$TMPDIR/n.named" "$TMPDIR/ntruth" alpha beta; then fail "$name/node" "off by more than 5 points for $bad: $detail"
	else ok "$name/node" "${detail% }"; fi
	npid=$(truth "$TMPDIR/nnoflag" pid)
	if grep -q "node ${npid:-x} .*writes no perf map.*--perf-basic-prof" "$TMPDIR/agent.log"; then
		ok "$name/noflag" "the log names node $npid and --perf-basic-prof"
	else
		fail "$name/noflag" "the log does not name node ${npid:-?} as lacking --perf-basic-prof: $(grep -i node "$TMPDIR/agent.log" | head -3 | tr '\n' ' ')"
	fi
fi

# ---- asked, quiet, xrs -----------------------------------------------------------------------
if ! [ "${written:-0}" -ge 1 ] 2>/dev/null || ! [ "${asked:-0}" -ge "${written:-0}" ] 2>/dev/null; then
	fail "$name/asked" "/status jvm_perfmaps: asked ${asked:-?}, written ${written:-?}"
elif ! grep -q "writes its perf map on request" "$TMPDIR/agent.log"; then
	fail "$name/asked" "the log does not say a JVM was asked: $(errof "$TMPDIR/agent.log")"
else ok "$name/asked" "asked $asked, written $written"; fi
if grep -q 'Full thread dump' "$TMPDIR/j1.out" "$TMPDIR/j2.out"; then
	fail "$name/quiet" "a JVM printed a thread dump: the agent's SIGQUIT came without the attach trigger"
else ok "$name/quiet" "no thread dump"; fi
if [ "$rs_rc" != 0 ]; then
	fail "$name/xrs" "the -Xrs JVM exited with status $rs_rc (SIGQUIT kills it): $(errof "$TMPDIR/j2.out")"
elif ! grep -q 'does not catch SIGQUIT' "$TMPDIR/agent.log"; then
	fail "$name/xrs" "the agent did not say why it left the -Xrs JVM alone: $(grep -i jvm "$TMPDIR/agent.log" | head -3 | tr '\n' ' ')"
else ok "$name/xrs" "left alone: $(grep -o 'JVM [0-9]* does not catch SIGQUIT[^:]*' "$TMPDIR/agent.log" | head -1)"; fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=

# ---- record ----------------------------------------------------------------------------------
rm -f "/tmp/perf-$j3.map"
alive=1; kill -0 "$j3" 2>/dev/null || alive=0
"$STROBE" record -p "$j3" -d 3 -o "$TMPDIR/rec.folded" 2>"$TMPDIR/rec.err"; rc=$?
[ -s "/tmp/perf-$j3.map" ] || rc="$rc, and no perf map was written"
kill "$j3" 2>/dev/null; wait "$j3" 2>/dev/null; rm -f "/tmp/perf-$j3.map"; j3=
n=$(grep -c 'JitSplit\.run[0-9]*(' "$TMPDIR/rec.folded" 2>/dev/null)
if [ "$alive" = 0 ]; then fail "$name/record" "the JVM to record exited before the recording: $(errof "$TMPDIR/j3.out")"
elif [ "$rc" != 0 ]; then fail "$name/record" "strobe record exited with $rc: $(errof "$TMPDIR/rec.err")"
elif [ "${n:-0}" -lt 3 ]; then fail "$name/record" "the Java methods are not named in the recording ($n stacks name one; record said: $(grep -o 'duration reached[^;]*' "$TMPDIR/rec.err")): $(awk '{ print $NF, $0 }' "$TMPDIR/rec.folded" | sort -rn | head -3 | cut -d' ' -f2- | cut -c1-200 | tr '\n' '|')"
else ok "$name/record" "$n stacks name run60/run30/run10"; fi
exit $st
