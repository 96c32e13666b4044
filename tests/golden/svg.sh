#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Flame graphs from every input format and option are well-formed XML (xmllint) and hold the
# frames and numbers they should: the known 60/30/10 split, totals of real profiles, diff titles.
set -u
st=0
if ! command -v xmllint >/dev/null; then echo "SKIP svg: xmllint (libxml2-utils) not installed"; exit 0; fi
printf 'main;hot 60\nmain;warm 30\nmain;cold 10\n' > "$TMPDIR/k.folded"
printf 'main;hot 30\nmain;warm 30\nmain;gone 40\n' > "$TMPDIR/b.folded"
# b2: warm moves 33 -> 30 of 100, inside the counting noise; hot and gone move far outside it.
printf 'main;hot 30\nmain;warm 33\nmain;gone 40\n' > "$TMPDIR/b2.folded"
# Names no XML document may hold raw: markup, control bytes, invalid and overlong UTF-8, a
# surrogate, U+FFFF, "]]>", plus a valid multi-byte name that must pass through. (After 1 KiB
# of plain lines: format detection takes control bytes at the start for a binary pprof.)
for i in $(seq 100); do echo "main;pad$i 1"; done | sort > "$TMPDIR/odd.folded"
printf 'main;<a&b>"c\x27;x]]>y 3\nmain;bad\x01\x1b\x7f\xff\xc0\x80\xed\xa0\x80\xef\xbf\xbf 2\nmain;caf\xc3\xa9_[k] 500\n' >> "$TMPDIR/odd.folded"
perf=$(dirname "$0")/collapse/header.perf
cases=(
  "folded|flamegraph $TMPDIR/k.folded|<title>hot (60 samples, 60.00%)"
  "options|flamegraph --title T --subtitle S --width 800 --height 20 --fontsize 10 --colors mem --hash --countname bytes $TMPDIR/k.folded|<title>warm (30 bytes, 30.00%)"
  "inverted|flamegraph --inverted $TMPDIR/k.folded|>Icicle Graph<"
  "reverse|flamegraph --reverse $TMPDIR/k.folded|<title>main (10 samples, 10.00%)"
  "perf-script|flamegraph $perf|<title>app (20,202,020 samples, 100.00%)"
  "focus|flamegraph --focus ^warm\$ $TMPDIR/k.folded|<title>all (30 samples, 100.00%)"
  "diff|diff $TMPDIR/b.folded $TMPDIR/k.folded|<title>gone (total: base 40, new 0, delta -40 samples"
  "diff-java-palette|flamegraph --colors java $TMPDIR/k.folded|<title>cold (10 samples"
  "odd-names|flamegraph $TMPDIR/odd.folded|<title>x]]&gt;y (3 samples"
  "odd-names-utf8|flamegraph --width 4000 $TMPDIR/odd.folded|>café</text>"
  "diff-svg|diff -t svg $TMPDIR/b.folded $TMPDIR/k.folded|>Differential Flame Graph<"
  "diff-noise|diff $TMPDIR/b2.folded $TMPDIR/k.folded|<title>warm (total: base 32, new 30, delta -2 samples (-6.25%); self: base 32, new 30, delta -2; noise at 99% confidence (q 1))</title><rect x=\"922.2\" y=\"36\" width=\"267.8\" height=\"15\" fill=\"rgb(226,226,246)\""
  "diff-significant|diff $TMPDIR/b2.folded $TMPDIR/k.folded|<title>gone (total: base 39, new 0, delta -39 samples (-100.00%); self: base 39, new 0, delta -39; significant at 99% confidence (q 1.5e-11))"
  "diff-confidence|diff --confidence 0.5 $TMPDIR/b2.folded $TMPDIR/k.folded|<title>warm (total: base 32, new 30, delta -2 samples (-6.25%); self: base 32, new 30, delta -2; noise at 50% confidence"
  "nametype|flamegraph --nametype Frame: $TMPDIR/k.folded|data-nt=\"Frame:\""
  "minwidth|flamegraph --minwidth 200 $TMPDIR/k.folded|<title>warm (30 samples"
)
# A real Go CPU profile (tests/fixtures/goservice.go): the root is go tool pprof's cpu total.
if command -v go >/dev/null && [ -f "$GOPROF/go_cpu.pb.gz" ]; then
  total=$(go tool pprof -raw "$GOPROF/go_cpu.pb.gz" 2>/dev/null | awk '/^Samples:/ { getline; s = 1; next }
    /^Locations/ { s = 0 } s && $2 ~ /^[0-9]+:$/ { t += $2 } END { printf "%.0f", t }' | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta')
  cases+=("pprof|flamegraph --sample-index cpu $GOPROF/go_cpu.pb.gz|<title>all ($total nanoseconds, 100.00%)")
else
  echo "FAIL svg/pprof: go or the Go fixtures ($GOPROF) missing (make fixtures)"; st=1
fi
for c in "${cases[@]}"; do
  IFS='|' read -r name args want <<<"$c"
  if ! "$STROBE" $args > "$TMPDIR/out.svg" 2> "$TMPDIR/err"; then
    echo "FAIL svg/$name: strobe $args failed: $(head -2 "$TMPDIR/err")"; st=1; continue
  fi
  if ! xmllint --noout "$TMPDIR/out.svg" 2> "$TMPDIR/xml"; then
    echo "FAIL svg/$name: not well-formed XML: $(head -3 "$TMPDIR/xml")"; st=1; continue
  fi
  if ! grep -qF -- "$want" "$TMPDIR/out.svg"; then
    echo "FAIL svg/$name: '$want' not in the SVG"; st=1; continue
  fi
  echo "ok svg/$name"
done
# -o writes the file atomically; bad option values are errors.
"$STROBE" flamegraph -o "$TMPDIR/o.svg" "$TMPDIR/k.folded" && xmllint --noout "$TMPDIR/o.svg" \
  && echo "ok svg/output-file" || { echo "FAIL svg/output-file"; st=1; }
if "$STROBE" flamegraph --width nope "$TMPDIR/k.folded" > /dev/null 2> "$TMPDIR/err"; then
  echo "FAIL svg/bad-width: accepted"; st=1
elif grep -q "width: 'nope' is not a whole number" "$TMPDIR/err"; then echo "ok svg/bad-width"
else echo "FAIL svg/bad-width: message: $(cat "$TMPDIR/err")"; st=1; fi
# The fast path (folded text straight to a tree) draws the same frames as the profile path
# (forced here with a --focus that keeps everything): same names, depths and widths.
frames() { grep -o 'data-w="[^"]*" data-d="[^"]*"><title>[^<]*' | sort; }
[ -n "$TESTDATA" ] || echo "SKIP svg/fast-path-same-frames/flamegraph-vectors: external vectors absent (../shared/testdata or TESTDATA)"
for f in ${TESTDATA:+"$TESTDATA"/flamegraph-perf/expected/*-collapsed-all.txt} "$TMPDIR/k.folded"; do
  a=$("$STROBE" flamegraph "$f" | frames | md5sum)
  b=$("$STROBE" flamegraph --focus . "$f" | frames | md5sum)
  if [ "$a" = "$b" ]; then echo "ok svg/fast-path-same-frames/$(basename "$f")"; else
    echo "FAIL svg/fast-path-same-frames/$(basename "$f"): the two paths draw different frames"; st=1; fi
done
exit $st
