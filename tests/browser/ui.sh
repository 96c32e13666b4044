#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The web UI in real browsers: Debian's chromium driven by playwright-core and Debian's
# firefox-esr driven by puppeteer-core over WebDriver BiDi (the same checks, tests/browser/ui.mjs
# through tests/browser/driver.mjs) against `strobe server` seeded with hand-made folded profiles
# of known totals at known times, a Go pprof, native heap and mutex profiles made by strobe record
# (the type picker offers their types) and a tenant behind a bearer token; checks the flame graph's frames and the top table against the API and the known
# numbers, window selection on the timeline, search, zoom, sandwich, comparison mode, error and
# empty states, and that the page's URL restores the same view. Also the embedded files'
# content types and ETag revalidation (curl). Screenshots go to build/ui-screenshots/BROWSER/.
# A browser or driver that is missing gives a SKIP line naming it; the other browser still runs.
# Same protocol as the other scripts (env STROBE, TMPDIR; ok / FAIL / SKIP lines).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
mods=${PLAYWRIGHT_MODULES:-$root/node_modules}
chrome=${CHROMIUM:-/usr/bin/chromium}
firefox=${FIREFOX:-/usr/bin/firefox-esr}
if ! command -v node >/dev/null; then echo "SKIP ui: node not installed"; exit 0; fi
browsers=()
if [ ! -d "$mods/playwright-core" ]; then echo "SKIP ui: playwright-core not in $mods (bash scripts/deps.sh check)"
elif [ ! -x "$chrome" ]; then echo "SKIP ui: no chromium at $chrome (Debian package chromium; bash scripts/deps.sh check)"
else browsers+=("chromium $chrome"); fi
if [ ! -d "$mods/puppeteer-core" ]; then echo "SKIP ui-firefox: puppeteer-core not in $mods (bash scripts/deps.sh check)"
elif [ ! -x "$firefox" ]; then echo "SKIP ui-firefox: no firefox at $firefox (Debian package firefox-esr; bash scripts/deps.sh check)"
else browsers+=("firefox $firefox"); fi
[ ${#browsers[@]} -eq 0 ] && exit 0
# shellcheck source=../e2e/lib/server.sh
. "$root/tests/e2e/lib/server.sh"
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null' EXIT
# tenants: the default one and team1 need no token, "secure" needs its bearer token
token=tok-$RANDOM$RANDOM
# "fleet" holds 200 services (the stacked timeline's case) apart from the other cases' data
printf '{"tenants": [{"id": "anonymous"}, {"id": "team1"}, {"id": "fleet"}, {"id": "secure", "token": "%s"}]}\n' "$token" > "$TMPDIR/ui.json"
chmod 600 "$TMPDIR/ui.json" # it holds a token: the server refuses it readable by others
start_server --config "$TMPDIR/ui.json"
st=0
now=$(date +%s)
tb=$((now - 40 * 60)) tn=$((now - 10 * 60))
# base (v1) and new (v2) of service api; known totals 100 and 220
printf 'main;work;hot 50\nmain;work 5\nmain;idle 30\ngc 15\n' > "$TMPDIR/v1.folded"
printf 'main;work;hot 150\nmain;work 5\nmain;idle 30\ngc 15\nmain;new 20\n' > "$TMPDIR/v2.folded"
push() { # FILE TIME LABELS [TENANT [TOKEN]]; env NAME: the profile name (process_cpu)
  local out
  if ! out=$(curl -sS -H 'Expect:' -H "X-Scope-OrgID: ${4:-anonymous}" ${5:+-H "Authorization: Bearer $5"} --data-binary @"$1" --url-query name="${NAME:-process_cpu}" \
      --url-query "labels=$3" --url-query "time=$2" "$url/api/v1/push" 2>&1) ||
     [[ $out != *'"accepted"'* ]]; then
    echo "FAIL ui/seed: push of $1 refused: $out"; exit 1
  fi
}
push "$TMPDIR/v1.folded" $tb '{service_name="api",version="v1"}'
push "$TMPDIR/v2.folded" $tn '{service_name="api",version="v2"}'
push "$TMPDIR/v1.folded" $tn '{service_name="team"}' team1 # another tenant's: only with tenant=team1
push "$TMPDIR/v1.folded" $tn '{service_name="vault"}' secure "$token" # only with the token
# an off-CPU profile: self time all in __schedule (90 of 100), main's total 100
printf 'main;read;__schedule 60\nmain;write;__schedule 30\nmain;spin 10\n' > "$TMPDIR/off.folded"
NAME=off_cpu push "$TMPDIR/off.folded" $tn '{service_name="waiter"}'
# a frame that did not change (a: +1 in a million) beside one that doubled (b)
printf 'main;a 1000000\nmain;b 1000\n' > "$TMPDIR/s1.folded"
printf 'main;a 1000001\nmain;b 2000\n' > "$TMPDIR/s2.folded"
push "$TMPDIR/s1.folded" $tb '{service_name="steady"}'
push "$TMPDIR/s2.folded" $tn '{service_name="steady"}'
# a stack 60 frames deep: taller than the graph's box, so it scrolls
seq -f 'f%g' 0 59 | paste -sd';' | sed 's/$/ 10/' > "$TMPDIR/deep.folded"
push "$TMPDIR/deep.folded" $tn '{service_name="deep"}'
# tenant fleet: 200 services, svc-NNN with total (N+1)*10000, one every 15 s over the last 50 min
for i in $(seq 0 199); do
  printf 'main;work;s%d %d\nmain;idle %d\n' $i $(((i + 1) * 9000)) $(((i + 1) * 1000)) > "$TMPDIR/svc.folded"
  push "$TMPDIR/svc.folded" $((now - 50 * 60 + i * 15)) "{service_name=\"svc-$(printf %03d $i)\"}" fleet
done
[ -f "$GOPROF/go_cpu.pb.gz" ] && push "$GOPROF/go_cpu.pb.gz" $((now - 20 * 60)) '{service_name="go"}'
# heap and mutex profiles of native programs, as strobe record makes them (libstrobe-heap.so):
# the type picker must offer their memory:* and mutex:* types
if ! "$STROBE" record -e heap -q -o "$TMPDIR/heap-native.pb.gz" -- "$root/build/workloads/alloc_truth" >/dev/null 2>"$TMPDIR/rec.err" ||
   ! "$STROBE" record -e mutex -q -o "$TMPDIR/mutex-native.pb.gz" -- "$root/build/workloads/lock_truth" >/dev/null 2>>"$TMPDIR/rec.err"; then
  echo "FAIL ui/seed: strobe record -e heap / -e mutex: $(head -2 "$TMPDIR/rec.err" | tr '\n' ' ')"; exit 1
fi
NAME=memory push "$TMPDIR/heap-native.pb.gz" $tn '{service_name="native-heap"}'
NAME=mutex push "$TMPDIR/mutex-native.pb.gz" $tn '{service_name="native-locks"}'

# cost and leaks (ui/costleak.html): two teams' CPU through Pyroscope's /ingest (100 samples a
# second: 360000 samples are 1 core-hour), and an in-use series whose grow_site gains 1 MB a
# step over 12 profiles (made by protoc) while flat_site stays
for x in "shop payments 360000 marshal" "search discovery 120000 rank"; do
  set -- $x
  curl -sS -o /dev/null -H 'Expect:' --data-binary "main;serve;$4 $3" \
    "$url/ingest?name=$1.cpu%7Bteam%3D$2%7D&format=folded&from=$tn&until=$((tn + 10))"
done
if command -v protoc >/dev/null; then
  for i in $(seq 12); do
    printf 'sample_type { type: 1 unit: 2 }\nsample { location_id: [1, 3] value: [%d] }\nsample { location_id: [2, 3] value: [5000000] }\nlocation { id: 1 line { function_id: 1 } }\nlocation { id: 2 line { function_id: 2 } }\nlocation { id: 3 line { function_id: 3 } }\nfunction { id: 1 name: 3 }\nfunction { id: 2 name: 4 }\nfunction { id: 3 name: 5 }\nstring_table: ["", "inuse_space", "bytes", "grow_site", "flat_site", "main", "space"]\nperiod_type { type: 6 unit: 2 }\ntime_nanos: %d000000000\n' \
      $((i * 1000000)) $((now - 40 * 60 + i * 150)) |
      protoc --encode=perftools.profiles.Profile --proto_path="$root/proto" profile.proto >"$TMPDIR/heap.pb"
    curl -sS -o /dev/null -H 'Expect:' --data-binary @"$TMPDIR/heap.pb" "$url/api/v1/push?name=memory&service_name=heapy"
  done
fi

# the embedded files
hdr=$(curl -si "$url/ui/app.js" | tr -d '\r')
etag=$(sed -n 's/^ETag: //p' <<<"$hdr")
if ! grep -q '^Content-Type: text/javascript' <<<"$hdr" || [ -z "$etag" ]; then
  echo "FAIL ui/assets: /ui/app.js headers: $(head -6 <<<"$hdr" | tr '\n' ' ')"; st=1
elif [ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$url/ui/app.js")" != 304 ]; then
  echo "FAIL ui/assets: If-None-Match with the ETag did not give 304"; st=1
elif ! curl -s "$url/" | grep -q '<script type="module" src="/ui/app.js">' ||
     [ "$(curl -s -o /dev/null -w '%{http_code}%{content_type}' "$url/ui/style.css")" != "200text/css; charset=utf-8" ] ||
     [ "$(curl -s "$url/ui/nope.js")" != '{"error":"no UI file /ui/nope.js","status":404}' ]; then
  echo "FAIL ui/assets: / , /ui/style.css or the 404 of an unknown file"; st=1
else
  echo "ok ui/assets"
fi

for b in "${browsers[@]}"; do
  set -- $b
  mkdir -p "$root/build/ui-screenshots/$1"
  PW_MODULES=$mods node "$root/tests/browser/ui.mjs" "$url" "$1" "$2" $((tb * 1000)) $((tn * 1000)) \
    "$root/build/ui-screenshots/$1" "$token" || st=1
done
exit $st
