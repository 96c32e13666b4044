#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What `strobe record` writes besides the default pprof, and what it keeps in it:
#   folded     -o r.folded: folded stacks of the cpu value, burn shares within ±3 pp of the truth
#   svg        -o r.svg: well-formed XML (xmllint) naming burn_60, burn_30, burn_10 and main
#   roots      -a -o a.folded with two workload processes: stacks rooted at each process's name
#   rawaddr    --no-symbolize: no function names, but every user frame keeps its mapping; the
#              workload's mapping carries the build ID readelf reports for the binary
#   label      --label env=ci is on every sample (go tool pprof -tags, else strobe --tagfocus)
#   main-file  the workload's binary is the profile's first mapping, so go tool pprof prints
#              "File: cpu_split", not the first library a leaf frame was in (libc.so.6)
#   fifo       -o to a FIFO (as to /dev/null or a terminal): written in place, the FIFO stays one;
#              a temporary renamed over it replaced the node with a regular file (as it did
#              /dev/null with `strobe flamegraph -o /dev/null`)
#   lost       a 1-page ring under a context-switch storm (--mode perf: the eBPF path has no ring): the loss is counted on stderr and in
#              the profile's comments, never silent
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads cpu_split
FNS=(burn_60 burn_30 burn_10)

# ---- folded ------------------------------------------------------------------------------------
name=record_outputs/folded
if ! rec "$name" 60 -F 999 -o "$TMPDIR/r.folded" -- "$WL/cpu_split" -o "$TMPDIR/f.truth" 3; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
else
	s=$(shares "$TMPDIR/r.folded" "${FNS[@]}")
	bad="" detail=""
	for fn in "${FNS[@]}"; do
		got=$(pct "$s" "$fn"); want=$(truth_share "$TMPDIR/f.truth" "$fn")
		detail+="$fn $got% (truth $want%) "
		within_pp "$got" "$want" 3 || bad+="$fn "
	done
	if [ -n "$bad" ]; then fail "$name" "off by more than 3 pp: $detail"
	else ok "$name" "${detail% }"; fi
fi

# ---- fifo --------------------------------------------------------------------------------------
name=record_outputs/fifo
if [ ! -s "$TMPDIR/r.folded" ]; then
	fail "$name" "no folded recording to write (the folded case failed)"
else
	mkfifo "$TMPDIR/out.fifo"
	timeout 30 cat "$TMPDIR/out.fifo" >"$TMPDIR/fifo.got" & cpid=$!
	timeout 30 "$STROBE" flamegraph -o "$TMPDIR/out.fifo" "$TMPDIR/r.folded" 2>"$TMPDIR/fifo.err"; frc=$?
	[ -p "$TMPDIR/out.fifo" ] || kill "$cpid" 2>/dev/null
	wait "$cpid" 2>/dev/null
	if [ ! -p "$TMPDIR/out.fifo" ]; then
		fail "$name" "the FIFO was replaced by a $(stat -c %F "$TMPDIR/out.fifo" 2>/dev/null || echo missing file) (exit $frc)"
	elif [ "$frc" != 0 ]; then fail "$name" "strobe flamegraph -o FIFO exited with $frc: $(errof "$TMPDIR/fifo.err")"
	elif ! grep -q burn_60 "$TMPDIR/fifo.got"; then fail "$name" "the reader got no flame graph naming burn_60 ($(stat -c %s "$TMPDIR/fifo.got") bytes)"
	else ok "$name" "$(stat -c %s "$TMPDIR/fifo.got") bytes through the FIFO, which stays one"; fi
fi

# ---- svg ---------------------------------------------------------------------------------------
name=record_outputs/svg
if ! rec "$name" 60 -F 499 -o "$TMPDIR/r.svg" -- "$WL/cpu_split" 1; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif command -v xmllint >/dev/null && ! xmllint --noout "$TMPDIR/r.svg" 2>"$TMPDIR/xml.err"; then
	fail "$name" "not well-formed XML: $(errof "$TMPDIR/xml.err")"
else
	missing=""
	for fn in "${FNS[@]}" main; do grep -q ">$fn " "$TMPDIR/r.svg" || grep -q "$fn" "$TMPDIR/r.svg" || missing+="$fn "; done
	if [ -n "$missing" ]; then fail "$name" "frames missing from the SVG: $missing"
	else ok "$name" "$(stat -c %s "$TMPDIR/r.svg") bytes, names burn_* and main"; fi
fi

# ---- roots: several processes in one flame graph -------------------------------------------------
name=record_outputs/roots
cp "$WL/cpu_split" "$TMPDIR/cs_alpha"; cp "$WL/cpu_split" "$TMPDIR/cs_beta"
"$TMPDIR/cs_alpha" 4 & a=$!
"$TMPDIR/cs_beta" 4 & b=$!
sleep 0.5
if ! rec "$name" 60 -a -d 2 -o "$TMPDIR/a.folded"; then
	fail "$name" "strobe record -a failed (exit $rc): $(recerr "$name")"
