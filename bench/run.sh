#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe's benchmarks against its peers, run side by side on the same inputs in one run, written
# to docs/BENCHMARKS.md (the results section between the markers is replaced).
#
# Peers: FlameGraph's perl scripts from $FLAMEGRAPH_DIR (stackcollapse-perf.pl, flamegraph.pl)
# and `go tool pprof` on PATH. A missing peer is reported and its comparison skipped.
# Inputs are generated here, never committed: a real `perf record -a -g` of a busy workload
# (perf script text, >= 50 MB), synthetic folded stacks and a synthetic pprof from a fixed seed.
# The other parts are scripts of their own, each writing its markdown to the file it is given:
# bench/record.sh (strobe record against perf record), bench/unwind.sh (--call-graph against
# perf --call-graph dwarf), bench/server.sh (ingest, storage, query, RSS of strobe server),
# bench/fleet.sh (whole-host and fleet queries, before and after: OLD_STROBE, OLD_LOAD),
# bench/agent.sh (strobe agent's cost), bench/python.sh (the agent's cost of Python frames), bench/heap.sh (libstrobe-heap.so against heaptrack and
# jemalloc's profiler) and bench/ui.sh (the web UI in headless chromium and firefox-esr).
#
#   bench/run.sh            (RUNS=3 by default; BENCH_DIR to keep inputs between runs)
#   BENCH_ONLY=PART bench/run.sh   one part (toolkit, record, unwind, server, otlp, fleet, agent, heap or ui); the
#                                  others keep their previous results
#   BENCH_QUICK=1           shorter recorder benchmarks (see bench/record.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strobe=$root/build/strobe
runs=${RUNS:-3}
work=${BENCH_DIR:-$(mktemp -d /tmp/strobe-bench.XXXXXX)}
mkdir -p "$work"
results=$work/results.md
: > "$results"
note() { echo "bench: $*" >&2; }
only=${BENCH_ONLY:-all}
# The parts after the toolkit: NAME, script, title in the report.
parts=(record bench/record.sh "Recorder: strobe record"
       unwind bench/unwind.sh "Unwinding: --call-graph auto against fp and perf --call-graph dwarf"
       server bench/server.sh "Server: strobe server"
       otlp bench/otlp.sh "OTLP ingest against pprof push"
       fleet bench/fleet.sh "Fleet: whole-host and fleet queries, before and after the per-point totals"
       agent bench/agent.sh "Agent: strobe agent"
       python bench/python.sh "Python frames: the agent's cost with 20 Python processes, against native-only"
       heap bench/heap.sh "Heap and lock profiling: libstrobe-heap.so against heaptrack and jemalloc's profiler"
       ui bench/ui.sh "Web UI: query to drawn flame graph, hover, zoom"
       symbolize bench/symbolize.sh "Naming on the server: a 24-hour flame graph of bare addresses"
       symbolize_big bench/symbolize_big.sh "Naming on the server: memory with a 100 MB+ debug file"
       spans bench/spans.sh "Span queries: the span index against the scan"
       pgo bench/pgo.sh "PGO from strobe's profiles: AutoFDO and BOLT against plain -O2"
       significance bench/significance.sh "Significance: the smallest regression found at 19 Hz over 1 h"
       clickhouse bench/clickhouse.sh "ClickHouse store against SQLite"
       oncpu bench/oncpu.sh "On-CPU sampling summed in the kernel (eBPF) against perf"
       sampler bench/sampler.sh "The agent's export: 500 processes' profiles from the sampler's aggregate"
       agentcpu bench/agent_cpu_procs.sh "The agent's own CPU beside 200 busy processes, against an older build")
case " all toolkit record unwind server otlp fleet agent python heap ui symbolize symbolize_big spans pgo significance clickhouse oncpu sampler agentcpu " in *" $only "*) ;;
  *) note "BENCH_ONLY is all, toolkit, record, unwind, server, otlp, fleet, agent, python, heap, ui, symbolize, symbolize_big, spans, pgo, significance, clickhouse, oncpu, sampler or agentcpu"; exit 2 ;; esac
rm -f "$work"/{toolkit,record,unwind,server,otlp,fleet,agent,python,heap,ui,symbolize,symbolize_big,spans,pgo,significance,clickhouse,oncpu,sampler,agentcpu}.md "$work/notes"

