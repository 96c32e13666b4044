#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The C SDK's per-thread labels read by the kernel at each sample, against a server that knows
# its own truth. build/workloads/span_server handles 120 requests of two kinds (/fast 10 ms of
# CPU, /slow 60 ms) on 4 threads, setting endpoint and span_id per request with
# build/libstrobe-sdk.a, and measures each kind's and each request's CPU time with the thread
# CPU clock. build/tools/tls_labels_probe finds the TLS offset the SDK published, runs
# agent/tls_labels.bpf.c on a cpu-clock event on every CPU (999 Hz) and counts samples per
# label set, read from the sampled thread's block through task->thread.fsbase.
#   read            nearly every sample of the workload's requests had a good block (status
#                   ok); torn copies (a sample inside a label write) and faults are counted
#   shares          each endpoint's share of the labelled samples is within 3 points of its
#                   share of the measured CPU time
#   span-query      the profile pushed with those labels on its samples, queried by the span_id
#                   of one request (/api/v1/query?span_id=), holds that request's samples only:
#                   its endpoint, exactly the count the probe made for it, and about its
#                   measured CPU time
# Needs root and kernel BTF; SKIPs otherwise, or when the kernel refuses the program.
set -u
st=0
fail() { echo "FAIL record_tls_labels/$1: $2"; st=1; }
ok() { echo "ok record_tls_labels/$1${2:+ ($2)}"; }
[ "$(id -u)" = 0 ] || { echo "SKIP record_tls_labels: needs root (loading eBPF programs)"; exit 0; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP record_tls_labels: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 0; }
[ "$(uname -m)" = x86_64 ] || { echo "SKIP record_tls_labels: the block is read through fsbase, x86-64 only"; exit 0; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build
for f in "$B/workloads/span_server" "$B/tools/tls_labels_probe"; do
  [ -x "$f" ] || { echo "FAIL record_tls_labels/setup: $f is not built (make workloads)"; exit 1; }
done
T=$TMPDIR
pid= wpid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; [ -n "$wpid" ] && kill -9 $wpid 2>/dev/null' EXIT
"$B/workloads/span_server" "$T/go" "$T/truth" 120 & wpid=$!
"$B/tools/tls_labels_probe" --pid $wpid --go "$T/go" --freq 999 --duration 50 --pprof "$T/p.pb.gz" \
  >"$T/counts" 2>"$T/probe.err"
prc=$?
if [ $prc = 4 ]; then
  echo "SKIP record_tls_labels: $(tail -1 "$T/probe.err")"; exit 0
fi
wait $wpid; wrc=$?; wpid=
[ $prc = 0 ] && [ $wrc = 0 ] || { echo "FAIL record_tls_labels/setup: probe $prc, workload $wrc: $(cat "$T/probe.err")"; exit 1; }

# ---- the reads ----------------------------------------------------------------------------------
# counts: "N STATUS endpoint=E,span_id=S" (or "-" without labels)
read -r okl all torn <<<"$(awk '{a += $1} $2 == "ok" && $3 != "-" {o += $1} $2 == "torn" {t += $1}
  END {print o + 0, a + 0, t + 0}' "$T/counts")"
awk -v o="$okl" -v a="$all" 'BEGIN {exit !(a > 0 && o >= 0.95 * a)}' &&
  ok read "$okl of $all samples labelled, $torn torn" ||
  fail read "$okl of $all samples labelled ($(awk '{print $2}' "$T/counts" | sort | uniq -c | tr '\n' ' '))"

# ---- shares against the truth -------------------------------------------------------------------
# label KEY of the line's label set ($3: k=v,k=v in slot order)
LBL='function lbl(key,   i, n, kv, p) { n = split($3, kv, ","); for (i = 1; i <= n; i++) {
  split(kv[i], p, "="); if (p[1] == key) return p[2] } return "" }'
ef=$(awk "$LBL"' $2 == "ok" && lbl("endpoint") == "/fast" {s += $1} END {print s + 0}' "$T/counts")
es=$(awk "$LBL"' $2 == "ok" && lbl("endpoint") == "/slow" {s += $1} END {print s + 0}' "$T/counts")
tf=$(awk '$1 == "cpu_ns" && $2 == "/fast" {print $3}' "$T/truth")
ts=$(awk '$1 == "cpu_ns" && $2 == "/slow" {print $3}' "$T/truth")
v=$(awk -v ef="$ef" -v es="$es" -v tf="$tf" -v ts="$ts" 'BEGIN {
  if (ef + es == 0 || tf + ts == 0) { print "none"; exit }
  a = 100 * ef / (ef + es); b = 100 * tf / (tf + ts); d = a - b; if (d < 0) d = -d
  printf "/fast %.1f%% of labelled samples, truth %.1f%%, off by %.1f points%s", a, b, d, d <= 3 ? "" : " (over 3)" }')
