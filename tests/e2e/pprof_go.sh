#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pprof written by strobe, read by the peer. For every real Go profile and a hand-made one
# (sparse ids, inlined lines, numeric labels with units, a NUL byte in a string), `strobe
# convert -t pprof` must give `go tool pprof`:
#   - the same sample types, per-type totals and sample count (-raw),
#   - the same stacks, labels and values for every sample type (-traces -sample_index=N),
#   - the very same -raw listing (locations, lines, mappings, labels, header): these inputs
#     number their entities densely in table order, as strobe writes them, so nothing may move.
# A folded file converted to pprof must show its known total and leaf in `go tool pprof -top`,
# and merging a profile with itself must double every total as go tool pprof sees it.
# Folded input carries no unit: with --type cpu:nanoseconds its pprof has the sample type and
# period type cpu/nanoseconds; perf script input of cpu-clock has them without being told.
set -u
if ! command -v go >/dev/null; then
  echo "SKIP pprof_go: go (golang-go) is not installed"; exit 0
fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
here=$(cd "$(dirname "$0")" && pwd)
st=0
fail() { echo "FAIL pprof_go/$1: $2"; st=1; }

totals() { # "N samples; type/unit=total ..." from go tool pprof -raw
  go tool pprof -raw "$1" 2>/dev/null | awk '
    /^Samples:/ { getline; n = split($0, types, " "); s = 1; next }
    /^Locations/ { s = 0 }
    s && /^ *-?[0-9]+( +-?[0-9]+)*: / { ns++; sub(/:.*/, ""); k = split($0, v, " "); for (i = 1; i <= k; i++) t[i] += v[i] }
    END { if (n) { printf "%d samples;", ns; for (i = 1; i <= n; i++) printf " %s=%.0f", types[i], t[i]; print "" } }'
}
ntypes() { go tool pprof -raw "$1" 2>/dev/null | awk '/^Samples:/ { getline; print NF; exit }'; }

compare() { # $1 = case name, $2 = input profile
  local name=$1 in=$2 out=$TMPDIR/$1.pb.gz
  if ! "$STROBE" convert -t pprof -o "$out" "$in" 2>"$TMPDIR/err"; then
    fail "$name" "strobe convert failed: $(head -2 "$TMPDIR/err")"; return
  fi
  local want got
  want=$(totals "$in"); got=$(totals "$out")
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    fail "$name" "go tool pprof totals differ: original '$want', strobe '$got'"; return
  fi
  local n i
  n=$(ntypes "$in")
  for ((i = 0; i < n; i++)); do
    go tool pprof -traces -sample_index=$i "$in" >"$TMPDIR/a" 2>&1
    go tool pprof -traces -sample_index=$i "$out" >"$TMPDIR/b" 2>&1
    if ! cmp -s "$TMPDIR/a" "$TMPDIR/b"; then
      fail "$name" "go tool pprof -traces -sample_index=$i differs (< original, > strobe):"
      diff "$TMPDIR/a" "$TMPDIR/b" | head -10; return
    fi
  done
  go tool pprof -raw "$in" >"$TMPDIR/a" 2>&1
  go tool pprof -raw "$out" >"$TMPDIR/b" 2>&1
  if ! cmp -s "$TMPDIR/a" "$TMPDIR/b"; then
    fail "$name" "go tool pprof -raw differs (< original, > strobe):"
    diff -a "$TMPDIR/a" "$TMPDIR/b" | head -10; return
  fi
  echo "ok pprof_go/$name ($want)"
}

