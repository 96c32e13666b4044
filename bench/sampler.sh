#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's export on a busy host (bench/sampler_export.c): the sampler's aggregate holding 500
# processes, each exported as its own profile, as agent.c does every interval. CPU milliseconds
# (median of RUNS), this build against OLD_EXPORT when given (the same program built from an
# older commit: the before/after of issue 19's per-process index), side by side with the ratio;
# then the per-record path (bench/sampler_feed.c), against OLD_FEED likewise; then the agent's
# lookup of each process's identity by pid (bench/proc_lookup.c), hash index against linear scan.
# Writes markdown to RESULTS (stdout when not given); bench/run.sh calls it under
# BENCH_ONLY=sampler (or all).
#
#   bench/sampler.sh [RESULTS]    RUNS=5; OLD_EXPORT=path/to/old/sampler_export,
#                                 OLD_FEED=path/to/old/sampler_feed
set -euo pipefail
cd "$(dirname "$0")/.."
results=${1:-/dev/stdout}
[ -x build/bench/sampler_export ] || make --no-print-directory build/bench/sampler_export >&2
runs=${RUNS:-5}
old=${OLD_EXPORT:-}
# One line of sampler_export: | shape | fill ms | export ms | per process us |
field() { awk -F'|' -v f="$1" '{gsub(/^ +| +$/, "", $f); print $f}'; }
{
  if [ -n "$old" ]; then
    echo "| aggregate | export all, CPU ms: before | after | after / before | per process, CPU us: before | after |"
    echo "|---|---:|---:|---:|---:|---:|"
  else
    echo "| aggregate | fill, CPU ms | export all, CPU ms (median of $runs) | per process, CPU us |"
    echo "|---|---:|---:|---:|"
  fi
  for shape in "500 20" "500 100" "500 400" "100 100"; do
    # shellcheck disable=SC2086
    new_line=$(build/bench/sampler_export $shape "$runs")
    if [ -n "$old" ]; then
      # shellcheck disable=SC2086
      old_line=$("$old" $shape "$runs")
      n=$(echo "$new_line" | field 4) o=$(echo "$old_line" | field 4)
      echo "| $(echo "$new_line" | field 2) | $o | $n | $(awk -v n="$n" -v o="$o" 'BEGIN {printf "%.2f", n / o}') | $(echo "$old_line" | field 5) | $(echo "$new_line" | field 5) |"
    else
      echo "$new_line"
    fi
  done
  echo
  # The per-record path (bench/sampler_feed.c): event kinds, decoding, ordering, aggregation.
  [ -x build/bench/sampler_feed ] || make --no-print-directory build/bench/sampler_feed >&2
  oldf=${OLD_FEED:-}
  if [ -n "$oldf" ]; then
    echo "| records | CPU ms: before | after | after / before | per record, CPU ns: before | after |"
    echo "|---|---:|---:|---:|---:|---:|"
    new_line=$(build/bench/sampler_feed 200000 "$runs") old_line=$("$oldf" 200000 "$runs")
    n=$(echo "$new_line" | field 3) o=$(echo "$old_line" | field 3)
    echo "| $(echo "$new_line" | field 2) | $o | $n | $(awk -v n="$n" -v o="$o" 'BEGIN {printf "%.2f", n / o}') | $(echo "$old_line" | field 4) | $(echo "$new_line" | field 4) |"
  else
    echo "| records | CPU ms (median of $runs) | per record, CPU ns |"
    echo "|---|---:|---:|"
    build/bench/sampler_feed 200000 "$runs"
  fi
  echo
  # The agent's lookup of each exported process's identity (bench/proc_lookup.c): the hash index
  # against the linear scan it replaced, in one program.
  [ -x build/bench/proc_lookup ] || make --no-print-directory build/bench/proc_lookup >&2
  echo "| processes, each looked up once per export | linear scan, CPU us per export (median of $runs) | hash index | hash / scan |"
  echo "|---|---:|---:|---:|"
  build/bench/proc_lookup 500 2000 "$runs"
  build/bench/proc_lookup 5000 200 "$runs"
  echo
  echo "Reproduce: \`make build/bench/sampler_export build/bench/sampler_feed build/bench/proc_lookup && BENCH_ONLY=sampler bench/run.sh\` (or \`bench/sampler.sh\`; with \`OLD_EXPORT=\` and \`OLD_FEED=\` the same programs built against an older commit, the side-by-side tables)."
} > "$results"
