#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/regressions (server/regressions.c): releases compared by their version label,
# ranked by cost, routed to the team the config's "owners" names. Service "shop" (owned by
# team "payments") runs v1 then v2, twelve pushes each of 2000 samples from a seeded generator
# (awk), v2 with "planted" 5 points of the total heavier; v3 is v1's workload again (A/A).
#   - v1 -> v2: exactly one regression, "planted", team payments, bootstrap over slices;
#   - v1 -> v3: none;
#   - units: v4 does the same work per request with twice the samples (twice the requests):
#     normalised by units, none; the same pair with equal units claimed: every function grew;
#   - one window for both versions falls back to the counting test and still finds planted;
#   - bad parameters are 400s naming the parameter; the CLI prints the table.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_regressions: curl is not installed"; exit 0; fi
if ! command -v jq >/dev/null; then echo "SKIP server_regressions: jq is not installed"; exit 0; fi
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
fail() { echo "FAIL server_regressions/$1: $2"; st=1; }
ok() { echo "ok server_regressions/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
printf '{"owners": {"service_name": {"shop": "payments", "other": "search"}}}\n' > "$TMPDIR/cfg.json"
start_server --config "$TMPDIR/cfg.json"

gen() { # SEED PLANT N: one push of N samples; "planted" 10 % (+PLANT), f1..f9 share the rest
  awk -v seed="$1" -v plant="$2" -v n="$3" 'BEGIN {
    srand(seed); pl = 0.10 + plant; rest = 1 - pl;
    for (s = 0; s < n; s++) {
      u = rand();
      if (u < pl) c["main;planted"]++;
      else { k = 1 + int((u - pl) / (rest / 9)); if (k > 9) k = 9; c["main;f" k]++ }
    }
    for (x in c) print x, c[x] }'
}
now=$(date +%s)
T1=$((now - 3000)) T2=$((now - 2000)) T3=$((now - 1000)) T4=$((now - 500))
push() { # VERSION T0 SEED PLANT N
  local i
  for i in $(seq 0 11); do
    gen $(($3 + i)) "$4" "$5" | curl -s -o /dev/null -w '%{http_code}\n' --data-binary @- \
      "$url/ingest?name=shop%7Bversion%3D$1%7D&from=$(($2 + i * 10))&until=$(($2 + i * 10 + 10))&format=folded&sampleRate=100"
  done | grep -qv '^200$' && fail push "$1: a push was refused"
}
push v1 "$T1" 100 0 2000
push v2 "$T2" 200 0.05 2000
push v3 "$T3" 300 0 2000
push v4 "$T4" 400 0 4000
Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="shop"}'
reg() { # BASE BFROM NEW NFROM [curl args]: the pair, each over its own 120 s
  curl -s -G "$url/api/v1/regressions" --data-urlencode "query=$Q" -d by=version -d base="$1" -d new="$3" \
    -d base_from="$2" -d base_to=$(($2 + 120)) -d new_from="$4" -d new_to=$(($4 + 120)) "${@:5}" > "$TMPDIR/reg.json"
}

reg v1 "$T1" v2 "$T2"
got=$(jq -c '[.regressions[] | [.function, .team]]' "$TMPDIR/reg.json")
if [ "$got" != '[["planted","payments"]]' ] || [ "$(jq -r .method "$TMPDIR/reg.json")" != "bootstrap over window slices" ]; then
  fail ab "want planted of payments by the bootstrap, got $got: $(head -c 400 "$TMPDIR/reg.json")"
else ok ab "$(jq -r '.regressions[0] | "planted +\(.self.change * 1000 | floor / 10) points, q \(.self.q), cost \(.cost) ns"' "$TMPDIR/reg.json")"; fi

reg v1 "$T1" v3 "$T3"
if [ "$(jq .count "$TMPDIR/reg.json")" != 0 ]; then fail aa "$(jq -c '[.regressions[].function]' "$TMPDIR/reg.json")"
else ok aa "v1 -> v3: none"; fi

# v4: twice the samples per push (twice the requests), the same work per request.
reg v1 "$T1" v4 "$T4" -d base_units=1000 -d new_units=2000
a=$(jq -r '"\(.count) \(.method) \(.normalised_by)"' "$TMPDIR/reg.json")
reg v1 "$T1" v4 "$T4" -d base_units=1000 -d new_units=1000
b=$(jq .count "$TMPDIR/reg.json")
if [ "$a" != "0 binomial count test per unit units" ] || [ "$b" -lt 10 ]; then
  fail units "per unit: '$a' (want 0 regressions); equal units claimed: $b (want all 10 functions)"
else ok units "per request: 0; with the load growth unaccounted: $b"; fi

# One window over both versions: too few slices hold each, so the counting test.
curl -s -G "$url/api/v1/regressions" --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=v2 \
  -d from=$T1 -d to=$((T2 + 120)) > "$TMPDIR/reg.json"
if [ "$(jq -c '[.method, [.regressions[].function]]' "$TMPDIR/reg.json")" != '["binomial count test",["planted"]]' ]; then
  fail count-fallback "$(head -c 300 "$TMPDIR/reg.json")"
else ok count-fallback; fi

bad() { # NAME WANT-IN-MESSAGE curl-args...
  local name=$1 want=$2 code
  shift 2
  code=$(curl -s -o "$TMPDIR/err" -w '%{http_code}' -G "$url/api/v1/regressions" "$@")
  if [ "$code" != 400 ] || ! grep -q -- "$want" "$TMPDIR/err"; then fail "bad-$name" "HTTP $code: $(head -c 200 "$TMPDIR/err")"
  else ok "bad-$name"; fi
}
bad no-query query
bad by-without-values 'needs base= and new=' --data-urlencode "query=$Q" -d by=version
bad by-name 'by must be a label name' --data-urlencode "query=$Q" --data-urlencode 'by=ver sion' -d base=a -d new=b
bad units-alone 'base_units and new_units go together' --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=v2 -d base_units=5
bad units-negative 'new_units must be a positive number' --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=v2 -d base_units=5 -d new_units=-1
bad values-without-by 'they need by=LABEL' --data-urlencode "query=$Q" -d base=v1 -d new=v2
bad limit 'limit must be' --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=v2 -d limit=0
bad confidence confidence --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=v2 -d confidence=2
code=$(curl -s -o "$TMPDIR/err" -w '%{http_code}' -G "$url/api/v1/regressions" --data-urlencode "query=$Q" -d by=version -d base=v1 -d new=nope)
if [ "$code" != 422 ]; then fail empty-side "HTTP $code: $(head -c 200 "$TMPDIR/err")"; else ok empty-side; fi

# The CLI: the table, the team, the function.
out=$("$STROBE" regressions --server "$url" --by version --base v1 --new v2 --base-from "$T1" --base-to $((T1 + 120)) \
  --new-from "$T2" --new-to $((T2 + 120)) "$Q" 2>&1)
if ! grep -q '^1 regression (bootstrap over window slices, 99% confidence, normalised by total); team payments$' <<<"$out" ||
   ! grep -q ' planted$' <<<"$out"; then fail cli "$out"
else ok cli; fi
exit $st
