#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# JFR from a real JVM (openjdk-17's -XX:StartFlightRecording) read by strobe, judged against
# what the JVM itself reports (tests/workloads/java/CpuSplit.java: hot60, hot30 and hot10 in
# turns of 6:3:1 units of work, each turn timed with the thread's own CPU clock):
#   jvm-sampler the JDK's own reader (`jfr print`) gives shares within 3 points of the CPU clock
#              (the truth strobe is judged by is the JVM's samples: a busy machine may skew the
#              sampler, never strobe's reading of it)
#   cpu        `strobe top` on the .jfr: each hot method's share of the three, within 3 points
#              of the JVM's samples' shares
#   convert    `strobe convert -f folded` gives the same shares (the folded stacks name them)
#   alloc      allocBig allocates 3 times the bytes of allocSmall: its share of the sampled
#              allocation bytes (jdk.ObjectAllocationSample) is 75 % within 12 points (the JVM
#              samples at TLAB refills, some 150 a second: 76.9 and 82.3 % in two runs)
#   lock       four threads meet on one monitor in `contended`: the lock_count column's top
#              frames name it
#   ingest-raw /ingest?format=jfr with the raw recording: the server's cpu query gives the same
#              shares, under Pyroscope's profile type process_cpu:cpu:nanoseconds:cpu:nanoseconds
#   ingest-form the multipart form pyroscope-java sends (jfr part, labels part as a
#              LabelsSnapshot encoded by protoc from proto/jfr_labels.proto): the same shares
# No java: SKIP (FAIL under CI=true, where the fixtures must be there).
set -u
name=jfr_truth
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "FAIL $name: CI=true but java/javac (openjdk-17-jdk-headless) is not installed"; exit 1; fi
  echo "SKIP $name: java/javac is not installed (apt-get install openjdk-17-jdk-headless)"; exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../workloads/java/CpuSplit.java
mkdir -p "$TMPDIR/cls"
if ! javac -d "$TMPDIR/cls" "$src" 2>"$TMPDIR/javac.err"; then
  echo "FAIL $name/javac: $(head -3 "$TMPDIR/javac.err")"; exit 1
fi
rec=$TMPDIR/rec.jfr
# 20 s with a sample every 2 ms: some thousands of samples of the main thread, so a share is
# known to about a point. DebugNonSafepoints makes the JVM's own samples name the method that ran
# (without it JFR attributes a pc to the nearest safepoint's method).
java -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints \
  -XX:StartFlightRecording=filename="$rec",settings=profile,jdk.ExecutionSample#period=2ms \
  -cp "$TMPDIR/cls" CpuSplit "${JFR_SECONDS:-20}" >"$TMPDIR/truth" 2>"$TMPDIR/java.err"
if ! [ -s "$rec" ] || ! grep -q '^truth ' "$TMPDIR/truth"; then
  echo "FAIL $name/record: no recording or no truth: $(tail -3 "$TMPDIR/java.err")"; exit 1
fi

# shares FILE: "METHOD PCT" of hot60/hot30/hot10 among the three, from "name value" lines
shares() { awk '{ v[$1] += $2 } END { s = v["CpuSplit.hot60"] + v["CpuSplit.hot30"] + v["CpuSplit.hot10"];
  if (s > 0) for (m in v) if (m ~ /^CpuSplit\.hot/) printf "%s %.2f\n", m, 100 * v[m] / s }' "$1" | sort; }