if [ "$only" = all ] || [ "$only" = toolkit ]; then # ---- the toolkit: collapse, flamegraph, top --
  fg=${FLAMEGRAPH_DIR:-}
  if [ -n "$fg" ] && [ -f "$fg/stackcollapse-perf.pl" ] && [ -f "$fg/flamegraph.pl" ]; then
    have_fg=1
  else
    have_fg=0
    note "SKIP FlameGraph comparisons: set FLAMEGRAPH_DIR to a checkout of FlameGraph"
  fi
  if command -v go >/dev/null && go tool pprof -h >/dev/null 2>&1; then have_go=1; else
    have_go=0; note "SKIP pprof comparison: go tool pprof not found"; fi

  # measure NAME CMD... : runs CMD $runs times (stdout to /dev/null), prints "median_s max_rss_kb"
  measure() {
    local name=$1; shift
    local times=() rss=0 i t m
    for ((i = 0; i < runs; i++)); do
      /usr/bin/time -f '%e %M' -o "$work/time.$$" "$@" > /dev/null
      read -r t m < "$work/time.$$"
      times+=("$t")
      [ "$m" -gt "$rss" ] && rss=$m
    done
    local med
    med=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    note "$name: median ${med}s of $runs (${times[*]}), max RSS ${rss} KB"
    echo "$med $rss"
  }

  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) b = 0.005; printf "%.1f", a / b }'; }
  mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

  row() { # name input_bytes peer_med strobe_med strobe_rss_kb goal
    local r="n/a" peer="skipped"
    if [ "$3" != "-" ]; then r="$(ratio "$3" "$4")x"; peer="$3 s"; fi
    local rss_ratio
    rss_ratio=$(awk -v k="$5" -v b="$2" 'BEGIN { printf "%.2f", k * 1024 / b }')
    printf '| %s | %s MB | %s | %s s | %s | %s MB (%s x input) | %s |\n' "$1" "$(mb "$2")" \
      "$peer" "$4" "$r" "$(awk -v k="$5" 'BEGIN{printf "%.1f", k/1024}')" "$rss_ratio" "$6" \
      >> "$results"
  }

  # ---- inputs ------------------------------------------------------------------------------------
  perf_txt=$work/perf-script.txt
  if [ ! -s "$perf_txt" ] || [ "$(stat -c %s "$perf_txt")" -lt 52428800 ]; then
    note "recording a busy workload with perf record -a -g (about 40 s)"
    busy() {
      local end=$((SECONDS + 30))
      while [ $SECONDS -lt $end ]; do
        head -c 20000000 /dev/urandom | gzip -6 > /dev/null
        find /usr/lib /usr/share -type f 2>/dev/null | head -3000 | xargs cat 2>/dev/null | sha256sum > /dev/null
        seq 1 300000 | sort -R | sort -n > /dev/null
      done
    }
    busy & busy & wait_pids=$(jobs -p)
    perf record -q -a -g -F 999 -e cpu-clock -o "$work/perf.data" -- sleep 30 2>/dev/null
    wait $wait_pids 2>/dev/null || true
    perf script -i "$work/perf.data" > "$perf_txt" 2>/dev/null
    # Grow to >= 50 MB by repeating the real recording (the same stacks, more samples).
    while [ "$(stat -c %s "$perf_txt")" -lt 52428800 ]; do
      cat "$perf_txt" "$perf_txt" > "$perf_txt.2" && mv "$perf_txt.2" "$perf_txt"
    done
  fi
  folded=$work/synthetic.folded
  if [ ! -s "$folded" ]; then
    note "generating 200,000 unique folded stacks (seed 42)"
    awk -v seed=42 -v nstacks=200000 -f bench/gen_folded.awk | LC_ALL=C sort > "$folded"
  fi
  pprof=$work/synthetic.pb.gz
  [ -s "$pprof" ] || "$root/build/bench/gen_pprof" "$pprof" 200000 42

  # ---- runs --------------------------------------------------------------------------------------
  echo "| benchmark | input | peer (median) | strobe (median) | speed-up | strobe peak RSS | goal |" >> "$results"
  echo "|---|---|---|---|---|---|---|" >> "$results"

  psize=$(stat -c %s "$perf_txt")
  read -r s_med s_rss < <(measure "strobe collapse" "$strobe" collapse "$perf_txt")
  p_med=-
  if [ $have_fg = 1 ]; then
    read -r p_med _ < <(measure "stackcollapse-perf.pl" perl "$fg/stackcollapse-perf.pl" "$perf_txt")
    if ! cmp -s <("$strobe" collapse "$perf_txt") <(perl "$fg/stackcollapse-perf.pl" "$perf_txt"); then
      note "WARNING: strobe collapse output differs from stackcollapse-perf.pl on the benchmark input"
      echo "**collapse output differs from stackcollapse-perf.pl on this input**" >> "$work/notes"
    fi
  fi
  row "collapse (perf script, real perf record -a -g)" "$psize" "$p_med" "$s_med" "$s_rss" ">= 25x"

  fsize=$(stat -c %s "$folded")
  read -r s_med s_rss < <(measure "strobe flamegraph" "$strobe" flamegraph "$folded")
  p_med=-
  [ $have_fg = 1 ] && read -r p_med _ < <(measure "flamegraph.pl" perl "$fg/flamegraph.pl" "$folded")
  row "flamegraph (200,000 unique folded stacks)" "$fsize" "$p_med" "$s_med" "$s_rss" ">= 30x"

  gsize=$(stat -c %s "$pprof")
  usize=$(gzip -dc "$pprof" | wc -c)
  read -r s_med s_rss < <(measure "strobe top" "$strobe" top "$pprof")
  p_med=-
  if [ $have_go = 1 ]; then
    export PPROF_TMPDIR=$work HOME=${HOME:-$work}
    read -r p_med _ < <(measure "go tool pprof -top" go tool pprof -top "$pprof")
  fi
  row "top (pprof, 200,000 unique stacks, $(mb "$gsize") MB gzipped)" "$usize" "$p_med" "$s_med" "$s_rss" ">= 20x"

  {
    echo "Run of $(date -u +%Y-%m-%d) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $runs runs each, medians; RSS is the largest of the runs, against the uncompressed input."
    echo
    cat "$results"
    [ -f "$work/notes" ] && { echo; cat "$work/notes"; }
  } > "$work/toolkit.md"
