#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent against a server that says "not now": a Go stub of the push API
# (tests/e2e/lib/pushstub.go) answers 429 with `Retry-After: 3`, then 503 with a Retry-After
# HTTP date 3 s ahead, then 200, and logs every push it gets with its own clock. The agent
# profiles cpu_split (-p, one profile a second) into its memory spool.
#   wait       from the stub's log: no push came before the time the previous answer's
#              Retry-After allowed (at least 3 answers of each form are judged)
#   status     meanwhile /status says the agent backs off because the server asked
#              (push.backoff_reason "retry-after", push.retry_after counts the answers) and
#              /metrics has strobe_agent_push_retry_after_total and _backoff_retry_after 1;
#              the profiles wait in the spool (more than one at a time), none dropped
#   delivered  once the stub answers 200, every profile the agent exported arrives: the stub's
#              distinct 200 bodies = export.profiles = push.pushed, spool empty, 0 dropped
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_retry_after cpu_split
command -v go >/dev/null || { echo "SKIP agent_retry_after: needs go (golang-go)"; exit 0; }
kill_at_exit apid spid wpid
here=$(cd "$(dirname "$0")" && pwd)
RA=3

mkdir -p "$TMPDIR/go"
cp "$here/lib/pushstub.go" "$TMPDIR/go/main.go"
if ! (cd "$TMPDIR/go" && GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOFLAGS= \
	GOCACHE="$TMPDIR/gocache" go build -o pushstub main.go) >"$TMPDIR/gobuild.log" 2>&1; then
	fail agent_retry_after/build "go build: $(head -3 "$TMPDIR/gobuild.log" | tr '\n' ' ')"; exit 1
fi
"$TMPDIR/go/pushstub" "$TMPDIR/pushes" >"$TMPDIR/stubport" 2>"$TMPDIR/stub.err" & spid=$!
for _ in $(seq 200); do [ -s "$TMPDIR/stubport" ] && break; sleep 0.05; done
url=http://127.0.0.1:$(head -1 "$TMPDIR/stubport")
if ! curl -sf "$url/ready" >/dev/null; then
	fail agent_retry_after/start "the push stub did not come up: $(head -3 "$TMPDIR/stub.err" | tr '\n' ' ')"; exit 1
fi
mode() { curl -sf -X POST "$url/mode?$1" >/dev/null || { fail agent_retry_after/mode "stub refused mode $1"; exit 1; }; }
count() { awk -v s="$1" '$2 == s' "$TMPDIR/pushes" | wc -l; }
wait_count() { # STATUS N: until the stub has answered N pushes with STATUS (60 s at most)
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sample_status
		sleep 0.2
	done
	return 1
}
maxitems=0 reasons="" ra_seen=0 metric_ra=0 metric_flag=0
sample_status() { # what /status and /metrics say while the agent backs off
	local s it r m
	s=$(curl -sf "$admin/status") || return
	it=$(jqpath spool.items <<<"$s"); r=$(jqpath push.backoff_reason <<<"$s")
	[ "${it:-0}" -gt "$maxitems" ] && maxitems=$it
	[ -n "$r" ] && [[ " $reasons " != *" $r "* ]] && reasons+="$r "
	ra_seen=$(jqpath push.retry_after <<<"$s")
	m=$(curl -sf "$admin/metrics")
	metric_ra=$(awk '$1 == "strobe_agent_push_retry_after_total" { print $2 }' <<<"$m")
	[ "$(awk '$1 == "strobe_agent_push_backoff_retry_after" { print $2 }' <<<"$m")" = 1 ] && metric_flag=1
}

