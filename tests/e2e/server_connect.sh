#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Grafana's protocols against the real server, judged by an encoder that is not ours: every
# request is written in protobuf text format and encoded by Debian's `protoc --encode` against
# proto/*.proto, every binary answer decoded by `protoc --decode`, so a field number or type that
# drifted from upstream's fails here. Known data first (a pprof made by `strobe convert` from
# folded text, pushed through /api/v1/push), then for every QuerierService method:
#   bin-METHOD    application/proto request and answer, values checked (totals, names, label
#                 values, series points)
#   json-METHOD   the same call as application/json (the proto3 JSON mapping), values checked
#   gzip-*        a gzipped request (Content-Encoding) and a gzipped answer (Accept-Encoding)
#   push-*        push.v1.PusherService/Push, binary and JSON, then queried back
#   settings      settings.v1.SettingsService/Get answers with no settings
#   err-*         a bad body, an unknown method, a bad token, an unsupported Content-Type: Connect's
#                 error format ({"code","message"}, application/json) with Connect's HTTP status
#   doc-*         golden cases in the shape of Pyroscope's documented calls (its server API
#                 reference: JSON push with base64 rawProfile, SelectMergeStacktraces with
#                 profileTypeID/labelSelector/start/end in ms, /pyroscope/render?query=&from=&until=)
#   render-*      the legacy GETs /pyroscope/render, render-diff, label-values
set -u
for t in curl protoc python3; do
  command -v $t >/dev/null || { echo "SKIP server_connect: $t is not installed (protobuf-compiler for protoc)"; exit 0; }