# within A B: every method of A within 3 points of B (and all three present)
within() { awk -v tol="${3:-3}" 'NR == FNR { t[$1] = $2; next } { n++; d = $2 - t[$1]; if (d < 0) d = -d; if (d > tol || !($1 in t)) bad = bad " " $1 ":" $2 "/" t[$1] }
  END { if (n != 3 || bad != "") { print "off:" bad " (" n " methods)"; exit 1 } }' "$2" "$1"; }
# Two truths. The JVM's own reader (`jfr print`): how many samples' stacks hold each method, the
# shares strobe must find (its decoder against the JDK's, within a point). And the workload's
# CPU clock: what the methods really got, which the JVM's sampler reports within 3 points.
awk '/^truth /{ print $2, $3 }' "$TMPDIR/truth" | sort > "$TMPDIR/clock.s"
clock=$(tr '\n' ' ' < "$TMPDIR/clock.s")
if command -v jfr >/dev/null && jfr print --events jdk.ExecutionSample --stack-depth 64 "$rec" > "$TMPDIR/print" 2>"$TMPDIR/print.err"; then
  awk '/^jdk.ExecutionSample/ { for (m in in_) print m, 1; delete in_ }
       match($0, /CpuSplit\.hot[0-9]+\(/) { in_[substr($0, RSTART, RLENGTH - 1)] = 1 }
       END { for (m in in_) print m, 1 }' "$TMPDIR/print" > "$TMPDIR/print.v"
  shares "$TMPDIR/print.v" > "$TMPDIR/truth.s"
  if why=$(within "$TMPDIR/truth.s" "$TMPDIR/clock.s"); then ok jvm-sampler "JVM samples $(tr '\n' ' ' < "$TMPDIR/truth.s")vs CPU clock $clock"
  else fail jvm-sampler "$why: the JVM's samples $(tr '\n' ' ' < "$TMPDIR/truth.s") vs its CPU clock $clock"; fi
else
  echo "SKIP $name/jvm-sampler: no jfr tool ($(head -1 "$TMPDIR/print.err" 2>/dev/null)); judging by the CPU clock"
  cp "$TMPDIR/clock.s" "$TMPDIR/truth.s"
fi
truth=$(tr '\n' ' ' < "$TMPDIR/truth.s")

# ---- cpu: strobe top --cum --------------------------------------------------------------------------
if "$STROBE" top --cum "$rec" > "$TMPDIR/top" 2>"$TMPDIR/top.err"; then
  awk 'NR > 3 && $6 ~ /^CpuSplit\.hot/ { print $6, $4 }' "$TMPDIR/top" > "$TMPDIR/top.v"
  shares "$TMPDIR/top.v" > "$TMPDIR/top.s"
  if why=$(within "$TMPDIR/top.s" "$TMPDIR/truth.s"); then ok cpu "strobe $(tr '\n' ' ' < "$TMPDIR/top.s")vs JVM $truth"
  else fail cpu "$why; strobe $(tr '\n' ' ' < "$TMPDIR/top.s") JVM $truth"; fi
else fail cpu "strobe top: $(head -3 "$TMPDIR/top.err")"; fi

# ---- convert: folded ----------------------------------------------------------------------------------
if "$STROBE" convert -f folded "$rec" > "$TMPDIR/folded" 2>"$TMPDIR/conv.err"; then
  awk '{ n = $NF; split($0, f, ";"); seen = ""; for (i in f) { sub(/ [0-9]+$/, "", f[i]); if (f[i] ~ /^CpuSplit\.hot/ && index(seen, f[i]) == 0) { print f[i], n; seen = seen " " f[i] } } }' \
    "$TMPDIR/folded" > "$TMPDIR/conv.v"
  shares "$TMPDIR/conv.v" > "$TMPDIR/conv.s"
  if why=$(within "$TMPDIR/conv.s" "$TMPDIR/truth.s"); then ok convert "$(tr '\n' ' ' < "$TMPDIR/conv.s")"
  else fail convert "$why"; fi
else fail convert "$(head -3 "$TMPDIR/conv.err")"; fi

# ---- alloc ----------------------------------------------------------------------------------------------
if "$STROBE" top --cum --sample-index alloc_sample_bytes "$rec" > "$TMPDIR/alloc" 2>"$TMPDIR/alloc.err"; then
  big=$(awk '$6 == "CpuSplit.allocBig" { print $4 }' "$TMPDIR/alloc")
  small=$(awk '$6 == "CpuSplit.allocSmall" { print $4 }' "$TMPDIR/alloc")
  share=$(awk -v b="${big:-0}" -v s="${small:-0}" 'BEGIN { if (b + s > 0) printf "%.1f", 100 * b / (b + s); else print 0 }')
  if awk -v x="$share" 'BEGIN { exit !(x >= 63 && x <= 87) }'; then ok alloc "allocBig $share % of the sampled bytes (truth 75 %)"
  else fail alloc "allocBig $share % (big $big, small $small), expected 75 +- 12"; fi
else fail alloc "$(head -3 "$TMPDIR/alloc.err")"; fi

# ---- lock -----------------------------------------------------------------------------------------------
if "$STROBE" top --cum --sample-index lock_count "$rec" > "$TMPDIR/lock" 2>"$TMPDIR/lock.err"; then
  total=$(awk '/^Showing/ { print $(NF-1) }' "$TMPDIR/lock")
  cont=$(awk '$6 == "CpuSplit.contended" { print $4 }' "$TMPDIR/lock")
  if [ -n "$cont" ] && [ "${total:-0}" -gt 0 ] && [ "$cont" -ge $((total * 9 / 10)) ]; then
    ok lock "CpuSplit.contended in $cont of $total monitor-enter events"
  else fail lock "contended $cont of $total: $(head -8 "$TMPDIR/lock" | tr '\n' '|')"; fi
else fail lock "$(head -3 "$TMPDIR/lock.err")"; fi

# ---- /ingest?format=jfr ----------------------------------------------------------------------------------
if ! command -v curl >/dev/null; then echo "SKIP $name/ingest: curl is not installed"; exit $st; fi
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
# shellcheck source=lib/server.sh
. "$here/lib/server.sh"
start_server
CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds'
now=$(date +%s)
win="from=$((now - 30))&until=$now"
query_shares() { # APP OUT: shares of the app's cpu from the server's folded query
  curl -s -G "$url/api/v1/query" --data-urlencode "query=$CPU{service_name=\"$1\"}" -d format=folded -d from=now-5m > "$2.f"
  awk '{ n = $NF; split($0, f, ";"); seen = ""; for (i in f) { sub(/ [0-9]+$/, "", f[i]); if (f[i] ~ /^CpuSplit\.hot/ && index(seen, f[i]) == 0) { print f[i], n; seen = seen " " f[i] } } }' "$2.f" > "$2.v"
  shares "$2.v" > "$2"
}
code=$(curl -s -o "$TMPDIR/r1" -w '%{http_code}' --data-binary @"$rec" \
  "$url/ingest?name=javaapp.cpu&$win&format=jfr&sampleRate=100&spyName=javaspy")
query_shares javaapp "$TMPDIR/raw.s"
types=$(curl -s "$url/api/v1/types" 2>/dev/null | tr -d '\n' | head -c 2000)
if [ "$code" = 200 ] && why=$(within "$TMPDIR/raw.s" "$TMPDIR/truth.s"); then ok ingest-raw "$(tr '\n' ' ' < "$TMPDIR/raw.s")"
else fail ingest-raw "HTTP $code $(head -c 300 "$TMPDIR/r1"); ${why:-} $(head -3 "$TMPDIR/raw.s.f")"; fi
for t in memory:alloc_sample_bytes:bytes:space:bytes mutex:contentions:count:mutex:count; do
  n=$(curl -s -G "$url/api/v1/query" --data-urlencode "query=$t{service_name=\"javaapp\"}" -d format=folded -d from=now-5m | grep -c 'CpuSplit\.')
  if [ "$n" -gt 0 ]; then ok "ingest-type/$t" "$n stacks"; else fail "ingest-type/$t" "no stacks (types: $types)"; fi
done

if command -v protoc >/dev/null; then
  printf 'contexts { key: 1 value { labels { key: 1 value: 2 } } }\nstrings { key: 1 value: "endpoint" }\nstrings { key: 2 value: "/checkout" }\n' |
    protoc --proto_path="$here/../../proto" --encode=LabelsSnapshot jfr_labels.proto > "$TMPDIR/labels.pb"
  code=$(curl -s -o "$TMPDIR/r2" -w '%{http_code}' -F "jfr=@$rec;type=application/octet-stream" \
    -F "labels=@$TMPDIR/labels.pb;type=application/octet-stream" \
    "$url/ingest?name=formapp%7Benv%3Dtest%7D&$win&format=jfr&sampleRate=100")
  query_shares formapp "$TMPDIR/form.s"
  if [ "$code" = 200 ] && why=$(within "$TMPDIR/form.s" "$TMPDIR/truth.s"); then ok ingest-form "$(tr '\n' ' ' < "$TMPDIR/form.s")"
  else fail ingest-form "HTTP $code $(head -c 300 "$TMPDIR/r2"); ${why:-}"; fi
  # a labels part that is not a LabelsSnapshot is refused with a reason
  code=$(curl -s -o "$TMPDIR/r3" -w '%{http_code}' -F "jfr=@$rec" -F "labels=@$src" \
    "$url/ingest?name=badlabels&$win&format=jfr")
  if [ "$code" = 422 ] && grep -q labels "$TMPDIR/r3"; then ok ingest-bad-labels "$(head -c 120 "$TMPDIR/r3")"
  else fail ingest-bad-labels "HTTP $code $(head -c 200 "$TMPDIR/r3")"; fi
else echo "SKIP $name/ingest-form: protoc is not installed"; fi
exit $st
