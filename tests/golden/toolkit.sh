#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Golden cases of the toolkit commands (top, convert, merge, diff, gate, transforms, bad input):
# each tests/golden/toolkit/NAME.cmd holds the arguments of one strobe command run in that folder;
# its stdout and exit status must equal NAME.out byte for byte, and its stderr NAME.err when that
# file exists. UPDATE=1 rewrites the expected files (review the diff before committing).
set -u
cd "$(dirname "$0")/toolkit"
st=0
for c in *.cmd; do
  name=${c%.cmd}
  args=$(cat "$c")
  out=$(eval "\"$STROBE\" $args" 2> "$TMPDIR/$name.err"; echo "[exit $?]")
  err=$(cat "$TMPDIR/$name.err")
  if [ "${UPDATE:-}" = 1 ]; then
    printf '%s\n' "$out" > "$name.out"
    [ -f "$name.err" ] && printf '%s\n' "$err" > "$name.err"
    echo "ok $name (updated)"
    continue
  fi
  if [ "$out" != "$(cat "$name.out")" ]; then
    echo "FAIL toolkit/$name: stdout or exit status differs:"
    diff -u "$name.out" <(printf '%s\n' "$out") | head -20
    st=1
  elif [ -f "$name.err" ] && [ "$err" != "$(cat "$name.err")" ]; then
    echo "FAIL toolkit/$name: stderr differs:"
    diff -u "$name.err" <(printf '%s\n' "$err") | head -20
    st=1
  elif grep -q 'runtime error\|AddressSanitizer' "$TMPDIR/$name.err"; then
    echo "FAIL toolkit/$name: sanitizer report"; head -20 "$TMPDIR/$name.err"; st=1
  else
    echo "ok toolkit/$name"
  fi
done
# A failed conversion leaves no output file behind.
rm -f "$TMPDIR/never.pb.gz"
"$STROBE" convert -t pprof -o "$TMPDIR/never.pb.gz" nocount.folded 2>/dev/null
if [ -e "$TMPDIR/never.pb.gz" ] || ls "$TMPDIR"/never.pb.gz.tmp.* >/dev/null 2>&1; then
  echo "FAIL toolkit/no-partial-output: a file was left behind after a failed convert"; st=1
else
  echo "ok toolkit/no-partial-output"
fi
exit $st
