#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Automatic regression detection and its webhook (server/notify.c). Service "shop" (team
# "payments" in the owners map) runs v1, then v2 with "planted" 5 points of the total heavier,
# then v3 with v2's workload again (an A/A pair), twelve pushes of 2000 samples each from a
# seeded generator (awk), pushed to a server without a notifier so that each version is whole
# when the notifier first looks. Then, with "notify" configured (check every 1 s, settle 1 s):
#   - one: the receiver (build/tools/webhook_sink) gets exactly one notification, v1 -> v2,
#     naming planted and payments with its confidence and a diff link; v2 -> v3 is judged clean
#     (in the state file) and sends nothing, while further checks run;
#   - restart: the server restarted on the same data sends nothing again;
#   - retry: a receiver answering 500 twice: delivered once on the third try, /metrics counts
#     the two failed attempts;
#   - give-up: a receiver that always answers 500 with max_tries 2: two attempts, then
#     given up, counted and kept as such in the state file;
#   - config: a webhook that is not http(s) is refused at start.
set -u
name=server_notify
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
if ! command -v jq >/dev/null; then echo "SKIP $name: jq is not installed"; exit 0; fi
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
sink=$(dirname "$STROBE")/tools/webhook_sink
if ! [ -x "$sink" ]; then echo "FAIL $name/setup: $sink is not built (make build/tools/webhook_sink)"; exit 1; fi
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid= spid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; [ -n "$spid" ] && kill -9 $spid 2>/dev/null' EXIT
start_server

gen() { # SEED PLANT N: one push of N samples; "planted" 10 % (+PLANT), f1..f9 share the rest
  awk -v seed="$1" -v plant="$2" -v n="$3" 'BEGIN {
    srand(seed); pl = 0.10 + plant; rest = 1 - pl;
    for (s = 0; s < n; s++) {
      u = rand();
      if (u < pl) c["main;planted"]++;
      else { k = 1 + int((u - pl) / (rest / 9)); if (k > 9) k = 9; c["main;f" k]++ }
    }
    for (x in c) print x, c[x] }'
}
now=$(date +%s)
push() { # VERSION T0 SEED PLANT
  local i
  for i in $(seq 0 11); do
    gen $(($3 + i)) "$4" 2000 | curl -s -o /dev/null -w '%{http_code}\n' --data-binary @- \
      "$url/ingest?name=shop%7Bversion%3D$1%7D&from=$(($2 + i * 10))&until=$(($2 + i * 10 + 10))&format=folded&sampleRate=100"
  done | grep -qv '^200$' && fail push "$1: a push was refused"
}
push v1 $((now - 3000)) 100 0
push v2 $((now - 2000)) 200 0.05
push v3 $((now - 1000)) 300 0.05
kill "$pid"; wait "$pid" 2>/dev/null; pid=
cp -r "$TMPDIR/data" "$TMPDIR/data0" # as pushed, never notified: for the retry case
cp -r "$TMPDIR/data" "$TMPDIR/data00" # and for the give-up case

sink_start() { # OUT [--fail K]: sets spid, sport
  [ -n "$spid" ] && kill "$spid" 2>/dev/null
  local i pf="$1.port" # a file of its own: the last sink's could still be read
  "$sink" --out "$@" > "$pf" & spid=$!
  sport=
  for ((i = 0; i < 200; i++)); do
    sport=$(head -1 "$pf" 2>/dev/null); [ -n "$sport" ] && break; sleep 0.05
  done
  [ -n "$sport" ] || fail setup "the webhook receiver did not start"
}
cfg() { # PORT [MORE]: MORE is more of "notify"'s keys
  printf '{"owners": {"service_name": {"shop": "payments"}}, "notify": {"webhook": "http://127.0.0.1:%s/hook", "settle": "1s", "check_interval": "1s", "min_profiles": 3, "lookback": "2h", "backoff": "200ms", "public_url": "http://strobe.example:4100/"%s}}\n' "$1" "${2:+, $2}" > "$TMPDIR/cfg.json"
}
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
wait_checks() { # N: until the notifier has run N more rounds (or 40 s)
  local i want=$(( $(metric strobe_notify_checks_total || echo 0) + $1 ))
  for ((i = 0; i < 400; i++)); do
    [ "$(metric strobe_notify_checks_total)" -ge "$want" ] 2>/dev/null && return 0; sleep 0.1
  done
  return 1
}
lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }

