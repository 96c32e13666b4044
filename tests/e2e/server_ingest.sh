#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pyroscope's POST /ingest against the real server, as its SDKs and agents send it:
#   folded    name=myapp.cpu{env=prod}, sampleRate=100: 15 samples are 150 ms of CPU, stacks kept
#   gzip      the same body with Content-Encoding: gzip
#   lines     format=lines: each line one sample
#   pprof     a real Go CPU profile: the same cpu total as go tool pprof -raw
#   tenant    X-Scope-OrgID keeps one tenant's upload from another
#   bad       a malformed name is a JSON 400 and stores nothing
#   not-utf8  a label value that is not UTF-8 is a JSON 400 as /api/v1/push answers it; the label
#             name is not listed afterwards
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_ingest: curl is not installed"; exit 0; fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
fail() { echo "FAIL server_ingest/$1: $2"; st=1; }
ok() { echo "ok server_ingest/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server
now=$(date +%s)
win="from=$((now - 10))&until=$now"
total() { # SELECTOR [curl options]: the folded total of a query over the last 5 minutes
  local sel=$1; shift
  curl -s -G "$url/api/v1/query" "$@" --data-urlencode "query=$sel" -d format=folded -d from=now-5m |
    awk '{ t += $NF } END { printf "%.0f", t }'
}

# ---- folded ---------------------------------------------------------------------------------------
printf 'main;handle;parse 10\nmain;handle;render 5\n' > "$TMPDIR/f.txt"
code=$(curl -s -o "$TMPDIR/r1" -w '%{http_code}' --data-binary @"$TMPDIR/f.txt" \
  "$url/ingest?name=myapp.cpu%7Benv%3Dprod%7D&$win&format=folded&sampleRate=100&spyName=gospy")
t=$(total "$CPU{service_name=\"myapp\",env=\"prod\"}")
stacks=$(curl -s -G "$url/api/v1/query" --data-urlencode "query=$CPU{service_name=\"myapp\"}" -d format=folded -d from=now-5m)
if [ "$code" = 200 ] && [ "$t" = 150000000 ] && grep -q '^main;handle;parse 100000000$' <<<"$stacks"; then
  ok folded "15 samples at 100 Hz = $t ns"
else fail folded "HTTP $code $(cat "$TMPDIR/r1"); total $t; stacks: $stacks"; fi

# ---- gzip -----------------------------------------------------------------------------------------
gzip -c "$TMPDIR/f.txt" > "$TMPDIR/f.gz"
code=$(curl -s -o "$TMPDIR/r2" -w '%{http_code}' -H 'Content-Encoding: gzip' --data-binary @"$TMPDIR/f.gz" \
  "$url/ingest?name=gzapp.cpu&$win&format=folded&sampleRate=100")
t=$(total "$CPU{service_name=\"gzapp\"}")
if [ "$code" = 200 ] && [ "$t" = 150000000 ]; then ok gzip; else fail gzip "HTTP $code $(cat "$TMPDIR/r2"); total $t"; fi
# a body that inflates past limits.max_decompressed_bytes (256 MiB; 300 MiB of zeros, 300 KB
# gzipped): 413 that names the limit, as docs/server.md says
head -c $((300 << 20)) /dev/zero | gzip -1 > "$TMPDIR/bomb.gz"
code=$(curl -s -o "$TMPDIR/r2b" -w '%{http_code}' -H 'Content-Encoding: gzip' --data-binary @"$TMPDIR/bomb.gz" \
  "$url/ingest?name=bomb.cpu&$win&format=folded&sampleRate=100")
if [ "$code" = 413 ] && grep -q max_decompressed_bytes "$TMPDIR/r2b"; then ok gzip-bomb "$(cut -c1-100 "$TMPDIR/r2b")"
else fail gzip-bomb "HTTP $code $(cut -c1-200 "$TMPDIR/r2b")"; fi

# ---- lines ----------------------------------------------------------------------------------------
printf 'main;a;b\nmain;a;b\nmain;a;c\n' > "$TMPDIR/l.txt"
code=$(curl -s -o "$TMPDIR/r3" -w '%{http_code}' --data-binary @"$TMPDIR/l.txt" \
  "$url/ingest?name=lineapp.cpu&$win&format=lines&sampleRate=100")
t=$(total "$CPU{service_name=\"lineapp\"}")
if [ "$code" = 200 ] && [ "$t" = 30000000 ]; then ok lines "3 lines = $t ns"; else fail lines "HTTP $code $(cat "$TMPDIR/r3"); total $t"; fi

# ---- pprof ----------------------------------------------------------------------------------------
cpu=$GOPROF/go_cpu.pb.gz
code=$(curl -s -o "$TMPDIR/r4" -w '%{http_code}' --data-binary @"$cpu" "$url/ingest?name=goapp&$win&format=pprof")
t=$(total "$CPU{service_name=\"goapp\"}")
if command -v go >/dev/null; then
  want=$(go tool pprof -raw "$cpu" 2>/dev/null | awk '/^Samples:/ { getline; s = 1; next } /^Locations/ { s = 0 }
    s && /^ *-?[0-9]+( +-?[0-9]+)*: / { sub(/:.*/, ""); split($0, v, " "); x += v[2] } END { printf "%.0f", x }')
  if [ "$code" = 200 ] && [ -n "$want" ] && [ "$t" = "$want" ]; then ok pprof "cpu total $t = go tool pprof's"
  else fail pprof "HTTP $code $(head -c 200 "$TMPDIR/r4"); total $t, go tool pprof $want"; fi
else
  echo "SKIP server_ingest/pprof: go (golang-go) is not installed"
fi

# ---- tenant ---------------------------------------------------------------------------------------
curl -s -o /dev/null -H 'X-Scope-OrgID: team-a' --data-binary @"$TMPDIR/f.txt" \
  "$url/ingest?name=secret.cpu&$win&format=folded&sampleRate=100"
a=$(total "$CPU{service_name=\"secret\"}" -H 'X-Scope-OrgID: team-a')
b=$(total "$CPU{service_name=\"secret\"}" -H 'X-Scope-OrgID: team-b')
d=$(total "$CPU{service_name=\"secret\"}")
if [ "$a" = 150000000 ] && [ "$b" = 0 ] && [ "$d" = 0 ]; then ok tenant "team-a sees $a, team-b and the default tenant 0"
else fail tenant "team-a $a, team-b $b, default $d"; fi

# ---- bad ------------------------------------------------------------------------------------------
before=$(curl -s "$url/api/v1/label/service_name/values")
code=$(curl -s -o "$TMPDIR/r5" -w '%{http_code}' --data-binary @"$TMPDIR/f.txt" \
  "$url/ingest?name=broken%7Benv%3D&$win&format=folded")
after=$(curl -s "$url/api/v1/label/service_name/values")
if [ "$code" = 400 ] && grep -q '"error"' "$TMPDIR/r5" && [ "$before" = "$after" ]; then
  ok bad "$(cat "$TMPDIR/r5")"
else fail bad "HTTP $code $(cat "$TMPDIR/r5"); services before $before, after $after"; fi

# ---- not-utf8 -------------------------------------------------------------------------------------
code=$(curl -s -o "$TMPDIR/r6" -w '%{http_code}' --data-binary @"$TMPDIR/f.txt" \
  "$url/ingest?name=latin%7Bcity%3DK%F6ln%7D&$win&format=folded")
names=$(curl -s "$url/api/v1/labels")
if [ "$code" = 400 ] && grep -q '"error".*not UTF-8' "$TMPDIR/r6" && ! grep -q city <<<"$names"; then
  ok not-utf8 "$(cat "$TMPDIR/r6")"
else fail not-utf8 "HTTP $code $(cat "$TMPDIR/r6"); label names $names"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
