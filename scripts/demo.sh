#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe's demo: the whole system live on this machine. It starts `strobe server` on loopback
# with a temporary data directory, `strobe agent` against it (every process on the host, on-CPU
# and off-CPU), and a small shop of services with distinct hot paths (build/workloads/demo_shop:
# shop-api, shop-worker and shop-db, the last one mostly waiting on a lock), then prints the
# server's URL and, for each service, a command that shows its flame graph. It runs until Ctrl-C,
# or for DURATION seconds (then it prints each service's top functions before stopping), and
# stops everything cleanly.
#
#   make demo                 (or: DURATION=60 make demo; PORT=4100 picks the server's port)
#
# The agent needs root (or CAP_PERFMON and kernel.perf_event_paranoid <= 1 for other users'
# processes).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
shop=$root/build/workloads/demo_shop
duration=${DURATION:-0}
port=${PORT:-0}
for f in "$strobe" "$shop"; do
	[ -x "$f" ] || { echo "demo: $f is missing (run make demo, which builds it)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/strobe-demo.XXXXXX)
pids=()
spid= apid=
cleanup() {
	trap - INT TERM EXIT
	echo
	echo "demo: stopping"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [ -n "$apid" ]; then kill -TERM "$apid" 2>/dev/null; wait "$apid" 2>/dev/null; fi
	if [ -n "$spid" ]; then kill -TERM "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; fi
	echo "demo: stopped; logs and data in $work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# ---- server --------------------------------------------------------------------------------
"$strobe" server --data "$work/data" --listen "127.0.0.1:$port" 2>"$work/server.log" &
spid=$!
url=
for _ in $(seq 200); do
	p=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/server.log" | head -1)
	if [ -n "$p" ] && curl -sf "http://127.0.0.1:$p/ready" >/dev/null; then url=http://127.0.0.1:$p; break; fi
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$url" ]; then
	echo "demo: the server did not start:" >&2
	sed 's/^/  /' "$work/server.log" >&2
	exit 1
fi

# ---- agent ---------------------------------------------------------------------------------
# Off-CPU on (to show shop-db's lock waits) and a 5 % budget: off-CPU recording of a whole host
# costs more than the default 1 %, and the demo should show data, not the budget at work.
"$strobe" agent --server "$url" --offcpu -F 49 --interval 5 --max-cpu 5 --admin 127.0.0.1:0 \
	--label env=demo --spool "$work/spool" 2>"$work/agent.log" &
apid=$!
admin=
for _ in $(seq 200); do
	p=$(sed -n 's/.*admin listening on .* port \([0-9]*\).*/\1/p' "$work/agent.log" | head -1)
	if [ -n "$p" ]; then admin=http://127.0.0.1:$p; break; fi
	kill -0 "$apid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$admin" ]; then
	echo "demo: the agent did not start:" >&2
	sed 's/^/  /' "$work/agent.log" >&2
	[ "$(id -u)" -ne 0 ] && echo "demo: the agent needs root (or CAP_PERFMON): try sudo make demo" >&2
	apid=
	exit 1
fi

# ---- the shop ------------------------------------------------------------------------------
for svc in api worker db; do
	STROBE_SERVICE=shop-$svc "$shop" "$svc" &
	pids+=($!)
done

CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
OFF='process_cpu:off_cpu:nanoseconds:cpu:nanoseconds'
cat <<EOF

strobe demo is running.

  server      $url   (web UI, and the HTTP API of docs/http-api.md)
  agent       $admin/status   (kill switch: curl -X POST $admin/pause, then /resume)
  services    shop-api, shop-worker (CPU), shop-db (waits on a lock: see its off-CPU time)
  logs, data  $work

Flame graphs (data arrives every 5 s; give it ten seconds):

  # shop-api, where its CPU goes (top functions; -t svg -o api.svg for the flame graph)
  build/strobe query -s $url --from now-5m '$CPU{service_name="shop-api"}'
  # shop-worker, as an interactive SVG flame graph
  build/strobe query -s $url --from now-5m -f svg -o worker.svg '$CPU{service_name="shop-worker"}'
  # shop-db, where it waits (off-CPU): acquire_table_lock
  build/strobe query -s $url --from now-5m -f svg -o db-offcpu.svg '$OFF{service_name="shop-db"}'
  # the same with curl, any service:
  curl -o api.svg '$url/api/v1/query?format=svg&from=now-5m&query=$(printf '%s' "$CPU{service_name=\"shop-api\"}" | sed 's/{/%7B/; s/}/%7D/; s/"/%22/g')'

EOF
if [ "$duration" -gt 0 ] 2>/dev/null; then
	echo "demo: running for $duration s (DURATION)"
	sleep "$duration" & wait $!
	sleep 6 & wait $! # one more export interval
	for svc in api worker; do
		echo "== shop-$svc: top functions (on-CPU)"
		"$strobe" query -s "$url" --from now-10m -f top --max-nodes 6 "$CPU{service_name=\"shop-$svc\"}" 2>&1 | head -9
	done
	echo "== shop-db: where its threads wait (off-CPU, the shop's own functions)"
	"$strobe" query -s "$url" --from now-10m -f pprof -o "$work/db-offcpu.pb.gz" "$OFF{service_name=\"shop-db\"}" &&
		"$strobe" top -n 5 --show '^(acquire_table_lock|read_page|client_think|scan_rows|conn_main)$' \
			"$work/db-offcpu.pb.gz" 2>&1 | tail -6
	echo
	curl -s "$admin/status" | grep -E '"(state|frequency_hz|pushed|failed|dropped|cpu_pct|rss_bytes)"' | sed 's/^ */  agent /'
else
	echo "demo: press Ctrl-C to stop"
	while kill -0 "$spid" 2>/dev/null && kill -0 "$apid" 2>/dev/null; do sleep 1 & wait $!; done
fi
