#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe servers on a ClickHouse cluster (store/clickhouse/, docs/clickhouse.md): two
# clickhouse-servers on free loopback ports in TMPDIR, one cluster of two shards behind
# Distributed tables, and two strobe servers on it (both list the shards 1,2: a push is written
# to its shard's local tables, reads go through the Distributed tables), plus a strobe server on
# SQLite as the reference.
#   - the same pushes to A and to SQLite; B's answers (another server) equal SQLite's: folded
#     profiles (a counter, a gauge averaged over two pushes, a counter over whole minutes read
#     from the per-minute roll-ups), label names and values, profile
#     types, series, a range grouped by service, ranges of the stacks through a function (a
#     counter and a gauge); and the pushes landed on both shards;
#   - selectors on sample labels (pid, thread) in queries, label values and ranges, and
#     exemplars with the profile the heaviest one opens by id (through A, found on B): equal to
#     SQLite's;
#   - GetProfileStats (Connect): a tenant's oldest and newest profile times, and a tenant with
#     none, equal to SQLite's;
#   - limits on two more servers C and D sharing one database: max_label_values_per_name and
#     max_series_per_tenant answered 429 by either server from ClickHouse's counts, nothing of a
#     refused push stored; max_stacks and max_query_profiles 429s with the SQLite messages;
#   - symbol garbage collection: a server restarted with --retention 1d drops a 3-day-old
#     partition, and the functions, locations and stacks only its points used are deleted while
#     the kept profile answers as before;
#   - kill -9 of A in the middle of a stream of pushes: every acknowledged push is queryable
#     through B (the one in flight may or may not be there: it was not acknowledged);
#   - shard 2 stopped: a push for a series of shard 2 answers 503 with a reason and leaves
#     nothing (its samples are not there once the shard is back), a push for a series of shard
#     1 still answers 200; shard 2 started again: the same push answers 200 and is queryable.
# No clickhouse-server, or one that cannot start: SKIP (FAIL under CI=true, where deps.sh
# installed it).
set -u
name=server_clickhouse
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
# shellcheck source=lib/clickhouse.sh
. "$(dirname "$0")/lib/clickhouse.sh"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pids=()
pid=
trap 'for p in "${pids[@]}" $pid; do kill -9 $p 2>/dev/null; done; ch_cleanup' EXIT
declare -a ch_pid ch_http ch_tcp

rm -rf "$TMPDIR/a" "$TMPDIR/b" "$TMPDIR/s" # fresh stores, even when TMPDIR is reused
if ! ch_start 2; then
  if [ "${CI:-}" = true ]; then echo "FAIL $name: CI=true but ClickHouse did not start: $ch_why"; exit 1; fi
  echo "SKIP $name: $ch_why"; exit 0
fi
F=$GOPROF
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
HEAP='memory:inuse_space:bytes:space:bytes'

ch_strobe A "$TMPDIR/a" --store "$(ch_url 1 2)"
ch_strobe B "$TMPDIR/b" --store "$(ch_url 1 2)"
ch_strobe S "$TMPDIR/s"

# ---- the same data into ClickHouse (through A) and SQLite --------------------------------------
push() { # URL FILE QUERY -> HTTP status
  curl -s -o "$TMPDIR/push.out" -w '%{http_code}' --data-binary @"$2" "$1/api/v1/push?$3"
}
codes=
for u in "$url_A" "$url_S"; do
  for s in api web db pay ops auth cart; do codes+=" $(push "$u" "$F/go_cpu.pb.gz" "service_name=$s&time=now-2m")"; done
  codes+=" $(push "$u" "$F/go_heap.pb.gz" "service_name=web&time=now-3m")"
  codes+=" $(push "$u" "$F/go_heap.pb.gz" "service_name=web&time=now-1m")"
  codes+=" $(push "$u" "$F/go_cpu.pb.gz" "service_name=api&labels=%7Benv%3D%22prod%22%7D&time=now-1m")"
done
if [ "$(tr ' ' '\n' <<<"$codes" | grep -c '^200$')" = 20 ]; then ok push "20 pushes, 200 each"
else fail push "statuses:$codes; $(cat "$TMPDIR/push.out")"; fi

