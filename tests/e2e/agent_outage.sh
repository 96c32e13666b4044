#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent through a server outage. A steady workload (cpu_split, service "outage") runs
# while the server is stopped for OUTAGE_SECONDS (30 by default) and started again on the same
# data directory and port:
#   during   the agent keeps sampling, its pushes fail, the spool fills; /status says so
#   window   afterwards the store has the outage window: a range query with 6 s steps over it
#            (three export intervals each, so that the intervals' jitter on a loaded machine
#            cannot leave a step empty) has data in every step
#   drops    a second agent, restricted to the workload's pid with a 4 KiB spool, has to drop
#            profiles during the same outage: oldest first, counted in /status and /metrics
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_outage cpu_split
OUT=${OUTAGE_SECONDS:-30}
kill_at_exit apid apid2 pid wpid
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'

start_server
port=${url##*:}
STROBE_SERVICE=outage "$WL/cpu_split" $((OUT + 40)) & wpid=$!
start_agent "$TMPDIR/agent.log" -F 49 -i 2 --spool "$TMPDIR/spool" --comm '^cpu_split$' --max-cpu 100
a1=$admin apid1=$apid
start_agent "$TMPDIR/agent2.log" -F 49 -i 1 --pid "$wpid" --spool "$TMPDIR/spool2" --spool-max 4096 --label agent=small --max-cpu 100
a2=$admin apid2=$apid apid=$apid1
sleep 8

# ---- the outage ------------------------------------------------------------------------------
t_down=$(date +%s)
kill -TERM "$pid"; wait "$pid"; pid=
sleep "$OUT"
admin=$a1
failed=$(status_field push.failed); items=$(status_field spool.items)
admin=$a2
dropped=$(status_field spool.dropped); items2=$(status_field spool.items); bytes2=$(status_field spool.bytes)
t_up=$(date +%s)
"$STROBE" server --data "$TMPDIR/data" --listen "127.0.0.1:$port" 2>"$TMPDIR/log2" & pid=$!
for _ in $(seq 200); do curl -sf "$url/ready" >/dev/null && break; sleep 0.05; done

name=agent_outage/during
if ! [ "${failed:-0}" -gt 0 ] 2>/dev/null || ! [ "${items:-0}" -gt 0 ] 2>/dev/null; then
	fail "$name" "after $OUT s without a server, /status says push.failed=${failed:-?} spool.items=${items:-?} (want both > 0)"
else
	ok "$name" "$failed failed pushes, $items profiles spooled"
fi

# the spool drains once the server is back (the backoff is at most 30 s)
admin=$a1
for _ in $(seq 120); do
	[ "$(status_field spool.items)" = 0 ] && break
	sleep 0.5
done
sleep 4 # one more interval after the workload's last outage profile
name=agent_outage/window
left=$(status_field spool.items)
from=$((t_down + 2)) to=$((t_up - 2))
r=$(curl -s -G "$url/api/v1/range" --data-urlencode "query=$CPU{service_name=\"outage\",agent!=\"small\"}" \
	--data-urlencode "from=$from" --data-urlencode "to=$to" --data-urlencode step=6s)
steps=$(( (to - from) / 6 ))
have=$(grep -o '\[[0-9]*, *[0-9.e+]*\]' <<<"$r" | awk -F'[][, ]+' '$3 > 0' | wc -l)
if [ "${left:-1}" != 0 ]; then
	fail "$name" "the spool still holds $left profiles after the server came back: $(tail -3 "$TMPDIR/agent.log" | tr '\n' ' ')"
elif ! [ "$have" -ge "$steps" ]; then
	fail "$name" "only $have of $steps 6 s steps of the outage window [$from, $to) have data: $r"
else
	ok "$name" "$have of $steps 6 s steps of the $OUT s outage have data"
fi

name=agent_outage/drops
admin=$a2
metric=$(curl -s "$admin/metrics" | awk '$1 == "strobe_agent_spool_dropped_total" { print $2 }')
if ! [ "${dropped:-0}" -gt 0 ] 2>/dev/null; then
	fail "$name" "a 4 KiB spool through a $OUT s outage at 1 profile/s dropped nothing (spool.dropped=${dropped:-?}, items ${items2:-?})"
elif ! [ "${metric:-0}" -ge "$dropped" ] 2>/dev/null; then
	fail "$name" "/metrics strobe_agent_spool_dropped_total=${metric:-?} < /status spool.dropped=$dropped"
elif ! [ "${bytes2:-99999}" -le 4096 ] 2>/dev/null; then
	fail "$name" "$items2 profiles of $bytes2 bytes in a 4 KiB spool"
else
	ok "$name" "$dropped dropped (oldest first), $items2 kept ($bytes2 bytes), /metrics $metric"
fi
kill -TERM "$apid" "$apid2" 2>/dev/null; wait "$apid" "$apid2" 2>/dev/null; apid= apid2=
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit $st
