#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe on replicated ClickHouse (store URL replicated=1: ReplicatedMergeTree and friends, kept
# by ZooKeeper; docs/clickhouse.md "Replicas"): one ZooKeeper (lib/zookeeper.sh) and two
# clickhouse-servers as two replicas of ONE shard, on free loopback ports in TMPDIR, and two
# strobe servers, A on replica 1 and B on replica 2.
#   - replicated: pushes to A are in replica 2's own tables (points, roll-ups), and B answers
#     the same profiles, labels and roll-ups as A;
#   - replica-down: replica 1 killed (-9), pushes through B still answer 200 and are queryable
#     through B;
#   - catch-up: replica 1 started again fetches what it missed: its own tables reach replica
#     2's counts (polled with a deadline), and a query through A (on replica 1) then sees the
#     pushes made while it was down.
# No ZooKeeper or clickhouse-server, or one that cannot start: SKIP (FAIL under CI=true).
set -u
name=server_clickhouse_replicas
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
# shellcheck source=lib/clickhouse.sh
. "$(dirname "$0")/lib/clickhouse.sh"
# shellcheck source=lib/zookeeper.sh
. "$(dirname "$0")/lib/zookeeper.sh"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
unset STROBE_TEST_CLICKHOUSE # this test names its own stores
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pids=()
pid=
trap 'for p in "${pids[@]}" $pid; do kill -9 $p 2>/dev/null; done; zk_stop; ch_cleanup' EXIT
declare -a ch_pid ch_http ch_tcp ch_inter
skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL $name: CI=true but $1"; exit 1; fi
  echo "SKIP $name: $1"; exit 0
}
rm -rf "$TMPDIR/a" "$TMPDIR/b"
command -v clickhouse-server >/dev/null || skip "clickhouse-server is not installed (scripts/deps.sh check)"
zk_start || skip "$zk_why"
ch_zk_port=$zk_port
ch_start 2 || skip "$ch_why"
F=$GOPROF
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

ch_strobe A "$TMPDIR/a" --store "clickhouse://127.0.0.1:${ch_http[1]}/strobe?cluster=strobe&replicated=1"
ch_strobe B "$TMPDIR/b" --store "clickhouse://127.0.0.1:${ch_http[2]}/strobe?cluster=strobe&replicated=1"

push() { curl -s -o "$TMPDIR/push.out" -w '%{http_code}' --data-binary @"$F/go_cpu.pb.gz" "$1/api/v1/push?$2"; }
q() { curl -s -G "$1/api/v1/$2" "${@:3}"; }
folded() { q "$1" query --data-urlencode "query=$2" -d format=folded -d from=now-10m -d to=now | sort; }
total() { awk '{ t += $NF } END { printf "%.0f", t }'; }
cnt() { ch_sql "$1" "SELECT count() FROM strobe.$2"; }
# until COND (a command) holds, or DEADLINE seconds
until_ok() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done; }