case $v in
  *points) ok shares "$v" ;;
  *) fail shares "$v; samples /fast $ef /slow $es, truth ns /fast $tf /slow $ts" ;;
esac

# ---- a span's own samples through the server ----------------------------------------------------
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server
read -r n span ep <<<"$(awk "$LBL"' $2 == "ok" && lbl("span_id") != "" && $1 > best {
  best = $1; bs = lbl("span_id"); be = lbl("endpoint") } END {print best + 0, bs, be}' "$T/counts")"
code=$(curl -s -o "$T/pr" -w '%{http_code}' --data-binary @"$T/p.pb.gz" --url-query service_name=span_server \
  --url-query name=process_cpu "$url/api/v1/push")
[ "$code" = 200 ] || fail span-query "push: HTTP $code $(head -c 300 "$T/pr")"
now=$(date +%s)
CPU='process_cpu:samples:count:cpu:nanoseconds'
code=$(curl -s -o "$T/q" -w '%{http_code}' -G --url-query "query=$CPU{service_name=\"span_server\"}" \
  --url-query from=$((now - 600)) --url-query to=$((now + 60)) --url-query "span_id=$span" \
  --url-query format=folded "$url/api/v1/query")
want_ns=$(awk -v s="$span" '$1 == "span" && $2 == s {print $4}' "$T/truth")
got=$(cat "$T/q")
# the request's CPU time against its samples at 999 Hz: within a third (sampling noise on ~60
# samples, and the clock reads at its edges)
near=$(awk -v n="$n" -v w="${want_ns:-0}" 'BEGIN {e = n * 1e9 / 999; print (w > 0 && e > w * 0.67 && e < w * 1.33) ? 1 : 0}')
[ "$code" = 200 ] && [ "$got" = "endpoint $ep $n" ] && [ "$near" = 1 ] &&
  ok span-query "span $span: $n samples of $ep, its CPU ${want_ns} ns" ||
  fail span-query "HTTP $code: '$(head -c 300 "$T/q")', want 'endpoint $ep $n' (truth ${want_ns:-?} ns)"

# ---- strobe record of a command it starts -------------------------------------------------------
# The SDK publishes its offset in a constructor just after the exec; record looks for it in its
# first rounds (20 ms apart): every request's CPU is spent after that, so nearly all of burn's
# samples carry a span_id (with 100-ms rounds, 97 % did in a 1.4 s run; without the look, none).
touch "$T/go2"
if STROBE_DEBUG=1 "$STROBE" record -q -e cpu -F 999 -o "$T/rec.pb.gz" -- "$B/workloads/span_server" "$T/go2" "$T/truth2" 60 \
  >"$T/rec.out" 2>&1; then
  all=$("$STROBE" top --focus '^burn$' "$T/rec.pb.gz" 2>&1 | sed -n 's/.*accounting for \([0-9.]*\)ms.*/\1/p')
  lab=$("$STROBE" top --focus '^burn$' --tagfocus 'span_id=.' "$T/rec.pb.gz" 2>&1 | sed -n 's/.*accounting for \([0-9.]*\)ms.*/\1/p')
  v=$(awk -v a="${all:-0}" -v l="${lab:-0}" 'BEGIN { if (a > 0) printf "%.1f", 100 * l / a; else print -1 }')
  awk -v v="$v" 'BEGIN { exit !(v >= 95) }' &&
    ok record-started "${v}% of burn's ${all} ms labelled" ||
    fail record-started "${v}% of burn's ${all:-?} ms labelled, want >= 95%; the profile's top: $("$STROBE" top "$T/rec.pb.gz" 2>&1 | sed -n '3p;5,7p' | tr -s ' \n' ' '); record said: $(tail -c 600 "$T/rec.out" | tr '\n' ' ')"
else
  fail record-started "strobe record failed: $(tail -c 400 "$T/rec.out")"
fi
exit $st
