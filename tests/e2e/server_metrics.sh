#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /metrics against the real server: every counter moves by exactly what was done to it.
#   format     every line is a comment or `name{labels} value`, every family has a TYPE
#   ingested   a folded push of 3 stacks: profiles +1, bytes + its size, samples +3
#   tenant     a Go pprof pushed as team-m: its own counters, bytes = the file's size, samples =
#              the samples go tool pprof -raw lists
#   rejected   an oversized body (413) and a push without service_name (400): +1 under
#              max_body_bytes and +1 under invalid, and the ingested counters did not move
#   latency    two queries: the query histogram's count +2, its +Inf bucket = count, sum > 0
#   commits    the store's group-commit counters hold exactly the stored pushes
#   size       strobe_store_size_bytes = the sizes of the store's files on disk
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_metrics: curl is not installed"; exit 0; fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
fail() { echo "FAIL server_metrics/$1: $2"; st=1; }
ok() { echo "ok server_metrics/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
printf '{"limits": {"max_body_bytes": 100000}}\n' > "$TMPDIR/cfg.json"
start_server --config "$TMPDIR/cfg.json"
scrape() { curl -s "$url/metrics" > "$TMPDIR/$1"; }
# val FILE 'name{labels}': the sample's value, 0 when absent
val() { awk -v k="$2" 'index($0, k " ") == 1 { v = $NF } END { print v + 0 }' "$TMPDIR/$1"; }
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
A='tenant="anonymous",source="push"'
M='tenant="team-m",source="push"'

# ---- format ---------------------------------------------------------------------------------------
scrape m0
bad=$(awk '/^#/ { if ($2 == "TYPE") typed[$3] = 1; next }
  !/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*\})? -?[0-9.e+]+$|\+Inf$/ { print "line " NR ": " $0; next }
  { n = $1; sub(/\{.*/, "", n); f = n; sub(/_(bucket|sum|count)$/, "", f)
    if (!typed[n] && !typed[f]) print "no TYPE for " n }' "$TMPDIR/m0" | head -3)
if [ -s "$TMPDIR/m0" ] && [ -z "$bad" ] && grep -q '^# TYPE strobe_ingested_profiles_total counter$' "$TMPDIR/m0"; then
  ok format "$(grep -vc '^#' "$TMPDIR/m0") samples"
else fail format "${bad:-empty or no strobe_ingested_profiles_total}"; fi

# ---- ingested -------------------------------------------------------------------------------------
printf 'main;a;b 5\nmain;c 3\nd 1\n' > "$TMPDIR/f.txt" # 3 stacks
flen=$(stat -c %s "$TMPDIR/f.txt")
code=$(curl -s -o "$TMPDIR/r1" -w '%{http_code}' --data-binary @"$TMPDIR/f.txt" "$url/api/v1/push?service_name=m")
scrape m1
dp=$(( $(val m1 "strobe_ingested_profiles_total{$A}") - $(val m0 "strobe_ingested_profiles_total{$A}") ))
db=$(( $(val m1 "strobe_ingested_bytes_total{$A}") - $(val m0 "strobe_ingested_bytes_total{$A}") ))
ds=$(( $(val m1 "strobe_ingested_samples_total{$A}") - $(val m0 "strobe_ingested_samples_total{$A}") ))
if [ "$code" = 200 ] && [ "$dp" = 1 ] && [ "$db" = "$flen" ] && [ "$ds" = 3 ]; then
  ok ingested "profiles +1, bytes +$db, samples +3"
else fail ingested "HTTP $code; profiles +$dp, bytes +$db (want $flen), samples +$ds (want 3)"; fi

# ---- tenant ---------------------------------------------------------------------------------------
cpu=$GOPROF/go_cpu.pb.gz
code=$(curl -s -o "$TMPDIR/r2" -w '%{http_code}' -H 'X-Scope-OrgID: team-m' --data-binary @"$cpu" "$url/api/v1/push?service_name=m")
scrape m2
tp=$(val m2 "strobe_ingested_profiles_total{$M}")
tb=$(val m2 "strobe_ingested_bytes_total{$M}")
ts=$(val m2 "strobe_ingested_samples_total{$M}")
ap=$(val m2 "strobe_ingested_profiles_total{$A}")
if command -v go >/dev/null; then
  want=$(go tool pprof -raw "$cpu" 2>/dev/null | awk '/^Samples:/ { getline; s = 1; next } /^Locations/ { s = 0 }
    s && /^ *-?[0-9]+( +-?[0-9]+)*: / { n++ } END { print n + 0 }')
else
  want=$ts; echo "SKIP server_metrics/tenant-samples: go (golang-go) is not installed"
fi
if [ "$code" = 200 ] && [ "$tp" = 1 ] && [ "$tb" = "$(stat -c %s "$cpu")" ] && [ "$ts" = "$want" ] && [ "$ts" -gt 0 ] && [ "$ap" = 1 ]; then
  ok tenant "team-m: 1 profile, $tb bytes, $ts samples = go tool pprof's; anonymous still 1"
else fail tenant "HTTP $code; team-m profiles $tp bytes $tb samples $ts (want $want); anonymous $ap"; fi

# ---- rejected -------------------------------------------------------------------------------------
head -c 150000 /dev/zero > "$TMPDIR/big"
c1=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$TMPDIR/big" "$url/api/v1/push?service_name=m")
c2=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$TMPDIR/f.txt" "$url/api/v1/push")
scrape m3
r1=$(( $(val m3 'strobe_rejected_total{reason="max_body_bytes"}') - $(val m2 'strobe_rejected_total{reason="max_body_bytes"}') ))
r2=$(( $(val m3 'strobe_rejected_total{reason="invalid"}') - $(val m2 'strobe_rejected_total{reason="invalid"}') ))
same=1
for k in "strobe_ingested_profiles_total{$A}" "strobe_ingested_bytes_total{$A}" "strobe_ingested_samples_total{$A}"; do
  [ "$(val m3 "$k")" = "$(val m2 "$k")" ] || same=0
done
if [ "$c1" = 413 ] && [ "$c2" = 400 ] && [ "$r1" = 1 ] && [ "$r2" = 1 ] && [ $same = 1 ]; then
  ok rejected "413 max_body_bytes +1, 400 invalid +1, ingested unchanged"
else fail rejected "HTTP $c1/$c2; max_body_bytes +$r1, invalid +$r2, ingested unchanged: $same"; fi

# ---- latency --------------------------------------------------------------------------------------
for i in 1 2; do
  curl -s -o /dev/null -G "$url/api/v1/query" --data-urlencode "query=$CPU{service_name=\"m\"}" -d format=top -d from=now-5m
done
scrape m4
qc=$(( $(val m4 'strobe_request_duration_seconds_count{handler="query"}') - $(val m3 'strobe_request_duration_seconds_count{handler="query"}') ))
qinf=$(val m4 'strobe_request_duration_seconds_bucket{handler="query",le="+Inf"}')
qn=$(val m4 'strobe_request_duration_seconds_count{handler="query"}')
qsum=$(val m4 'strobe_request_duration_seconds_sum{handler="query"}')
if [ "$qc" = 2 ] && [ "$qinf" = "$qn" ] && awk -v s="$qsum" 'BEGIN { exit !(s > 0) }'; then
  ok latency "query count +2, sum ${qsum}s"
else fail latency "count +$qc, +Inf bucket $qinf vs count $qn, sum $qsum"; fi

# ---- commits --------------------------------------------------------------------------------------
cp=$(val m4 strobe_store_committed_pushes_total)
cn=$(val m4 strobe_store_commits_total)
if [ "$cp" = 2 ] && [ "$cn" -ge 1 ] && [ "$cn" -le 2 ]; then ok commits "$cp pushes in $cn commits"
else fail commits "$cp pushes in $cn commits, want 2 in 1-2"; fi

# ---- size -----------------------------------------------------------------------------------------
scrape m5
files=0
for f in strobe.db strobe.db-wal strobe.db-shm; do
  [ -f "$TMPDIR/data/$f" ] && files=$((files + $(stat -c %s "$TMPDIR/data/$f")))
done
got=$(( $(val m5 'strobe_store_size_bytes{file="db"}') + $(val m5 'strobe_store_size_bytes{file="wal"}') + $(val m5 'strobe_store_size_bytes{file="shm"}') ))
# On the ClickHouse store (lib/server.sh): its database's active parts, as ClickHouse counts
# them (asked again until two answers agree, since parts merge in the background).
if [ -n "${STROBE_TEST_CLICKHOUSE:-}" ]; then
  for ((i = 0; i < 40; i++)); do
    files=$(curl -s "http://$STROBE_TEST_CLICKHOUSE/" --data-binary "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '$(cat "$TMPDIR/data/.chdb")' AND active")
    scrape m5
    got=$(val m5 'strobe_store_size_bytes{file="db"}')
    [ "$got" = "$files" ] && break
    sleep 0.25
  done
fi
if [ "$got" = "$files" ] && [ "$got" -gt 0 ]; then ok size "$got bytes"; else fail size "metrics $got, files $files"; fi
exit $st
