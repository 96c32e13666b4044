#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Significance in the server's diffs (/api/v1/diff, docs/significance.md). Twelve pushes a side,
# ten seconds apart, of a steady workload of 2000 samples each from a seeded generator (awk):
#   - A/A (base and new from the same workload): the profile-set test (bootstrap over window
#     slices) flags no function;
#   - A/B: "planted" gains 5 points of the total in NEW: it alone is flagged;
#   - "jittery" swings between 10 % and 30 % from push to push in both windows and is 5 points
#     higher on average in NEW: the counting noise alone would call that certain, the variation
#     between pushes says noise;
#   - a window holding one push a side falls back to the counting test, and says so;
#   - the flat tree (the UI's format) carries one noise flag per node; a bad confidence is a
#     400 that names the parameter.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_significance: curl is not installed"; exit 0; fi
if ! command -v jq >/dev/null; then echo "SKIP server_significance: jq is not installed"; exit 0; fi
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
fail() { echo "FAIL server_significance/$1: $2"; st=1; }
ok() { echo "ok server_significance/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
start_server

# gen SEED PLANT JITTER_SHIFT I: one push of 2000 samples. Shares: f1..f8 steady, "planted"
# 10 % (+PLANT points), "jittery" 10 % or 30 % by the push's parity (+JITTER_SHIFT points).
gen() {
  awk -v seed="$1" -v plant="$2" -v js="$3" -v i="$4" 'BEGIN {
    srand(seed);
    jit = (i % 2 ? 0.30 : 0.10) + js; pl = 0.10 + plant;
    rest = 1 - jit - pl;
    for (k = 1; k <= 8; k++) w[k] = rest / 8;
    for (s = 0; s < 2000; s++) {
      u = rand();
      if (u < pl) c["main;planted"]++;
      else if (u < pl + jit) c["main;jittery"]++;
      else { k = 1 + int((u - pl - jit) / (rest / 8)); if (k > 8) k = 8; c["main;f" k]++ }
    }
    for (n in c) print n, c[n] }'
}
now=$(date +%s)
T0=$((now - 1800)) T1=$((now - 900))
push() { # APP T0 SEED PLANT JSHIFT
  local i
  for i in $(seq 0 11); do
    gen $(($3 + i)) "$4" "$5" "$i" | curl -s -o /dev/null -w '%{http_code}\n' --data-binary @- \
      "$url/ingest?name=$1&from=$(($2 + i * 10))&until=$(($2 + i * 10 + 10))&format=folded&sampleRate=100"
  done | sort | uniq -c | grep -qv ' 200$' && fail push "$1: a push was refused"
}
push aa "$T0" 100 0 0
push aa "$T1" 200 0 0
push ab "$T0" 300 0 0
push ab "$T1" 400 0.05 0.05
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="%s"}'
fns() { # APP [extra curl args]: format=functions of [T0, T0+120) against [T1, T1+120)
  local app=$1 s
  shift
  s=$(printf "$SEL" "$app")
  curl -s -G "$url/api/v1/diff" --data-urlencode "base=$s" --data-urlencode "new=$s" \
    -d base_from=$T0 -d base_to=$((T0 + 120)) -d new_from=$T1 -d new_to=$((T1 + 120)) \
    -d format=functions "$@" > "$TMPDIR/fns.json"
}

fns aa
m=$(jq -r .method "$TMPDIR/fns.json") n=$(jq '[.functions[] | select(.noise | not)] | length' "$TMPDIR/fns.json")
nf=$(jq '.functions | length' "$TMPDIR/fns.json")
if [ "$m" != "bootstrap over window slices" ] || [ "$(jq .base_profiles "$TMPDIR/fns.json")" != 12 ]; then
  fail aa-method "method '$m', $(jq .base_profiles "$TMPDIR/fns.json") base profiles (want the bootstrap over 12 slices): $(head -c 300 "$TMPDIR/fns.json")"
elif [ "$nf" -lt 10 ] || [ "$n" != 0 ]; then
  fail aa "$n of $nf functions flagged in an A/A pair: $(jq -c '[.functions[] | select(.noise | not) | .name]' "$TMPDIR/fns.json")"
else ok aa "0 of $nf flagged, 12 slices a side"; fi

fns ab
flagged=$(jq -c '[.functions[] | select(.noise | not) | .name]' "$TMPDIR/fns.json")
if [ "$flagged" != '["planted"]' ]; then
  fail ab "flagged $flagged, want only planted: $(jq -c '.functions[] | select(.name == "planted" or .name == "jittery") | {name, flat}' "$TMPDIR/fns.json")"
else ok ab "$(jq -r '.functions[] | select(.name == "planted") | "planted \(.flat.change * 100 | floor) points, q \(.flat.q)"' "$TMPDIR/fns.json")"; fi
# jittery moved as much as planted, but it moves that much between pushes too.
jq=$(jq -r '.functions[] | select(.name == "jittery") | "\(.flat.change) \(.flat.p) \(.noise)"' "$TMPDIR/fns.json")
read -r jc jp jn <<<"$jq"
if [ "$jn" != true ] || awk -v c="$jc" 'BEGIN { exit !(c < 0.03) }'; then
  fail between-runs "jittery: change $jc p $jp noise $jn (want a change near +0.05 judged noise)"
else ok between-runs "jittery +$jc judged noise, p $jp"; fi

# One push a side: the counting test, named in the answer and the table.
s=$(printf "$SEL" ab)
curl -s -G "$url/api/v1/diff" --data-urlencode "base=$s" --data-urlencode "new=$s" -d base_from=$T0 \
  -d base_to=$((T0 + 10)) -d new_from=$T1 -d new_to=$((T1 + 10)) -d format=top > "$TMPDIR/top.txt"
if ! grep -q '^Significance: binomial count test' "$TMPDIR/top.txt" || ! grep -q ' planted$' "$TMPDIR/top.txt"; then
  fail count-fallback "$(head -5 "$TMPDIR/top.txt")"
else ok count-fallback; fi

# The flat tree: one noise flag per node (nodes / stride), root 0.
s=$(printf "$SEL" ab)
curl -s -G "$url/api/v1/diff" --data-urlencode "base=$s" --data-urlencode "new=$s" -d base_from=$T0 \
  -d base_to=$((T0 + 120)) -d new_from=$T1 -d new_to=$((T1 + 120)) -d format=flat > "$TMPDIR/flat.json"
if [ "$(jq '(.nodes | length) / .stride == (.noise | length) and .noise[0] == 0 and .confidence == 0.99' "$TMPDIR/flat.json")" != true ]; then
  fail flat-noise "$(head -c 300 "$TMPDIR/flat.json")"
else ok flat-noise "$(jq '.noise | add' "$TMPDIR/flat.json") of $(jq '.noise | length' "$TMPDIR/flat.json") nodes noise"; fi

code=$(curl -s -o "$TMPDIR/err" -w '%{http_code}' -G "$url/api/v1/diff" --data-urlencode "base=$s" \
  --data-urlencode "new=$s" -d confidence=1.5 -d format=functions)
if [ "$code" != 400 ] || ! grep -q confidence "$TMPDIR/err"; then fail bad-confidence "HTTP $code: $(head -c 200 "$TMPDIR/err")"
else ok bad-confidence; fi
exit $st
