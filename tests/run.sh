#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs strobe's test suites and prints one verdict line per test, then a summary line
# "N passed, N failed, N skipped". Exit status is non-zero when anything failed.
#
#   tests/run.sh [--load] [unit|golden|e2e|clickhouse|browser|fuzz]...   (default: all of them)
#
# --load (or LOAD=1) runs the suites beside CPU hogs, one per core, that double the load of the
# machine: the tests judge by what their workloads actually got (CPU time, measured waits), so
# they must pass there too. `make check-load` runs the whole suite that way.
#
# Suites:
#   unit    build/test/test_*      cmocka binaries built with ASan+UBSan
#   golden  tests/golden/*.sh      text cases compared byte for byte
#   e2e     tests/e2e/*.sh         real binaries end to end (peers such as go tool pprof)
#   clickhouse  the server's e2e tests (tests/e2e/server_*.sh that start their servers with
#           lib/server.sh) again on the ClickHouse store: one clickhouse-server started for the
#           stage (lib/clickhouse.sh), STROBE_TEST_CLICKHOUSE set, verdicts named ch:NAME; SKIP
#           without clickhouse-server (FAIL under CI=true)
#   browser tests/browser/*.sh     the web UI in chromium and firefox-esr (playwright-core, puppeteer-core), the SVG's script in jsdom
#   fuzz    build/fuzz/fuzz_*      each libFuzzer target for FUZZ_SECONDS (default 15; FUZZ_BUDGETS=1:
#                                  tests/fuzz/budgets) over its corpus in tests/fuzz/corpus/<name>/
#   soak    the long runs, not in the default set (make soak): tests/e2e/agent_outage.sh with
#           OUTAGE_SECONDS (600 by make soak), tests/e2e/agent_churn.sh with CHURN_SECONDS
# Script protocol (golden, e2e, browser): env STROBE (ASan CLI), STROBE_FAST (optimised CLI), TESTDATA
# (absolute path of ../shared/testdata), TMPDIR (a fresh directory); the script prints
# "ok NAME", "FAIL NAME: why" or "SKIP NAME: why" per case and exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
load=${LOAD:-}
[ "${1:-}" = --load ] && { load=1; shift; }
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(unit golden e2e clickhouse browser fuzz)
hogs=()
stop_hogs() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; hogs=(); }
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
if [ -n "$load" ]; then
  for ((i = 0; i < $(nproc); i++)); do
    # A busy loop at the tests' own priority: each takes a core's worth of CPU when it can.
    bash -c 'while :; do :; done' & hogs+=($!)
  done
  echo "tests/run.sh: --load: ${#hogs[@]} CPU hogs beside the suites (pids ${hogs[*]})"
fi

export STROBE="$root/build/strobe-san" STROBE_FAST="$root/build/strobe"
# The project's own fixtures: Go profiles written by Go's runtime from tests/fixtures/goservice.go
# (make fixtures; `make check` makes them). Tests compare strobe with go tool pprof on them.
export GOPROF="${GOPROF:-$root/build/fixtures/pprof}"
# The external conformance vectors (FlameGraph's perf captures and their expected folded output,
# Go profiles whose contents are pinned, fuzz regression inputs found elsewhere) live beside the
# checkout, not in it: an extra layer. Absent, every case that needs them prints SKIP and why;
# absent under CI=true, that is a failure (CI must run them).
export TESTDATA="${TESTDATA:-$(cd "$root/../shared/testdata" 2>/dev/null && pwd)}"
[ -n "$TESTDATA" ] && ! [ -d "$TESTDATA/pprof" ] && TESTDATA=
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
SOAK_SCRIPTS="${SOAK_SCRIPTS:-tests/e2e/agent_outage.sh tests/e2e/agent_churn.sh}"
pass=0 fail=0 skip=0
failed=()
testdata_verdict() { # once, before the suites: whether the external vectors are here
  if [ -n "$TESTDATA" ]; then
    echo "external vectors at $TESTDATA" # a note, not a verdict
  elif [ "${CI:-}" = true ]; then
    echo "FAIL testdata: CI=true but the external vectors are absent (../shared/testdata beside $root, or TESTDATA)"
  else
    echo "SKIP testdata: external vectors absent (../shared/testdata beside $root, or set TESTDATA): the cases that need them say SKIP"
  fi
}

