#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Span-scoped profiles and exemplars against the real server. Known data: three profiles of one
# service pushed with their own sample labels (span A with trace T, span B with trace T, and one
# without a span), then:
#   span-one, span-list, trace   /api/v1/query?span_id=A, span_id=A,B, trace_id=T: exactly
#                                those profiles' stacks and totals
#   span-scan-agrees             the same span selected by a regex the index cannot answer (the
#                                scan) gives the same profile
#   span-bad-id                  a bad ID is a 400 naming the parameter
#   cli-span                     `strobe query --span A` prints A's stacks only
#   exemplars                    /api/v1/range?exemplars=2: the heaviest profiles of the step,
#                                heaviest first, with their span IDs
#   profile-id, profile-id-other-tenant  the flame graph of one exemplar by its id; another
#                                tenant's id is a 404
#   backfill                     a database from before the index (its table dropped) gets it
#                                filled at open: span queries still find the old points
set -u
for t in curl jq sqlite3; do
  command -v $t >/dev/null || { echo "SKIP server_spans: $t is not installed"; exit 0; }
done
st=0
fail() { echo "FAIL server_spans/$1: $2"; st=1; }
ok() { echo "ok server_spans/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
T=$TMPDIR
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server
CPU='process_cpu:samples:count:samples:count'
A=9a517183f26a089d B=00000000000000bb TR=4bf92f3577b34da6a3ce929d0e0e4736
printf 'main;handle;parse 10\nmain;handle;render 5\n' >"$T/a.txt"
printf 'main;work 7\n' >"$T/b.txt"
printf 'main;idle 40\n' >"$T/c.txt"
for f in a b c; do
  "$STROBE" convert -f pprof -o "$T/$f.pb.gz" "$T/$f.txt" || { echo "FAIL server_spans/setup: convert"; exit 1; }
done
now=$(date +%s)
push() { # FILE SAMPLE_LABELS [TENANT]
  local code
  code=$(curl -s -o "$T/pr" -w '%{http_code}' --data-binary @"$T/$1.pb.gz" -H "X-Scope-OrgID: ${3:-anonymous}" \
    --url-query service_name=spans --url-query name=process_cpu --url-query "from=$now" \
    ${2:+--url-query "sample_labels=$2"} "$url/api/v1/push")
  [ "$code" = 200 ] || fail setup "push $1: HTTP $code $(cat "$T/pr")"
}
push a "{span_id=\"$A\",trace_id=\"$TR\"}"
push b "{span_id=\"$B\",trace_id=\"$TR\"}"
push c ""
W="--url-query from=$((now - 60)) --url-query to=$((now + 60))"
q() { # extra query args...: folded answer into $T/q, code in $code
  code=$(curl -s -o "$T/q" -w '%{http_code}' -G --url-query "query=$CPU{service_name=\"spans\"}" $W \
    --url-query format=folded "$@" "$url/api/v1/query")
}
tot() { awk '{s += $NF} END {print s + 0}' "$T/q"; }

q --url-query "span_id=$A"
[ "$code" = 200 ] && [ "$(tot)" = 15 ] && ! grep -q 'work\|idle' "$T/q" && ok span-one "$(tot)" ||
  fail span-one "HTTP $code: $(head -c 300 "$T/q")"
q --url-query "span_id=$A,$B"
[ "$code" = 200 ] && [ "$(tot)" = 22 ] && ! grep -q idle "$T/q" && ok span-list "$(tot)" ||
  fail span-list "HTTP $code: $(head -c 300 "$T/q")"
q --url-query "trace_id=$TR"
[ "$code" = 200 ] && [ "$(tot)" = 22 ] && ok trace "$(tot)" || fail trace "HTTP $code: $(head -c 300 "$T/q")"
sort "$T/q" >"$T/idx"
code=$(curl -s -o "$T/q" -w '%{http_code}' -G --url-query "query=$CPU{service_name=\"spans\",span_id=~\"(${A}|${B}).*\"}" \
  $W --url-query format=folded "$url/api/v1/query")
sort "$T/q" >"$T/scan"
[ "$code" = 200 ] && [ -s "$T/scan" ] && cmp -s "$T/idx" "$T/scan" && ok span-scan-agrees ||
  fail span-scan-agrees "HTTP $code: index $(tr '\n' ' ' <"$T/idx") scan $(tr '\n' ' ' <"$T/scan")"
q --url-query 'span_id=a"b'
[ "$code" = 400 ] && grep -q span_id "$T/q" && ok span-bad-id "$(head -c 120 "$T/q")" ||
  fail span-bad-id "HTTP $code: $(head -c 200 "$T/q")"
"$STROBE" query --server "$url" --from $((now - 60)) --to $((now + 60)) -f folded --span "$B" \
  "$CPU{service_name=\"spans\"}" >"$T/cli" 2>"$T/cli.err"
[ "$(cat "$T/cli")" = "main;work 7" ] && ok cli-span || fail cli-span "$(head -c 300 "$T/cli") $(head -c 300 "$T/cli.err")"

# ---- exemplars ----------------------------------------------------------------------------------
code=$(curl -s -o "$T/r" -w '%{http_code}' -G --url-query "query=$CPU{service_name=\"spans\"}" $W \
  --url-query step=120s --url-query exemplars=2 "$url/api/v1/range")
v=$(jq -c '[.exemplars[].profiles[] | [.value, (.span_id // "")]]' "$T/r" 2>/dev/null)
[ "$code" = 200 ] && [ "$v" = "[[40,\"\"],[15,\"$A\"]]" ] && ok exemplars "$v" || fail exemplars "HTTP $code: $v $(head -c 300 "$T/r")"
id=$(jq -r '.exemplars[0].profiles[1].id' "$T/r" 2>/dev/null)
q --url-query "profile_id=$id"
[ "$code" = 200 ] && [ "$(tot)" = 15 ] && grep -q parse "$T/q" && ok profile-id "id $id: $(tot)" ||
  fail profile-id "HTTP $code: $(head -c 300 "$T/q")"
code=$(curl -s -o "$T/q" -w '%{http_code}' -G -H 'X-Scope-OrgID: other' --url-query "query=$CPU{}" $W \
  --url-query "profile_id=$id" "$url/api/v1/query")
[ "$code" = 404 ] && ok profile-id-other-tenant || fail profile-id-other-tenant "HTTP $code: $(head -c 200 "$T/q")"
q --url-query "profile_id=x"
[ "$code" = 400 ] && grep -q profile_id "$T/q" && ok profile-id-bad || fail profile-id-bad "HTTP $code"

# ---- a database from before the index -----------------------------------------------------------
if [ -n "${STROBE_TEST_CLICKHOUSE:-}" ]; then
  echo "SKIP server_spans/backfill: on the ClickHouse store: it drops the SQLite store's span_index table, which ClickHouse has no counterpart of"
  exit $st
fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=
sqlite3 "$T/data/strobe.db" 'DROP TABLE span_index;' || fail backfill "cannot drop the table"
launch_server "$STROBE" "$T/data" || { fail backfill "server did not come back: $(head -5 "$T/log")"; exit 1; }
q --url-query "span_id=$A"
n=$(sqlite3 "$T/data/strobe.db" 'SELECT count(*) FROM span_index' 2>/dev/null)
[ "$code" = 200 ] && [ "$(tot)" = 15 ] && [ "$n" = 4 ] && ok backfill "$n index rows" ||
  fail backfill "HTTP $code, $n index rows: $(head -c 300 "$T/q")"
exit $st
