#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/leaks against the truth.
#   synthetic  SYNTHETIC TIMES: 61 Go-style heap profiles (inuse_space), one every 20 s with
#              time_nanos spanning 20 minutes, made by a generator (awk, then protoc from text,
#              an encoder that is not ours): leak_site's in-use grows 1 MiB a minute (plus the
#              noise of heap sampling at 512 KiB: sd sqrt(512 KiB x bytes)), while four churn
#              sites hold a random 0.5..1.5 x their size at each snapshot and free_site shrinks.
#              leak_site must be first, at 60 MiB/h within ±20 %, and no other site reported.
#   quiet      the same generator without the leak: nothing is reported.
#   real       REAL COLLECTION, REAL TIME: alloc_truth -m leak (leak_site keeps 1 MiB/s while
#              churn_a and churn_b allocate and free 20 MB/s each) runs 24 s with
#              libstrobe-heap.so preloaded, under `strobe agent` pushing every 2 s: leak_site
#              first, its rate within ±20 % of what the workload counted (leak_bytes over its
#              run), no churn site reported.
#   cli        `strobe leaks` prints the synthetic case's answer: leak_site alone, its growth the API's
#   cap        6000 stacks at 720 steps pass the cap on stacks x steps: a 429 naming it; at 12
#              steps the same request is answered
#   bad        bad parameters are 400s that name the parameter.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
name=server_leaks
for c in curl jq protoc; do
  if ! command -v $c >/dev/null; then
    if [ "${CI:-}" = true ]; then echo "FAIL $name: $c is not installed (scripts/deps.sh check)"; exit 1; fi
    echo "SKIP $name: $c is not installed"; exit 0
  fi
done
kill_at_exit pid apid wpid
proto=$(cd "$(dirname "$0")/../../proto" && pwd)
INUSE='memory:inuse_space:bytes:space:bytes'
start_server

# gen OUTDIR T0_S LEAK(0|1) SEED: 61 snapshots heap-NN.pb at T0 + 20 s x NN
gen() {
  mkdir -p "$1"
  awk -v t0="$2" -v leak="$3" -v seed="$4" -v dir="$1" 'function gauss() { return sqrt(-2 * log(1 - rand())) * cos(6.283185307 * rand()) }
  BEGIN {
    srand(seed); MiB = 1048576; rate = 524288
    split("churn_a churn_b churn_c churn_d", ch, " "); split("8 16 3 40", sz, " ")
    for (k = 0; k <= 60; k++) {
      f = sprintf("%s/heap-%02d.txt", dir, k)
      t = t0 + 20 * k
      L = 4 * MiB + leak * MiB * (20 * k) / 60          # 1 MiB a minute
      L += gauss() * sqrt(rate * L)                       # heap sampling noise
      printf "sample_type { type: 1 unit: 2 } sample_type { type: 3 unit: 4 }\n" > f
      printf "sample { location_id: [4, 2, 1] value: [%d, %d] }\n", L / 4096, L > f
      for (c = 1; c <= 4; c++) {
        v = sz[c] * MiB * (0.5 + rand())
        printf "sample { location_id: [%d, 2, 1] value: [%d, %d] }\n", 4 + c, v / 4096, v > f
      }
      v = 30 * MiB * (1 - k / 80)                        # memory given back over time
      printf "sample { location_id: [9, 2, 1] value: [%d, %d] }\n", v / 4096, v > f
      for (l = 1; l <= 9; l++) printf "location { id: %d line { function_id: %d } }\n", l, l > f
      for (l = 1; l <= 9; l++) printf "function { id: %d name: %d }\n", l, 5 + l > f
      printf "string_table: [\"\", \"inuse_objects\", \"count\", \"inuse_space\", \"bytes\", \"space\", \"main\", \"serve\", \"unused\", \"leak_site\", \"churn_a\", \"churn_b\", \"churn_c\", \"churn_d\", \"free_site\"]\n" > f
      printf "time_nanos: %d000000000\nperiod_type { type: 5 unit: 4 } period: 524288\n", t > f
      close(f)
    }
  }'
  local k
  for k in $(seq -w 0 60); do
    protoc --encode=perftools.profiles.Profile --proto_path="$proto" profile.proto \
      <"$1/heap-$k.txt" >"$1/heap-$k.pb" || return 1
  done
}
push_all() { # DIR SERVICE
  local f code
  for f in "$1"/heap-*.pb; do
    code=$(curl -s -o "$TMPDIR/push.out" -w '%{http_code}' --data-binary @"$f" "$url/api/v1/push?service_name=$2")
    [ "$code" = 200 ] || { echo "push $f: HTTP $code $(cat "$TMPDIR/push.out")"; return 1; }
  done
}
leaks() { curl -s -G "$url/api/v1/leaks" --data-urlencode "query=$1" "${@:2}"; }
now=$(date +%s)
t0=$((now - 1500))
if ! gen "$TMPDIR/leak" "$t0" 1 7 || ! gen "$TMPDIR/quiet" "$t0" 0 11; then
  fail "$name/synthetic" "the generator failed"
