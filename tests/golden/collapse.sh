#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe collapse against stackcollapse-perf.pl's own test vectors: for every perf script input of
# FlameGraph's test suite ($TESTDATA/flamegraph-perf) and every option, the output must equal the
# expected file byte for byte (the FlameGraph runner compares with diff -u). Then strobe's own
# cases in tests/golden/collapse/NAME.perf with NAME.OPT.folded expected outputs (OPT "none" for
# no option; "event-filter=EV" becomes --event-filter=EV), made with stackcollapse-perf.pl.
set -u
st=0
check() { # name input opt expected
  local out=$TMPDIR/out
  if ! "$STROBE" collapse ${3:+--$3} "$2" > "$out" 2> "$TMPDIR/err"; then
    echo "FAIL $1: exit status $?: $(head -3 "$TMPDIR/err")"; st=1; return
  fi
  if cmp -s "$out" "$4"; then echo "ok $1"; else
    echo "FAIL $1: output differs from $(basename "$4"):"; diff -u "$4" "$out" | head -12; st=1
  fi
}
dir=${TESTDATA:+$TESTDATA/flamegraph-perf}
if [ -z "$dir" ]; then
  echo "SKIP collapse/flamegraph-vectors: external vectors absent (../shared/testdata/flamegraph-perf or TESTDATA)"
elif [ ! -d "$dir" ]; then
  echo "FAIL collapse/flamegraph-vectors: not found at $dir"; st=1
fi
for f in ${dir:+"$dir"/*.txt}; do
  b=$(basename "$f" .txt)
  for opt in pid tid kernel jit all addrs; do
    check "collapse/$b/--$opt" "$f" "$opt" "$dir/expected/$b-collapsed-$opt.txt"
  done
done
here=$(dirname "$0")/collapse
for f in "$here"/*.perf; do
  [ -f "$f" ] || continue
  b=$(basename "$f" .perf)
  for e in "$here/$b".*.folded; do
    opt=${e#"$here/$b".}; opt=${opt%.folded}
    [ "$opt" = none ] && opt=
    check "collapse/own/$b/${opt:-default}" "$f" "$opt" "$e"
  done
done
# Bad input: an empty file and a 10 MB frame name are one-line errors (exit 2), never a crash.
: > "$TMPDIR/empty.perf"
"$STROBE" collapse "$TMPDIR/empty.perf" > "$TMPDIR/out" 2> "$TMPDIR/err"; rc=$?
if [ $rc = 2 ] && grep -q 'empty.perf: empty input' "$TMPDIR/err" && [ ! -s "$TMPDIR/out" ]; then
  echo "ok collapse/bad/empty"; else echo "FAIL collapse/bad/empty: exit $rc, stderr: $(cat "$TMPDIR/err")"; st=1; fi
{ printf 'big 1 [000] 1.0: 1 cpu-clock: \n\t1 '; head -c 10485760 /dev/zero | tr '\0' x; printf ' (/bin/big)\n\n'; } > "$TMPDIR/huge.perf"
"$STROBE" collapse "$TMPDIR/huge.perf" > "$TMPDIR/out" 2> "$TMPDIR/err"; rc=$?
if [ $rc = 2 ] && grep -q 'huge.perf:2: frame name of 10485760 bytes exceeds' "$TMPDIR/err" && [ "$(wc -l < "$TMPDIR/err")" = 1 ]; then
  echo "ok collapse/bad/10MB-frame"; else echo "FAIL collapse/bad/10MB-frame: exit $rc, stderr: $(head -c 300 "$TMPDIR/err")"; st=1; fi
# Binary garbage: whatever perl would ignore is ignored; never a crash or a sanitizer report.
head -c 300000 /dev/urandom > "$TMPDIR/garbage.perf"
"$STROBE" collapse --all --srcline "$TMPDIR/garbage.perf" > "$TMPDIR/out" 2> "$TMPDIR/err"; rc=$?
if { [ $rc = 0 ] || [ $rc = 2 ]; } && ! grep -q Sanitizer "$TMPDIR/err"; then
  echo "ok collapse/bad/garbage"; else echo "FAIL collapse/bad/garbage: exit $rc: $(head -c 300 "$TMPDIR/err")"; st=1; fi
# stdin, in pieces through a pipe, gives what the file gives.
f=$here/pidtid.perf
if cat "$f" | "$STROBE" collapse --tid - | cmp -s - "$here/pidtid.tid.folded"; then
  echo "ok collapse/stdin-pipe"; else echo "FAIL collapse/stdin-pipe: output differs from the file's"; st=1; fi
exit $st
