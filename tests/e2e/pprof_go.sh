#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pprof written by strobe, read by the peer: every real Go profile converted by strobe must give
# `go tool pprof -raw` the same sample types and per-type totals as the original; a folded file
# converted to pprof must show its known total in `go tool pprof -top`; and merging a profile
# with itself must double every total as go tool pprof sees it.
set -u
if ! command -v go >/dev/null; then
  echo "SKIP pprof_go: go (golang-go) is not installed"; exit 0
fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
totals() { # "type/unit=total ..." from go tool pprof -raw
  go tool pprof -raw "$1" 2>/dev/null | awk '
    /^Samples:/ { getline; n = split($0, types, " "); s = 1; next }
    /^Locations/ { s = 0 }
    s && /:/ { sub(/:.*/, ""); k = split($0, v, " "); for (i = 1; i <= k; i++) t[i] += v[i] }
    END { for (i = 1; i <= n; i++) printf "%s=%.0f ", types[i], t[i]; print "" }'
}
for f in "$TESTDATA"/pprof/*.pb.gz; do
  base=$(basename "$f" .pb.gz)
  if ! "$STROBE" convert -t pprof -o "$TMPDIR/$base.pb.gz" "$f" 2>"$TMPDIR/err"; then
    echo "FAIL pprof_go/$base: strobe convert failed: $(head -2 "$TMPDIR/err")"; st=1; continue
  fi
  want=$(totals "$f"); got=$(totals "$TMPDIR/$base.pb.gz")
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "FAIL pprof_go/$base: go tool pprof totals differ: original '$want', strobe '$got'"; st=1
  else
    echo "ok pprof_go/$base ($want)"
  fi
done

# merge doubles
f=$TESTDATA/pprof/go_cpu.pb.gz
"$STROBE" merge -o "$TMPDIR/double.pb.gz" "$f" "$f"
want=$(totals "$f" | awk '{ for (i = 1; i <= NF; i++) { split($i, a, "="); printf "%s=%.0f ", a[1], a[2] * 2 } print "" }')
got=$(totals "$TMPDIR/double.pb.gz")
if [ "$want" = "$got" ]; then echo "ok pprof_go/merge-doubles ($got)"; else
  echo "FAIL pprof_go/merge-doubles: want '$want', got '$got'"; st=1; fi

# folded -> pprof -> go tool pprof -top
printf 'main;work;hash 60\nmain;work;sort 30\nmain;idle 10\n' > "$TMPDIR/k.folded"
"$STROBE" convert -t pprof -o "$TMPDIR/k.pb.gz" "$TMPDIR/k.folded"
top=$(go tool pprof -top "$TMPDIR/k.pb.gz" 2>/dev/null)
if grep -q 'of 100 total' <<<"$top" && grep -qE '^ +60 +60\.00% .* hash$' <<<"$top"; then
  echo "ok pprof_go/folded-to-pprof"
else
  echo "FAIL pprof_go/folded-to-pprof: go tool pprof -top printed:"; head -12 <<<"$top"; st=1
fi
exit $st