elif ! e=$(push_all "$TMPDIR/leak" leaky) || ! e2=$(push_all "$TMPDIR/quiet" steady); then
  fail "$name/synthetic" "${e:-}${e2:-}"
else
  # steps of 20 s centred on the snapshots
  leaks "$INUSE{service_name=\"leaky\"}" -d from=$((t0 - 10)) -d to=$((t0 + 1210)) -d step=20s >"$TMPDIR/l.json"
  read -r first rate n others tested <<<"$(jq -r '[.leaks[0].leaf // "none", .leaks[0].growth_per_hour // 0,
    (.leaks[0].points | length), ([.leaks[1:][].leaf] | join(",") | if . == "" then "-" else . end), .stacks_tested] | @tsv' "$TMPDIR/l.json")"
  mibh=$(awk -v r="$rate" 'BEGIN { printf "%.2f", r / 1048576 }')
  if [ "$first" = leak_site ] && within_rel "$rate" $((60 * 1048576)) 20 && [ "$others" = - ] && [ "$n" = 61 ]; then
    ok "$name/synthetic" "leak_site first at $mibh MiB/h (truth 60), 61 points, nothing else of $tested stacks reported"
  else
    fail "$name/synthetic" "first $first at $mibh MiB/h (truth 60), $n points, also reported: $others; $(head -c 300 "$TMPDIR/l.json")"
  fi
  # the CLI's table of the same: leak_site's row first, its growth the API's
  "$STROBE" leaks -s "$url" --from $((t0 - 10)) --to $((t0 + 1210)) --step 20s "$INUSE{service_name=\"leaky\"}" >"$TMPDIR/cli.txt" 2>&1
  row=$(sed -n 3p "$TMPDIR/cli.txt")
  if grep -q ';leak_site$' <<<"$row" && grep -q "^1 leaking of 6 stacks" "$TMPDIR/cli.txt" && [ "$(awk '{ print $1 }' <<<"$row")" = "$mibh" ]; then
    ok "$name/cli" "$(tr -s ' ' <<<"$row")"
  else fail "$name/cli" "$(head -c 400 "$TMPDIR/cli.txt")"; fi
  leaks "$INUSE{service_name=\"steady\"}" -d from=$((t0 - 10)) -d to=$((t0 + 1210)) -d step=20s >"$TMPDIR/q.json"
  nq=$(jq -r '.leaks | length' "$TMPDIR/q.json"); tq=$(jq -r '.stacks_tested' "$TMPDIR/q.json")
  if [ "$nq" = 0 ] && [ "$tq" = 6 ]; then ok "$name/quiet" "0 of $tq stacks reported without a leak"
  else fail "$name/quiet" "$nq of $tq stacks reported without a leak: $(jq -c '[.leaks[].leaf]' "$TMPDIR/q.json")"; fi
fi

# Real collection: the preload library, the agent, the push path, 2 s intervals.
LIB=$ROOT/build/libstrobe-heap.so
if [ "$(id -u)" -ne 0 ]; then
  skip "$name/real" "the agent needs root"
elif [ ! -x "$WL/alloc_truth" ] || [ ! -e "$LIB" ]; then
  fail "$name/real" "build/workloads/alloc_truth or $LIB is missing (make all workloads)"
