#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Span queries (issue 26): a query by span_id over a store of many profiles, each with its own
# span_id and trace_id on its samples, through the span index (store/spans.c) and through the
# scan it replaced, on the same store in the same run (bench/span_query.c; the answers are
# compared and must be identical). Appends markdown to RESULTS (stdout when not given);
# bench/run.sh calls it under BENCH_ONLY=spans (or all).
#
#   bench/spans.sh [RESULTS]        SPAN_PROFILES (100000), SPAN_SERIES (20), RUNS (3)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bin=build/bench/span_query
results=${1:-/dev/stdout}
runs=${RUNS:-3}
n=${SPAN_PROFILES:-100000}
ser=${SPAN_SERIES:-20}
[ -x "$bin" ] || { echo "bench: missing $bin: run make bench" >&2; exit 2; }
work=$(mktemp -d /tmp/strobe-bench-spans.XXXXXX)
trap 'rm -rf "$work"' EXIT
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
: >"$work/i"; : >"$work/s"
for ((r = 0; r < runs; r++)); do
  rm -rf "$work/store"
  line=$("$bin" "$work/store" -n "$n" -s "$ser" -q 15)
  kv index_ms "$line" >>"$work/i"
  kv scan_ms "$line" >>"$work/s"
done
mi=$(median <"$work/i") ms=$(median <"$work/s")
{
  echo "One span's profile over the whole hour, $n profiles in $ser series (each profile its own"
  echo "span_id), medians of 15 spans per run, median of $runs runs; both answers identical."
  echo
  echo "| query by span_id | median |"
  echo "|---|---|"
  echo "| scan (before: every point of the window read) | $ms ms |"
  echo "| span index (after) | $mi ms |"
  echo "| ratio | $(awk -v a="$ms" -v b="$mi" 'BEGIN { printf "%.0fx", a / b }') |"
  echo
  echo "Reproduce: \`make build/bench/span_query && BENCH_ONLY=spans bench/run.sh\`"
  echo "(or \`bench/spans.sh\`)."
} >>"$results"
