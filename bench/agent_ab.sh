#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Paired A/B of the agent's own CPU: two builds of `strobe agent` run at the same time, both
# profiling the whole host and pushing every 2 s to one `strobe server` on loopback, while
# build/bench/cpu_work keeps both CPUs busy. Running them side by side means both see the same
# processes and samples, so what other jobs on a shared machine do cancels out of the
# comparison (a sequential A/B on a busy host mostly measures the host). After a 6 s warm-up,
# each agent's CPU is read from /proc/PID/task/*/schedstat over the same window; which one
# starts first alternates by round. Prints one line per round and rate, in ms of CPU per s.
#
#   bash bench/agent_ab.sh OLD_STROBE NEW_STROBE      (ROUNDS=4 SECONDS_MEASURED=12 HZ="19 99")
set -u
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/.." && pwd)
OLD=${1:?usage: agent_ab.sh OLD_STROBE NEW_STROBE} NEW=${2:?usage: agent_ab.sh OLD_STROBE NEW_STROBE}
ROUNDS=${ROUNDS:-4} M=${SECONDS_MEASURED:-12} HZS=${HZ:-19 99}
CW=$ROOT/build/bench/cpu_work
[ -x "$CW" ] || { echo "agent_ab: missing $CW: run make bench" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "agent_ab: needs root (the agent profiles the whole host)" >&2; exit 1; }
tmp=$(mktemp -d)
spid='' pa='' pb='' cp=''
trap 'for p in $pa $pb $cp $spid; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
"$NEW" server --data "$tmp/data" --listen 127.0.0.1:0 2>"$tmp/server.log" & spid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$tmp/server.log")
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { echo "agent_ab: the server did not start: $(head -3 "$tmp/server.log")" >&2; exit 1; }
cpu() { local s=0 v t; for t in /proc/$1/task/*/schedstat; do read -r v _ <"$t" && s=$((s + v)); done; echo $s; }
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for hz in $HZS; do
		if [ $((r % 2)) = 1 ]; then A=$OLD B=$NEW; else A=$NEW B=$OLD; fi
		"$A" agent --server "http://127.0.0.1:$port" -F "$hz" -i 2 --max-cpu 100 2>"$tmp/a.log" & pa=$!
		"$B" agent --server "http://127.0.0.1:$port" -F "$hz" -i 2 --max-cpu 100 2>"$tmp/b.log" & pb=$!
		"$CW" -s $((M + 7)) >/dev/null 2>&1 & cp=$!
		sleep 6
		a0=$(cpu $pa) b0=$(cpu $pb) t0=$(date +%s%N)
		sleep "$M"
		a1=$(cpu $pa) b1=$(cpu $pb) t1=$(date +%s%N)
		kill $pa $pb; wait $pa $pb 2>/dev/null; wait $cp; pa='' pb='' cp=''
		ms() { awk -v c="$1" -v w=$((t1 - t0)) 'BEGIN { printf "%.2f", c / w * 1000 }'; }
		if [ "$A" = "$OLD" ]; then o=$(ms $((a1 - a0))) n=$(ms $((b1 - b0))); else n=$(ms $((a1 - a0))) o=$(ms $((b1 - b0))); fi
		echo "round $r hz $hz old $o new $n ms/s load $(cut -d' ' -f1 /proc/loadavg)"
	done
done
