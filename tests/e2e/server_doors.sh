#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The same profile through every door gives the same answers. One pprof (a real Go CPU profile
# when $GOPROF has one, else one `strobe convert` makes from folded text) goes in through each
# door into a service of its own; then each service is read back through the native API
# (/api/v1/query, folded) and through Connect (SelectMergeStacktraces), and
#   DOOR-native    the native total and per-function self values equal the first door's
#   DOOR-connect   Connect's flame graph (total, every level, names) equals the first door's
#   DOOR-agree     Connect's total and per-function self values equal the native API's
# Doors: /ingest (Pyroscope, format=pprof), /api/v1/push, push.v1.PusherService/Push, OTLP's
# /v1development/profiles (twice: with the samples' attributes, which take the profile model, and
# without, which take the view path straight into the store). A new door
# is a function door_NAME SERVICE FILE (0 when stored) and one word more in DOORS.
set -u
for t in curl protoc python3; do
  command -v $t >/dev/null || { echo "SKIP server_doors: $t is not installed"; exit 0; }
done
st=0
fail() { echo "FAIL server_doors/$1: $2"; st=1; }
ok() { echo "ok server_doors/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
P="--proto_path=$ROOT/proto"
T=$TMPDIR
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server
now=$(date +%s)

prof=${GOPROF:+$GOPROF/go_cpu.pb.gz}
if [ -z "$prof" ] || [ ! -s "$prof" ]; then
  printf 'main;serve;parse 40\nmain;serve;render 25\nmain;gc 10\nruntime;sched 5\n' >"$T/f.txt"
  "$STROBE" convert -f pprof -o "$T/p.pb.gz" "$T/f.txt" || { echo "FAIL server_doors/setup: convert"; exit 1; }
  prof=$T/p.pb.gz
fi
gunzip -c "$prof" >"$T/p0.pb" 2>/dev/null || cp "$prof" "$T/p0.pb"
# The profile is stamped now (protoc rewrites time_nanos), so that every door stores it in the
# window the queries read, however old the fixture file is.
protoc --decode=perftools.profiles.Profile $P "$ROOT/proto/profile.proto" <"$T/p0.pb" |
  sed "/^time_nanos:/d" | { cat; echo "time_nanos: $((now - 5))000000000"; } |
  protoc --encode=perftools.profiles.Profile $P "$ROOT/proto/profile.proto" >"$T/p.pb" ||
  { echo "FAIL server_doors/setup: protoc could not restamp the profile"; exit 1; }
gzip -c "$T/p.pb" >"$T/p.pb.gz"
prof=$T/p.pb.gz

door_ingest() { # Pyroscope's /ingest, the pprof as its SDKs send it
  curl -sf -o /dev/null --data-binary @"$2" "$url/ingest?name=$1&format=pprof&from=$((now - 10))&until=$now"
}
door_push() { # strobe's native push
  curl -sf -o /dev/null --data-binary @"$2" "$url/api/v1/push?service_name=$1&name=process_cpu"
}
door_pushv1() { # push.v1.PusherService/Push, encoded by protoc
  local esc
  esc=$(python3 -c "import sys; print(''.join('\\\\%03o' % b for b in open(sys.argv[1],'rb').read()))" "$T/p.pb")
  printf 'series { labels { name: "__name__" value: "process_cpu" } labels { name: "service_name" value: "%s" } samples { raw_profile: "%s" } }\n' "$1" "$esc" |
    protoc --encode=push.v1.PushRequest $P "$ROOT/proto/push.proto" >"$T/push.bin" &&
    curl -sf -o /dev/null -H 'Content-Type: application/proto' --data-binary @"$T/push.bin" "$url/push.v1.PusherService/Push"
}
OTLPREQ=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
door_otlp() { # OpenTelemetry's /v1development/profiles: the pprof as strobe converts it, with
  # service.name added to its resource by protoc
  "$STROBE" convert -f otlp -o "$T/o.otlp" "$2" &&
    protoc --decode=$OTLPREQ $P "$ROOT/proto/otlp_profiles_service.proto" <"$T/o.otlp" |
    sed "0,/^  resource {/s//  resource {\n    attributes { key: \"service.name\" value { string_value: \"$1\" } }/" |
    protoc --encode=$OTLPREQ $P "$ROOT/proto/otlp_profiles_service.proto" >"$T/o2.otlp" &&
    curl -sf -o /dev/null -H 'Content-Type: application/x-protobuf' --data-binary @"$T/o2.otlp" "$url/v1development/profiles"
}
door_otlpview() { # the same request without its samples' attributes (pprof labels, threads):
  # OTLP's fast path, a pprof view of the dictionary (lib/otlp_view.c), no profile model; the
  # service's totals and flame graph are those of the labelled samples summed
  "$STROBE" convert -f otlp -o "$T/o.otlp" "$2" &&
    protoc --decode=$OTLPREQ $P "$ROOT/proto/otlp_profiles_service.proto" <"$T/o.otlp" |
    sed -e "0,/^  resource {/s//  resource {\n    attributes { key: \"service.name\" value { string_value: \"$1\" } }/" \
      -e '/^        attribute_indices: /d' -e '/^        link_index: /d' |
    protoc --encode=$OTLPREQ $P "$ROOT/proto/otlp_profiles_service.proto" >"$T/o3.otlp" &&
    curl -sf -o /dev/null -H 'Content-Type: application/x-protobuf' --data-binary @"$T/o3.otlp" "$url/v1development/profiles"
}
DOORS="ingest push pushv1 otlp otlpview"

for d in $DOORS; do
  "door_$d" "door-$d" "$prof" || { fail "$d-store" "the door refused the profile"; }
done
TYPE=$(curl -s "$url/api/v1/profile_types" | python3 -c 'import json,sys; t=[x for x in json.load(sys.stdin)["data"] if ":cpu:" in x or ":samples:" in x]; print(sorted(t)[0])')

native() { # SERVICE: "total=N f:self ..." from the native API's folded stacks
  curl -s -G "$url/api/v1/query" --data-urlencode "query=$TYPE{service_name=\"$1\"}" -d format=folded -d from=now-10m |
    python3 -c '
import sys
tot = 0; s = {}
for l in sys.stdin:
    st, v = l.rstrip("\n").rsplit(" ", 1); v = int(v); tot += v
    leaf = st.split(";")[-1]; s[leaf] = s.get(leaf, 0) + v
print("total=%d" % tot, " ".join("%s:%d" % kv for kv in sorted(s.items()) if kv[1]))'
}
connect() { # SERVICE: the raw flame graph JSON in $T/c-SERVICE.json, and "total=N f:self ..."
  local s=$(( $(date +%s) * 1000 ))
  curl -s -o "$T/c-$1.json" -H 'Content-Type: application/json' \
    -d "{\"profileTypeID\":\"$TYPE\",\"labelSelector\":\"{service_name=\\\"$1\\\"}\",\"start\":$((s - 600000)),\"end\":$((s + 60000))}" \
    "$url/querier.v1.QuerierService/SelectMergeStacktraces"
  python3 - "$T/c-$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["flamegraph"]
s = {}
for lv in d.get("levels", []):
    v = list(map(int, lv.get("values", [])))
    for i in range(0, len(v), 4):
        if v[i + 2]:
            n = d["names"][v[i + 3]]; s[n] = s.get(n, 0) + v[i + 2]
print("total=%s" % d.get("total", 0), " ".join("%s:%d" % kv for kv in sorted(s.items())))
PY
}
first= fn= fc=
for d in $DOORS; do
  n=$(native "door-$d") c=$(connect "door-$d")
  if [ -z "$first" ]; then
    first=$d fn=$n fc=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["flamegraph"], sort_keys=True))' "$T/c-door-$d.json")
    case $n in total=0*|total=) fail "$d-native" "nothing stored: $n" ;; *) ok "$d-native" "$(cut -c1-60 <<<"$n")" ;; esac
  else
    [ "$n" = "$fn" ] && ok "$d-native" "= $first" || fail "$d-native" "$n != $first's $fn"
    cj=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["flamegraph"], sort_keys=True))' "$T/c-door-$d.json")
    [ "$cj" = "$fc" ] && ok "$d-connect" "flame graph = $first's" || fail "$d-connect" "flame graph differs from $first's: $(head -c 200 <<<"$cj")"
  fi
  [ "$n" = "$c" ] && ok "$d-agree" "native = Connect" || fail "$d-agree" "native $n, Connect $c"
done

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