else
	na=$(grep -c '^cs_alpha;' "$TMPDIR/a.folded"); nb=$(grep -c '^cs_beta;' "$TMPDIR/a.folded")
	if [ "$na" -gt 0 ] && [ "$nb" -gt 0 ] && grep '^cs_alpha;' "$TMPDIR/a.folded" | grep -q ';burn_60'; then
		ok "$name" "$na stacks under cs_alpha, $nb under cs_beta"
	else
		fail "$name" "stacks not rooted at the process names ($na under cs_alpha, $nb under cs_beta): $(head -2 "$TMPDIR/a.folded" | cut -c1-120 | tr '\n' ' ')"
	fi
fi
wait $a $b 2>/dev/null

# ---- rawaddr: --no-symbolize keeps mappings and build IDs ----------------------------------------
name=record_outputs/rawaddr
want_bid=$(readelf -n "$WL/cpu_split" 2>/dev/null | awk '/Build ID/ { print $3 }')
if ! rec "$name" 60 --no-symbolize -o "$TMPDIR/raw.pb.gz" -- "$WL/cpu_split" 1; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
else
	"$STROBE" convert -t folded -o "$TMPDIR/raw.folded" "$TMPDIR/raw.pb.gz" 2>"$TMPDIR/raw.err"
	named=$(grep -c 'burn_60\|main' "$TMPDIR/raw.folded")
	unmapped=$(tr ';' '\n' < "$TMPDIR/raw.folded" | sed 's/ [0-9]*$//' | grep -c '^0x')
	if [ "$named" -ne 0 ]; then
		fail "$name" "--no-symbolize still named functions ($named stacks)"
	elif ! grep -q '\[cpu_split+0x' "$TMPDIR/raw.folded"; then
		fail "$name" "no frame keeps the workload's mapping: $(head -1 "$TMPDIR/raw.folded" | cut -c1-150)"
	elif [ "$unmapped" -ne 0 ]; then
		fail "$name" "$unmapped frames lost their mapping (bare addresses)"
	elif command -v go >/dev/null && [ -n "$want_bid" ]; then
		export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
		if go tool pprof -raw "$TMPDIR/raw.pb.gz" 2>/dev/null | grep 'cpu_split' | grep -q "$want_bid"; then
			ok "$name" "frames as [cpu_split+0x...], mapping build ID $want_bid"
		else
			fail "$name" "the workload's mapping lacks its build ID $want_bid: $(go tool pprof -raw "$TMPDIR/raw.pb.gz" 2>&1 | grep -A3 '^Mappings' | tr '\n' ' ' | cut -c1-200)"
		fi
	else
		ok "$name" "frames as [cpu_split+0x...] (build ID not checked: go or readelf missing)"
	fi
fi

# ---- label ---------------------------------------------------------------------------------------
name=record_outputs/label
if ! rec "$name" 60 --label env=ci -o "$TMPDIR/l.pb.gz" -- "$WL/cpu_split" 1; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
else
	all=$("$STROBE" convert -t folded --sample-index samples "$TMPDIR/l.pb.gz" | awk '{ s += $NF } END { print s + 0 }')
	env=$("$STROBE" convert -t folded --sample-index samples --tagfocus 'env=^ci$' "$TMPDIR/l.pb.gz" | awk '{ s += $NF } END { print s + 0 }')
	if [ "$all" -gt 0 ] && [ "$all" = "$env" ]; then ok "$name" "env=ci on all $all samples"
	else fail "$name" "env=ci on $env of $all samples"; fi
fi

# ---- lost: never silent ----------------------------------------------------------------------------
name=record_outputs/lost
(timeout 6 sh -c 'yes | head -c 3000000000 | cat > /dev/null') & storm=$!
sleep 0.3
if ! rec "$name" 60 --mode perf -e offcpu -m 1 -a -d 2 -o "$TMPDIR/lost.pb.gz"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
else
	f=$(_fname "$name")
	n=$(sed -n 's/.* \([0-9][0-9]*\) lost,.*/\1/p' "$TMPDIR/$f.err" | head -1)
	if [ -z "$n" ]; then
		fail "$name" "the summary does not count lost records: $(errof "$TMPDIR/$f.err")"
	elif [ "$n" -eq 0 ]; then
		skip "$name" "a 1-page ring lost nothing here (too few switches to overflow it)"
	elif ! gzip -dc "$TMPDIR/lost.pb.gz" | grep -aq "lost records: $n"; then
		fail "$name" "$n lost on stderr, but not in the profile's comments"
	elif ! grep -q 'use a larger -m' "$TMPDIR/$f.err"; then
		fail "$name" "$n lost without advice on stderr"
	else
		ok "$name" "$n lost records reported on stderr and in the profile"
	fi
fi
kill $storm 2>/dev/null; wait $storm 2>/dev/null

# ---- main-file: the main executable is mapping 1 -------------------------------------------------
name=record_outputs/main-file
if ! rec "$name" 60 -F 499 -o "$TMPDIR/m.pb.gz" -- "$WL/cpu_split" 1; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! command -v go >/dev/null; then
	skip "$name" "no go toolchain for go tool pprof"
else
	file=$(go tool pprof -top "$TMPDIR/m.pb.gz" 2>/dev/null | sed -n 's/^File: //p')
	if [ "$file" = cpu_split ]; then ok "$name" "File: $file"
	else fail "$name" "go tool pprof says File: '$file', not cpu_split"; fi
fi
exit $st
