#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server's memory while naming from a large debug file (issue 23): a generated program
# with a 100 MB+ separate debug file (bench/gen_bigdebug.sh: no -dbgsym package is reachable
# here) is uploaded, and a profile of bare addresses spread over all of it (one in every
# STRIDE of its functions, each inside the function, most inside an inlined helper) is
# queried:
#   - cold: the first query after the upload (the debug file opened, its CUs indexed);
#   - warm: the same query again (the naming cache answers);
#   - after a restart: the same query on a fresh process (the naming cache, no debug file).
# For each, the time to answer, the server's peak RSS (VmHWM) and what its RSS is made of
# (RssAnon: the symbolizer's tables and libdw's; RssFile: the mapped debug file's pages).
# Appends markdown to RESULTS (stdout when not given); bench/run.sh calls it under
# BENCH_ONLY=symbolize_big. Needs protoc (to write the profile).
#
#   bench/symbolize_big.sh [RESULTS]    STRIDE=8 (and gen_bigdebug.sh's TUS, NF, OPT)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
strobe=$root/build/strobe
results=${1:-/dev/stdout}
stride=${STRIDE:-8}
command -v protoc >/dev/null || { note "SKIP symbolize_big: protoc is not installed"; exit 0; }
bench/gen_bigdebug.sh
big=$root/build/bench/bigdebug
work=$(mktemp -d /tmp/strobe-bench-big.XXXXXX)
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

bid=$(readelf -n "$big/big" 2>/dev/null | awk '/Build ID/ {print $3}')
# (mawk has no strtonum)
HEX='function hex(s,  i, v) { v = 0; s = tolower(s); sub(/^0x/, "", s); for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }'
dsize=$(stat -c %s "$big/big.debug")
dwarf=$(readelf -SW "$big/big.debug" 2>/dev/null | sed 's/^ *\[ *[0-9]*\]//' | awk "$HEX"' $1 ~ /^\.debug_/ {s += hex($5)} END {printf "%.0f\n", s}')
base=$((0x555555554000))
# One location per sampled function, one sample each: 9 bytes in (the function's own code) for
# every other one, 64 bytes in (inside its first inlined helper, at -O0's layout) for the rest.
nm "$big/big" | awk -v stride="$stride" -v base="$base" -v bid="$bid" "$HEX"'
  $3 ~ /^fn_[0-9]+_[0-9]+$/ && (++n % stride) == 0 { k++; a[k] = hex($1) + (k % 2 ? 64 : 9) }
  END {
    print "sample_type { type: 1 unit: 2 }"
    for (i = 1; i <= k; i++) printf "sample { location_id: %d value: 1 }\n", i
    printf "mapping { id: 1 memory_start: %.0f memory_limit: %.0f filename: 3 build_id: 4 }\n", base, base + 1073741824
    for (i = 1; i <= k; i++) printf "location { id: %d mapping_id: 1 address: %.0f }\n", i, base + a[i]
    printf "string_table: \"\" string_table: \"cpu\" string_table: \"nanoseconds\" string_table: \"/opt/big\" string_table: \"%s\"\n", bid
  }' >"$work/prof.txt"
nloc=$(grep -c '^location' "$work/prof.txt")
protoc --proto_path="$root/proto" --encode=perftools.profiles.Profile profile.proto <"$work/prof.txt" >"$work/prof.pb"

start() { server_start "$work/data" "$work/server.log"; }
stop() { server_stop; }
mem() { awk '/^(VmHWM|RssAnon|RssFile):/ {printf "%s ", int($2 / 1024)} END {print ""}' "/proc/$spid/status"; } # MB: hwm anon file
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="big"}'
q() { # seconds to answer; the folded answer in $work/q.folded
  curl -s -o "$work/q.folded" -w '%{time_total}\n' -G "$url/api/v1/query" \
    --data-urlencode "query=$SEL" -d from=now-1h -d format=folded
}
named() { grep -c '^fn_[0-9]*_[0-9]*;\|^fn_[0-9]*_[0-9]* \|^inl_' "$work/q.folded" || true; }
inl() { grep -c ';inl_' "$work/q.folded" || true; }

start
"$strobe" push -s "$url" --service big "$work/prof.pb" >/dev/null
"$strobe" debuginfo upload -s "$url" "$big/big.debug" >/dev/null
read -r h0 a0 f0 < <(mem)
t_cold=$(q); n_cold=$(named); i_cold=$(inl)
read -r h1 a1 f1 < <(mem)
t_warm=$(q); n_warm=$(named)
read -r h2 a2 f2 < <(mem)
stop; start
read -r h3 a3 f3 < <(mem)
t_rest=$(q); n_rest=$(named)
read -r h4 a4 f4 < <(mem)
note "big debug file $((dsize / 1000000)) MB ($((dwarf / 1000000)) MB of DWARF), $nloc addresses: cold $t_cold s ($n_cold named, $i_cold in an inlined helper) hwm $h0 -> $h1 MB (anon $a1, file $f1); warm $t_warm s; after a restart $t_rest s ($n_rest named) hwm $h3 -> $h4 MB"
{
  echo "A generated program (bench/gen_bigdebug.sh: $(awk '{print $1 " units of " $2 " functions and " $3 " record types each, " $4 " -g"}' "$big/key")), its separate debug file $((dsize / 1000000)) MB ($((dsize / 1048576)) MiB; $((dwarf / 1000000)) MB of DWARF sections), uploaded; one query of $nloc bare addresses spread over all its functions (one in $stride); one server, one run:"
  echo
  echo "| query | time to answer | addresses named (in an inlined helper) | server peak RSS (VmHWM) before → after | RSS after: anonymous / mapped file |"
  echo "|---|---|---|---|---|"
  echo "| cold: first after the upload (debug file opened, CUs indexed) | $(printf %.3f "$t_cold") s | $n_cold ($i_cold) | $h0 → $h1 MB | $a1 / $f1 MB |"
  echo "| warm: the same again (naming cache) | $(printf %.3f "$t_warm") s | $n_warm | $h1 → $h2 MB | $a2 / $f2 MB |"
  echo "| after a restart (naming cache, no debug file opened) | $(printf %.3f "$t_rest") s | $n_rest | $h3 → $h4 MB | $a4 / $f4 MB |"
  echo
  echo "What it is made of: the debug file's pages that libdw maps and the first query touches ($f1 MB: clean, file-backed, the kernel can drop them under pressure) and $a1 MB anonymous (libdw's per-unit state and parsed line tables, the symbolizer's unit and function index). Bounded per object by the tenant symbolizer's 256 MiB DWARF budget (sections measured from the headers before libdw opens the file, line tables counted as parsed; beyond it, symbol tables only) and by the 16 symbolizers held; held until the tenant's symbolizer is dropped. With the naming cache, a restarted server answers the same query without opening the file: $h4 MB."
  echo
  echo "Reproduce: \`BENCH_ONLY=symbolize_big bench/run.sh\` (or \`bench/symbolize_big.sh\`; the program is generated once, about a CPU-minute, and kept in build/bench/bigdebug)."
  echo
} >>"$results"
