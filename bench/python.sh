#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What reading Python frames (agent/python.bpf.h, agent/python.c) costs the agent: 20 Python
# processes (bench/py_work.py, each a loop of pure-Python calls three frames deep) on the host,
# and `strobe agent --on-cpu-mode bpf` (no server: pushes fail, which does not touch sampling)
# at 19 and 99 Hz, with Python frames and native-only (--no-python), in one run:
#   lost     the drop of the workload's ops per CPU-second against the workload alone (the
#            sampling interrupt and the eBPF program run on its threads and are charged to it)
#   own      the agent's utime + stime from /proc/PID/stat over the run
#   ns/smp   the program on_sample's run_time_ns / run_cnt (kernel.bpf_stats_enabled=1)
#   total    (own + the program's run time) in % of the host's CPU (CPUs x the window), the
#            goal being <= 0.3 % at 19 Hz; and the same in % of the workload's CPU time
# py-spy is not compared: Debian 12 has no py-spy package and npm none (bench notes it).
# Appends markdown to RESULTS (stdout when not given).
#   bench/python.sh [RESULTS]       ROUNDS=3 PY_SECONDS=10 PY_PROCS=20 AGENT_INTERVAL=10 (defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
results=${1:-/dev/stdout}
rounds=${ROUNDS:-${RUNS:-3}} secs=${PY_SECONDS:-10} nproc_py=${PY_PROCS:-20} iv=${AGENT_INTERVAL:-10}
note() { echo "bench: $*" >&2; }
py=$(if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3 || true; fi)
[ -x "$strobe" ] || { note "missing $strobe: run make"; exit 2; }
if [ -z "$py" ]; then note "SKIP Python benchmark: no python3"; echo "Not run: no python3." >>"$results"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then note "SKIP Python benchmark: needs root"; echo "Not run: needs root." >>"$results"; exit 0; fi
work=$(mktemp -d /tmp/strobe-py-bench.XXXXXX)
apid= wpids=()
old_stats=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
  for p in "${wpids[@]}"; do kill "$p" 2>/dev/null || true; done
  sysctl -qw kernel.bpf_stats_enabled="$old_stats" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "nan"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
have_stats=0
command -v bpftool >/dev/null && command -v jq >/dev/null && sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null && have_stats=1

# The workers, started once and left running through every mode (long-lived services: the
# agent's cost per new process, its tables and names, is not what this measures).
modes=(none py19 native19 py99 native99)
wpids=()
# (niced: the host is shared; the ratios are what counts)
for ((i = 0; i < nproc_py; i++)); do nice -n 10 "$py" bench/py_work.py 0 "$work/w$i" & wpids+=($!); done
sleep 2
snap() { cat "$work"/w* 2>/dev/null | awk '{ o += $1; c += $2 } END { printf "%d %.6f\n", o, c }'; }
# window: the workers' ops and CPU seconds over $secs s
window() {
  local o0 c0 o1 c1
  read -r o0 c0 < <(snap)
  sleep "$secs"
  read -r o1 c1 < <(snap)
  awk -v a="$o0" -v b="$o1" -v c="$c0" -v d="$c1" 'BEGIN { printf "%d %.6f\n", b - a, d - c }'
}
# our agent's on_sample: the newest one loaded since ids $1 (other agents on the host may have
# a program of that name; this bpftool does not list programs' pids)
sample_ids() { bpftool -j prog show 2>/dev/null | jq -r '.[] | select(.name == "on_sample") | .id'; }
prog_id() { sample_ids | grep -vxF -f <(printf '%s\n' $1) | sort -n | tail -1; }
prog_stats() { bpftool -j prog show id "$1" 2>/dev/null | jq -r '"\(.run_time_ns // 0) \(.run_cnt // 0)"'; }

