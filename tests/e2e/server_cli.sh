#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CLI clients of the server against the real thing: `strobe push` of a Go CPU profile and of
# folded text (with --type cpu:nanoseconds: a cpu series), `strobe query` back in folded (identical to strobe convert of the input), pprof
# (go tool pprof reads it) and top, a label value that needs percent-encoding in both URLs;
# `strobe query --diff`; errors from the server shown with its
# message (exit 1); an unreachable server named (exit 1); the documented example config
# (examples/server.json) is accepted as it stands.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_cli: curl is not installed"; exit 0; fi
export PPROF_TMPDIR=$TMPDIR HOME=${HOME:-$TMPDIR}
st=0
fail() { echo "FAIL server_cli/$1: $2"; st=1; }
ok() { echo "ok server_cli/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
cpu=$GOPROF/go_cpu.pb.gz
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server

# ---- push ---------------------------------------------------------------------------------------
if "$STROBE" push --server "$url" --service api --label env=prod --time now "$cpu" > "$TMPDIR/push.out" 2>"$TMPDIR/push.err" &&
   grep -q "$CPU" "$TMPDIR/push.out"; then
  ok push "$(cut -c1-120 "$TMPDIR/push.out")"
else fail push "exit $?: $(cat "$TMPDIR/push.err" "$TMPDIR/push.out" | head -3)"; fi
printf 'main;work 7\nmain;idle 3\n' > "$TMPDIR/f.folded"
if "$STROBE" push --server "$url" --service folded-app --name custom "$TMPDIR/f.folded" > "$TMPDIR/p2.out" 2>"$TMPDIR/p2.err"; then
  ok push-folded "$(cut -c1-120 "$TMPDIR/p2.out")"
else fail push-folded "$(cat "$TMPDIR/p2.err")"; fi
# Folded perf periods are nanoseconds on the CPU: --type says so, and the series is cpu time.
if "$STROBE" push --server "$url" --service typed-app --type cpu:nanoseconds "$TMPDIR/f.folded" > "$TMPDIR/p3.out" 2>"$TMPDIR/p3.err" &&
   grep -q "\"$CPU\"" "$TMPDIR/p3.out" && grep -q '"total":10[,}]' "$TMPDIR/p3.out"; then
  ok push-folded-type "$(cut -c1-120 "$TMPDIR/p3.out")"
else fail push-folded-type "$(cat "$TMPDIR/p3.err" "$TMPDIR/p3.out")"; fi

# ---- query --------------------------------------------------------------------------------------
"$STROBE" query --server "$url" --from now-5m -t folded "$CPU{service_name=\"api\",env=\"prod\"}" > "$TMPDIR/q.folded" 2>"$TMPDIR/q.err"
"$STROBE_FAST" convert -t folded --sample-index cpu "$cpu" > "$TMPDIR/ref.folded"
if [ -s "$TMPDIR/q.folded" ] && cmp -s "$TMPDIR/q.folded" "$TMPDIR/ref.folded"; then
  ok query-folded "$(wc -l < "$TMPDIR/q.folded") stacks, identical to strobe convert of the input"
else fail query-folded "differs from the input: $(cat "$TMPDIR/q.err") $(diff "$TMPDIR/q.folded" "$TMPDIR/ref.folded" | head -3)"; fi
if "$STROBE" query --server "$url" --from now-5m -o "$TMPDIR/q.pb.gz" "$CPU{service_name=\"api\"}" 2>"$TMPDIR/q2.err"; then
  if command -v go >/dev/null; then
    if go tool pprof -top "$TMPDIR/q.pb.gz" 2>/dev/null | grep -q 'crypto/sha256.block'; then ok query-pprof "go tool pprof reads it"
    else fail query-pprof "go tool pprof cannot read it or the hot frame is missing"; fi
  else ok query-pprof "written ($(stat -c %s "$TMPDIR/q.pb.gz") bytes)"; fi
else fail query-pprof "$(cat "$TMPDIR/q2.err")"; fi
# -o FILE: it says what it wrote (as record does)
if grep -q "^strobe query: wrote $TMPDIR/q.pb.gz (pprof, [0-9]* bytes)\$" "$TMPDIR/q2.err"; then ok query-wrote "$(cat "$TMPDIR/q2.err")"
else fail query-wrote "no 'wrote FILE' line on stderr: $(head -3 "$TMPDIR/q2.err")"; fi
# an SVG says what it shows: the selector as asked, and the window
sel="$CPU{service_name=\"api\"}"
if "$STROBE" query --server "$url" --from 2026-01-01T10:00:00Z --to 2030-01-01T11:00:00Z -f svg -o "$TMPDIR/q.svg" "$sel" 2>"$TMPDIR/q3.err"; then
  t=$(grep -o '<text id="title"[^>]*>[^<]*' "$TMPDIR/q.svg" | sed 's/.*>//; s/&quot;/"/g')
  sub=$(grep -o '<text id="subtitle"[^>]*>[^<]*' "$TMPDIR/q.svg" | sed 's/.*>//')
  if [ "$t" = "$sel" ] && [ "$sub" = "from 2026-01-01 10:00:00 to 2030-01-01 11:00:00 UTC" ]; then ok query-svg-title "$t / $sub"
  else fail query-svg-title "title '$t', subtitle '$sub'"; fi
else fail query-svg-title "$(cat "$TMPDIR/q3.err")"; fi
top=$("$STROBE" query --server "$url" --from now-5m "$CPU{service_name=\"api\"}" 2>&1)
if grep -q 'flat%' <<<"$top"; then ok query-top; else fail query-top "${top:0:200}"; fi
# A label value with what a URL's query would otherwise split or change (& + # % space) goes
# through push's and query's percent-encoding and comes back as it was.
v='r&d +1#x%20y'
if "$STROBE" push --server "$url" --service esc-app --name custom --label "team=$v" "$TMPDIR/f.folded" > "$TMPDIR/p4.out" 2>"$TMPDIR/p4.err"; then
  "$STROBE" query --server "$url" --from now-5m -t folded "custom:samples:count:samples:count{team=\"$v\"}" 2>"$TMPDIR/q4.err" | sort > "$TMPDIR/q4.folded"
  if [ "$(tr '\n' ' ' < "$TMPDIR/q4.folded")" = "main;idle 3 main;work 7 " ]; then ok query-escaped "team=\"$v\""
  else fail query-escaped "got '$(tr '\n' ' ' < "$TMPDIR/q4.folded")': $(head -c 300 "$TMPDIR/q4.err")"; fi
else fail query-escaped "push: $(cat "$TMPDIR/p4.err")"; fi

# ---- diff ---------------------------------------------------------------------------------------
d=$("$STROBE" query --server "$url" --from now-5m --diff "$CPU{service_name=\"api\"}" -t top "$CPU{env=\"prod\"}" 2>&1)
if [ $? -eq 0 ] && [ -n "$d" ]; then ok diff "$(head -1 <<<"$d" | cut -c1-80)"; else fail diff "${d:0:200}"; fi

# ---- errors ---------------------------------------------------------------------------------------
"$STROBE" query --server "$url" 'process_cpu{service_name=' > /dev/null 2>"$TMPDIR/e1"
code=$?
if [ $code = 1 ] && grep -q 'HTTP 400' "$TMPDIR/e1" && [ "$(wc -l < "$TMPDIR/e1")" = 1 ]; then ok bad-selector "$(cat "$TMPDIR/e1")"
else fail bad-selector "exit $code: $(cat "$TMPDIR/e1")"; fi
"$STROBE" query --server http://127.0.0.1:1 "$CPU" > /dev/null 2>"$TMPDIR/e2"
code=$?
if [ $code = 1 ] && grep -q '127.0.0.1:1' "$TMPDIR/e2"; then ok unreachable "$(cat "$TMPDIR/e2")"
else fail unreachable "exit $code: $(cat "$TMPDIR/e2")"; fi
"$STROBE" push --server "$url" "$cpu" > /dev/null 2>"$TMPDIR/e3"
code=$?
if [ $code = 2 ] && grep -q 'service' "$TMPDIR/e3"; then ok push-usage "$(cat "$TMPDIR/e3")"
else fail push-usage "exit $code: $(cat "$TMPDIR/e3")"; fi
kill $pid; wait $pid 2>/dev/null; pid=
# The example of docs/server.md, as shipped (its data_dir overridden): the server comes up once
# it is readable by its owner only, as docs/server.md says (it holds tokens).
cp "$(dirname "$0")/../../examples/server.json" "$TMPDIR/example.json"
chmod 600 "$TMPDIR/example.json"
start_server --config "$TMPDIR/example.json"
if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/api/v1/labels")" = 401 ]; then
  ok example-config "up, its tenants' tokens required"
else fail example-config "$(head -3 "$TMPDIR/log")"; fi
kill $pid; wait $pid 2>/dev/null; pid=
exit $st