# one
sink_start "$TMPDIR/got.jsonl"
cfg "$sport"
launch_server "$STROBE" "$TMPDIR/data" --config "$TMPDIR/cfg.json" || fail start "$(head -3 "$TMPDIR/log")"
for ((i = 0; i < 300; i++)); do [ "$(lines "$TMPDIR/got.jsonl")" -ge 1 ] && break; sleep 0.1; done
wait_checks 3 || fail one "the notifier ran no rounds"
n=$(lines "$TMPDIR/got.jsonl")
got=$(head -1 "$TMPDIR/got.jsonl" | jq -c '[.service, .team, .base.version, .new.version, [.regressions[].function], (.regressions[0].self.q < 0.01), (.link | test("mode=diff") and test("bq="))]' 2>/dev/null)
clean=$(jq -c '[.pairs[] | select(.[1] == "shop") | [.[2], .[3], .[4]]]' "$TMPDIR/data/notify-state.json" 2>/dev/null)
if [ "$n" != 1 ] || [ "$got" != '["shop","payments","v1","v2",["planted"],true,true]' ]; then
  fail one "want one notification v1->v2 naming planted and payments, got $n: $got $(head -c 300 "$TMPDIR/got.jsonl")"
elif [ "$clean" != '[["v1","v2","sent"],["v2","v3","clean"]]' ]; then
  fail aa "want v2->v3 judged clean and v1->v2 sent in the state file, got $clean"
else ok one "$(head -1 "$TMPDIR/got.jsonl" | jq -r '"planted q \(.regressions[0].self.q), \(.method); v2->v3 clean"')"; fi

# restart
kill "$pid"; wait "$pid" 2>/dev/null; pid=
launch_server "$STROBE" "$TMPDIR/data" --config "$TMPDIR/cfg.json" || fail start "$(head -3 "$TMPDIR/log")"
wait_checks 3 || fail restart "the notifier ran no rounds"
if [ "$(lines "$TMPDIR/got.jsonl")" != 1 ] || [ "$(metric strobe_notify_sent_total)" != 0 ]; then
  fail restart "sent again after a restart: $(lines "$TMPDIR/got.jsonl") notifications, sent_total $(metric strobe_notify_sent_total)"
else ok restart "nothing resent over 3 rounds"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# retry
sink_start "$TMPDIR/got2.jsonl" --fail 2
cfg "$sport"
launch_server "$STROBE" "$TMPDIR/data0" --config "$TMPDIR/cfg.json" || fail start "$(head -3 "$TMPDIR/log")"
for ((i = 0; i < 300; i++)); do [ "$(lines "$TMPDIR/got2.jsonl")" -ge 1 ] && break; sleep 0.1; done
wait_checks 2 || fail retry "the notifier ran no rounds"
a=$(lines "$TMPDIR/got2.jsonl.attempts") f=$(metric strobe_notify_failed_attempts_total) s=$(metric strobe_notify_sent_total)
if [ "$(lines "$TMPDIR/got2.jsonl")" != 1 ] || [ "$a" != 3 ] || [ "$f" != 2 ] || [ "$s" != 1 ]; then
  fail retry "want delivered once after 2 failures: $(lines "$TMPDIR/got2.jsonl") delivered, $a attempts, failed_attempts_total $f, sent_total $s"
else ok retry "3 attempts, failed_attempts_total $f, sent_total $s"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# give-up: a receiver that always answers 500, max_tries 2: two attempts, then given up,
# counted and remembered (not retried on the next rounds)
sink_start "$TMPDIR/got3.jsonl" --fail 1000
cfg "$sport" '"max_tries": 2'
launch_server "$STROBE" "$TMPDIR/data00" --config "$TMPDIR/cfg.json" || fail start "$(head -3 "$TMPDIR/log")"
for ((i = 0; i < 300; i++)); do [ "$(metric strobe_notify_given_up_total)" = 1 ] 2>/dev/null && break; sleep 0.1; done
wait_checks 3 || fail give-up "the notifier ran no rounds"
a=$(lines "$TMPDIR/got3.jsonl.attempts") g=$(metric strobe_notify_given_up_total) f=$(metric strobe_notify_failed_attempts_total)
s=$(jq -c '[.pairs[] | select(.[2] == "v1") | .[4]]' "$TMPDIR/data00/notify-state.json" 2>/dev/null)
if [ "$a" != 2 ] || [ "$g" != 1 ] || [ "$f" != 2 ] || [ "$s" != '["given_up"]' ] || [ "$(lines "$TMPDIR/got3.jsonl")" != 0 ]; then
  fail give-up "want 2 attempts then given up: $a attempts, given_up_total $g, failed_attempts_total $f, state $s"
else ok give-up "2 attempts, given_up_total $g, state $s"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# config: a webhook that is not http(s) is refused at start, naming the key
printf '{"notify": {"webhook": "ftp://127.0.0.1/x"}}\n' > "$TMPDIR/bad.json"
timeout 20 "$STROBE" server --data "$TMPDIR/data1" --listen 127.0.0.1:0 --config "$TMPDIR/bad.json" 2> "$TMPDIR/bad.log"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 0 ]; then
  fail config "a server started with an ftp:// webhook"
elif ! grep -q 'notify.*webhook.* must be an http' "$TMPDIR/bad.log"; then
  fail config "the refusal does not name notify.webhook: $(head -c 300 "$TMPDIR/bad.log")"
else ok config "exit $rc: $(head -c 100 "$TMPDIR/bad.log")"; fi
exit $st