tally() { # reads verdict lines on stdin, echoes them, counts them
  local line
  while IFS= read -r line; do
    case "$line" in
      "ok "*) pass=$((pass+1)); echo "  $line" ;;
      "FAIL "*) fail=$((fail+1)); failed+=("${line#FAIL }"); echo "  $line" ;;
      "SKIP "*) skip=$((skip+1)); echo "  $line" ;;
      *) echo "    $line" ;;
    esac
  done
}

run_unit() {
  echo "== unit"
  local t
  for t in build/test/test_*; do
    [ -x "$t" ] || continue
    local name out rc
    name=$(basename "$t")
    out=$(cd "$root" && "$t" 2>&1); rc=$?
    # A binary that cannot run here prints "SKIP NAME: why" alone; a case that cannot prints
    # "SKIP case: why" (tests/unit/fixtures.h) and counts as a skip beside the binary's verdict.
    tally < <(grep '^SKIP ' <<<"$out" | sed "/^SKIP $name[:/]/! s|^SKIP |SKIP $name/|")
    if [ $rc -eq 0 ] && grep -q '^SKIP ' <<<"$out" && ! grep -q 'test(s) run' <<<"$out"; then
      : # it could not run here, and said why
    elif [ $rc -eq 0 ]; then
      local n extra=
      n=$(grep -c '^SKIP ' <<<"$out")
      [ "$n" -gt 0 ] && extra=", $n skipped"
      tally <<<"ok $name ($(grep -o '[0-9]* test(s) run' <<<"$out" | head -1 || true)$extra)"
    else
      # cmocka's verdict lines first: a sanitizer's leak report after a failed
      # assertion can be longer than the tail below and hide which check failed.
      grep -E '^\[ *(ERROR|LINE|FAILED) *\]|error: ' <<<"$out" | head -20 | sed 's/^/    /'
      printf '%s\n' "$out" | tail -40 | sed 's/^/    /'
      tally <<<"FAIL $name: exit $rc"
    fi
  done
}

