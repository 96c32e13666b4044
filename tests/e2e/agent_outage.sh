#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent through a server outage. A steady workload (cpu_split, service "outage") runs
# while the server is stopped for OUTAGE_SECONDS (30 by default; `make soak` runs 600) and
# started again on the same data directory and port:
#   during     the agent keeps sampling, its pushes fail, the spool fills; /status says so. The
#              line reports both agents' CPU (from /proc/PID/stat, over the outage) and RSS.
#   window     afterwards the store has the outage window: a range query with 6 s steps over it
#              (three export intervals each, so that the intervals' jitter on a loaded machine
#              cannot leave a step empty) has data in every step
#   drops      a second agent, restricted to the workload's pid with a 4 KiB spool, has to drop
#              profiles during the same outage: oldest first, counted in /status and /metrics
#   accounting once the workload is gone and that agent's spool is empty, every profile it
#              exported is either in the store or counted as dropped: exported = stored +
#              dropped (+ rejected, 0). The store is counted by a range query in steps far
#              shorter than its 1 s interval, so each stored profile is one non-empty step.
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_outage cpu_split
OUT=${OUTAGE_SECONDS:-30}
kill_at_exit apid apid2 pid wpid
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
HZ_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null; }
kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status" 2>/dev/null; }

t_start=$(date +%s)
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
c1a=$(cpu_ticks "$apid") c2a=$(cpu_ticks "$apid2")
sleep "$OUT"
c1b=$(cpu_ticks "$apid") c2b=$(cpu_ticks "$apid2")
admin=$a1
failed=$(status_field push.failed); items=$(status_field spool.items); sbytes=$(status_field spool.bytes)
admin=$a2
dropped=$(status_field spool.dropped); items2=$(status_field spool.items); bytes2=$(status_field spool.bytes)
t_up=$(date +%s)
res() { # PID CPU0 CPU1: "CPU % of a core over the outage, RSS now, peak RSS"
	awk -v a="$2" -v b="$3" -v hz="$HZ_TCK" -v s="$OUT" -v rss="$(kib "$1" VmRSS)" -v hwm="$(kib "$1" VmHWM)" \
		'BEGIN { printf "CPU %.2f s = %.2f %% of a core, RSS %.1f MB (peak %.1f MB)", (b - a) / hz, 100 * (b - a) / hz / s, rss / 1024, hwm / 1024 }'
}
r1=$(res "$apid" "$c1a" "$c1b") r2=$(res "$apid2" "$c2a" "$c2b")
"$STROBE" server --data "$TMPDIR/data" --listen "127.0.0.1:$port" 2>"$TMPDIR/log2" & pid=$!
for _ in $(seq 200); do curl -sf "$url/ready" >/dev/null && break; sleep 0.05; done

name=agent_outage/during
if ! [ "${failed:-0}" -gt 0 ] 2>/dev/null || ! [ "${items:-0}" -gt 0 ] 2>/dev/null; then
	fail "$name" "after $OUT s without a server, /status says push.failed=${failed:-?} spool.items=${items:-?} (want both > 0)"
else
	ok "$name" "$OUT s: $failed failed pushes, $items profiles spooled ($sbytes bytes); agent: $r1; small-spool agent: $r2"
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
	ok "$name" "$have of $steps 6 s steps of the $OUT s outage have data, $(status_field push.pushed) profiles pushed in all"
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

# ---- accounting: what the small agent exported, against what the store holds -----------------
name=agent_outage/accounting
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
admin=$a2
prev=-1 stable=0
for _ in $(seq 120); do # until its spool is empty and nothing more is exported for 3 s
	p=$(status_field export.profiles); it=$(status_field spool.items)
	if [ "$it" = 0 ] && [ "$p" = "$prev" ]; then
		stable=$((stable + 1)); [ $stable -ge 6 ] && break
	else
		stable=0
	fi
	prev=$p
	sleep 0.5
done
exported=$(status_field export.profiles); dropped=$(status_field spool.dropped)
rejected=$(status_field push.rejected); corrupt=$(status_field spool.corrupt); left=$(status_field spool.items)
t_end=$(date +%s)
from=$((t_start - 5)) to=$((t_end + 5))
step=$(( (to - from) * 1000 / 10000 )); [ $step -lt 100 ] && step=100
r=$(curl -s -G "$url/api/v1/range" --data-urlencode "query=$CPU{agent=\"small\"}" \
	--data-urlencode "from=$from" --data-urlencode "to=$to" --data-urlencode "step=${step}ms")
stored=$(grep -o '\[[0-9]*, *[0-9.e+]*\]' <<<"$r" | awk -F'[][, ]+' '$3 > 0' | wc -l)
if [ "$left" != 0 ] || [ "$stable" -lt 6 ]; then
	fail "$name" "the small agent's spool did not settle: $left items, export.profiles $exported"
elif [ "$exported" != $((stored + dropped + rejected + corrupt)) ]; then
	fail "$name" "exported $exported profiles, but the store holds $stored and the agent counts $dropped dropped, $rejected rejected, $corrupt corrupt (missing $((exported - stored - dropped - rejected - corrupt)))"
elif ! [ "$dropped" -gt 0 ]; then
	fail "$name" "nothing was dropped, so the count proves nothing"
else
	ok "$name" "exported $exported = stored $stored + dropped $dropped (rejected $rejected, corrupt $corrupt)"
fi
kill -TERM "$apid" "$apid2" 2>/dev/null; wait "$apid" "$apid2" 2>/dev/null; apid= apid2=
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
exit $st