fi

for ((i = 0; i < ${#parts[@]}; i += 3)); do
  name=${parts[i]}
  if [ "$only" = all ] || [ "$only" = "$name" ]; then
    RUNS=$runs bash "${parts[i + 1]}" "$work/$name.md"
  fi
done

# ---- report ------------------------------------------------------------------------------------
# Each part sits between its own markers inside the results section; a part not run this time
# (BENCH_ONLY) keeps its previous results.
out=docs/BENCHMARKS.md
mkdir -p docs
[ -f "$out" ] || printf '# Benchmarks\n\n<!-- results:begin -->\n<!-- results:end -->\n' > "$out"
part() { # NAME TITLE FILE: the part's markdown, this run's or the one already in $out
  echo "### $2"
  echo
  echo "<!-- $1:begin -->"
  if [ -f "$3" ]; then cat "$3"; else
    awk -v b="<!-- $1:begin -->" -v e="<!-- $1:end -->" '$0 == e {p = 0} p {print; n++} $0 == b {p = 1}
      END {if (!n) print "Not run yet."}' "$out"
  fi
  echo "<!-- $1:end -->"
}
{
  echo "<!-- results:begin -->"
  part toolkit "Toolkit: collapse, flamegraph, top" "$work/toolkit.md"
  for ((i = 0; i < ${#parts[@]}; i += 3)); do
    echo
    part "${parts[i]}" "${parts[i + 2]}" "$work/${parts[i]}.md"
  done
  echo "<!-- results:end -->"
} > "$work/section"
awk -v sec="$work/section" '
  /<!-- results:begin -->/ { while ((getline l < sec) > 0) print l; skip = 1; next }
  /<!-- results:end -->/ { skip = 0; next }
  !skip { print }' "$out" > "$work/out.md" && mv "$work/out.md" "$out"
for f in "$work"/{toolkit,record,unwind,server,otlp,fleet,agent,python,heap,ui,symbolize,symbolize_big,spans,pgo,significance,clickhouse,oncpu,sampler,agentcpu}.md; do [ -f "$f" ] && cat "$f"; done
note "written to $out (inputs kept in $work)"