note "Python: $rounds rounds of ${secs} s x ${#modes[@]} modes, $nproc_py processes"
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#modes[@]}; i++)); do
    m=${modes[$(((i + r) % ${#modes[@]}))]}
    if [ "$m" = none ]; then
      read -r ops cpu < <(window)
      echo "$ops $cpu 0 0 0 $tck" >>"$work/$m"
      continue
    fi
    hz=${m//[a-z]/}
    extra=()
    [ "${m//[0-9]/}" = native ] && extra=(--no-python)
    before=$( [ $have_stats = 1 ] && sample_ids | tr '\n' ' ' || true)
    "$strobe" agent --server http://127.0.0.1:9 --log-level error -F "$hz" -i "$iv" \
      --max-cpu 100 --on-cpu-mode bpf --no-preload "${extra[@]}" 2>"$work/agent.log" &
    apid=$!
    sleep $((iv + 2)) # past its first export (which names everything once): the steady state
    pid_=$( [ $have_stats = 1 ] && prog_id "${before:-0}" || true)
    a0=$(ticks "$apid"); s0=$( ( [ -n "$pid_" ] && prog_stats "$pid_" ) || echo "0 0")
    read -r ops cpu < <(window)
    a1=$(ticks "$apid"); s1=$( ( [ -n "$pid_" ] && prog_stats "$pid_" ) || echo "0 0")
    kill "$apid"; wait "$apid" 2>/dev/null || true; apid=
    alive=0; for p in "${wpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    [ "$alive" = "$nproc_py" ] || note "only $alive of $nproc_py workers still running after $m"
    read -r t0 c0 <<<"$s0"; read -r t1 c1 <<<"$s1"
    echo "$ops $cpu $((a1 - a0)) $((t1 - t0)) $((c1 - c0)) $tck" >>"$work/$m"
  done
done

# per mode: medians of ops/CPU-s, own CPU ms, program ns per sample, samples
row() { # MODE: ops_per_cpu own_ms prog_ns_per_sample samples prog_ms cpu_s
  awk '{ opc = $2 > 0 ? $1 / $2 : 0; own = $6 ? $3 * 1000 / $6 : 0;
         nps = $5 ? $4 / $5 : 0; print opc, own, nps, $5, $4 / 1e6, $2 }' "$work/$1"
}
col() { row "$1" | awk -v c="$2" '{ print $c }' | median; }
base=$(col none 1)
{
  echo "$nproc_py Python processes (niced, on a $(nproc)-CPU host shared with other work) (\`bench/py_work.py\`, $py, $("$py" -c 'import sys; print(sys.version.split()[0])')), $secs s a run, median of $rounds rounds; \`strobe agent --on-cpu-mode bpf -i $iv\` (10 s: its default interval, one export in each window) with Python frames (py) and native-only (\`--no-python\`). Reproduce: \`bash bench/python.sh\` (or \`BENCH_ONLY=python bench/run.sh\`)."
  echo
  echo "| mode | workload ops/CPU-s | lost | agent own CPU | program ns/sample | samples | total (own + program), % of host CPU | ... % of workload CPU |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '| alone | %.0f | | | | | | |\n' "$base"
  for m in py19 native19 py99 native99; do
    opc=$(col "$m" 1) own=$(col "$m" 2) nps=$(col "$m" 3) smp=$(col "$m" 4) pms=$(col "$m" 5) cpus=$(col "$m" 6)
    lost=$(awk -v a="$opc" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f %%", 100 * (b - a) / b; else print "n/a" }')
    tot=$(awk -v o="$own" -v p="$pms" -v c="$cpus" 'BEGIN { if (c > 0) printf "%.3f %%", 100 * (o + p) / (c * 1000); else print "n/a" }')
    host=$(awk -v o="$own" -v p="$pms" -v n="$(nproc)" -v s="$secs" 'BEGIN { printf "%.3f %%", 100 * (o + p) / (n * s * 1000) }')
    printf '| %s | %.0f | %s | %.0f ms | %s | %s | %s | %s |\n' "$m" "$opc" "$lost" "$own" \
      "$( [ "$pms" != 0 ] && printf '%.0f' "$nps" || echo n/a)" "$smp" "$host" "$tot"
  done
  echo
  echo "py-spy, the peer the issue names, is not compared: \`apt-cache policy py-spy\` finds no package in Debian 12 and npm has none (\`npm view py-spy\`: 404), and PyPI is out of reach here."
} >>"$results"