mode "status=429&retry=$RA"
STROBE_SERVICE=retry_after "$WL/cpu_split" 120 & wpid=$!
start_agent "$TMPDIR/agent.log" -F 49 -i 1 --pid "$wpid" --max-cpu 100
wait_count 429 4 || { fail agent_retry_after/wait "the stub got only $(count 429) pushes in 60 s: $(tail -3 "$TMPDIR/agent.log" | tr '\n' ' ')"; exit 1; }
mode "status=503&date=$RA"
wait_count 503 4 || { fail agent_retry_after/wait "the stub got only $(count 503) pushes answered 503: $(tail -3 "$TMPDIR/agent.log" | tr '\n' ' ')"; exit 1; }
mode status=200
for _ in $(seq 150); do
	[ "$(status_field spool.items)" = 0 ] && break
	sleep 0.2
done
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
prev=-1 stable=0
for _ in $(seq 100); do # until nothing more is exported for 2 s and the spool is empty
	p=$(status_field export.profiles); it=$(status_field spool.items)
	if [ "$it" = 0 ] && [ "$p" = "$prev" ]; then
		stable=$((stable + 1)); [ $stable -ge 10 ] && break
	else
		stable=0
	fi
	prev=$p
	sleep 0.2
done

name=agent_retry_after/wait
# each line: time, status, earliest next (0: no Retry-After); judge every answer with one
verdict=$(awk '
	NR > 1 && prev_earliest > 0 {
		n[prev_status]++
		margin = ($1 - prev_earliest) / 1e6
		if (margin < 0) { bad++; if (!first) first = sprintf("push at %s ns came %.0f ms before the %s answer'"'"'s Retry-After allowed", $1, -margin, prev_status) }
		if (min == "" || margin < min) min = margin
	}
	{ prev_status = $2; prev_earliest = $3 }
	END { printf "%d %d %d %.0f %s\n", bad, n[429], n[503], min, first }' "$TMPDIR/pushes")
read -r bad n429 n503 minms why <<<"$verdict"
if [ "$bad" != 0 ]; then
	fail "$name" "$bad of $((n429 + n503)) pushes too early: $why"
elif [ "$n429" -lt 3 ] || [ "$n503" -lt 3 ]; then
	fail "$name" "only $n429 Retry-After seconds and $n503 Retry-After dates were judged (want 3 each)"
else
	ok "$name" "$n429 pushes after a 429 with Retry-After: $RA and $n503 after a 503 with a date $RA s ahead: none early, the closest ${minms} ms after the allowed time"
fi

name=agent_retry_after/status
dropped=$(status_field spool.dropped)
if [[ " $reasons " != *" retry-after "* ]]; then
	fail "$name" "/status never said push.backoff_reason=retry-after (saw: '${reasons% }')"
elif ! [ "${ra_seen:-0}" -ge 6 ] 2>/dev/null || ! [ "${metric_ra:-0}" -ge 6 ] 2>/dev/null || [ "$metric_flag" != 1 ]; then
	fail "$name" "/status push.retry_after=${ra_seen:-?}, /metrics strobe_agent_push_retry_after_total=${metric_ra:-?} (want >= 6), backoff_retry_after seen 1: $metric_flag"
elif ! [ "$maxitems" -gt 1 ] || [ "$dropped" != 0 ]; then
	fail "$name" "the spool held at most $maxitems profiles while the server deferred, $dropped dropped"
else
	ok "$name" "reason retry-after, $ra_seen answers counted (/metrics $metric_ra), up to $maxitems profiles waited in the spool, 0 dropped"
fi

name=agent_retry_after/delivered
exported=$(status_field export.profiles); pushed=$(status_field push.pushed); left=$(status_field spool.items)
got=$(awk '$2 == 200 { print $4 }' "$TMPDIR/pushes" | sort -u | wc -l)
dups=$(( $(count 200) - got ))
if [ "$left" != 0 ] || [ "$stable" -lt 10 ]; then
	fail "$name" "the spool did not empty after the stub answered 200: $left left"
elif [ "$got" != "$exported" ] || [ "$pushed" != "$exported" ]; then
	fail "$name" "the agent exported $exported profiles and counts $pushed pushed; the stub got $got distinct"
else
	ok "$name" "all $exported profiles arrived ($dups sent twice), $(status_field spool.dropped) dropped"
fi
stop_agent
exit "${st:-0}"
