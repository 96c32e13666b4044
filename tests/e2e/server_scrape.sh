#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pull scraping by the real server: a Go service with net/http/pprof (tests/e2e/lib/pprofsrv.go,
# built here, offline) is named as a scrape target in the server's config; after a few rounds the
# store answers for it as for a push: its CPU profile names burnLoop, its allocs (a cumulative
# profile stored as deltas) name allocLoop, the target's labels and tenant are on the series.
# The heap's inuse gauges carry their own scrape's time: once the target is gone, the last
# inuse_space point is later than the last alloc_space delta (stamped at its window's start, the
# scrape before), not at the same time as it.
set -u
if ! command -v go >/dev/null || ! command -v curl >/dev/null; then
  echo "SKIP server_scrape: needs go (golang-go) and curl"; exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
st=0
fail() { echo "FAIL server_scrape/$1: $2"; st=1; }
ok() { echo "ok server_scrape/$1${2:+ ($2)}"; }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done' EXIT
mkdir -p "$TMPDIR/go"
cp "$here/lib/pprofsrv.go" "$TMPDIR/go/main.go"
if ! (cd "$TMPDIR/go" && GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOFLAGS= \
      GOCACHE="$TMPDIR/gocache" go build -o pprofsrv main.go) > "$TMPDIR/gobuild.log" 2>&1; then
  fail build "go build: $(head -3 "$TMPDIR/gobuild.log" | tr '\n' ' ')"; exit 1
fi
rm -f "$TMPDIR/goport"
"$TMPDIR/go/pprofsrv" > "$TMPDIR/goport" & pids+=($!)
for ((i = 0; i < 200; i++)); do grep -q '^[0-9][0-9]*$' "$TMPDIR/goport" 2>/dev/null && break; sleep 0.05; done
goport=$(head -1 "$TMPDIR/goport")
[ -n "$goport" ] || { fail start "the Go service printed no port"; exit 1; }
cat > "$TMPDIR/server.json" <<JSON
{
  "scrape": [
    {"url": "http://127.0.0.1:$goport", "labels": {"service_name": "gosvc", "env": "test"},
     "interval": "1s", "cpu_seconds": 1, "profiles": ["cpu", "allocs"], "tenant": "team-go"}
  ]
}
JSON
# shellcheck source=lib/server.sh
. "$here/lib/server.sh"
start_server --config "$TMPDIR/server.json"
pids+=("$pid")
q() { curl -s -G "$url/api/v1/query" -H 'X-Scope-OrgID: team-go' --data-urlencode "query=$1" -d format=folded -d from=now-5m; }
# Poll (at most 20 s) until both profiles have arrived: allocs needs two rounds (a baseline, then
# a delta), the CPU profile one second of each round.
cpu= alloc=
for ((i = 0; i < 80; i++)); do
  cpu=$(q 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="gosvc",env="test"}')
  alloc=$(q 'memory:alloc_space:bytes:space:bytes{service_name="gosvc"}')
  grep -q 'main.burnLoop' <<<"$cpu" && grep -q 'main.allocLoop' <<<"$alloc" && break
  sleep 0.25
done
if grep -q 'main.burnLoop' <<<"$cpu"; then
  ok cpu "$(grep -c . <<<"$cpu") stacks, burnLoop among them"
else fail cpu "no main.burnLoop in the scraped CPU profile: $(head -c 300 <<<"$cpu") -- $(tail -3 "$TMPDIR/log" | tr '\n' ' ')"; fi
if grep -q 'main.allocLoop' <<<"$alloc"; then
  total=$(awk '{ t += $NF } END { printf "%.0f", t }' <<<"$alloc")
  ok allocs "alloc_space deltas name allocLoop, $total bytes"
else fail allocs "no main.allocLoop in alloc_space: $(head -c 300 <<<"$alloc")"; fi
other=$(curl -s -G "$url/api/v1/query" --data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="gosvc"}' -d format=folded -d from=now-5m | wc -c)
if [ "$other" -eq 0 ]; then ok tenant "nothing in the default tenant"; else fail tenant "the default tenant sees $other bytes"; fi

# ---- gauge-time: the target goes away; its last scrape's inuse point is the newest point ---------
kill "${pids[0]}" 2>/dev/null; wait "${pids[0]}" 2>/dev/null
sleep 3 # a round in flight ends (its next fetch fails)
t1=$(date +%s)
last() { # the start (ms) of the last 1 s step with data of $1 (both queries on the same steps)
  curl -s -G "$url/api/v1/range" -H 'X-Scope-OrgID: team-go' --data-urlencode "query=$1" \
    -d from=$((t1 - 300)) -d to=$((t1 + 1)) -d step=1s |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(max([p[0] for s in d.get("series",[]) for p in s["points"] if p[1]] or [0]))'
}
if command -v python3 >/dev/null; then
  li=$(last 'memory:inuse_space:bytes:space:bytes{service_name="gosvc"}')
  la=$(last 'memory:alloc_space:bytes:space:bytes{service_name="gosvc"}')
  if [ "${li:-0}" -gt 0 ] && [ "${la:-0}" -gt 0 ] && [ "$li" -gt "$la" ]; then
    ok gauge-time "last inuse step $((li - la)) ms after the last alloc delta's"
  else fail gauge-time "last inuse step $li, last alloc step $la (want inuse later)"; fi
else echo "SKIP server_scrape/gauge-time: python3 is not installed"; fi
exit $st