run_scripts() { # $1 = folder, or "soak" (the agent's long runs, $SOAK_SCRIPTS)
  echo "== $1"
  local s list=(tests/$1/*.sh)
  [ "$1" = soak ] && list=($SOAK_SCRIPTS)
  for s in "${list[@]}"; do
    [ -f "$s" ] || continue
    local tmp rc
    tmp=$(mktemp -d)
    { TMPDIR=$tmp bash "$s" 2>&1; echo "__rc=$?"; } > "$tmp.log"
    rc=$(sed -n 's/^__rc=//p' "$tmp.log")
    tally < <(grep -v '^__rc=' "$tmp.log")
    if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$tmp.log"; then
      tally <<<"FAIL $(basename "$s"): exited $rc without naming a failed case"
    fi
    rm -rf "$tmp" "$tmp.log"
  done
}

run_clickhouse() {
  echo "== clickhouse (the server's e2e tests on the ClickHouse store)"
  local chdir s t0=$SECONDS
  chdir=$(mktemp -d)
  # shellcheck source=e2e/lib/clickhouse.sh
  . tests/e2e/lib/clickhouse.sh
  declare -a ch_pid ch_http ch_tcp ch_inter
  if ! TMPDIR=$chdir ch_start 1; then
    if [ "${CI:-}" = true ]; then tally <<<"FAIL clickhouse: CI=true but ClickHouse did not start: $ch_why"
    else tally <<<"SKIP clickhouse: $ch_why"; fi
    ch_stop 1; rm -rf "$chdir"
    return
  fi
  # server_clickhouse*.sh start their own ClickHouses; the others that start servers through
  # lib/server.sh run on this one (a database per data dir)
  # CH_TESTS="server_ingest.sh ..." runs only those (by hand, while fixing one)
  for s in tests/e2e/server_*.sh; do
    case "$s" in *server_clickhouse*) continue ;; esac
    [ -n "${CH_TESTS:-}" ] && [[ " $CH_TESTS " != *" $(basename "$s") "* ]] && continue
    grep -q 'start_server\|launch_server' "$s" || continue
    local tmp rc
    tmp=$(mktemp -d)
    { STROBE_TEST_CLICKHOUSE=127.0.0.1:${ch_http[1]} TMPDIR=$tmp bash "$s" 2>&1; echo "__rc=$?"; } > "$tmp.log"
    rc=$(sed -n 's/^__rc=//p' "$tmp.log")
    tally < <(grep -v '^__rc=' "$tmp.log" | sed -E 's/^(ok|FAIL|SKIP) /\1 ch:/')
    if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$tmp.log"; then
      tally <<<"FAIL ch:$(basename "$s"): exited $rc without naming a failed case"
    fi
    rm -rf "$tmp" "$tmp.log"
  done
  # the tests' servers made their databases (lib/server.sh: t<pid>_<n>) on this ClickHouse: the
  # stage ran on it, not on SQLite
  local dbs
  dbs=$(ch_sql 1 "SELECT count() FROM system.databases WHERE match(name, '^t[0-9]+_[0-9]+$')")
  if [ "${dbs:-0}" -gt 0 ]; then tally <<<"ok ch:stage ($dbs databases made by the tests' servers)"
  else tally <<<"FAIL ch:stage: the tests' servers made no database on the ClickHouse at 127.0.0.1:${ch_http[1]} ('$dbs'): they did not run on it"; fi
  ch_stop 1 # not ch_cleanup: its wait would wait for the --load hogs too
  rm -rf "$chdir"
  echo "    clickhouse stage: $((SECONDS - t0)) s"
}

run_fuzz() {
  # FUZZ_SECONDS (all targets), else FUZZ_BUDGETS=1 (make fuzz: tests/fuzz/budgets), else 15 s.
  local how="15 s each"
  [ -n "${FUZZ_BUDGETS:-}" ] && how="each for its budget in tests/fuzz/budgets"
  [ -n "${FUZZ_SECONDS:-}" ] && how="$FUZZ_SECONDS s each"
  echo "== fuzz ($how)"
  local f
  for f in build/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    local name corpus work rc secs runs
    name=$(basename "$f")
    secs=${FUZZ_SECONDS:-}
    [ -z "$secs" ] && [ -n "${FUZZ_BUDGETS:-}" ] && secs=$(awk -v n="$name" '$1 == n { print $2 }' tests/fuzz/budgets)
    secs=${secs:-15}
    corpus="tests/fuzz/corpus/$name"
    work=$(mktemp -d)
    [ -d "$corpus" ] && cp -r "$corpus/." "$work/" 2>/dev/null
    # Inputs that stopped a target elsewhere, kept in the external vectors as NAME-*.bin
    # (fuzz_pprof: pprof-*), run as seeds too when they are here.
    [ -n "$TESTDATA" ] && [ -d "$TESTDATA/fuzz" ] && cp "$TESTDATA/fuzz/${name#fuzz_}"-* "$work/" 2>/dev/null
    mkdir -p "build/fuzz-crashes/$name"
    "$f" -artifact_prefix="build/fuzz-crashes/$name/" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$work" > "$work.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -1)
    if [ $rc -eq 0 ]; then
      tally <<<"ok $name (${secs} s, ${runs:-?} runs, $(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$work.log" | tail -1))"
    else
      grep -A30 -m1 'ERROR\|==ERROR\|runtime error' "$work.log" | sed 's/^/    /' | head -40
      tally <<<"FAIL $name: fuzzer found a failure after ${runs:-?} runs (exit $rc; inputs in build/fuzz-crashes/$name/)"
    fi
    rm -rf "$work" "$work.log"
  done
}

tally < <(testdata_verdict)
! [[ " ${suites[*]} " =~ \ (unit|golden|e2e|browser)\  ]] || [ -f "$GOPROF/go_cpu.pb.gz" ] ||
  tally <<<"FAIL fixtures: the project's Go profiles are not in $GOPROF (make fixtures: needs go)"
for s in "${suites[@]}"; do
  case "$s" in
    unit) run_unit ;;
    golden|e2e|browser|soak) run_scripts "$s" ;;
    fuzz) run_fuzz ;;
    clickhouse) run_clickhouse ;;
    *) echo "tests/run.sh: unknown suite '$s'" >&2; exit 2 ;;
  esac
done < /dev/null

if [ ${#failed[@]} -gt 0 ]; then
  echo "failed:"; printf '  %s\n' "${failed[@]}"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
