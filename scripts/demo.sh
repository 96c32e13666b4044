#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# strobe's demo, for now: render a flame graph and a top table of the bundled sample (a real
# `perf record -g` of a compile, gzip and sha256sum, as `perf script` text) and say where the
# SVG is. Later issues turn this into the live system (server, agent, workload).
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
sample=examples/sample.perf.gz
build/strobe flamegraph --title "strobe demo: compile + gzip + sha256sum" \
  --subtitle "perf record -g, cpu-clock 499 Hz (examples/sample.perf.gz)" \
  -o "$out/flamegraph.svg" "$sample"
build/strobe convert -t pprof -o "$out/sample.pb.gz" "$sample"
echo "Top functions of the sample:"
build/strobe top -n 10 "$out/sample.pb.gz"
echo
echo "Flame graph written to $(pwd)/$out/flamegraph.svg (open it in a browser: hover, click"
echo "to zoom, Ctrl-F to search). The sample as pprof: $out/sample.pb.gz (go tool pprof reads it)."
