#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe server end to end: the real binary on a free loopback port with a fresh data dir, fed
# the real Go profiles with curl. A query of one push must give go tool pprof's totals exactly,
# two pushes double them; every output format, diff normalisation, range steps, the label APIs,
# tenant isolation with tokens, JSON errors, limits, and kill -9 right after a 200 losing
# nothing.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_api: curl is not installed"; exit 0; fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
fail() { echo "FAIL server_api/$1: $2"; st=1; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
cpu=$GOPROF/go_cpu.pb.gz
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

start() { # $1 = binary; the rest = extra options. Sets pid and url; polls until ready.
  local bin=$1; shift
  : >"$TMPDIR/log"
  "$bin" server --data "$TMPDIR/data" --listen 127.0.0.1:0 "$@" 2>>"$TMPDIR/log" & pid=$!
  local port= i
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$TMPDIR/log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  url=http://127.0.0.1:$port
  curl -sf "$url/ready" >/dev/null || { fail start "server did not come up: $(cat "$TMPDIR/log")"; exit 1; }
}
stop() { kill $pid; wait $pid; local rc=$?; pid=; return $rc; }

# The cpu/nanoseconds total as go tool pprof sees it (column = index of the type).
gototal() { go tool pprof -raw "$1" 2>/dev/null | awk -v c="$2" '
  /^Samples:/ { getline; s = 1; next } /^Locations/ { s = 0 }
  s && /^ *-?[0-9]+( +-?[0-9]+)*: / { sub(/:.*/, ""); split($0, v, " "); t += v[c] } END { printf "%.0f\n", t }'; }
q() { curl -s -G "$url/api/v1/$1" "${@:2}"; }

rm -rf "$TMPDIR/data"  # a fresh store, even when TMPDIR is reused
start "$STROBE"
# ---- push + query totals against go tool pprof ---------------------------------------------
resp=$(curl -s -w '\n%{http_code}' --data-binary @"$cpu" "$url/api/v1/push?service_name=api&labels=%7Benv%3D%22prod%22%7D&time=now")
code=${resp##*$'\n'}
if [ "$code" = 200 ] && grep -q "\"type\":\"$CPU\"" <<<"$resp" && grep -q '"process_cpu:samples:count:cpu:nanoseconds"' <<<"$resp"; then
  echo "ok server_api/push"
else fail push "got $resp"; fi
if command -v go >/dev/null; then
  want=$(gototal "$cpu" 2)
  q query --data-urlencode "query=$CPU{service_name=\"api\"}" -d format=pprof -d from=now-5m -o "$TMPDIR/q1.pb.gz"
  got=$(gototal "$TMPDIR/q1.pb.gz" 1)
  if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$want" != 0 ]; then echo "ok server_api/query-total ($got ns)"; else fail query-total "go tool pprof: original $want, queried $got"; fi
  wants=$(gototal "$cpu" 1)
  q query --data-urlencode "query=process_cpu:samples:count:cpu:nanoseconds{env=\"prod\"}" -d format=pprof -d from=now-5m -o "$TMPDIR/q2.pb.gz"
  gots=$(gototal "$TMPDIR/q2.pb.gz" 1)
  if [ "$wants" = "$gots" ]; then echo "ok server_api/query-samples ($gots)"; else fail query-samples "original $wants, queried $gots"; fi
  # Top of the original and of the query agree on the heaviest function.
  a=$(go tool pprof -top -sample_index=cpu "$cpu" 2>/dev/null | awk '/flat%/ { getline; print $NF; exit }')
  b=$(q query --data-urlencode "query=$CPU" -d format=top -d from=now-5m | awk '/flat%/ { getline; print $NF; exit }')
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "ok server_api/top ($a)"; else fail top "pprof '$a', server '$b'"; fi
  # pprof.Do labels on the samples are series labels: each endpoint's total is pprof's -tagfocus.
  for e in /checkout /report /search; do
    want=$(go tool pprof -raw -tagfocus="endpoint=$e" "$cpu" 2>/dev/null | awk '
      /^Samples:/ { getline; s = 1; next } /^Locations/ { s = 0 }
      s && /^ *-?[0-9]+( +-?[0-9]+)*: / { sub(/:.*/, ""); split($0, v, " "); t += v[2] } END { printf "%.0f\n", t }')
    q query --data-urlencode "query=$CPU{service_name=\"api\",endpoint=\"$e\"}" -d format=pprof -d from=now-5m -o "$TMPDIR/qe.pb.gz"
    got=$(gototal "$TMPDIR/qe.pb.gz" 1)
    if [ -n "$want" ] && [ "$want" != 0 ] && [ "$want" = "$got" ]; then echo "ok server_api/sample-label$e ($got ns)"; else fail "sample-label$e" "pprof -tagfocus $want, query $got"; fi
  done
else
  echo "SKIP server_api/query-total: go (golang-go) is not installed"
fi

# ---- formats ----------------------------------------------------------------------------------
fold=$(q query --data-urlencode "query=$CPU" -d format=folded -d from=now-5m)
ftotal=$(awk '{ t += $NF } END { printf "%.0f", t }' <<<"$fold")
"$STROBE_FAST" convert -t folded --sample-index=cpu "$cpu" > "$TMPDIR/ref.folded" 2>/dev/null
if [ "$fold" = "$(cat "$TMPDIR/ref.folded")" ]; then echo "ok server_api/folded (total $ftotal)"; else fail folded "differs from strobe convert of the input"; fi
json=$(q query --data-urlencode "query=$CPU" -d format=json -d from=now-5m)
if grep -q "\"total\": *$ftotal\b" <<<"$json" || grep -q "\"total\":$ftotal" <<<"$json"; then echo "ok server_api/json"; else fail json "no total $ftotal in: ${json:0:200}"; fi
svg=$(q query --data-urlencode "query=$CPU" -d format=svg -d from=now-5m)
if grep -q '^<svg\|<svg ' <<<"$svg" && grep -q 'crypto/sha256.block' <<<"$svg"; then echo "ok server_api/svg"; else fail svg "not an SVG with the hot frame"; fi
n1=$(q query --data-urlencode "query=$CPU" -d format=folded -d from=now-5m -d max_nodes=5 | wc -l)
n2=$(wc -l <<<"$fold")
if [ "$n1" -lt "$n2" ] && [ "$n1" -ge 1 ]; then echo "ok server_api/max_nodes ($n2 -> $n1 stacks)"; else fail max_nodes "$n2 -> $n1 stacks"; fi

# ---- a second push doubles; range per step -----------------------------------------------------
curl -s -o /dev/null --data-binary @"$cpu" "$url/api/v1/push?service_name=api&labels=%7Benv%3D%22prod%22%7D&time=now-2m"
f2=$(q query --data-urlencode "query=$CPU" -d format=folded -d from=now-5m | awk '{ t += $NF } END { printf "%.0f", t }')
if [ "$f2" = "$((ftotal * 2))" ]; then echo "ok server_api/double ($f2)"; else fail double "want $((ftotal * 2)), got $f2"; fi
now=$(date +%s)
range=$(q range --data-urlencode "query=$CPU" -d from=$((now - 300)) -d to=$((now + 60)) -d step=60s -d group_by=service_name)
rtot=$(grep -o '\[[0-9]*,[0-9]*\]' <<<"$range" | tr -d '[]' | awk -F, '{ t += $2; if ($2) n++ } END { printf "%.0f %d", t, n }')
if [ "$rtot" = "$f2 2" ] && grep -q '"group":{"service_name":"api"}' <<<"$range"; then echo "ok server_api/range (two steps, $f2)"; else fail range "want '$f2 2', got '$rtot': ${range:0:300}"; fi
sha=$(awk '/crypto\/sha256.block/ { t += $NF } END { printf "%.0f", t }' <<<"$fold")
rf=$(q range --data-urlencode "query=$CPU" -d from=$((now - 300)) -d to=$((now + 60)) -d step=6m -d function=crypto/sha256.block | grep -o '\[[0-9]*,[0-9]*\]' | tr -d '[]' | awk -F, '{ t += $2 } END { printf "%.0f", t }')
if [ "$rf" = "$((sha * 2))" ]; then echo "ok server_api/range-function ($rf)"; else fail range-function "want $((sha * 2)), got $rf"; fi

# ---- diff: the same profile against itself is all grey; normalised ------------------------------
curl -s -o /dev/null --data-binary @"$cpu" "$url/api/v1/push?service_name=web&time=now"
dtop=$(q diff --data-urlencode "base=$CPU{service_name=\"api\"}" -d base_from=now-5m --data-urlencode "new=$CPU{service_name=\"web\"}" -d new_from=now-5m -d format=top)
secs=$(awk -v t="$(gototal "$cpu" 2)" 'BEGIN { printf "%.2fs", t / 1e9 }')
if grep -q "Total: base $secs (normalised), new $secs" <<<"$dtop" && grep -q "^Significance: " <<<"$dtop" && [ "$(wc -l <<<"$dtop")" = 4 ]; then echo "ok server_api/diff-normalised"; else fail diff-normalised "$(head -5 <<<"$dtop")"; fi
dsvg=$(q diff --data-urlencode "base=$CPU{service_name=\"api\"}" -d base_from=now-5m --data-urlencode "new=$CPU{service_name=\"web\"}" -d new_from=now-5m)
if grep -q '<svg' <<<"$dsvg"; then echo "ok server_api/diff-svg"; else fail diff-svg "no svg"; fi

# ---- label APIs --------------------------------------------------------------------------------
l=$(q labels -d from=now-10m); v=$(q label/service_name/values -d from=now-10m)
v2=$(q label/service_name/values -d from=now-10m --data-urlencode 'query={env="prod"}'); t=$(q profile_types -d from=now-10m)
if [ "$l" = '{"data":["endpoint","env","service_name","version"]}' ] && [ "$v" = '{"data":["api","web"]}' ] && [ "$v2" = '{"data":["api"]}' ] &&
   [ "$t" = '{"data":["process_cpu:cpu:nanoseconds:cpu:nanoseconds","process_cpu:samples:count:cpu:nanoseconds"]}' ]; then
  echo "ok server_api/labels"
else fail labels "labels $l; values $v; filtered $v2; types $t"; fi

# ---- every Go profile gets its Parca/Pyroscope type -----------------------------------------------
for pair in heap:memory:inuse_space:bytes:space:bytes mutex:mutex:delay:nanoseconds:contentions:count \
            block:block:contentions:count:contentions:count goroutine:goroutine:goroutine:count:goroutine:count; do
  f=${pair%%:*}; ty=${pair#*:}
  r=$(curl -s --data-binary @"$GOPROF/go_$f.pb.gz" "$url/api/v1/push?service_name=types&time=now")
  if grep -q "\"type\":\"$ty\"" <<<"$r"; then echo "ok server_api/type-$f"; else fail type-$f "want $ty in $r"; fi
done

# ---- errors are JSON with a message ------------------------------------------------------------
check_err() { # $1 name, $2 want status, $3 want message part, rest = curl args
  local name=$1 ws=$2 wm=$3; shift 3
  local out code
  out=$(curl -s -w '\n%{http_code}' "$@"); code=${out##*$'\n'}; out=${out%$'\n'*}
  if [ "$code" = "$ws" ] && grep -q '"error":' <<<"$out" && grep -qF -- "$wm" <<<"$out"; then echo "ok server_api/$name"; else fail "$name" "want $ws '$wm', got $code $out"; fi
}
check_err bad-selector 400 'offset' -G "$url/api/v1/query" --data-urlencode "query=$CPU{service_name=api}"
check_err bad-time 400 'is not a time' -G "$url/api/v1/query" --data-urlencode "query=$CPU" -d from=yesterday
check_err no-type 400 'profile type' -G "$url/api/v1/query" --data-urlencode 'query={service_name="api"}'
check_err bad-format 400 'format' -G "$url/api/v1/query" --data-urlencode "query=$CPU" -d format=png
check_err no-service 400 'service_name' --data-binary @"$cpu" "$url/api/v1/push"
check_err bad-profile 400 'profile 1' --data-binary 'not a profile at all' "$url/api/v1/push?service_name=x"
check_err bad-label 400 'label' --data-binary @"$cpu" "$url/api/v1/push?service_name=x&labels=%7B__x%3D%22y%22%7D"
check_err unknown 404 'no endpoint' "$url/api/v1/nope"
check_err bad-tenant 400 'X-Scope-OrgID' -H 'X-Scope-OrgID: a/b' -G "$url/api/v1/labels"
before=$(q query --data-urlencode "query=$CPU" -d format=folded -d from=now-5m | md5sum)
check_err rejected-stores-nothing 400 'profile 2' -F "p=@$cpu" -F 'p=garbage;filename=x' "$url/api/v1/push?service_name=api&time=now"
after=$(q query --data-urlencode "query=$CPU" -d format=folded -d from=now-5m | md5sum)
[ "$before" = "$after" ] && echo "ok server_api/rejected-unchanged" || fail rejected-unchanged "a rejected push changed the data"
r=$(curl -s -F "a=@$cpu" -F "b=@$GOPROF/go_heap.pb.gz" "$url/api/v1/push?service_name=multi&time=now")
grep -q '"profiles":2' <<<"$r" && echo "ok server_api/multipart" || fail multipart "$r"
stop || fail stop "server exited non-zero: $(tail -3 "$TMPDIR/log")"

# ---- tenants with tokens, limits ---------------------------------------------------------------
cat > "$TMPDIR/cfg.json" <<'JSON'
{ "retention": "28d", "limits": { "max_body_bytes": 20000, "max_labels": 3 },
  "tenants": [ { "id": "team-a", "token": "sekrit-a" }, { "id": "team-b", "token": "sekrit-b" } ] }
JSON
chmod 600 "$TMPDIR/cfg.json" # it holds tokens: the server refuses it readable by others
start "$STROBE" --config "$TMPDIR/cfg.json"
A=(-H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer sekrit-a')
B=(-H 'X-Scope-OrgID: team-b' -H 'Authorization: Bearer sekrit-b')
check_err no-token 401 'token' -H 'X-Scope-OrgID: team-a' --data-binary @"$cpu" "$url/api/v1/push?service_name=a"
check_err wrong-token 401 'token' -H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer sekrit-b' -G "$url/api/v1/labels"
check_err unknown-tenant 401 'unknown tenant' -G "$url/api/v1/labels"
curl -s -o /dev/null "${A[@]}" --data-binary @"$cpu" "$url/api/v1/push?service_name=only-a&time=now"
va=$(curl -s -G "${A[@]}" "$url/api/v1/label/service_name/values" -d from=now-5m)
vb=$(curl -s -G "${B[@]}" "$url/api/v1/label/service_name/values" -d from=now-5m)
qb=$(curl -s -G "${B[@]}" "$url/api/v1/query" --data-urlencode "query=$CPU" -d format=folded -d from=now-5m | wc -c)
if [ "$va" = '{"data":["api","only-a"]}' ] || [ "$va" = '{"data":["only-a"]}' ]; then
  if [ "$vb" = '{"data":[]}' ] && [ "$qb" = 0 ]; then echo "ok server_api/tenant-isolation"; else fail tenant-isolation "team-b sees $vb, $qb bytes"; fi
else fail tenant-isolation "team-a sees $va"; fi
head -c 30000 /dev/urandom > "$TMPDIR/big"
check_err body-limit 413 'max_body_bytes' "${A[@]}" --data-binary @"$TMPDIR/big" "$url/api/v1/push?service_name=a"
check_err label-limit 400 'max_labels' "${A[@]}" --data-binary @"$cpu" "$url/api/v1/push?service_name=a&labels=%7Ba%3D%221%22%2Cb%3D%221%22%2Cc%3D%221%22%7D"
stop || fail stop2 "server exited non-zero"

# ---- durability: kill -9 right after a 200, then restart (optimised build, as deployed) ------------
start "$STROBE_FAST" --config "$TMPDIR/cfg.json"
code=$(curl -s -o /dev/null -w '%{http_code}' "${B[@]}" --data-binary @"$cpu" "$url/api/v1/push?service_name=durable&time=now")
kill -9 $pid; wait $pid 2>/dev/null; pid=
start "$STROBE_FAST" --config "$TMPDIR/cfg.json"
got=$(curl -s -G "${B[@]}" "$url/api/v1/query" --data-urlencode "query=$CPU{service_name=\"durable\"}" -d format=folded -d from=now-5m | awk '{ t += $NF } END { printf "%.0f", t }')
if [ "$code" = 200 ] && [ "$got" = "$ftotal" ]; then echo "ok server_api/kill-9-durable ($got)"; else fail kill-9-durable "push $code, after restart total '$got', want $ftotal"; fi
stop || true

# ---- query cost cap: a query reading more stored profiles than allowed is refused, named ----------
echo '{ "limits": { "max_query_profiles": 1 } }' > "$TMPDIR/cap.json"
rm -rf "$TMPDIR/data"
start "$STROBE" --config "$TMPDIR/cap.json"
# One folded profile is one stored profile per query type (no sample labels to split it).
curl -s -o /dev/null --data-binary $'main;work 7\nmain;idle 3\n' "$url/api/v1/push?service_name=capped&time=now"
one=$(q query --data-urlencode 'query=samples:samples:count:samples:count' -d format=folded -d from=now-5m | awk '{ t += $NF } END { printf "%.0f", t }')
curl -s -o /dev/null --data-binary $'main;work 7\nmain;idle 3\n' "$url/api/v1/push?service_name=capped&time=now-1m"
if [ "$one" = 10 ]; then echo "ok server_api/query-cap-under"; else fail query-cap-under "one profile: $one, want 10"; fi
check_err query-cap 429 'limit max_query_profiles' -G "$url/api/v1/query" --data-urlencode 'query=samples:samples:count:samples:count' -d from=now-5m
stop || true
exit $st