# ---- pushes to A (replica 1) reach replica 2 ------------------------------------------------------
codes=
for s in api web db; do codes+=" $(push "$url_A" "service_name=$s&time=now-2m")"; done
one=$(folded "$url_A" "$CPU{service_name=\"api\"}" | total)
# the roll-ups' total, not their rows: SummingMergeTree's merges fold rows, on each replica
# at its own pace
R1M='SELECT sum(arraySum(stacksMap.value)) FROM strobe.`.inner.points_1m_l`'
n1=$(cnt 1 points_l) n1m=$(ch_sql 1 "$R1M") # replica 1 (A's) has its pushes once they are 200
r2() { [ "$(cnt 2 points_l)" = "$n1" ] && [ "$(ch_sql 2 "$R1M")" = "$n1m" ]; }
if [ "$codes" != " 200 200 200" ] || [ "${one:-0}" -le 0 ]; then fail replicated "pushes to A:$codes ($(cat "$TMPDIR/push.out")), api total '$one'"
elif [ "${n1:-0}" -lt 3 ]; then fail replicated "replica 1 has '$n1' point rows after 3 pushes through A"
elif ! until_ok 30 r2; then fail replicated "replica 2 has $(cnt 2 points_l) point rows and $(ch_sql 2 "$R1M") roll-up total after 30 s; replica 1 has $n1 and $n1m"
else
  a=$(folded "$url_A" "$CPU{service_name=~\"api|web|db\"}"); b=$(folded "$url_B" "$CPU{service_name=~\"api|web|db\"}")
  la=$(q "$url_A" label/service_name/values -d from=now-10m); lb=$(q "$url_B" label/service_name/values -d from=now-10m)
  m0=$(( $(date +%s) / 60 * 60 - 600 )) m1=$(( $(date +%s) / 60 * 60 + 120 ))
  ra=$(q "$url_A" query --data-urlencode "query=$CPU" -d format=folded -d from=$m0 -d to=$m1 | sort); rb=$(q "$url_B" query --data-urlencode "query=$CPU" -d format=folded -d from=$m0 -d to=$m1 | sort)
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(total <<<"$b")" = $((3 * one)) ] && [ "$la" = "$lb" ] && [ "$ra" = "$rb" ] && [ "$(total <<<"$rb")" = $((3 * one)) ]; then
    ok replicated "replica 2 holds replica 1's $n1 point rows and roll-up total $n1m; B answers as A: $(wc -l <<<"$b") stacks, total $(total <<<"$b") ns, labels $lb, roll-ups equal"
  else fail replicated "A and B differ: totals $(total <<<"$a") / $(total <<<"$b") (want $((3 * one))), labels $la / $lb, roll-up totals $(total <<<"$ra") / $(total <<<"$rb")"; fi
fi

# ---- replica 1 killed: B still ingests and answers -------------------------------------------------
ch_kill 1
codes=
for i in 1 2 3 4; do codes+=" $(push "$url_B" "service_name=down&time=now-1m")"; done
down_seen() { [ "$(folded "$url_B" "$CPU{service_name=\"down\"}" | total)" = $((4 * one)) ]; }
if [ "$codes" != " 200 200 200 200" ]; then fail replica-down "pushes through B with replica 1 killed:$codes ($(cat "$TMPDIR/push.out"))"
elif ! until_ok 20 down_seen; then fail replica-down "4 pushes acknowledged by B; B answers $(folded "$url_B" "$CPU{service_name=\"down\"}" | total) ns, want $((4 * one))"
else ok replica-down "replica 1 killed: 4 pushes through B 200, $((4 * one)) ns queryable through B"; fi

# ---- replica 1 back: it catches up -------------------------------------------------------------------
if ! ch_restart 1; then fail catch-up "replica 1 did not start again: $ch_why"
else
  t0=$SECONDS
  # the series rows too: each table is fetched on its own, and the check below reads the series
  nser() { ch_sql "$1" "SELECT uniqExact(series) FROM strobe.series_l"; }
  n2=$(cnt 2 points_l) n2m=$(ch_sql 2 "$R1M") n2s=$(nser 2)
  caught() { [ "$(cnt 1 points_l)" = "$n2" ] && [ "$(ch_sql 1 "$R1M")" = "$n2m" ] && [ "$(nser 1)" = "$n2s" ]; }
  if [ "$n2" -le "$n1" ]; then fail catch-up "replica 2 has $n2 point rows, no more than the $n1 before replica 1 was killed"
  elif ! until_ok 45 caught; then fail catch-up "replica 1 has $(cnt 1 points_l) point rows and $(ch_sql 1 "$R1M") roll-up total and $(nser 1) series after 45 s, want replica 2's $n2, $n2m and $n2s"
  else
    # A reads through the Distributed table, which may pick either replica: read replica 1's own
    dsum="SELECT sum(arraySum(values)) FROM strobe.points_l WHERE type = '$CPU' AND series IN (SELECT series FROM strobe.series_l WHERE has(values, 'down'))"
    got=$(ch_sql 1 "$dsum")
    viaA=$(folded "$url_A" "$CPU{service_name=\"down\"}" | total)
    if [ "$got" = $((4 * one)) ] && [ "$viaA" = $((4 * one)) ]; then ok catch-up "replica 1 fetched the 4 pushes it missed in $((SECONDS - t0)) s or less: its own tables hold $got ns; A answers $viaA ns"
    else fail catch-up "replica 1's own tables hold '$got' ns of service 'down', A answers '$viaA', want $((4 * one))"; fi
  fi
fi
exit $st
