#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The web UI's benchmark: time from a query to a drawn flame graph, and the cost of a hover and
# of a zoom, for profiles of about 10k, 100k and 1M call-tree nodes, in headless chromium and
# firefox-esr (Debian's, driven by playwright-core and puppeteer-core: bench/ui.mjs) against
# `strobe server` (the optimised build) on loopback. Inputs come from bench/gen_folded.awk (fixed seed), converted to pprof and
# pushed. Writes a markdown part to $1 (bench/run.sh puts it in docs/BENCHMARKS.md).
#   bash bench/ui.sh OUT.md        (RUNS=3 by default; BENCH_DIR keeps the inputs)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-/dev/stdout}
runs=${RUNS:-3}
work=${BENCH_DIR:-$(mktemp -d /tmp/strobe-bench.XXXXXX)}
chrome=${CHROMIUM:-/usr/bin/chromium}
firefox=${FIREFOX:-/usr/bin/firefox-esr}
note() { echo "bench/ui: $*" >&2; }
browsers=() vers=()
if [ -x "$chrome" ] && [ -d node_modules/playwright-core ]; then
  browsers+=("chromium $chrome"); vers+=("chromium $("$chrome" --version 2>/dev/null | awk '{print $2}')")
else note "SKIP chromium: needs $chrome and node_modules/playwright-core (bash scripts/deps.sh check)"; fi
if [ -x "$firefox" ] && [ -d node_modules/puppeteer-core ]; then
  browsers+=("firefox $firefox"); vers+=("firefox-esr $("$firefox" --version 2>/dev/null | awk '{print $3}')")
else note "SKIP firefox: needs $firefox and node_modules/puppeteer-core (bash scripts/deps.sh check)"; fi
if [ ${#browsers[@]} -eq 0 ]; then
  printf 'Not run: neither chromium with playwright-core nor firefox-esr with puppeteer-core installed.\n' > "$out"
  exit 0
fi
mkdir -p "$work/ui"
# nstacks for ~10k, ~100k, ~1M nodes (gen_folded adds 1-6 frames per stack)
sizes=("10k 2900" "100k 29000" "1M 290000")
for s in "${sizes[@]}"; do
  set -- $s
  if [ ! -f "$work/ui/$1.pb.gz" ]; then
    awk -v seed=7 -v nstacks="$2" -f bench/gen_folded.awk > "$work/ui/$1.folded"
    build/strobe convert -t pprof -o "$work/ui/$1.pb.gz" "$work/ui/$1.folded"
  fi
done
data=$(mktemp -d /tmp/strobe-ui-bench.XXXXXX)
build/strobe server --data "$data" --listen 127.0.0.1:0 2> "$work/ui/server.log" & spid=$!
trap 'kill $spid 2>/dev/null; rm -rf "$data"' EXIT
port=
for ((i = 0; i < 200; i++)); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/ui/server.log")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" > /dev/null && break
  sleep 0.05
done
url=http://127.0.0.1:$port
t=$(($(date +%s) - 300))
for s in "${sizes[@]}"; do
  set -- $s
  curl -sf -H 'Expect:' --data-binary @"$work/ui/$1.pb.gz" \
    "$url/api/v1/push?name=process_cpu&service_name=ui_$1&time=$t" > /dev/null
done
load0=$(cut -d' ' -f1 /proc/loadavg)
: > "$work/ui/rows.md"
for b in "${browsers[@]}"; do
  set -- $b
  node bench/ui.mjs "$url" "$1" "$2" "$runs" 10k 100k 1M >> "$work/ui/rows.md"
done
load1=$(cut -d' ' -f1 /proc/loadavg)
{
  # the load average is part of the result: on a shared machine it decides the numbers
  echo "Run of $(date -u +%F) on $(nproc) cores (load average $load0 before, $load1 after), headless $(IFS=,; echo "${vers[*]}" | sed 's/,/ and /'); $runs loads each, medians; hover and zoom over 200 and 40 interactions, median and 95th percentile (and the slowest zoom); then 40 real clicks each way, alternating."
  echo
  echo "| browser | profile | nodes | JSON | query → drawn (median) | of which fetch / parse / draw | frames drawn | hover (median / p95) | zoom in a loop, one a frame: drawn right away (before; old measure; median / p95 / max) | the same, drawn in the next frame (now; that frame's work; median / p95 / max) | click → drawn, draw in the handler (before; median / p95) | click → drawn, draw in the next frame (now; median / p95) | that frame's work (now; median / p95) | goals |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$work/ui/rows.md"
} > "$out"
cat "$out" >&2
