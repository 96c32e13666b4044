#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe agent's on-disk spool across a restart, with the server down. Two agents profile
# cpu_split (-p, one profile a second, each with a --label naming the agent) into their own
# spool directories while the server is stopped; once each has spooled a few profiles, one is
# stopped with SIGTERM (it exports its last partial interval and exits), the other is killed
# with SIGKILL. A torn spool file (a valid one cut in half), a file with a flipped byte and the
# temp file of an unfinished write are then put in the killed agent's directory. The server
# comes back, and a new agent starts on each directory:
#   term   the first agent's profiles all arrive: the store holds as many of them (counted by
#          a range query in 100 ms steps, one non-empty step per profile) as there were spool
#          files when it exited, covering its lifetime (every 2 s step of it has data)
#   kill   the same for the SIGKILLed agent's files; the three bad files are skipped and
#          counted (spool.corrupt = 3), the new agent keeps running and sends everything else
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
agent_test agent_restart cpu_split
kill_at_exit apid ta tk pid wpid
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
spoolfiles() { find "$1" -maxdepth 1 -name '*.spool' | wc -l; }

start_server
port=${url##*:}
kill -TERM "$pid"; wait "$pid"; pid=
STROBE_SERVICE=restart "$WL/cpu_split" 120 & wpid=$!
t0=$(date +%s)
start_agent "$TMPDIR/term1.log" -F 49 -i 1 --pid "$wpid" --spool "$TMPDIR/spool-term" --label gen=term1 --max-cpu 100
ta=$apid aterm=$admin
start_agent "$TMPDIR/kill1.log" -F 49 -i 1 --pid "$wpid" --spool "$TMPDIR/spool-kill" --label gen=kill1 --max-cpu 100
tk=$apid akill=$admin apid=
for _ in $(seq 150); do # a few profiles spooled by each, none sent
	admin=$aterm; n1=$(status_field spool.items)
	admin=$akill; n2=$(status_field spool.items)
	[ "${n1:-0}" -ge 8 ] && [ "${n2:-0}" -ge 8 ] && break
	sleep 0.2
done
kill -KILL "$tk"; wait "$tk" 2>/dev/null; tk=
t_kill=$(date +%s)
kill -TERM "$ta"; wait "$ta"; rc_term=$?; ta=
nterm=$(spoolfiles "$TMPDIR/spool-term") nkill=$(spoolfiles "$TMPDIR/spool-kill")

# the SIGKILLed agent's directory gets the files a crash or a bad disk could leave
d=$TMPDIR/spool-kill
last=$(find "$d" -maxdepth 1 -name '*.spool' | sort | tail -1)
id=$((16#$(basename "$last" .spool)))
size=$(stat -c %s "$last")
head -c $((size / 2)) "$last" >"$d/$(printf %016x $((id + 1))).spool"                 # torn
cp "$last" "$d/$(printf %016x $((id + 2))).spool"                                      # bit flip
# (the byte's complement: writing a fixed 0xff left the file intact when the byte was 0xff)
b=$(od -An -tu1 -j $((size - 10)) -N1 "$last" | tr -d ' ')
printf "\\x$(printf %02x $((b ^ 255)))" | dd of="$d/$(printf %016x $((id + 2))).spool" bs=1 seek=$((size - 10)) conv=notrunc status=none
head -c 100 "$last" >"$d/tmp-$(printf %016x $((id + 3)))"                              # unfinished write

"$STROBE" server --data "$TMPDIR/data" --listen "127.0.0.1:$port" 2>"$TMPDIR/log2" & pid=$!
for _ in $(seq 200); do curl -sf "$url/ready" >/dev/null && break; sleep 0.05; done
start_agent "$TMPDIR/term2.log" -F 49 -i 1 --pid "$wpid" --spool "$TMPDIR/spool-term" --label gen=term2 --max-cpu 100
ta=$apid aterm=$admin
start_agent "$TMPDIR/kill2.log" -F 49 -i 1 --pid "$wpid" --spool "$TMPDIR/spool-kill" --label gen=kill2 --max-cpu 100
tk=$apid akill=$admin apid=
# until both have sent what the first agents left (their pushes outnumber those files)
for _ in $(seq 450); do # (up to 90 s: a loaded CI machine took over 30 s to reach the bad files)
	admin=$aterm; p1=$(status_field push.pushed)
	admin=$akill; p2=$(status_field push.pushed) c2=$(status_field spool.corrupt)
	# (the bad files sort after the good ones: counted once the sender has reached them)
	[ "${p1:-0}" -gt "$nterm" ] && [ "${p2:-0}" -gt "$nkill" ] && [ "${c2:-0}" -ge 3 ] && break
	sleep 0.2
done
t_end=$(date +%s)

stored() { # GEN: profiles of the agent labelled GEN in the store, one per non-empty 100 ms step
	curl -s -G "$url/api/v1/range" --data-urlencode "query=$CPU{gen=\"$1\"}" \
		--data-urlencode "from=$((t0 - 5))" --data-urlencode "to=$((t_end + 5))" --data-urlencode step=100ms |
		grep -o '\[[0-9]*, *[0-9.e+]*\]' | awk -F'[][, ]+' '$3 > 0' | wc -l
}
covered() { # GEN FROM TO: how many of the 2 s steps of [FROM, TO) have data, of how many
	local r
	r=$(curl -s -G "$url/api/v1/range" --data-urlencode "query=$CPU{gen=\"$1\"}" \
		--data-urlencode "from=$2" --data-urlencode "to=$3" --data-urlencode step=2s)
	echo "$(grep -o '\[[0-9]*, *[0-9.e+]*\]' <<<"$r" | awk -F'[][, ]+' '$3 > 0' | wc -l) $(( ($3 - $2) / 2 ))"
}

name=agent_restart/term
s=$(stored term1)
read -r have steps < <(covered term1 $((t0 + 2)) $((t_kill - 1)))
admin=$aterm
if [ "$rc_term" != 0 ]; then
	fail "$name" "the agent exited $rc_term on SIGTERM: $(tail -2 "$TMPDIR/term1.log" | tr '\n' ' ')"
elif [ "$s" != "$nterm" ]; then
	fail "$name" "the first agent left $nterm profiles in its spool; the store holds $s of them (the new agent: pushed $(status_field push.pushed), spool items $(status_field spool.items), corrupt $(status_field spool.corrupt))"
elif [ "$have" -lt "$steps" ]; then
	fail "$name" "only $have of the $steps 2 s steps of the first agent's life have data"
else
	ok "$name" "$nterm profiles spooled before SIGTERM, all $s in the store after the restart, $have of $steps 2 s steps covered"
fi

name=agent_restart/kill
s=$(stored kill1)
read -r have steps < <(covered kill1 $((t0 + 2)) $((t_kill - 1)))
admin=$akill
corrupt=$(status_field spool.corrupt)
if ! kill -0 "$tk" 2>/dev/null || ! curl -sf "$admin/status" >/dev/null; then
	fail "$name" "the agent started on the killed agent's spool died: $(tail -3 "$TMPDIR/kill2.log" | tr '\n' ' ')"
elif [ "$corrupt" != 3 ]; then
	fail "$name" "spool.corrupt=$corrupt after a torn file, a flipped byte and a temp file (want 3)"
elif [ "$s" != "$nkill" ]; then
	fail "$name" "the killed agent left $nkill good profiles in its spool; the store holds $s of them"
elif [ "$have" -lt "$steps" ]; then
	fail "$name" "only $have of the $steps 2 s steps of the killed agent's life have data"
else
	ok "$name" "$nkill profiles spooled before SIGKILL, all $s in the store, 3 bad files skipped and counted, $have of $steps 2 s steps covered"
fi
kill -TERM "$ta" "$tk" 2>/dev/null; wait "$ta" "$tk" 2>/dev/null; ta= tk=
exit "${st:-0}"
