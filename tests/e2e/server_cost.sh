#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/cost against the truth: workloads that burn a known number of core-seconds, as
# they measured it themselves (cpu_split's process_cpu_ns, CLOCK_PROCESS_CPUTIME_ID at exit), are
# recorded by `strobe record`, pushed under two services, and each service's core-seconds must
# come out within ±5 % of its own truth (whatever the machine's load: CPU time, not wall time).
#   truth      core-seconds per service_name, cpu:nanoseconds type
#   samples    the same from the samples:count type (samples x period)
#   money      dollars = core-hours x the configured price; kWh and CO2 from the configured
#              watts, PUE and grid intensity; per year = x (365.25 days / window)
#   functions  by=function: burn_60's self cost is about 60 % of the service's, and its yearly
#              dollars agree with the per-group figure scaled by that share
#   cli        `strobe cost` prints the server's figures as a table, and from the profile file
#              alone finds the same core-seconds (within 5 % of the truth)
#   bad        bad parameters are 400s that name the parameter
#   config     a bad "cost" section stops the server at start, naming the key
set -u
name=server_cost
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
if ! command -v jq >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "FAIL $name: jq is not installed (scripts/deps.sh check)"; exit 1; fi
  echo "SKIP $name: jq is not installed"; exit 0
fi
need_workloads cpu_split
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
. "$(dirname "$0")/lib/server.sh"
cat >"$TMPDIR/cfg.json" <<'J'
{"cost": {"price_per_core_hour": 2.5, "watts_per_core": 12, "pue": 1.5, "grid_g_co2_per_kwh": 300}}
J
start_server --config "$TMPDIR/cfg.json"

# Two services, two runs: billing burns 3 core-seconds on 2 threads, search 1.5 on one.
run() { # SVC THREADS CPU_S
  if ! rec "$1" 120 -F 499 -o "$TMPDIR/$1.pb.gz" -- "$WL/cpu_split" -t "$2" -c "$3" -o "$TMPDIR/$1.truth" 60 ||
     [ ! -s "$TMPDIR/$1.truth" ]; then
    fail "$name/truth" "record of $1 failed (rc $rc): $(recerr "$1")"; return 1
  fi
  code=$(curl -s -o "$TMPDIR/$1.push" -w '%{http_code}' --data-binary @"$TMPDIR/$1.pb.gz" \
    "$url/api/v1/push?service_name=$1&labels=%7Bteam%3D%22t_$1%22%7D")
  [ "$code" = 200 ] || { fail "$name/truth" "push of $1: HTTP $code $(cat "$TMPDIR/$1.push")"; return 1; }
}
run billing 2 3 && run search 1 1.5 || exit 1
truth_s() { awk '$1 == "process_cpu_ns" { printf "%.4f", $2 / 1e9 }' "$TMPDIR/$1.truth"; }
cost() { curl -s -G "$url/api/v1/cost" --data-urlencode "query=$1" -d from=now-15m -d to=now "${@:2}"; }
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
SMP='process_cpu:samples:count:cpu:nanoseconds'

cost "$CPU" -d group_by=service_name >"$TMPDIR/c.json"
detail= bad=
for s in billing search; do
  got=$(jq -r --arg s "$s" '.groups[] | select(.group.service_name == $s) | .cost.core_seconds' "$TMPDIR/c.json")
  want=$(truth_s "$s")
  detail+="$s ${got:-none} core-s (truth $want) "
  within_rel "$got" "$want" 5 || bad+="$s "
done
first=$(jq -r '.groups[0].group.service_name' "$TMPDIR/c.json")
[ "$first" = billing ] || bad+="rank(first $first) "
if [ -z "$bad" ]; then ok "$name/truth" "$detail"; else fail "$name/truth" "$detail off: $bad; $(head -c 300 "$TMPDIR/c.json")"; fi

cost "$SMP" -d group_by=team >"$TMPDIR/s.json"
got=$(jq -r '.groups[] | select(.group.team == "t_billing") | .cost.core_seconds' "$TMPDIR/s.json")
want=$(truth_s billing)
if within_rel "$got" "$want" 5; then ok "$name/samples" "t_billing ${got} core-s from samples x period (truth $want)"
else fail "$name/samples" "t_billing ${got:-none} core-s (truth $want): $(head -c 300 "$TMPDIR/s.json")"; fi

# The arithmetic, from the figures of one group: price 2.5 $/core-hour, 12 W x PUE 1.5,
# 300 g/kWh, over the 15-minute window (a year is 35064 of them).
money=$(jq -r '.groups[] | select(.group.service_name == "billing") | .cost |
  [.core_hours, .dollars, .kwh, .co2_kg, .dollars_per_year, .cores] | @tsv' "$TMPDIR/c.json")
if awk -F'\t' -v ch="$(truth_s billing)" '{
     h = $1; e = 1e-6 * (h + 1)
     ok = (($2 - h * 2.5)^2 < e^2) && (($3 - h * 12 / 1000 * 1.5)^2 < e^2) &&
          (($4 - h * 0.018 * 0.3)^2 < e^2) && (($5 - $2 * 35064)^2 < (1e-6 * $5)^2 + e^2) &&
          (($6 - h * 3600 / 900)^2 < e^2)
     exit !ok }' <<<"$money"; then
  ok "$name/money" "core-h, \$, kWh, kg CO2, \$/yr, cores: $(tr '\t' ' ' <<<"$money")"
