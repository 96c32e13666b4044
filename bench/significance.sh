#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The smallest regression the diff's significance finds 95 % of the time at 19 Hz over one hour
# of one service, for the counting test (two profiles) and the bootstrap over 240 pushes, with
# the A/A false-flag rate of each (bench/significance.c; simulated counts, seeded). Writes
# markdown to RESULTS (stdout when not given); bench/run.sh calls it under
# BENCH_ONLY=significance (or all).
#
#   bench/significance.sh [RESULTS]    TRIALS=100 per point
set -euo pipefail
cd "$(dirname "$0")/.."
results=${1:-/dev/stdout}
[ -x build/bench/significance ] || make --no-print-directory build/bench/significance >&2
{
  build/bench/significance "${TRIALS:-100}"
  echo
  echo "Reproduce: \`make build/bench/significance && BENCH_ONLY=significance bench/run.sh\` (or \`build/bench/significance 100\`)."
} > "$results"
