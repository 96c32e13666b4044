#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Heap snapshots are gauges whatever their sample types are called: two snapshots of 74 MB
# pushed a minute apart query as 74 MB over a range holding both (their mean), not 148 MB.
#   datadog   objects/space, as @datadog/pprof (Node) writes them
#   go        inuse_objects/inuse_space, as Go writes them (the store has averaged those)
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_heap_gauge: curl is not installed"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP server_heap_gauge: python3 is not installed"; exit 0; fi
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
  python3 "$(dirname "$0")/lib/heap_pprof.py" "$TMPDIR/h$i.pb" "$(( (now - 180 + 60 * i) * 1000000000 ))"
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
  python3 "$(dirname "$0")/lib/heap_pprof.py" "$TMPDIR/g$i.pb" "$(( (now - 180 + 60 * i) * 1000000000 ))" go
  curl -s -o /dev/null --data-binary @"$TMPDIR/g$i.pb" "$url/api/v1/push?service_name=goapp"
done
t=$(total 'memory:inuse_space:bytes:space:bytes{service_name="goapp"}')
if [ "$t" = 74000000 ]; then ok go "$t bytes"; else fail go "inuse_space $t (want 74000000)"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
