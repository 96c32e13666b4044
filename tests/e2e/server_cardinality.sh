#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cardinality end to end: a real `strobe server` on loopback fed by `strobe push`.
#   one-series   20 processes of one service (pid and comm given as push labels, as agents
#                before the move sent them, and as sample_labels=, as the agent sends them now)
#                leave one series, with no pid, comm or exe on it
#   pid-filter   a selector on pid (and strobe query --tagfocus) gives that process's samples
#                alone; the label API lists the 20 pids from the samples
#   limit        with limits.max_label_values_per_name = 3, a push bringing a 4th host is
#                answered 429 naming the label, stores nothing, and /metrics counts it under
#                its limit; a known host still goes in
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_cardinality: curl is not installed"; exit 0; fi
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
ok() { echo "ok server_cardinality/$1${2:+ ($2)}"; }
fail() { echo "FAIL server_cardinality/$1: $2"; st=1; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
S='samples:samples:count:samples:count'

cat >"$TMPDIR/config.json" <<'EOF'
{ "limits": { "max_label_values_per_name": 3 } }
EOF
start_server --config "$TMPDIR/config.json"
q() { curl -s -G "$url/api/v1/$1" -d from=now-10m "${@:2}"; }
enc() { # ASCII text URL-encoded
	local s=$1 o= c i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in [a-zA-Z0-9._~-]) o+=$c ;; *) o+=$(printf '%%%02X' "'$c") ;; esac
	done
	printf %s "$o"
}

# ---- 20 processes of one service -------------------------------------------------------------
bad=
for i in $(seq 0 19); do
	printf 'main;work_%d %d\n' "$i" $((i + 1)) >"$TMPDIR/p$i.folded"
	if ((i % 2)); then # the agent's way: sample_labels=
		c=$(curl -s -o "$TMPDIR/push.out" -w '%{http_code}' --data-binary @"$TMPDIR/p$i.folded" \
			"$url/api/v1/push?service_name=fleet&time=now-1m&labels=$(enc '{host="h1"}')&sample_labels=$(enc "{pid=\"$((1000 + i))\",comm=\"worker\",exe=\"/bin/worker\"}")")
	else # an older agent's: pid and comm as push labels
		c=$("$STROBE" push -s "$url" --service fleet --time now-1m -l host=h1 -l pid=$((1000 + i)) \
			-l comm=worker "$TMPDIR/p$i.folded" 2>&1 >/dev/null && echo 200)
	fi
	[ "$c" = 200 ] || bad+="push $i: $c $(cat "$TMPDIR/push.out" 2>/dev/null); "
done
series=$(q series --data-urlencode "match=$S{service_name=\"fleet\"}")
n=$(grep -o '"service_name":"fleet"' <<<"$series" | wc -l)
if [ -n "$bad" ]; then fail one-series "$bad"
elif [ "$n" != 1 ] || grep -q '"pid"\|"comm"\|"exe"' <<<"$series"; then
	fail one-series "want one series without pid, comm, exe; got $series"
else ok one-series "20 processes, $series"; fi

# ---- filtering by pid ----------------------------------------------------------------------
f=$(q query --data-urlencode "query=$S{service_name=\"fleet\",pid=\"1005\"}" -d format=folded)
all=$(q query --data-urlencode "query=$S{service_name=\"fleet\"}" -d format=folded | wc -l)
cli=$("$STROBE" query -s "$url" --from now-10m -f folded "$S{pid=~\"100[67]\"}" 2>&1 | sort | tr '\n' ' ')
tf=$("$STROBE" query -s "$url" --from now-10m -f folded --tagfocus 'pid=1012' "$S{service_name=\"fleet\"}" 2>&1)
pids=$(q label/pid/values --data-urlencode "query={service_name=\"fleet\"}" | grep -o '"[0-9]*"' | wc -l)
comms=$(q label/comm/values --data-urlencode "query={pid=\"1004\"}")
if [ "$f" != "main;work_5 6" ]; then fail pid-filter "pid 1005 gave '$f', want 'main;work_5 6'"
elif [ "$all" != 20 ]; then fail pid-filter "the service gave $all stacks, want 20"
elif [ "$cli" != "main;work_6 7 main;work_7 8 " ]; then fail pid-filter "strobe query pid=~100[67] gave '$cli'"
elif [ "$tf" != "main;work_12 13" ]; then fail pid-filter "strobe query --tagfocus pid=1012 gave '$tf'"
elif [ "$pids" != 20 ]; then fail pid-filter "label/pid/values listed $pids pids, want 20"
elif [ "$comms" != '{"data":["worker"]}' ]; then fail pid-filter "label/comm/values of pid 1004: $comms"
else ok pid-filter "pid 1005 alone, 20 pids listed, comm from the samples"; fi

# ---- the label-values limit ---------------------------------------------------------------
codes=
for h in h2 h3 h4; do
	codes+=$(curl -s -o "$TMPDIR/lim.out" -w '%{http_code} ' --data-binary $'main;lim 1\n' \
		"$url/api/v1/push?service_name=fleet&time=now-1m&labels=$(enc "{host=\"$h\"}")")
done
body=$(cat "$TMPDIR/lim.out")
stored=$(q query --data-urlencode "query=$S{host=\"h4\"}" -d format=folded)
rej=$(curl -s "$url/metrics" | awk '/^strobe_rejected_total\{reason="max_label_values_per_name"\}/ { print $2 }')
known=$(curl -s -o /dev/null -w '%{http_code}' --data-binary $'main;lim 1\n' \
	"$url/api/v1/push?service_name=fleet&time=now-1m&labels=$(enc '{host="h2"}')")
if [ "$codes" != "200 200 429 " ]; then fail limit "hosts h2 h3 h4 answered $codes, want 200 200 429 ($body)"
elif ! grep -q 'limit max_label_values_per_name: label host has 3 values' <<<"$body"; then fail limit "the 429 does not name the label: $body"
elif [ -n "$stored" ]; then fail limit "the refused push was stored: $stored"
elif [ "$rej" != 1 ]; then fail limit "strobe_rejected_total{reason=\"max_label_values_per_name\"} is '$rej', want 1"
elif [ "$known" != 200 ]; then fail limit "a push to a known host answered $known"
else ok limit "$body"; fi

kill "$pid"; wait "$pid"; pid=
exit $st
