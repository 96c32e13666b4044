#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Heap snapshots are gauges whatever their sample types are called: two snapshots of 74 MB
# pushed a minute apart query as 74 MB over a range holding both (their mean), not 148 MB.
#   datadog   objects/space, as @datadog/pprof (Node) writes them
#   go        inuse_objects/inuse_space, as Go writes them (the store has averaged those)
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_heap_gauge: curl is not installed"; exit 0; fi
# The snapshots are encoded by protoc from text, so the test does not depend on our encoder.
if ! command -v protoc >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "FAIL server_heap_gauge: protoc is not installed (scripts/deps.sh check)"; exit 1; fi
  echo "SKIP server_heap_gauge: protoc is not installed (package protobuf-compiler)"; exit 0
fi
proto=$(cd "$(dirname "$0")/../../proto" && pwd)
# heap_pb OUT TIME_NS [go]: a heap snapshot as @datadog/pprof (Node) writes one (objects/count
# and space/bytes, period type space/bytes), or with Go's inuse_ names: two stacks, 74 MB.
heap_pb() {
  local o=1 s=3
  [ "${3:-}" = go ] && o=8 s=9
  protoc --encode=perftools.profiles.Profile --proto_path="$proto" profile.proto >"$1" <<PB
sample_type { type: $o unit: 2 } sample_type { type: $s unit: 4 }
sample { location_id: [2, 1] value: [700, 70000000] }
sample { location_id: [3, 1] value: [40, 4000000] }
location { id: 1 line { function_id: 1 } } location { id: 2 line { function_id: 2 } } location { id: 3 line { function_id: 3 } }
function { id: 1 name: 5 } function { id: 2 name: 6 } function { id: 3 name: 7 }
string_table: ["", "objects", "count", "space", "bytes", "main", "load", "cache", "inuse_objects", "inuse_space"]
time_nanos: $2
period_type { type: 3 unit: 4 } period: 524288
PB
}
st=0
fail() { echo "FAIL server_heap_gauge/$1: $2"; st=1; }
ok() { echo "ok server_heap_gauge/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server
now=$(date +%s)
for i in 1 2; do
  heap_pb "$TMPDIR/h$i.pb" "$(( (now - 180 + 60 * i) * 1000000000 ))"
done
total() { # SELECTOR: the folded total over the last 10 minutes
  curl -s -G "$url/api/v1/query" --data-urlencode "query=$1" -d format=folded -d from=now-10m |
    awk '{ t += $NF } END { printf "%.0f", t }'
}
for i in 1 2; do
  code=$(curl -s -o "$TMPDIR/r$i" -w '%{http_code}' --data-binary @"$TMPDIR/h$i.pb" \
    "$url/api/v1/push?service_name=node")
  [ "$code" = 200 ] || fail datadog "push $i: HTTP $code $(cat "$TMPDIR/r$i")"
done
t=$(total 'memory:space:bytes:space:bytes{service_name="node"}')
o=$(total 'memory:objects:count:space:bytes{service_name="node"}')
if [ "$t" = 74000000 ] && [ "$o" = 740 ]; then ok datadog "two snapshots of 74 MB query as $t bytes, $o objects"
else fail datadog "space $t (want 74000000), objects $o (want 740); $(cat "$TMPDIR/r1")"; fi

# The same snapshots with Go's names.
for i in 1 2; do
  heap_pb "$TMPDIR/g$i.pb" "$(( (now - 180 + 60 * i) * 1000000000 ))" go
  curl -s -o /dev/null --data-binary @"$TMPDIR/g$i.pb" "$url/api/v1/push?service_name=goapp"
done
t=$(total 'memory:inuse_space:bytes:space:bytes{service_name="goapp"}')
if [ "$t" = 74000000 ]; then ok go "$t bytes"; else fail go "inuse_space $t (want 74000000)"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
