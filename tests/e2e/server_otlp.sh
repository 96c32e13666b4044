#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# OTLP profiles (POST /v1development/profiles) against the real server, with requests encoded by
# Debian's protoc from hand-written text fixtures (tests/fixtures/otlp/*.txtpb): an encoder that
# is not ours. Then read back through the native API:
#   protobuf   two profiles (cpu, samples) of one scope: totals 1000 ns and 10, stacks and the
#              resource/scope attributes as labels (service.name -> service_name...)
#   gzip       the same body gzipped (Content-Encoding: gzip)
#   json       the same request as OTLP/JSON (skipped while this build has no JSON codec)
#   bad-index  a sample naming a stack past the table: 400, nothing stored
#   partial    a request whose last resource breaks a label limit: 400 naming that series, and
#              nothing of the request stored (a request is all or nothing, not OTLP's partial
#              success: the exporter cannot resend half a request)
#   atomic-store  the same when the store refuses the last series (its time is past retention):
#              the first series, valid on its own, is not stored either
#   roundtrip  a Go pprof -> strobe convert -f otlp -> pprof: every sample type's total equal
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_otlp: curl is not installed"; exit 0; fi
if ! command -v protoc >/dev/null; then echo "SKIP server_otlp: protoc (protobuf-compiler) is not installed"; exit 0; fi
st=0
fail() { echo "FAIL server_otlp/$1: $2"; st=1; }
ok() { echo "ok server_otlp/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
root=$(cd "$(dirname "$0")/../.." && pwd)
fx=$root/tests/fixtures/otlp
PKG=opentelemetry.proto.collector.profiles.v1development
enc() { protoc --encode=$PKG.ExportProfilesServiceRequest --proto_path="$root/proto" otlp_profiles_service.proto; }
dec_resp() { protoc --decode=$PKG.ExportProfilesServiceResponse --proto_path="$root/proto" otlp_profiles_service.proto; }
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
SAMPLES='process_cpu:samples:count:cpu:nanoseconds'
echo '{ "limits": { "max_label_value_length": 16 } }' > "$TMPDIR/cfg.json"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server --config "$TMPDIR/cfg.json"
nowns=$(date +%s%N)
# the fixture's time, moved to now (the store keeps recent data); SVC renamed per case
fixture() { sed -e "s/1700000000000000000/$nowns/" -e "s/\"checkout\"/\"$2\"/" "$fx/$1.txtpb" | enc; }
q() { # TYPE SELECTOR-LABELS: the query's folded output over the last 5 minutes
  curl -s -G "$url/api/v1/query" --data-urlencode "query=$1{$2}" -d format=folded -d from=now-5m
}
total() { q "$@" | awk '{ t += $NF } END { printf "%.0f", t }'; }
post() { # OUT CONTENT-TYPE FILE [curl args]: prints the HTTP code
  local out=$1 ct=$2 f=$3; shift 3
  curl -s -o "$out" -w '%{http_code}' -H "Content-Type: $ct" --data-binary @"$f" "$@" "$url/v1development/profiles"
}
check_series() { # CASE SVC
  local c=$1 s=$2 cpu smp stacks lv
  cpu=$(total "$CPU" "service_name=\"$s\"")
  smp=$(total "$SAMPLES" "service_name=\"$s\"")
  stacks=$(q "$CPU" "service_name=\"$s\"" | sort | tr '\n' '|')
  want='main;idle 100|main;work 300|main;work;hash 600|'
  lv=$(total "$CPU" "service_name=\"$s\",deployment_environment=\"prod\",team=\"payments\",host_cpus=\"8\"")
  th=$(total "$CPU" "service_name=\"$s\",thread=\"worker-1\"")
  if [ "$cpu" = 1000 ] && [ "$smp" = 10 ] && [ "$stacks" = "$want" ] && [ "$lv" = 1000 ] && [ "$th" = 100 ]; then
    ok "$c" "cpu $cpu ns, samples $smp, stacks and labels as sent"
  else fail "$c" "cpu $cpu (want 1000), samples $smp (want 10), stacks '$stacks', with resource+scope labels $lv (want 1000), thread=worker-1 $th (want 100)"; fi
}

# ---- protobuf -------------------------------------------------------------------------------------
fixture two_types checkout > "$TMPDIR/a.otlp"
code=$(post "$TMPDIR/r1" application/x-protobuf "$TMPDIR/a.otlp")
resp=$(dec_resp < "$TMPDIR/r1" 2>&1)
if [ "$code" = 200 ] && [ -z "$resp" ]; then check_series protobuf checkout
else fail protobuf "HTTP $code, response '$resp' $(head -c 200 "$TMPDIR/r1")"; fi

# ---- gzip -----------------------------------------------------------------------------------------
fixture two_types gzcheckout | gzip -c > "$TMPDIR/b.otlp.gz"
code=$(post "$TMPDIR/r2" application/x-protobuf "$TMPDIR/b.otlp.gz" -H 'Content-Encoding: gzip')
if [ "$code" = 200 ]; then check_series gzip gzcheckout; else fail gzip "HTTP $code $(head -c 200 "$TMPDIR/r2")"; fi

# ---- json -----------------------------------------------------------------------------------------
if [ -f "$fx/two_types.json" ]; then
  sed -e "s/1700000000000000000/$nowns/" -e 's/"checkout"/"jsoncheckout"/' "$fx/two_types.json" > "$TMPDIR/c.json"
  code=$(post "$TMPDIR/r3" application/json "$TMPDIR/c.json")
  if [ "$code" = 200 ] && [ "$(cat "$TMPDIR/r3")" = "{}" ]; then check_series json jsoncheckout
  elif [ "$code" = 415 ]; then echo "SKIP server_otlp/json: this build has no JSON codec ($(head -c 120 "$TMPDIR/r3"))"
  else fail json "HTTP $code $(head -c 200 "$TMPDIR/r3")"; fi
fi

# a refused request in JSON: the error names the series, nothing stored
printf '%s' '{"resourceProfiles":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"jsonrefused"}},{"key":"team","value":{"stringValue":"a-team-name-far-longer-than-sixteen-bytes"}}]},"scopeProfiles":[{"profiles":[{"sampleType":{"typeStrindex":1,"unitStrindex":2},"samples":[{"stackIndex":1,"values":["9"]}]}]}]}],"dictionary":{"stringTable":["","cpu","nanoseconds","f"],"functionTable":[{},{"nameStrindex":3}],"locationTable":[{},{"lines":[{"functionIndex":1}]}],"stackTable":[{},{"locationIndices":[1]}]}}' > "$TMPDIR/jp.json"
code=$(post "$TMPDIR/r3b" application/json "$TMPDIR/jp.json")
if [ "$code" = 400 ] && grep -q 'series 1 of 1 {service_name=\\"jsonrefused\\".*max_label_value_length; nothing of the request was stored' "$TMPDIR/r3b"; then ok json-refused "$(cat "$TMPDIR/r3b")"
else fail json-refused "HTTP $code $(head -c 300 "$TMPDIR/r3b")"; fi

# ---- bad index ------------------------------------------------------------------------------------
enc < "$fx/bad_stack.txtpb" > "$TMPDIR/bad.otlp"
code=$(post "$TMPDIR/r4" application/x-protobuf "$TMPDIR/bad.otlp")
n=$(curl -s "$url/api/v1/label/service_name/values" | grep -c '"bad"')
if [ "$code" = 400 ] && grep -q 'stack index 7' "$TMPDIR/r4" && [ "$n" = 0 ]; then ok bad-index "$(head -c 120 "$TMPDIR/r4")"
else fail bad-index "HTTP $code $(head -c 200 "$TMPDIR/r4"); service 'bad' listed $n times"; fi

# ---- partial --------------------------------------------------------------------------------------
enc < "$fx/partial.txtpb" > "$TMPDIR/p.otlp"
code=$(post "$TMPDIR/r5" application/x-protobuf "$TMPDIR/p.otlp")
g=$(total "$CPU" 'service_name="good"')
rf=$(total "$CPU" 'service_name="refused"')
if [ "$code" = 400 ] && grep -q 'series 2 of 2 {service_name=\\"refused\\".*max_label_value_length.*nothing of the request was stored' "$TMPDIR/r5" &&
  [ "$g" = 0 ] && [ "$rf" = 0 ]; then ok partial "refused whole, nothing stored: $(head -c 200 "$TMPDIR/r5")"
else fail partial "HTTP $code, response '$(head -c 300 "$TMPDIR/r5")', good $g (want 0: all or nothing), refused $rf (want 0)"; fi

# ---- atomic-store: the store refuses the last series (past retention), the first is not kept ------
sed -e "s/\"good\"/\"atom1\"/" -e 's/"refused"/"atom2"/' -e '/a-team-name/d' "$fx/partial.txtpb" |
  awk -v now="$nowns" '/service.name/ { n++ } / profiles \{ sample_type/ { sub(/ profiles \{ sample_type/, " profiles { time_unix_nano: " (n == 1 ? now : 1000000000) " sample_type") } { print }' |
  enc > "$TMPDIR/as.otlp"
code=$(post "$TMPDIR/r5b" application/x-protobuf "$TMPDIR/as.otlp")
a1=$(total "$CPU" 'service_name="atom1"')
if [ "${code:0:1}" = 4 ] && grep -q 'retention.*nothing of the request was stored' "$TMPDIR/r5b" && [ "$a1" = 0 ]; then
  ok atomic-store "HTTP $code, atom1 not stored: $(head -c 160 "$TMPDIR/r5b")"
else fail atomic-store "HTTP $code, response '$(head -c 300 "$TMPDIR/r5b")', atom1 total $a1 (want 0: the request is one transaction)"; fi

# ---- round trip pprof -> OTLP -> pprof ------------------------------------------------------------
cpu=${GOPROF:-}/go_cpu.pb.gz
if [ -n "${GOPROF:-}" ] && [ -f "$cpu" ]; then
  "$STROBE" convert -f otlp -o "$TMPDIR/rt.otlp" "$cpu" 2>"$TMPDIR/e1" &&
    "$STROBE" convert -f pprof -o "$TMPDIR/rt.pb.gz" "$TMPDIR/rt.otlp" 2>>"$TMPDIR/e1"
  bad=
  for t in samples cpu; do
    a=$("$STROBE" convert -f folded --sample-index $t "$cpu" | awk '{ s += $NF } END { printf "%.0f", s }')
    b=$("$STROBE" convert -f folded --sample-index $t "$TMPDIR/rt.pb.gz" | awk '{ s += $NF } END { printf "%.0f", s }')
    [ -n "$a" ] && [ "$a" != 0 ] && [ "$a" = "$b" ] || bad+=" $t: $a vs $b"
    tot+=" $t=$a"
  done
  if command -v go >/dev/null; then
    ga=$(go tool pprof -top -sample_index=cpu "$cpu" 2>/dev/null | sed -n 's/.*of \(.*\) total.*/\1/p')
    gb=$(go tool pprof -top -sample_index=cpu "$TMPDIR/rt.pb.gz" 2>/dev/null | sed -n 's/.*of \(.*\) total.*/\1/p')
    [ -n "$ga" ] && [ "$ga" = "$gb" ] || bad+=" go tool pprof: '$ga' vs '$gb'"
  fi
  if [ -z "$bad" ]; then ok roundtrip "totals equal:$tot${ga:+, go tool pprof $ga}"
  else fail roundtrip "$bad $(head -c 200 "$TMPDIR/e1")"; fi
else
  echo "SKIP server_otlp/roundtrip: no Go pprof fixtures (GOPROF)"
fi
exit $st