else fail "$name/money" "core-h, \$, kWh, kg CO2, \$/yr, cores: $(tr '\t' ' ' <<<"$money")"; fi

cost "$CPU{service_name=\"billing\"}" -d by=function -d limit=5 >"$TMPDIR/f.json"
read -r top self tot <<<"$(jq -r '[.functions[0].name, .functions[0].self.dollars_per_year, .total.dollars_per_year] | @tsv' "$TMPDIR/f.json")"
share=$(ratio_pct "$self" "$tot")
want=$(truth_share "$TMPDIR/billing.truth" burn_60)
if [ "$top" = burn_60 ] && within_pp "$share" "$want" 5; then
  ok "$name/functions" "burn_60 first, \$$self of \$$tot a year (${share}%, truth ${want}%)"
else fail "$name/functions" "first ${top:-none} \$$self of \$$tot (${share}%, truth ${want}%): $(head -c 300 "$TMPDIR/f.json")"; fi

# The CLI: the server's table (billing's row first, its core-hours the API's), and the files
# path (the recorded profile alone, per function; its total core-hours against the truth).
"$STROBE" cost -s "$url" --from now-15m --to now --group-by service_name "$CPU" >"$TMPDIR/cli.txt" 2>&1
api_ch=$(jq -r '.groups[0].cost.core_hours' "$TMPDIR/c.json")
row=$(sed -n 3p "$TMPDIR/cli.txt")
"$STROBE" cost --price 2.5 "$TMPDIR/billing.pb.gz" >"$TMPDIR/clif.txt" 2>&1
fch=$(awk '/^total:/ { print $2 }' "$TMPDIR/clif.txt")
if [ "$(awk '{ print $1 }' <<<"$row")" = billing ] && awk -v a="$(awk '{ print $2 }' <<<"$row")" -v b="$api_ch" 'BEGIN { exit !((a - b)^2 < (1e-5 * b)^2) }' &&
   within_rel "$fch" "$(truth_s billing)" 5 && grep -q ' burn_60$' <<<"$(sed -n 3p "$TMPDIR/clif.txt")"; then
  ok "$name/cli" "server table row '$row'; files: $fch core-s (truth $(truth_s billing)), burn_60 first"
else fail "$name/cli" "server: $(head -c 300 "$TMPDIR/cli.txt"); files: $(head -c 300 "$TMPDIR/clif.txt")"; fi

# Bad input: each a 400 naming what is wrong.
badcase() { # WHAT WANT_IN_MESSAGE ARGS...
  local w=$1 m=$2 code
  shift 2
  code=$(curl -s -o "$TMPDIR/bad" -w '%{http_code}' -G "$url/api/v1/cost" "$@")
  if [ "$code" = 400 ] && grep -q -- "$m" "$TMPDIR/bad"; then return 0; fi
  bad+="$w(HTTP $code $(head -c 150 "$TMPDIR/bad")) "
}
bad=
badcase noquery "query" -d group_by=team
badcase heap "cost needs a CPU type" --data-urlencode 'query=memory:inuse_space:bytes:space:bytes'
badcase group "group_by" --data-urlencode "query=$CPU" --data-urlencode 'group_by=a b'
badcase by "by must be" --data-urlencode "query=$CPU" -d by=team
badcase limit "limit" --data-urlencode "query=$CPU" -d by=function -d limit=0
badcase order "order" --data-urlencode "query=$CPU" -d order=total
badcase window "to must be after" --data-urlencode "query=$CPU" -d from=now -d to=now-1h
badcase sel "query" --data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{'
if [ -z "$bad" ]; then ok "$name/bad" "8 bad requests, each a 400 naming the parameter"; else fail "$name/bad" "$bad"; fi

# A bad "cost" section stops the server at start, naming the key.
printf '{"cost": {"pue": 0.5}}\n' >"$TMPDIR/bad1.json"
printf '{"cost": {"price": 1}}\n' >"$TMPDIR/bad2.json"
m1=$(timeout 20 "$STROBE" server --data "$TMPDIR/bd" --listen 127.0.0.1:0 --config "$TMPDIR/bad1.json" 2>&1); r1=$?
m2=$(timeout 20 "$STROBE" server --data "$TMPDIR/bd" --listen 127.0.0.1:0 --config "$TMPDIR/bad2.json" 2>&1); r2=$?
if [ $r1 -ne 0 ] && [ $r1 -ne 124 ] && grep -q 'cost.pue' <<<"$m1" && [ $r2 -ne 0 ] && [ $r2 -ne 124 ] && grep -q 'cost.price' <<<"$m2"; then
  ok "$name/config" "refused: $(head -1 <<<"$m1" | cut -c1-90); $(head -1 <<<"$m2" | cut -c1-90)"
else fail "$name/config" "pue 0.5: rc $r1 '$m1'; unknown key: rc $r2 '$m2'"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
