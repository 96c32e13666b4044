#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe top against the peer: for every real Go profile in $GOPROF (tests/fixtures/goservice.go) and every sample
# type, `strobe top` must list the same functions with the same flat% and cum% as
# `go tool pprof -top` (all nodes, no dropping), and the same total in its header.
set -u
if ! command -v go >/dev/null; then
  echo "SKIP top_vs_pprof: go (golang-go) is not installed"; exit 0
fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
rows() { # keep "name flat% cum%" rows of a -top table, sorted by name
  awk '/^ *flat *flat%/ {t=1; next} t && NF >= 6 {
         name = $6; for (i = 7; i <= NF; i++) name = name " " $i
         sub(/ \((partial-)?inline\)$/, "", name); print name "\t" $2 "\t" $5 }' | LC_ALL=C sort
}
for f in "$GOPROF"/*.pb.gz; do
  base=$(basename "$f" .pb.gz)
  types=$(go tool pprof -raw "$f" 2>/dev/null | awk '/^Samples:/ {getline; for (i = 1; i <= NF; i++) { split($i, a, "/"); print a[1] }; exit}')
  for t in $types; do
    name="top_vs_pprof/$base/$t"
    peer=$(go tool pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 -sample_index="$t" "$f" 2>/dev/null)
    ours=$("$STROBE" top --sample-index "$t" "$f" 2>"$TMPDIR/err")
    if [ -z "$peer" ]; then echo "FAIL $name: go tool pprof printed nothing"; st=1; continue; fi
    if [ -z "$ours" ]; then echo "FAIL $name: strobe top failed: $(head -3 "$TMPDIR/err")"; st=1; continue; fi
    ptotal=$(grep -o 'of [^ ]* total' <<<"$peer"); stotal=$(grep -o 'of [^ ]* total' <<<"$ours")
    if [ "$ptotal" != "$stotal" ]; then
      echo "FAIL $name: totals differ: pprof '$ptotal', strobe '$stotal'"; st=1; continue
    fi
    if ! diff <(rows <<<"$peer") <(rows <<<"$ours") > "$TMPDIR/d"; then
      echo "FAIL $name: rows differ (< pprof, > strobe):"; head -10 "$TMPDIR/d"; st=1; continue
    fi
    echo "ok $name ($(rows <<<"$ours" | wc -l) functions, $stotal)"
  done
done
exit $st