for f in "$GOPROF"/*.pb.gz; do
  compare "$(basename "$f" .pb.gz)" "$f"
done
# Hand-made, uncompressed (go tool pprof and strobe both take raw protobuf too).
compare handmade-everything "$here/../fuzz/corpus/fuzz_pprof/handmade-everything.pb"

# merge doubles
f=$GOPROF/go_cpu.pb.gz
if "$STROBE" merge -o "$TMPDIR/double.pb.gz" "$f" "$f" 2>"$TMPDIR/err"; then
  want=$(totals "$f" | awk '{ printf "%d samples;", $1; for (i = 3; i <= NF; i++) { split($i, a, "="); printf " %s=%.0f", a[1], a[2] * 2 } print "" }')
  got=$(totals "$TMPDIR/double.pb.gz")
  if [ "$want" = "$got" ]; then echo "ok pprof_go/merge-doubles ($got)"; else
    fail merge-doubles "want '$want', got '$got'"; fi
else
  fail merge-doubles "strobe merge failed: $(head -2 "$TMPDIR/err")"
fi

# folded -> pprof -> go tool pprof -top: 100 in all, hash is the heaviest leaf with 60.
printf 'main;work;hash 60\nmain;work;sort 30\nmain;idle 10\n' > "$TMPDIR/k.folded"
if "$STROBE" convert -t pprof -o "$TMPDIR/k.pb.gz" "$TMPDIR/k.folded" 2>"$TMPDIR/err"; then
  top=$(go tool pprof -top "$TMPDIR/k.pb.gz" 2>&1)
  if grep -q 'of 100 total' <<<"$top" && grep -qE '^ +60 +60\.00% +60\.00% +60 +60\.00% +hash$' <<<"$top" &&
     grep -qE '^ +0 +0% +100% +100 +100% +main$' <<<"$top"; then
    echo "ok pprof_go/folded-to-pprof"
  else
    fail folded-to-pprof "go tool pprof -top printed:"; head -12 <<<"$top"
  fi
else
  fail folded-to-pprof "strobe convert failed: $(head -2 "$TMPDIR/err")"
fi

# ---- folded-type / perf-type: the unit of the values --------------------------------------------
printf 'main;work 30\nmain;idle 10\n' > "$TMPDIR/t.folded"
if "$STROBE" convert --type cpu:nanoseconds -f pprof -o "$TMPDIR/t.pb.gz" "$TMPDIR/t.folded" 2>"$TMPDIR/err"; then
  raw=$(go tool pprof -raw "$TMPDIR/t.pb.gz" 2>/dev/null)
  top=$(go tool pprof -top -sample_index=cpu "$TMPDIR/t.pb.gz" 2>/dev/null)
  if grep -q '^PeriodType: cpu nanoseconds' <<<"$raw" && grep -qx 'cpu/nanoseconds' <<<"$raw" &&
     grep -q 'of 40ns total' <<<"$top"; then
    echo "ok pprof_go/folded-type (cpu/nanoseconds; $(grep -o 'Showing.*total' <<<"$top"))"
  else fail folded-type "$(head -12 <<<"$raw" | tr '\n' ' ')"; fi
else
  fail folded-type "strobe convert --type failed: $(head -2 "$TMPDIR/err")"
fi
perf=$here/../golden/collapse/header.perf
if "$STROBE" convert -f pprof -o "$TMPDIR/p.pb.gz" "$perf" 2>"$TMPDIR/err" &&
   go tool pprof -raw "$TMPDIR/p.pb.gz" 2>/dev/null | grep -qx 'cpu/nanoseconds'; then
  echo "ok pprof_go/perf-type (cpu-clock periods are cpu/nanoseconds)"
else fail perf-type "$(go tool pprof -raw "$TMPDIR/p.pb.gz" 2>&1 | head -5 | tr '\n' ' ') $(head -2 "$TMPDIR/err")"; fi
# A pprof names its own types: --type is refused for it.
if "$STROBE" convert --type cpu:nanoseconds -f folded "$TMPDIR/t.pb.gz" >/dev/null 2>"$TMPDIR/err"; then
  fail type-pprof "--type was accepted for a pprof input"
elif grep -q 'names its own sample types' "$TMPDIR/err"; then echo "ok pprof_go/type-pprof ($(head -1 "$TMPDIR/err"))"
else fail type-pprof "$(head -2 "$TMPDIR/err")"; fi
exit $st
