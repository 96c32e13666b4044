#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One binary's frames read the same in `strobe record` and in `strobe agent`, and read as people
# write them. cxx_names (C++: a class template's member in two instantiations, an operator<, a
# function in a namespace) is recorded by `strobe record` (which names frames from DWARF) and,
# separately, profiled by `strobe agent` (symbol tables, its default) pushing to a server on
# loopback; the two folded profiles are then compared:
#   demangled  each profile names shop::Basket::add_items (one function for both
#              instantiations), shop::Price::operator< and shop::checkout, and no frame of
#              either is mangled (_Z..., _R...) or carries a symbol version (@GLIBC_...)
#   agree      the functions that hold at least 2 % of the samples in either profile are the
#              same set in both
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test names_agree cxx_names
kill_at_exit apid pid wpid
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
WANT=(shop::Basket::add_items 'shop::Price::operator<' shop::checkout main)

# names FOLDED: each function's share of the samples, "pct name" per line (a function counted
# once per stack)
names() {
	awk '{ sp = match($0, / [0-9]+$/); if (!sp) next
	       v = substr($0, sp + 1) + 0; n = split(substr($0, 1, sp - 1), f, ";"); all += v
	       delete seen; for (i = 1; i <= n; i++) if (!(f[i] in seen)) { seen[f[i]] = 1; c[f[i]] += v } }
	     END { for (k in c) printf "%.2f %s\n", 100 * c[k] / all, k }' "$1"
}
check_names() { # NAME FOLDED: the demangled verdict for one profile; sets bad
	local f w
	for w in "${WANT[@]}"; do
		awk -v w="$w" '$2 == w { found = 1 } END { exit !found }' "$2.names" || bad+="no $w in $1; "
	done
	f=$(awk '{ $1 = ""; sub(/^ /, "") } /^_[ZR]|@GLIBC|@@/ { print; exit }' "$2.names")
	[ -z "$f" ] || bad+="$1 has a raw name: $f; "
}

need_perf_events

# ---- strobe record ---------------------------------------------------------------------------
name=names_agree/demangled
if ! rec "$name" 60 -F 499 -o "$TMPDIR/rec.pb.gz" -- "$WL/cxx_names" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"; exit 1
fi
if ! fold "$TMPDIR/rec.pb.gz" "$TMPDIR/rec.folded" cpu; then
	fail "$name" "convert failed: $(errof "$TMPDIR/rec.folded.err")"; exit 1
fi
grep ';main;' "$TMPDIR/rec.folded" >"$TMPDIR/rec.main" # the workload's own stacks

# ---- strobe agent ----------------------------------------------------------------------------
start_server
t0=$(date +%s)
start_agent "$TMPDIR/agent.log" -F 299 -i 2 --max-cpu 100 --comm '^cxx_names$'
sleep 1
STROBE_SERVICE=names "$WL/cxx_names" 4 >/dev/null & wpid=$!
wait "$wpid"; wpid=
sleep 0.5
stop_agent || fail names_agree/stop "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
t1=$(($(date +%s) + 1))
if ! qfolded "$CPU{service_name=\"names\"}" "$t0" "$t1" "$TMPDIR/agent.folded"; then
	fail "$name" "query failed: $(errof "$TMPDIR/agent.folded.err")"; exit 1
fi
grep ';main;' "$TMPDIR/agent.folded" >"$TMPDIR/agent.main"

names "$TMPDIR/rec.main" | sort -k2 >"$TMPDIR/rec.main.names"
names "$TMPDIR/agent.main" | sort -k2 >"$TMPDIR/agent.main.names"
bad=""
check_names record "$TMPDIR/rec.main"
check_names agent "$TMPDIR/agent.main"
detail="record: $(wc -l <"$TMPDIR/rec.main") stacks, agent: $(wc -l <"$TMPDIR/agent.main") stacks"
if [ -n "$bad" ]; then fail "$name" "${bad}($detail)"; else ok "$name" "${WANT[*]} in both; $detail"; fi

name=names_agree/agree
hot() { awk '$1 >= 2 { $1 = ""; sub(/^ /, ""); print }' "$1" | sort; }
hot "$TMPDIR/rec.main.names" >"$TMPDIR/rec.hot"
hot "$TMPDIR/agent.main.names" >"$TMPDIR/agent.hot"
if [ ! -s "$TMPDIR/rec.hot" ]; then
	fail "$name" "no function holds 2 % of the recorded samples"
elif ! cmp -s "$TMPDIR/rec.hot" "$TMPDIR/agent.hot"; then
	fail "$name" "the hot functions differ (record < > agent): $(diff "$TMPDIR/rec.hot" "$TMPDIR/agent.hot" | grep '^[<>]' | tr '\n' ' ')"
else
	ok "$name" "$(wc -l <"$TMPDIR/rec.hot") functions at >= 2 % in both: $(tr '\n' ',' <"$TMPDIR/rec.hot" | sed 's/,$//')"
fi
exit $st