q() { curl -s -G "$1/api/v1/$2" "${@:3}"; }
folded() { q "$1" query --data-urlencode "query=$2" -d format=folded -d from=now-10m -d to=now | sort; }
same() { # CASE WHAT-IT-IS B-ANSWER S-ANSWER
  if [ -n "$3" ] && [ "$3" = "$4" ]; then ok "$1" "$2"
  else fail "$1" "ClickHouse (server B) and SQLite differ: $(diff <(echo "$3") <(echo "$4") | head -6 | tr '\n' ' ')"; fi
}
total() { awk '{ t += $NF } END { printf "%.0f", t }'; }
a=$(folded "$url_B" "$CPU{service_name=\"api\"}"); b=$(folded "$url_S" "$CPU{service_name=\"api\"}")
same query-counter "$(wc -l <<<"$a") stacks, total $(total <<<"$a")" "$a" "$b"
a=$(folded "$url_B" "$CPU{service_name=~\"a.*|d.*\",env!=\"prod\"}"); b=$(folded "$url_S" "$CPU{service_name=~\"a.*|d.*\",env!=\"prod\"}")
same query-regex "total $(total <<<"$a")" "$a" "$b"
a=$(folded "$url_B" "$HEAP{service_name=\"web\"}"); b=$(folded "$url_S" "$HEAP{service_name=\"web\"}")
same query-gauge "mean of 2 heap pushes, total $(total <<<"$a")" "$a" "$b"
a=$(q "$url_B" labels -d from=now-10m); b=$(q "$url_S" labels -d from=now-10m)
same labels "$a" "$a" "$b"
a=$(q "$url_B" label/service_name/values -d from=now-10m); b=$(q "$url_S" label/service_name/values -d from=now-10m)
same label-values "$a" "$a" "$b"
a=$(q "$url_B" profile_types -d from=now-10m); b=$(q "$url_S" profile_types -d from=now-10m)
same profile-types "$(grep -o ':' <<<"$a" | wc -l) colons" "$a" "$b"
a=$(q "$url_B" series --data-urlencode "match[]={service_name=\"web\"}" -d from=now-10m); b=$(q "$url_S" series --data-urlencode "match[]={service_name=\"web\"}" -d from=now-10m)
same series "$(grep -o '"service_name"' <<<"$a" | wc -l) series" "$a" "$b"
# one step over the whole window: the buckets cannot differ by when each server said "now"
# (the step's timestamp is each server's own now-10m; groups come in any order)
range() { q "$1" range --data-urlencode "query=$CPU" -d from=now-10m -d to=now -d step=11m -d group_by=service_name | tr '{' '\n' | sed -e 's/\[\[[0-9]*,/[[T,/' -e 's/]]}.*$/]]}/' -e 's/_ms":[0-9]*/_ms":T/g' | sort; }
a=$(range "$url_B"); b=$(range "$url_S")
same range-group-by "$(grep -c service_name <<<"$a") groups" "$a" "$b"
# only the stacks through a function: a counter, and a gauge (its mean over all its points)
rangef() { q "$1" range --data-urlencode "query=$2" -d from=now-10m -d to=now -d step=11m -d group_by=service_name --data-urlencode "function=$3" | tr '{' '\n' | sed -e 's/\[\[[0-9]*,/[[T,/' -e 's/]]}.*$/]]}/' -e 's/_ms":[0-9]*/_ms":T/g' | sort; }
a=$(rangef "$url_B" "$CPU" crypto/sha256.block); b=$(rangef "$url_S" "$CPU" crypto/sha256.block)
same range-function "$(grep -o 'points":\[\[T,[0-9]*' <<<"$a" | head -1)" "$a" "$b"
a=$(rangef "$url_B" "$HEAP" encoding/json.Marshal); b=$(rangef "$url_S" "$HEAP" encoding/json.Marshal)
same range-function-gauge "$(grep -o 'points":\[\[T,[0-9]*' <<<"$a" | head -1)" "$a" "$b"
# a window of whole minutes: counters are read from the per-minute roll-ups (points_1m)
m0=$(( $(date +%s) / 60 * 60 - 600 )) m1=$(( $(date +%s) / 60 * 60 + 120 ))
foldedm() { q "$1" query --data-urlencode "query=$2" -d format=folded -d from=$m0 -d to=$m1 | sort; }
a=$(foldedm "$url_B" "$CPU{service_name=~\"a.*\"}"); b=$(foldedm "$url_S" "$CPU{service_name=~\"a.*\"}")
same query-rollup "whole minutes, $(wc -l <<<"$a") stacks, total $(total <<<"$a")" "$a" "$b"
n1=$(ch_sql 1 "SELECT count() FROM strobe.points_l"); n2=$(ch_sql 2 "SELECT count() FROM strobe.points_l")
if [ "${n1:-0}" -gt 0 ] && [ "${n2:-0}" -gt 0 ]; then ok sharded "point rows: shard 1 $n1, shard 2 $n2"
else fail sharded "point rows: shard 1 '$n1', shard 2 '$n2' (a shard has none)"; fi

# ---- selectors on sample labels (pid, thread: on the points, not the series) --------------------
SM='samples:samples:count:samples:count'
codes=
for u in "$url_A" "$url_S"; do
  for i in 0 1 2 3 4 5; do
    printf 'main;work_%d %d\n' "$i" $((i + 1)) >"$TMPDIR/sl$i.folded"
    codes+=" $(push "$u" "$TMPDIR/sl$i.folded" "service_name=sl&time=now-1m&sample_labels=%7Bpid%3D%22100$i%22%2Cthread%3D%22t$((i % 2))%22%7D")"
  done
done
a=$(folded "$url_B" "$SM{service_name=\"sl\",pid=\"1003\"}"); b=$(folded "$url_S" "$SM{service_name=\"sl\",pid=\"1003\"}")
a2=$(folded "$url_B" "$SM{thread=~\"t1\",pid!=\"1005\"}"); b2=$(folded "$url_S" "$SM{thread=~\"t1\",pid!=\"1005\"}")
a3=$(q "$url_B" label/pid/values --data-urlencode "query={thread=\"t0\"}" -d from=now-10m); b3=$(q "$url_S" label/pid/values --data-urlencode "query={thread=\"t0\"}" -d from=now-10m)
a4=$(q "$url_B" range --data-urlencode "query=$SM{pid=~\"100[12]\"}" -d from=now-10m -d to=now -d step=11m | sed -e 's/\[\[[0-9]*,/[[T,/' -e 's/_ms":[0-9]*/_ms":T/g')
b4=$(q "$url_S" range --data-urlencode "query=$SM{pid=~\"100[12]\"}" -d from=now-10m -d to=now -d step=11m | sed -e 's/\[\[[0-9]*,/[[T,/' -e 's/_ms":[0-9]*/_ms":T/g')
if [ "$(tr ' ' '\n' <<<"$codes" | grep -c '^200$')" != 12 ]; then fail sample-labels "pushes:$codes"
elif [ "$a" != "main;work_3 4" ]; then fail sample-labels "pid 1003 on ClickHouse gave '$a', want 'main;work_3 4'"
else same sample-labels "pid=1003: $a; thread=~t1,pid!=1005: $(tr '\n' ' ' <<<"$a2"); pids of t0: $a3" "$a|$a2|$a3|$a4" "$b|$b2|$b3|$b4"; fi

# ---- exemplars: the heaviest stored profiles of a step, each opened by its id --------------------
exq() { curl -s -G "$1/api/v1/range" --data-urlencode "query=$SM{service_name=\"sl\"}" -d from=now-10m -d to=now -d step=11m -d exemplars=2; }
byid() { curl -s -G "$1/api/v1/query" --data-urlencode "query=$SM{service_name=\"sl\"}" -d format=folded -d "profile_id=$2"; }
ea=$(exq "$url_B"); eb=$(exq "$url_S")
va=$(jq -c '[.exemplars[].profiles[].value]' <<<"$ea" 2>&1); vb=$(jq -c '[.exemplars[].profiles[].value]' <<<"$eb" 2>&1)
pa=$(byid "$url_A" "$(jq -r '.exemplars[0].profiles[0].id' <<<"$ea" 2>/dev/null)"); pb=$(byid "$url_S" "$(jq -r '.exemplars[0].profiles[0].id' <<<"$eb" 2>/dev/null)")
if [ "$va" != "[6,5]" ]; then fail exemplars "values on ClickHouse $va, want [6,5] (the heaviest two of six): $(head -c 300 <<<"$ea")"
else same exemplars "values $va; the heaviest opened by id (through another server): $pa" "$va|$pa" "$vb|$pb"; fi

# ---- GetProfileStats: the tenant's oldest and newest profile times, as SQLite answers -----------
t1=$(($(date +%s) - 400)) t2=$(($(date +%s) - 100))
codes=
for u in "$url_A" "$url_S"; do
  for t in $t2 $t1 $t2; do
    codes+=" $(curl -s -o "$TMPDIR/push.out" -w '%{http_code}' -H 'X-Scope-OrgID: span-t' --data-binary @"$TMPDIR/sl0.folded" "$u/api/v1/push?service_name=ts&time=$t")"
  done
done
pstats() { curl -s -H 'Content-Type: application/json' "${@:2}" -d '{}' "$1/querier.v1.QuerierService/GetProfileStats" | tr -d ' '; }
a=$(pstats "$url_B" -H 'X-Scope-OrgID: span-t'); b=$(pstats "$url_S" -H 'X-Scope-OrgID: span-t')
a0=$(pstats "$url_B" -H 'X-Scope-OrgID: nobody'); b0=$(pstats "$url_S" -H 'X-Scope-OrgID: nobody')
want="{\"dataIngested\":true,\"oldestProfileTime\":\"$((t1 * 1000))\",\"newestProfileTime\":\"$((t2 * 1000))\"}"
if [ "$codes" != " 200 200 200 200 200 200" ]; then fail profile-stats "pushes:$codes"
elif [ "$a" != "$want" ]; then fail profile-stats "ClickHouse (B) answers '$a', want '$want' (SQLite: '$b')"
else same profile-stats "$a; a tenant without data: $a0" "$a|$a0" "$b|$b0"; fi

# ---- limits: the same 429s as SQLite, from ClickHouse's counts (any server) ----------------------
cat >"$TMPDIR/lim.json" <<'EOF'
{ "limits": { "max_label_values_per_name": 2, "max_series_per_tenant": 3, "max_stacks": 3, "max_query_profiles": 3 } }
EOF
lurl="clickhouse://127.0.0.1:${ch_http[1]},127.0.0.1:${ch_http[2]}/lim?cluster=strobe"
ch_strobe C "$TMPDIR/c" --store "$lurl" --config "$TMPDIR/lim.json"
ch_strobe D "$TMPDIR/d" --store "$lurl" --config "$TMPDIR/lim.json"
l1=$(push "$url_C" "$TMPDIR/sl0.folded" "service_name=h1&time=now-1m")
l2=$(push "$url_D" "$TMPDIR/sl0.folded" "service_name=h2&time=now-1m")
l3=$(push "$url_C" "$TMPDIR/sl0.folded" "service_name=h3&time=now-1m"); b3=$(cat "$TMPDIR/push.out")
l4=$(push "$url_D" "$TMPDIR/sl0.folded" "service_name=h3&time=now-1m")
l5=$(push "$url_D" "$TMPDIR/sl0.folded" "service_name=h1&time=now-30s")
l6=$(push "$url_C" "$TMPDIR/sl0.folded" "service_name=h2&labels=%7Benv%3D%22a%22%7D&time=now-1m")
l7=$(push "$url_D" "$TMPDIR/sl0.folded" "service_name=h2&labels=%7Benv%3D%22b%22%7D&time=now-1m"); b7=$(cat "$TMPDIR/push.out")
h3=$(q "$url_C" label/service_name/values -d from=now-10m)
if [ "$l1 $l2 $l3 $l4 $l5" != "200 200 429 429 200" ]; then fail limits "service h1 (C), h2 (D), h3 (C), h3 (D), h1 again (D): $l1 $l2 $l3 $l4 $l5, want 200 200 429 429 200 ($b3)"
elif ! grep -q "limit max_label_values_per_name: label service_name has 2 values in tenant 'anonymous', at most 2" <<<"$b3"; then fail limits "the 429 does not name the limit and label: $b3"
elif [ "$h3" != '{"data":["h1","h2"]}' ]; then fail limits "the refused pushes left something: service names $h3"
elif [ "$l6 $l7" != "200 429" ] || ! grep -q "limit max_series_per_tenant: tenant 'anonymous' has 3 series already" <<<"$b7"; then fail limits "a 3rd series $l6, a 4th $l7 ($b7), want 200 429 naming max_series_per_tenant"
else ok limits "label values: 200 200 429 429 200, series: $l6 $l7, through two servers"; fi
printf 'main;x 1\nmain;y 1\n' >"$TMPDIR/two.folded"
l8=$(push "$url_C" "$TMPDIR/two.folded" "service_name=h1&time=now-1m"); b8=$(cat "$TMPDIR/push.out")
q4=$(curl -s -o "$TMPDIR/q4" -w '%{http_code}' -G "$url_D/api/v1/query" --data-urlencode "query=$SM{service_name=~\"h.*\"}" -d format=folded -d from=now-10m)
q2=$(curl -s -o /dev/null -w '%{http_code}' -G "$url_D/api/v1/query" --data-urlencode "query=$SM{service_name=\"h2\"}" -d format=folded -d from=now-10m)
if [ "$l8" != 429 ] || ! grep -q 'limit max_stacks: the store holds 4 distinct stacks, at most 3' <<<"$b8"; then fail limits-stacks "a push of 2 new stacks to a store of 2 (max 3): $l8 $b8"
else ok limits-stacks "$b8"; fi
if [ "$q4 $q2" != "429 200" ] || ! grep -q 'limit max_query_profiles' "$TMPDIR/q4"; then fail limits-query "4 stored profiles: $q4 ($(cat "$TMPDIR/q4")), 2: $q2; want 429 naming max_query_profiles, then 200"
else ok limits-query "$(cat "$TMPDIR/q4")"; fi

# ---- symbol garbage collection: retention drops a day, its symbols go too -------------------------
# E (database gc, no retention yet) stores a profile 3 days old and one of a minute ago, which
# share main and shared; started again with --retention 1d, its retention (at start) drops the
# old day's partition and the collection deletes the symbols only the old points used.
gurl="clickhouse://127.0.0.1:${ch_http[1]},127.0.0.1:${ch_http[2]}/gc?cluster=strobe"
printf 'main;old_fn;old_leaf 5\nmain;shared 1\n' >"$TMPDIR/old.folded"
printf 'main;new_fn 3\nmain;shared 1\n' >"$TMPDIR/new.folded"
ch_strobe E "$TMPDIR/e" --store "$gurl"
g1=$(push "$url_E" "$TMPDIR/old.folded" "service_name=gc&time=now-3d") g2=$(push "$url_E" "$TMPDIR/new.folded" "service_name=gc&time=now-1m")
gsym() { ch_sql 1 "SELECT (SELECT uniqExact(id) FROM gc.functions), (SELECT uniqExact(id) FROM gc.locations), (SELECT uniqExact(id) FROM gc.stacks), (SELECT count() FROM gc.functions WHERE name LIKE 'old%')" | tr '\t' ' '; }
gb=$(gsym)
kill -9 "$pid_E"; wait "$pid_E" 2>/dev/null
ch_strobe E "$TMPDIR/e" --store "$gurl" --retention 1d
gdone() { [ "$(gsym)" = "3 3 3 0" ]; }
gf=$(q "$url_E" query --data-urlencode "query=$SM{service_name=\"gc\"}" -d format=folded -d from=now-10m | sort | tr '\n' ' ')
end=$((SECONDS + 30)); until gdone || [ $SECONDS -ge $end ]; do sleep 0.2; done
ga=$(gsym)
gf2=$(q "$url_E" query --data-urlencode "query=$SM{service_name=\"gc\"}" -d format=folded -d from=now-10m | sort | tr '\n' ' ')
# before: 5 functions (main old_fn old_leaf shared new_fn), as many locations, and 5 stacks (every
# node: main, main;old_fn, ...); after: main, shared, new_fn and the stacks main (an ancestor of a
# live one, kept), main;shared, main;new_fn. The kept profile answers the same before and after.
if [ "$g1 $g2" != "200 200" ]; then fail symbol-gc "pushes $g1 $g2"
elif [ "$ga" != "3 3 3 0" ] || [ "$gf" != "$gf2" ] || [ "$gf" != "main;new_fn 3 main;shared 1 " ]; then fail symbol-gc "functions, locations, stacks, old functions: before '$gb', after '$ga' (want 3 3 3 0); the kept profile '$gf' then '$gf2'"
else ok symbol-gc "functions, locations, stacks, old functions: $gb before the retention drop, $ga after; the kept profile answers '$gf' before and after"; fi

# ---- kill -9 of a strobe server in the middle of ingest ----------------------------------------
one=$(folded "$url_B" "$CPU{service_name=\"api\",env=\"prod\"}" | total)
: >"$TMPDIR/acked"
( for i in $(seq 1 60); do
    c=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$F/go_cpu.pb.gz" "$url_A/api/v1/push?service_name=k9&time=now-30s")
    [ "$c" = 200 ] && echo "$i" >>"$TMPDIR/acked"
  done ) &
loop=$!
for ((i = 0; i < 600; i++)); do [ "$(wc -l <"$TMPDIR/acked")" -ge 5 ] && break; sleep 0.05; done
kill -9 "$pid_A"; wait "$loop" 2>/dev/null
acked=$(wc -l <"$TMPDIR/acked")
got=$(folded "$url_B" "$CPU{service_name=\"k9\"}" | total)
if [ "$acked" -ge 5 ] && [ "$got" -ge $((acked * one)) ] && [ "$got" -le $(((acked + 1) * one)) ]; then
  ok kill9-acked "$acked acknowledged pushes of $one ns each, $got ns queryable"
else fail kill9-acked "$acked acknowledged pushes of $one ns: want $((acked * one)) (one more at most), got '$got'"; fi
ch_strobe A "$TMPDIR/a" --store "$(ch_url 1 2)"

# ---- one shard stopped ---------------------------------------------------------------------------
# Which services' series live on shard 2 (and which on 1): asked of each shard's own tables.
on2=$(ch_sql 2 "SELECT DISTINCT values[indexOf(names, 'service_name')] FROM strobe.series_l WHERE has(names, 'service_name') AND NOT has(names, 'env') ORDER BY 1" | head -1)
on1=$(ch_sql 1 "SELECT DISTINCT values[indexOf(names, 'service_name')] FROM strobe.series_l WHERE has(names, 'service_name') AND NOT has(names, 'env') ORDER BY 1" | head -1)
before=$(folded "$url_A" "$CPU{service_name=\"$on2\"}" | total)
ch_stop 2
c2=$(push "$url_A" "$F/go_cpu.pb.gz" "service_name=$on2&time=now-30s"); r2=$(cat "$TMPDIR/push.out")
c1=$(push "$url_A" "$F/go_cpu.pb.gz" "service_name=$on1&time=now-30s")
if [ "$c2" = 503 ] && grep -q clickhouse <<<"$r2" && [ "$c1" = 200 ]; then
  ok shard-down "push for '$on2' (shard 2) $c2, for '$on1' (shard 1) $c1"
else fail shard-down "push for '$on2' (shard 2) $c2 ($r2), for '$on1' (shard 1) $c1"; fi
if ch_restart 2; then
  mid=$(folded "$url_A" "$CPU{service_name=\"$on2\"}" | total)
  c=$(push "$url_A" "$F/go_cpu.pb.gz" "service_name=$on2&time=now-30s")
  after=$(folded "$url_A" "$CPU{service_name=\"$on2\"}" | total)
  if [ "$mid" = "$before" ] && [ "$c" = 200 ] && [ "$after" = $((before + one)) ]; then
    ok shard-back "nothing of the 503 push stored ($mid ns before and after it); then $c and $after ns"
  else fail shard-back "before $before, after the 503 push '$mid', push again $c, then '$after' (want $((before + one)))"; fi
else fail shard-back "shard 2 did not start again: $ch_why"; fi
exit $st