else
  SHM=$TMPDIR/shm; mkdir -p "$SHM"
  start_agent "$TMPDIR/agent.log" -F 19 -i 2 --max-cpu 100 --preload-dir "$SHM" --comm '^alloc_truth$'
  r0=$(date +%s)
  STROBE_SERVICE=leakrun STROBE_HEAP_DIR=$SHM STROBE_HEAP_RATE=16384 LD_PRELOAD=$LIB \
    "$WL/alloc_truth" -m leak -t 24 -o "$TMPDIR/leak.truth" >/dev/null
  r1=$(date +%s)
  i0=$(status_field export.intervals)
  for _ in $(seq 100); do [ "$(status_field export.intervals)" -ge $((i0 + 1)) ] 2>/dev/null && break; sleep 0.1; done
  stop_agent
  want=$(awk -v s=$((r1 - r0)) '$1 == "leak_bytes" { printf "%.0f", $2 / 24 * 3600 }' "$TMPDIR/leak.truth")
  leaks "$INUSE{service_name=\"leakrun\"}" -d from=$((r0 - 1)) -d to=$((r1 + 1)) -d step=2s >"$TMPDIR/r.json"
  read -r first rate n others <<<"$(jq -r '[.leaks[0].leaf // "none", .leaks[0].growth_per_hour // 0,
    (.leaks[0].points | length), ([.leaks[1:][].leaf] | join(",") | if . == "" then "-" else . end)] | @tsv' "$TMPDIR/r.json")"
  mibh=$(awk -v r="$rate" 'BEGIN { printf "%.0f", r / 1048576 }'); wmibh=$(awk -v r="$want" 'BEGIN { printf "%.0f", r / 1048576 }')
  if [ "$first" = leak_site ] && within_rel "$rate" "$want" 20 && ! grep -q churn <<<"$others"; then
    ok "$name/real" "leak_site first at $mibh MiB/h (the workload counted $wmibh), $n points; also: $others"
  else
    fail "$name/real" "first $first at $mibh MiB/h (workload $wmibh), $n points, also: $others; $(head -c 300 "$TMPDIR/r.json"); agent: $(errof "$TMPDIR/agent.log")"
  fi
fi

# The memory cap: 6000 distinct stacks at 720 steps pass 4 M stacks x steps: a 429 naming it.
awk -v t="$(( $(date +%s) - 300 ))" 'BEGIN {
  printf "sample_type { type: 1 unit: 2 }\n"
  for (i = 1; i <= 6000; i++) printf "sample { location_id: [%d] value: [%d] }\nlocation { id: %d line { function_id: %d } }\nfunction { id: %d name: %d }\n", i, 1000 + i, i, i, i, 3 + i
  printf "string_table: [\"\", \"inuse_space\", \"bytes\", \"space\""
  for (i = 1; i <= 6000; i++) printf ", \"fn%d\"", i
  printf "]\nperiod_type { type: 3 unit: 2 }\ntime_nanos: %d000000000\n", t }' |
  protoc --encode=perftools.profiles.Profile --proto_path="$proto" profile.proto >"$TMPDIR/wide.pb"
curl -s -o /dev/null --data-binary @"$TMPDIR/wide.pb" "$url/api/v1/push?service_name=wide"
code=$(curl -s -o "$TMPDIR/cap" -w '%{http_code}' -G "$url/api/v1/leaks" --data-urlencode "query=$INUSE{service_name=\"wide\"}" -d from=now-12m -d step=1s)
code2=$(curl -s -o "$TMPDIR/cap2" -w '%{http_code}' -G "$url/api/v1/leaks" --data-urlencode "query=$INUSE{service_name=\"wide\"}" -d from=now-12m -d step=1m)
if [ "$code" = 429 ] && grep -q 'stacks x steps' "$TMPDIR/cap" && [ "$code2" = 200 ] && [ "$(jq -r .steps_with_data "$TMPDIR/cap2")" = 1 ]; then
  ok "$name/cap" "720 steps: 429 $(head -c 120 "$TMPDIR/cap"); 12 steps: 200"
else fail "$name/cap" "720 steps: $code $(head -c 200 "$TMPDIR/cap"); 12 steps: $code2 $(head -c 200 "$TMPDIR/cap2")"; fi

# Bad input: each a 400 naming what is wrong.
bad=
badcase() { # WHAT WANT_IN_MESSAGE ARGS...
  local w=$1 m=$2 code
  shift 2
  code=$(curl -s -o "$TMPDIR/bad" -w '%{http_code}' -G "$url/api/v1/leaks" "$@")
  if [ "$code" = 400 ] && grep -q -- "$m" "$TMPDIR/bad"; then return 0; fi
  bad+="$w(HTTP $code $(head -c 150 "$TMPDIR/bad")) "
}
badcase noquery "query" -d step=1m
badcase cpu "in-use type" --data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds'
badcase step "step" --data-urlencode "query=$INUSE" -d step=abc
badcase steps "step" --data-urlencode "query=$INUSE" -d step=1s -d from=now-1d
badcase few "step" --data-urlencode "query=$INUSE" -d step=30m
badcase conf "confidence" --data-urlencode "query=$INUSE" -d confidence=1.5
badcase limit "limit" --data-urlencode "query=$INUSE" -d limit=2.5
badcase window "to must be after" --data-urlencode "query=$INUSE" -d from=now -d to=now-1h
if [ -z "$bad" ]; then ok "$name/bad" "8 bad requests, each a 400 naming the parameter"; else fail "$name/bad" "$bad"; fi
exit $st
