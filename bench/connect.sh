#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Grafana's flame graph call against the native one (issue 22): SelectMergeStacktraces over 24 h
# of the fleet benchmark's data (bench/fleet_load.c's fleet set: 20 services x 50 hosts, one small
# CPU profile per series every CONNECT_INTERVAL s, 600 by default so that writing it takes about a
# minute on a shared machine), timed against GET /api/v1/query on the same server, the same store
# and the same window, in one run. Calls alternate (native, Connect binary, Connect JSON), RUNS
# times; the ratio reported is the median of the per-round ratios Connect/native, so a noisy
# neighbour slows both sides of a round alike. The goal is Connect within 10 % of native.
# Appends markdown to RESULTS (stdout when not given); bench/fleet.sh calls it at its end.
#
#   bench/connect.sh [RESULTS]     RUNS=7 CONNECT_DIR=/tmp/strobe-bench-connect CONNECT_INTERVAL=600
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
load=$root/build/bench/fleet_load
results=${1:-/dev/stdout}
runs=${RUNS:-7}
dir=${CONNECT_DIR:-/tmp/strobe-bench-connect}
int=${CONNECT_INTERVAL:-600}
need_bins "$strobe" "$load"
command -v protoc >/dev/null || { note "protoc (protobuf-compiler) is needed"; exit 2; }
mkdir -p "$dir"
work=$(mktemp -d /tmp/strobe-bench-connect-run.XXXXXX)
spid=
trap 'server_stop; rm -rf "$work"' EXIT
end=$(cat "$dir/end" 2>/dev/null || true)
[ -n "$end" ] || { end=$(( $(date +%s) / 10 * 10 )); echo "$end" > "$dir/end"; }
if [ ! -f "$dir/fleet.done" ]; then
  rm -rf "$dir/fleet"
  note "writing the fleet data set, every $int s for 24 h"
  "$load" "$dir/fleet" fleet -i "$int" -e "$end" -c > "$dir/fleet.log"
  touch "$dir/fleet.done"
fi
echo '{"maintenance_interval": "24h", "limits": {"max_query_profiles": 100000000}}' > "$work/cfg.json"
BENCH_SERVER_WAIT=120 server_start "$dir/fleet" "$work/log" --config "$work/cfg.json"
cpu='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
from=$((end - 86400 + 7)) to=$((end + 7))
printf 'profile_typeID: "%s" label_selector: "{}" start: %d end: %d\n' "$cpu" $((from * 1000)) $((to * 1000)) |
  protoc --encode=querier.v1.SelectMergeStacktracesRequest --proto_path=proto proto/querier.proto > "$work/req.bin"
printf '{"profileTypeID":"%s","labelSelector":"{}","start":%d,"end":%d}' "$cpu" $((from * 1000)) $((to * 1000)) > "$work/req.json"
t() { # ARGS...: curl's total seconds, failing loudly
  local out
  out=$(curl -s --max-time 300 -o "$work/out" -w '%{time_total} %{http_code}' "$@")
  [ "${out##* }" = 200 ] || { note "failed: $* -> $out $(head -c 300 "$work/out")"; exit 1; }
  echo "${out%% *}"
}
native() { t -G "$url/api/v1/query" --data-urlencode "query=$cpu{}" -d "from=$from" -d "to=$to" -d "format=$1"; }
cbin() { t -H 'Content-Type: application/proto' --data-binary @"$work/req.bin" "$url/querier.v1.QuerierService/SelectMergeStacktraces"; }
cjson() { t -H 'Content-Type: application/json' --data-binary @"$work/req.json" "$url/querier.v1.QuerierService/SelectMergeStacktraces"; }
# the two answer the same question: Connect's total = the native folded total
native folded >/dev/null; ntot=$(awk '{ s += $NF } END { printf "%.0f", s }' "$work/out")
cbin >/dev/null; ctot=$(protoc --decode=querier.v1.SelectMergeStacktracesResponse --proto_path=proto proto/querier.proto < "$work/out" | sed -n 's/^  total: //p')
[ "$ntot" = "$ctot" ] || { note "totals differ: native $ntot, Connect $ctot"; exit 1; }
la=$(cut -d' ' -f1 /proc/loadavg)
N=() J=() B=() S=() rb=() rs=() rj=()
for ((i = 0; i < runs; i++)); do
  n=$(native json) f=$(native flat) b=$(cbin) j=$(cjson)
  N+=("$n") S+=("$f") B+=("$b") J+=("$j")
  rb+=("$(awk -v a="$b" -v c="$n" 'BEGIN { printf "%.3f", a / c }')")
  rs+=("$(awk -v a="$b" -v c="$f" 'BEGIN { printf "%.3f", a / c }')")
  rj+=("$(awk -v a="$j" -v c="$n" 'BEGIN { printf "%.3f", a / c }')")
done
note "native json: ${N[*]}; native flat: ${S[*]}; connect binary: ${B[*]}; connect json: ${J[*]}"
ms() { awk -v s="$1" 'BEGIN { printf "%.0f ms", s * 1000 }'; }
r=$(printf '%s\n' "${rb[@]}" | median)
{
  echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores (shared; load average $la before), $runs rounds, curl's total time on loopback. Data: $(sed -n 's/.*profiles=\([0-9]*\).*/\1/p' "$dir/fleet.log") profiles of 1,000 series (20 services x 50 hosts) over 24 h every $int s, bench/fleet_load.c; the whole fleet's flame graph over 24 h (total $ntot ns in both answers)."
  echo
  echo "| call | median | ratio to native json (median of rounds) |"
  echo "|---|---|---|"
  echo "| native \`GET /api/v1/query?format=json\` | $(ms "$(median "${N[@]}")") | 1 |"
  echo "| native \`GET /api/v1/query?format=flat\` | $(ms "$(median "${S[@]}")") | |"
  echo "| Connect \`SelectMergeStacktraces\`, application/proto | $(ms "$(median "${B[@]}")") | $r (to flat: $(median "${rs[@]}")) |"
  echo "| Connect \`SelectMergeStacktraces\`, application/json | $(ms "$(median "${J[@]}")") | $(median "${rj[@]}") |"
  echo
  echo "Goal: Connect within 10 % of the native query: $(awk -v r="$r" 'BEGIN { print r <= 1.10 ? "met" : "**missed**" }') (ratio $r)."
} >> "$results"