done
st=0
fail() { echo "FAIL server_connect/$1: $2"; st=1; }
ok() { echo "ok server_connect/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
P="--proto_path=$ROOT/proto"
Q=$ROOT/proto/querier.proto
T=$TMPDIR
cat >"$T/config.json" <<'CFG'
{"tenants": [{"id": "team-a", "token": "sekrit"}, {"id": "anonymous"}]}
CFG
chmod 600 "$T/config.json"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server --config "$T/config.json"
CPU='process_cpu:samples:count:samples:count'
now_ms=$(($(date +%s) * 1000))
start=$((now_ms - 600000)) end=$((now_ms + 60000))

# ---- known data: svc1 = 18 samples, svc2 = 7 -----------------------------------------------------
printf 'main;handle;parse 10\nmain;handle;render 5\nmain;idle 3\n' >"$T/a.txt"
printf 'main;work 7\n' >"$T/b.txt"
"$STROBE" convert -f pprof -o "$T/a.pb.gz" "$T/a.txt" && "$STROBE" convert -f pprof -o "$T/b.pb.gz" "$T/b.txt" ||
  { echo "FAIL server_connect/setup: strobe convert"; exit 1; }
for s in "svc1 a" "svc2 b"; do
  set -- $s
  code=$(curl -s -o "$T/pr" -w '%{http_code}' --data-binary @"$T/$2.pb.gz" \
    "$url/api/v1/push?service_name=$1&name=process_cpu&labels=%7Benv%3D%22prod%22%7D")
  [ "$code" = 200 ] || { echo "FAIL server_connect/setup: push $1: HTTP $code $(cat "$T/pr")"; exit 1; }
done

# call METHOD_PATH IN_MSG OUT_MSG TEXT [curl options]: encodes TEXT with protoc, posts it as
# application/proto, decodes the answer with protoc into $T/out.txt; the HTTP code in $code.
call() {
  local path=$1 in=$2 outm=$3 text=$4 file=${5:-$Q}; shift 5 2>/dev/null || shift 4
  printf '%s\n' "$text" | protoc --encode="$in" $P "$file" >"$T/req.bin" || { code=encode; return; }
  code=$(curl -s -o "$T/out.bin" -w '%{http_code}' -H 'Content-Type: application/proto' "$@" \
    --data-binary @"$T/req.bin" "$url/$path")
  : >"$T/out.txt"
  [ "$code" = 200 ] && protoc --decode="$outm" $P "$file" <"$T/out.bin" >"$T/out.txt" 2>"$T/dec.err"
}
# jcall PATH JSON [curl options]: posts JSON, answer in $T/out.json, HTTP code in $code
jcall() {
  local path=$1 body=$2; shift 2
  code=$(curl -s -o "$T/out.json" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
    -d "$body" "$url/$path")
}
jq_() { python3 -c "import json,sys; d=json.load(open('$T/out.json')); print($1)" 2>/dev/null; }
# the flame graph of $T/out.txt (text format) as "name total self" per node, summed by name
flame_txt() {
  python3 - "$T/out.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
names = re.findall(r'^\s*names: "(.*)"$', t, re.M)
levels = [list(map(int, re.findall(r'values: (-?\d+)', b))) for b in re.findall(r'levels \{(.*?)\}', t, re.S)]
out = {}
for lv in levels:
    for i in range(0, len(lv), 4):
        n = names[lv[i + 3]]; a = out.setdefault(n, [0, 0]); a[0] += lv[i + 1]; a[1] += lv[i + 2]
tot = re.search(r'^\s*total: (\d+)', t, re.M)
print("total=%s" % (tot.group(1) if tot else 0), " ".join("%s:%d/%d" % (k, v[0], v[1]) for k, v in sorted(out.items())))
PY
}
flame_json() {
  python3 - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["flamegraph"]
out = {}
for lv in d.get("levels", []):
    v = list(map(int, lv.get("values", [])))
    for i in range(0, len(v), 4):
        n = d["names"][v[i + 3]]; a = out.setdefault(n, [0, 0]); a[0] += v[i + 1]; a[1] += v[i + 2]
print("total=%s" % d.get("total", 0), " ".join("%s:%d/%d" % (k, v[0], v[1]) for k, v in sorted(out.items())))
PY
}
WANT1='total=18 handle:15/0 idle:3/3 main:18/0 parse:10/10 render:5/5 total:18/0'
SEL='label_selector: "{service_name=\"svc1\"}"'
W="start: $start end: $end"

# ---- ProfileTypes -------------------------------------------------------------------------------
call querier.v1.QuerierService/ProfileTypes querier.v1.ProfileTypesRequest querier.v1.ProfileTypesResponse "$W"
if [ "$code" = 200 ] && grep -q "ID: \"$CPU\"" "$T/out.txt" && grep -q 'name: "process_cpu"' "$T/out.txt" &&
  grep -q 'sample_type: "samples"' "$T/out.txt" && grep -q 'period_unit: "count"' "$T/out.txt"; then ok bin-ProfileTypes
else fail bin-ProfileTypes "HTTP $code $(tr '\n' ' ' <"$T/out.txt")"; fi
jcall querier.v1.QuerierService/ProfileTypes "{\"start\":\"$start\",\"end\":$end}"
v=$(jq_ '[p["ID"] for p in d["profileTypes"]]')
if [ "$code" = 200 ] && [ "$v" = "['$CPU']" ] && [ "$(jq_ 'd["profileTypes"][0]["sampleType"]')" = samples ]; then ok json-ProfileTypes
else fail json-ProfileTypes "HTTP $code $(cat "$T/out.json")"; fi

# ---- LabelNames, LabelValues --------------------------------------------------------------------
call querier.v1.QuerierService/LabelNames types.v1.LabelNamesRequest types.v1.LabelNamesResponse "matchers: \"{service_name=\\\"svc1\\\"}\" $W"
v=$(grep -o '"[^"]*"' "$T/out.txt" | tr -d '"' | tr '\n' ' ')
if [ "$code" = 200 ] && [ "$v" = "env service_name " ]; then ok bin-LabelNames "$v"; else fail bin-LabelNames "HTTP $code: $v"; fi
jcall querier.v1.QuerierService/LabelNames "{\"start\":$start,\"end\":$end}"
[ "$code" = 200 ] && [ "$(jq_ 'd["names"]')" = "['env', 'service_name']" ] && ok json-LabelNames ||
  fail json-LabelNames "HTTP $code $(cat "$T/out.json")"
call querier.v1.QuerierService/LabelValues types.v1.LabelValuesRequest types.v1.LabelValuesResponse "name: \"service_name\" $W"
v=$(grep -o '"[^"]*"' "$T/out.txt" | tr -d '"' | tr '\n' ' ')
if [ "$code" = 200 ] && [ "$v" = "svc1 svc2 " ]; then ok bin-LabelValues "$v"; else fail bin-LabelValues "HTTP $code: $v"; fi
jcall querier.v1.QuerierService/LabelValues "{\"name\":\"service_name\",\"matchers\":[\"{service_name=\\\"svc2\\\"}\"],\"start\":$start,\"end\":$end}"
[ "$code" = 200 ] && [ "$(jq_ 'd["names"]')" = "['svc2']" ] && ok json-LabelValues ||
  fail json-LabelValues "HTTP $code $(cat "$T/out.json")"
jcall querier.v1.QuerierService/LabelValues "{\"name\":\"__profile_type__\",\"start\":$start,\"end\":$end}"
[ "$code" = 200 ] && [ "$(jq_ 'd["names"]')" = "['$CPU']" ] && ok json-LabelValues-profile-type ||
  fail json-LabelValues-profile-type "HTTP $code $(cat "$T/out.json")"

# ---- Series -------------------------------------------------------------------------------------
call querier.v1.QuerierService/Series querier.v1.SeriesRequest querier.v1.SeriesResponse "matchers: \"{service_name=\\\"svc2\\\"}\" $W"
if [ "$code" = 200 ] && [ "$(grep -c 'labels_set' "$T/out.txt")" = 1 ] && grep -q 'value: "svc2"' "$T/out.txt" &&
  grep -q "value: \"$CPU\"" "$T/out.txt" && grep -q 'value: "prod"' "$T/out.txt"; then ok bin-Series
else fail bin-Series "HTTP $code $(tr '\n' ' ' <"$T/out.txt")"; fi
jcall querier.v1.QuerierService/Series "{\"labelNames\":[\"service_name\"],\"start\":$start,\"end\":$end}"
v=$(jq_ 'sorted(l["labels"][0]["value"] for l in d["labelsSet"])')
[ "$code" = 200 ] && [ "$v" = "['svc1', 'svc2']" ] && ok json-Series "$v" || fail json-Series "HTTP $code $(cat "$T/out.json")"

# ---- SelectMergeStacktraces ---------------------------------------------------------------------
call querier.v1.QuerierService/SelectMergeStacktraces querier.v1.SelectMergeStacktracesRequest \
  querier.v1.SelectMergeStacktracesResponse "profile_typeID: \"$CPU\" $SEL $W"
v=$(flame_txt)
[ "$code" = 200 ] && [ "$v" = "$WANT1" ] && ok bin-SelectMergeStacktraces "$v" || fail bin-SelectMergeStacktraces "HTTP $code: $v"
jcall querier.v1.QuerierService/SelectMergeStacktraces "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{service_name=\\\"svc1\\\"}\",\"start\":\"$start\",\"end\":\"$end\"}"
v=$(flame_json)
[ "$code" = 200 ] && [ "$v" = "$WANT1" ] && ok json-SelectMergeStacktraces || fail json-SelectMergeStacktraces "HTTP $code: $v $(head -c 300 "$T/out.json")"
# both services, and max_nodes: the 2 heaviest nodes (main 25, handle 15) are kept
call querier.v1.QuerierService/SelectMergeStacktraces querier.v1.SelectMergeStacktracesRequest \
  querier.v1.SelectMergeStacktracesResponse "profile_typeID: \"$CPU\" label_selector: \"{}\" max_nodes: 2 $W"
v=$(flame_txt)
[ "$code" = 200 ] && [ "$v" = "total=25 handle:15/0 main:25/0 total:25/0" ] && ok bin-max_nodes "$v" || fail bin-max_nodes "HTTP $code: $v"

# ---- SelectMergeProfile (pprof) -----------------------------------------------------------------
call querier.v1.QuerierService/SelectMergeProfile querier.v1.SelectMergeProfileRequest \
  perftools.profiles.Profile "profile_typeID: \"$CPU\" $SEL $W"
v=$(grep -E '^  value: ' "$T/out.txt" | awk '{ s += $2 } END { print s + 0 }')
if [ "$code" = 200 ] && [ "$v" = 18 ] && grep -q '"parse"' "$T/out.txt"; then
  # the same bytes read as a pprof by strobe's own reader: the same total
  cp "$T/out.bin" "$T/merged.pb"
  t2=$("$STROBE" convert -f folded "$T/merged.pb" 2>/dev/null | awk '{ s += $NF } END { print s + 0 }')
  [ "$t2" = 18 ] && ok bin-SelectMergeProfile "total $v" || fail bin-SelectMergeProfile "protoc total $v, strobe reads $t2"
else fail bin-SelectMergeProfile "HTTP $code total $v $(head -c 300 "$T/out.txt")"; fi
jcall querier.v1.QuerierService/SelectMergeProfile "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{service_name=\\\"svc2\\\"}\",\"start\":$start,\"end\":$end}"
v=$(jq_ 'sum(int(s["value"][0]) for s in d["sample"])')
[ "$code" = 200 ] && [ "$v" = 7 ] && ok json-SelectMergeProfile "total $v" || fail json-SelectMergeProfile "HTTP $code $v $(head -c 300 "$T/out.json")"

# ---- SelectSeries -------------------------------------------------------------------------------
call querier.v1.QuerierService/SelectSeries querier.v1.SelectSeriesRequest querier.v1.SelectSeriesResponse \
  "profile_typeID: \"$CPU\" label_selector: \"{}\" group_by: \"service_name\" step: 3600 $W"
v=$(python3 - "$T/out.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
out = []
for s in re.findall(r'series \{(.*?)\n\}', t, re.S):
    name = re.search(r'value: "(.*?)"', s).group(1)
    out.append("%s=%g" % (name, sum(float(x) for x in re.findall(r'value: ([0-9.e+]+)\n', s))))
print(" ".join(sorted(out)))
PY
)
[ "$code" = 200 ] && [ "$v" = "svc1=18 svc2=7" ] && ok bin-SelectSeries "$v" || fail bin-SelectSeries "HTTP $code: $v $(head -c 300 "$T/out.txt")"
jcall querier.v1.QuerierService/SelectSeries "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{service_name=\\\"svc1\\\"}\",\"step\":60,\"aggregation\":\"TIME_SERIES_AGGREGATION_TYPE_AVERAGE\",\"start\":$start,\"end\":$end}"
v=$(jq_ '[int(p["value"]) for s in d["series"] for p in s["points"]]')
[ "$code" = 200 ] && [ "$v" = "[18]" ] && ok json-SelectSeries-average "$v" || fail json-SelectSeries-average "HTTP $code $(cat "$T/out.json")"

# ---- SelectMergeSpanProfile: the samples whose span_id label is asked for ------------------------
# Service "spans": a.txt pushed with span_id 9a517183f26a089d on its samples, b.txt with another.
for s in "a 9a517183f26a089d" "b 00000000000000bb"; do
  set -- $s
  code=$(curl -s -o "$T/pr" -w '%{http_code}' --data-binary @"$T/$1.pb.gz" --url-query service_name=spans \
    --url-query name=process_cpu --url-query "sample_labels={span_id=\"$2\"}" "$url/api/v1/push")
  [ "$code" = 200 ] || fail setup-spans "push: HTTP $code $(cat "$T/pr")"
done
call querier.v1.QuerierService/SelectMergeSpanProfile querier.v1.SelectMergeSpanProfileRequest \
  querier.v1.SelectMergeSpanProfileResponse "profile_typeID: \"$CPU\" label_selector: \"{service_name=\\\"spans\\\"}\" span_selector: \"9a517183f26a089d\" start: $start end: $end"
v=$(flame_txt)
[ "$code" = 200 ] && [ "$v" = "$WANT1" ] && ok bin-SelectMergeSpanProfile-span "$v" || fail bin-SelectMergeSpanProfile-span "HTTP $code: $v (want $WANT1)"
call querier.v1.QuerierService/SelectMergeSpanProfile querier.v1.SelectMergeSpanProfileRequest \
  querier.v1.SelectMergeSpanProfileResponse "profile_typeID: \"$CPU\" label_selector: \"{}\" span_selector: \"not-a-span\" start: $start end: $end"
[ "$code" = 400 ] && ok bin-SelectMergeSpanProfile-bad-id "HTTP $code" || fail bin-SelectMergeSpanProfile-bad-id "HTTP $code"
# Samples without a span_id are in no span.
call querier.v1.QuerierService/SelectMergeSpanProfile querier.v1.SelectMergeSpanProfileRequest \
  querier.v1.SelectMergeSpanProfileResponse "profile_typeID: \"$CPU\" $SEL span_selector: \"9a517183f26a089d\" start: $start end: $end"
v=$(flame_txt)
[ "$code" = 200 ] && [ "$v" = "total=0 total:0/0" ] && ok bin-SelectMergeSpanProfile "$v" || fail bin-SelectMergeSpanProfile "HTTP $code: $v"

# ---- Diff ---------------------------------------------------------------------------------------
call querier.v1.QuerierService/Diff querier.v1.DiffRequest querier.v1.DiffResponse \
  "left { profile_typeID: \"$CPU\" label_selector: \"{service_name=\\\"svc1\\\"}\" $W } right { profile_typeID: \"$CPU\" label_selector: \"{service_name=\\\"svc2\\\"}\" $W }"
lt=$(sed -n 's/^  leftTicks: //p' "$T/out.txt") rt=$(sed -n 's/^  rightTicks: //p' "$T/out.txt")
nv=$(grep -c 'values:' "$T/out.txt")
# nodes: total, main, handle, idle, work, parse, render = 7 nodes x 7 numbers
[ "$code" = 200 ] && [ "$lt" = 18 ] && [ "$rt" = 7 ] && [ "$nv" = 49 ] && ok bin-Diff "left $lt right $rt" ||
  fail bin-Diff "HTTP $code left $lt right $rt values $nv"

# ---- GetProfileStats: this tenant has data, team-a none -----------------------------------------
jcall querier.v1.QuerierService/GetProfileStats '{}'
a=$(jq_ 'd.get("dataIngested")')
jcall querier.v1.QuerierService/GetProfileStats '{}' -H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer sekrit'
b=$(jq_ 'd.get("dataIngested")')
[ "$a $b" = "True None" ] && ok json-GetProfileStats "anonymous $a, team-a $b" || fail json-GetProfileStats "anonymous $a, team-a $b"

# ---- gzip both ways -----------------------------------------------------------------------------
printf 'profile_typeID: "%s" %s %s\n' "$CPU" "$SEL" "$W" | protoc --encode=querier.v1.SelectMergeStacktracesRequest $P "$Q" | gzip -c >"$T/req.gz"
code=$(curl -s -D "$T/hdr" -o "$T/out.gz" -w '%{http_code}' -H 'Content-Type: application/proto' -H 'Content-Encoding: gzip' \
  -H 'Accept-Encoding: gzip' --data-binary @"$T/req.gz" "$url/querier.v1.QuerierService/SelectMergeStacktraces")
gunzip -c "$T/out.gz" 2>/dev/null | protoc --decode=querier.v1.SelectMergeStacktracesResponse $P "$Q" >"$T/out.txt" 2>/dev/null
v=$(flame_txt)
[ "$code" = 200 ] && grep -qi '^content-encoding: gzip' "$T/hdr" && [ "$v" = "$WANT1" ] && ok gzip-bin ||
  fail gzip-bin "HTTP $code: $v $(tr '\n' ' ' <"$T/hdr")"
printf '{"profileTypeID":"%s","labelSelector":"{service_name=\\"svc1\\"}","start":%s,"end":%s}' "$CPU" $start $end | gzip -c >"$T/req.gz"
code=$(curl -s -o "$T/out.json" -w '%{http_code}' --compressed -H 'Content-Type: application/json' -H 'Content-Encoding: gzip' \
  --data-binary @"$T/req.gz" "$url/querier.v1.QuerierService/SelectMergeStacktraces")
v=$(flame_json)
[ "$code" = 200 ] && [ "$v" = "$WANT1" ] && ok gzip-json || fail gzip-json "HTTP $code: $v"

# ---- Push (binary and JSON), queried back --------------------------------------------------------
PUSHP=$ROOT/proto/push.proto
gunzip -c "$T/a.pb.gz" >"$T/a.pb"
esc=$(python3 -c "import sys; print(''.join('\\\\%03o' % b for b in open(sys.argv[1],'rb').read()))" "$T/a.pb")
call push.v1.PusherService/Push push.v1.PushRequest push.v1.PushResponse \
  "series { labels { name: \"__name__\" value: \"process_cpu\" } labels { name: \"service_name\" value: \"pushed\" } samples { raw_profile: \"$esc\" ID: \"734FD599-6865-419E-9475-932762D8F469\" } }" "$PUSHP"
call querier.v1.QuerierService/SelectMergeStacktraces querier.v1.SelectMergeStacktracesRequest \
  querier.v1.SelectMergeStacktracesResponse "profile_typeID: \"$CPU\" label_selector: \"{service_name=\\\"pushed\\\"}\" $W"
v=$(flame_txt)
[ "$code" = 200 ] && [ "$v" = "$WANT1" ] && ok push-bin "$v" || fail push-bin "HTTP $code: $v"

# ---- settings -----------------------------------------------------------------------------------
call settings.v1.SettingsService/Get settings.v1.GetSettingsRequest settings.v1.GetSettingsResponse "" "$ROOT/proto/settings.proto"
[ "$code" = 200 ] && [ ! -s "$T/out.txt" ] && ok settings-bin || fail settings-bin "HTTP $code $(cat "$T/out.txt")"
jcall settings.v1.SettingsService/Get '{}'
[ "$code" = 200 ] && [ "$(cat "$T/out.json")" = '{}' ] && ok settings-json || fail settings-json "HTTP $code $(cat "$T/out.json")"

# ---- errors: Connect's format and status ---------------------------------------------------------
cerr() { # NAME HTTP CODE: judges the last answer ($T/out.bin or out.json)
  local f=$T/out.json; [ -s "$T/out.bin" ] && f=$T/out.bin
  local c; c=$(python3 -c "import json,sys; d=json.load(open('$f')); print(d['code'] if d.get('message') else '')" 2>/dev/null)
  if [ "$code" = "$2" ] && [ "$c" = "$3" ]; then ok "$1" "$2 $c"; else fail "$1" "HTTP $code code '$c': $(head -c 200 "$f")"; fi
}
rm -f "$T/out.bin"
printf '\xff\xff\xff' >"$T/bad.bin"
code=$(curl -s -o "$T/out.bin" -w '%{http_code}' -H 'Content-Type: application/proto' --data-binary @"$T/bad.bin" "$url/querier.v1.QuerierService/SelectMergeStacktraces")
cerr err-bad-proto 400 invalid_argument
rm -f "$T/out.bin"; jcall querier.v1.QuerierService/SelectMergeStacktraces '{"profileTypeID": 12, '
cerr err-bad-json 400 invalid_argument
jcall querier.v1.QuerierService/SelectMergeStacktraces '{"labelSelector":"{}"}'
cerr err-no-type 400 invalid_argument
jcall querier.v1.QuerierService/SelectMergeStacktraces "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{service_name=~\\\"(\\\"}\"}"
cerr err-bad-selector 400 invalid_argument
jcall querier.v1.QuerierService/NoSuchMethod '{}'
cerr err-unknown-method 404 unimplemented
jcall querier.v1.QuerierService/LabelNames '{}' -H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer wrong'
cerr err-bad-token 401 unauthenticated
jcall querier.v1.QuerierService/LabelNames '{}' -H 'X-Scope-OrgID: nobody'
cerr err-unknown-tenant 401 unauthenticated
code=$(curl -s -o "$T/out.json" -w '%{http_code}' -H 'Content-Type: text/plain' -d x "$url/querier.v1.QuerierService/LabelNames")
cerr err-content-type 415 unimplemented
jcall push.v1.PusherService/Push '{"series":[{"labels":[{"name":"env","value":"x"}],"samples":[{"rawProfile":"AAAA"}]}]}'
cerr err-push-no-service 400 invalid_argument
# tenants: team-a with its token sees nothing of the anonymous tenant's data
jcall querier.v1.QuerierService/LabelValues "{\"name\":\"service_name\",\"start\":$start,\"end\":$end}" -H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer sekrit'
[ "$code" = 200 ] && [ "$(cat "$T/out.json")" = '{}' ] && ok tenant-isolated || fail tenant-isolated "HTTP $code $(cat "$T/out.json")"

# ---- golden: Pyroscope's documented calls --------------------------------------------------------
b64=$(base64 -w0 "$T/b.pb.gz")
jcall push.v1.PusherService/Push "{\"series\":[{\"labels\":[{\"name\":\"__name__\",\"value\":\"process_cpu\"},{\"name\":\"service_name\",\"value\":\"my_service\"}],\"samples\":[{\"ID\":\"734FD599-6865-419E-9475-932762D8F469\",\"rawProfile\":\"$b64\"}]}]}"
[ "$code" = 200 ] && [ "$(cat "$T/out.json")" = '{}' ] && ok doc-push-json || fail doc-push-json "HTTP $code $(cat "$T/out.json")"
jcall querier.v1.QuerierService/SelectMergeStacktraces "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{service_name=\\\"my_service\\\"}\",\"start\":$start,\"end\":$end}"
v=$(flame_json)
[ "$code" = 200 ] && [ "$v" = 'total=7 main:7/0 total:7/0 work:7/7' ] && ok doc-SelectMergeStacktraces "$v" ||
  fail doc-SelectMergeStacktraces "HTTP $code $v"
code=$(curl -s -G -o "$T/out.json" -w '%{http_code}' "$url/pyroscope/render" \
  --data-urlencode "query=$CPU{service_name=\"svc1\"}" -d from=now-1h -d until=now)
v=$(jq_ 'd["flamebearer"]["numTicks"], d["flamebearer"]["names"][d["flamebearer"]["levels"][3][3]], d["metadata"]["format"], sum(d["timeline"]["samples"]), d["timeline"]["durationDelta"]')
[ "$code" = 200 ] && [ "$v" = "18 parse single 18 10" ] && ok doc-render "$v" || fail doc-render "HTTP $code: $v $(head -c 300 "$T/out.json")"

# Pyroscope's older application-name form, app.cpu{labels}, for data that came in through /ingest
now=$(date +%s)
printf 'main;handle;parse 10\nmain;handle;render 5\n' >"$T/f.txt"
curl -s -o /dev/null --data-binary @"$T/f.txt" "$url/ingest?name=legacyapp.cpu%7Benv%3Dprod%7D&from=$((now - 10))&until=$now&format=folded&sampleRate=100"
code=$(curl -s -G -o "$T/out.json" -w '%{http_code}' "$url/pyroscope/render" --data-urlencode 'query=legacyapp.cpu{env="prod"}' -d from=now-1h -d until=now)
v=$(jq_ 'd["flamebearer"]["numTicks"]')
[ "$code" = 200 ] && [ "$v" = 150000000 ] && ok doc-render-app-name "legacyapp.cpu: $v ns" || fail doc-render-app-name "HTTP $code: $v $(head -c 200 "$T/out.json")"

# ---- legacy GETs --------------------------------------------------------------------------------
code=$(curl -s -G -o "$T/out.json" -w '%{http_code}' "$url/pyroscope/render-diff" \
  --data-urlencode "leftQuery=$CPU{service_name=\"svc1\"}" --data-urlencode "rightQuery=$CPU{service_name=\"svc2\"}" \
  -d leftFrom=now-1h -d leftUntil=now -d rightFrom=now-1h -d rightUntil=now)
v=$(jq_ 'd["leftTicks"], d["rightTicks"], d["metadata"]["format"], len(d["flamebearer"]["levels"][1])')
[ "$code" = 200 ] && [ "$v" = "18 7 double 7" ] && ok render-diff "$v" || fail render-diff "HTTP $code: $v"
code=$(curl -s -G -o "$T/out.json" -w '%{http_code}' "$url/pyroscope/label-values" -d label=service_name -d from=now-1h -d until=now)
[ "$code" = 200 ] && [ "$(jq_ 'd')" = "['legacyapp', 'my_service', 'pushed', 'spans', 'svc1', 'svc2']" ] && ok render-label-values ||
  fail render-label-values "HTTP $code $(cat "$T/out.json")"
code=$(curl -s -o "$T/out.json" -w '%{http_code}' "$url/pyroscope/render?query=nonsense%7B&from=now-1h")
[ "$code" = 400 ] && grep -q '"error"' "$T/out.json" && ok render-bad-query || fail render-bad-query "HTTP $code $(cat "$T/out.json")"

# ---- tenant team-a (kept apart from the listings above): grouping, stats, atomic pushes ---------
TA=(-H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer sekrit')
t1=$(($(date +%s) - 400)) t2=$(($(date +%s) - 100))
for s in "grp prod a $t1" "grp dev b $t2" "grp2 prod b $t2"; do
  set -- $s
  code=$(curl -s -o "$T/pr" -w '%{http_code}' "${TA[@]}" --data-binary @"$T/$3.pb.gz" \
    "$url/api/v1/push?service_name=$1&name=process_cpu&time=$4&labels=%7Benv%3D%22$2%22%7D")
  [ "$code" = 200 ] || fail team-a-setup "push $1 $2: HTTP $code $(cat "$T/pr")"
done
# SelectSeries by two labels: one series per (service_name, env), as Pyroscope groups
ser_sums() { # the series of $T/out.txt as "name=value,...,SUM" sorted, one line
  awk '/^series \{/ { lab = ""; sum = 0; next }
    /^  labels \{/ { inl = 1; next } /^  points \{/ { inp = 1; next } /^  \}/ { inl = inp = 0; next }
    inl && /name:/ { n = $2; gsub(/"/, "", n); next }
    inl && /value:/ { v = $2; gsub(/"/, "", v); lab = lab n "=" v ","; next }
    inp && /value:/ { sum += $2; next }
    /^\}/ { print lab sum }' "$T/out.txt" | sort | tr '\n' ' '
}
call querier.v1.QuerierService/SelectSeries querier.v1.SelectSeriesRequest querier.v1.SelectSeriesResponse \
  "profile_typeID: \"$CPU\" label_selector: \"{}\" group_by: \"service_name\" group_by: \"env\" step: 3600 $W" "$Q" "${TA[@]}"
v=$(ser_sums)
want='service_name=grp,env=dev,7 service_name=grp,env=prod,18 service_name=grp2,env=prod,7 '
[ "$code" = 200 ] && [ "$v" = "$want" ] && ok bin-SelectSeries-group-by-two "$v" ||
  fail bin-SelectSeries-group-by-two "HTTP $code: '$v' (want '$want') $(head -c 200 "$T/out.bin")"
jcall querier.v1.QuerierService/SelectSeries "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{}\",\"groupBy\":[\"env\",\"service_name\"],\"step\":3600,\"start\":$start,\"end\":$end}" "${TA[@]}"
n=$(grep -o '"labels":\[[^]]*\]' "$T/out.json" | sort | tr -d '\n')
wantj='"labels":[{"name":"env","value":"dev"},{"name":"service_name","value":"grp"}]"labels":[{"name":"env","value":"prod"},{"name":"service_name","value":"grp"}]"labels":[{"name":"env","value":"prod"},{"name":"service_name","value":"grp2"}]'
[ "$code" = 200 ] && [ "$n" = "$wantj" ] && ok json-SelectSeries-group-by-two || fail json-SelectSeries-group-by-two "HTTP $code $(head -c 400 "$T/out.json")"
jcall querier.v1.QuerierService/SelectSeries "{\"profileTypeID\":\"$CPU\",\"labelSelector\":\"{}\",\"groupBy\":[\"env\",\"no,comma\"],\"step\":3600}" "${TA[@]}"
[ "$code" = 400 ] && grep -q 'group_by' "$T/out.json" && ok err-group-by-name || fail err-group-by-name "HTTP $code $(cat "$T/out.json")"
# GetProfileStats: the oldest and newest profile times, in ms
jcall querier.v1.QuerierService/GetProfileStats '{}' "${TA[@]}"
v=$(tr -d ' ' <"$T/out.json")
want="{\"dataIngested\":true,\"oldestProfileTime\":\"$((t1 * 1000))\",\"newestProfileTime\":\"$((t2 * 1000))\"}"
[ "$code" = 200 ] && [ "$v" = "$want" ] && ok json-GetProfileStats-times "$v" || fail json-GetProfileStats-times "HTTP $code '$v' (want '$want')"
# push.v1 with two series, the last refused (a bad label name): nothing of it stored
jcall push.v1.PusherService/Push "{\"series\":[{\"labels\":[{\"name\":\"__name__\",\"value\":\"process_cpu\"},{\"name\":\"service_name\",\"value\":\"atomok\"}],\"samples\":[{\"rawProfile\":\"$b64\"}]},{\"labels\":[{\"name\":\"service_name\",\"value\":\"atombad\"},{\"name\":\"bad-name\",\"value\":\"x\"}],\"samples\":[{\"rawProfile\":\"$b64\"}]}]}" "${TA[@]}"
cp "$T/out.json" "$T/push2.json"; c2=$code
jcall querier.v1.QuerierService/LabelValues "{\"name\":\"service_name\",\"start\":$start,\"end\":$end}" "${TA[@]}"
if [ "$c2" = 400 ] && grep -q '"code":"invalid_argument"' "$T/push2.json" && grep -q 'series 2 of 2: .*bad-name.*nothing of the push was stored' "$T/push2.json" &&
  ! grep -q atomok "$T/out.json"; then ok push-atomic "$(head -c 200 "$T/push2.json")"
else fail push-atomic "HTTP $c2 $(head -c 300 "$T/push2.json"); services now: $(cat "$T/out.json")"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
