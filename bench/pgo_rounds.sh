#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The timing half of bench/pgo.sh: runs the binaries that bench/pgo.sh built into DIR (names.txt,
# scale.txt, about.md beside them) round by round and writes the table to OUT.md. Separate so
# that the same binaries can be timed on a quieter machine than the one that built them.
# Each round runs every variant once, the order rotated by one each round; a run's cost is its
# user+system CPU seconds (bash's time). Per variant: the median, plain's median / its median,
# and the paired comparison: the median of plain's / its CPU within a round, and in how many
# rounds it used less CPU than plain did in the same round, with the two-sided sign test's p
# (ties dropped).
#   bench/pgo_rounds.sh DIR OUT.md      (RUNS=15)
set -euo pipefail
dir=${1:?usage: bench/pgo_rounds.sh DIR OUT.md}
out=${2:?usage: bench/pgo_rounds.sh DIR OUT.md}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
runs=${RUNS:-15}
[ "$runs" -lt 5 ] && runs=5
cd "$dir"
mapfile -t names <names.txt
scale=$(cat scale.txt)
want=$(./plain "$scale")
for n in "${names[@]}"; do
  got=$(./"$n" "$scale")
  [ "$got" = "$want" ] || { echo "bench/pgo: $n prints '$got', plain '$want'" >&2; exit 1; }
done
declare -A t
nv=${#names[@]}
for ((r = 0; r < runs; r++)); do
  for ((k = 0; k < nv; k++)); do
    n=${names[$(((k + r) % nv))]}
    s=$( { TIMEFORMAT='%3U %3S'; time ./"$n" "$scale" >/dev/null; } 2>&1 | awk '{printf "%.3f", $1 + $2}')
    t[$n]+="$s "
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# wins of $2 over $1 (paired by round), the sign test's two-sided p (ties dropped), and the
# median of the per-round ratios $1/$2 (the load of a round cancels out of its ratio)
paired() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); w = 0; l = 0
    for (i = 1; i <= n; i++) { if (y[i] < x[i]) w++; else if (y[i] > x[i]) l++ }
    m = w + l; k = w < l ? w : l; p = 0; c = 1
    for (i = 0; i <= k; i++) { p += c; c = c * (m - i) / (i + 1) }
    p = m ? 2 * p / 2 ^ m : 1; if (p > 1) p = 1
    for (i = 1; i <= n; i++) r[i] = x[i] / y[i]
    for (i = 2; i <= n; i++) { v = r[i]; for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]; r[j + 1] = v }
    q = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    printf "%d/%d|%.3g|%.3f", w, n, p, q }'
}
desc() {
  case $1 in
  plain) echo "clang -O2 (no profile)" ;;
  dip) echo "clang -O2 -fdebug-info-for-profiling (no profile)" ;;
  afdo) echo "-O2 -fprofile-sample-use=\`strobe pgo autofdo\` of plain" ;;
  afdo_dip) echo "-O2 -fdebug-info-for-profiling -fprofile-sample-use= (profile of dip, with discriminators)" ;;
  bolt) echo "plain, then llvm-bolt -data=\`strobe pgo bolt\`" ;;
  afdo_bolt) echo "afdo_dip, re-recorded, then llvm-bolt" ;;
  perf_bolt) echo "peer: perf record, perf2bolt -nl, llvm-bolt" ;;
  perf_afdo) echo "peer: perf record, create_llvm_prof" ;;
  *) echo "$1" ;;
  esac
}
base=$(med "${t[plain]}")
{
  cat about.md
  echo "CPU seconds (user+sys) per run, $runs interleaved rounds on $(nproc) cores of $(hostname -s 2>/dev/null || echo this host);"
  echo "speed-up = plain's median / the variant's; paired speed-up = the median over rounds of plain's CPU / the variant's in the same round; wins = rounds in which the variant used less CPU than plain in the same round, p = two-sided sign test."
  echo
  echo "| build | median CPU s | speed-up vs -O2 | paired speed-up | wins vs plain | p | min-max (s) |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for n in "${names[@]}"; do
    m=$(med "${t[$n]}")
    mm=$(tr ' ' '\n' <<<"${t[$n]}" | grep . | sort -n | sed -n '1p;$p' | paste -sd-)
    if [ "$n" = plain ]; then pw="-|-|1.000"; else pw=$(paired "${t[plain]}" "${t[$n]}"); fi
    IFS='|' read -r wins pv ratio <<<"$pw"
    printf '| %s | %.3f | %.3f | %s | %s | %s | %s |\n' "$(desc "$n")" "$m" \
      "$(awk -v a="$base" -v b="$m" 'BEGIN {print a / b}')" "$ratio" "$wins" "$pv" "$mm"
  done
  echo
  echo "Runs (s), in round order:"
  for n in "${names[@]}"; do echo "- $n: ${t[$n]}"; done
  echo
  echo "Reproduce: \`bash bench/pgo.sh OUT.md\` (or \`BENCH_ONLY=pgo bench/run.sh\`)."
} >"$out"
cat "$out"
