#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server's data directory on a small filesystem that fills up (a size-limited tmpfs this test
# mounts; SKIP where mounting is not allowed). Every acknowledged push goes into a ledger (each
# has a stack of its own, "ledger;p<N>", with the value N), and the ledger is checked against a
# query while the disk is full, after space returns and after a kill -9 and restart:
#   refused      with the disk full, pushes get 507 with Retry-After and a message saying so
#   ledger-full  every push answered 200 is there while the disk is full
#   query-full   queries keep working while full; /ready too
#   maintenance  compaction and retention while full answer (200 or 507) and leave the server up
#   metrics      the refusals are counted: strobe_rejected_total{reason="disk_full"}
#   group-full   100 concurrent pushes while full (group commits): each refused, or acknowledged
#                and stored; nothing refused is stored
#   restart-full kill -9 while full, restarted on the full disk: up, ledger whole, pushes refused
#   resumes      space returns (the filler deleted): the next pushes get 200, no restart
#   ledger-after every acknowledged push is there after the resume, and after kill -9 + restart
set -u
name=server_diskfull
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
if [ -n "${STROBE_TEST_CLICKHOUSE:-}" ]; then echo "SKIP $name: on the ClickHouse store: it fills the filesystem of the SQLite store's file; the ClickHouse store writes to ClickHouse's disks"; exit 0; fi
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid= mnt=$TMPDIR/mnt
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
}
trap cleanup EXIT
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=6m tmpfs "$mnt" 2>"$TMPDIR/mount.err"; then
  echo "SKIP $name: cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): $(head -1 "$TMPDIR/mount.err")"
  exit 0
fi
data=$mnt/data
T='samples:samples:count:samples:count'

start() { # starts $STROBE on $data; sets pid and url
  launch_server "$STROBE" "$data" || { fail start "server did not come up: $(head -c 600 "$TMPDIR/log")"; exit 1; }
}

# One push: a folded profile whose stack "ledger;pN" says which push it was, plus padding stacks
# of its own (distinct strings, so each push needs new pages). Sets code to the HTTP status; a 200
# goes into the ledger.
: >"$TMPDIR/ledger"
n=0
push() {
  n=$((n + 1))
  { echo "ledger;p$n $n"; for ((k = 0; k < 40; k++)); do echo "pad;p${n}_$k;$RANDOM$RANDOM$RANDOM$RANDOM $((k + 1))"; done; } >"$TMPDIR/body"
  code=$(curl -s -D "$TMPDIR/hdr" -o "$TMPDIR/resp" -w '%{http_code}' --data-binary @"$TMPDIR/body" \
    "$url/api/v1/push?service_name=ledger&time=${when:-now}")
  [ "$code" = 200 ] && echo "$n" >>"$TMPDIR/ledger"
}
# Every acknowledged push missing from a query of the store: prints their numbers ("" = none).
missing() {
  curl -s -m 30 -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"ledger\"}" \
    -d format=folded -d from=now-6h -d until=now+1m >"$TMPDIR/q" || { echo "query-failed"; return; }
  awk 'NR == FNR { if ($1 ~ /^ledger;p[0-9]+$/) got[substr($1, 9)] = $2; next }
       !($1 in got) || got[$1] != $1 { printf "%s ", $1 }' "$TMPDIR/q" "$TMPDIR/ledger"
}

start
# Three hours ago: closed buckets that compaction has to fold (and so to write) once full.
when=now-3h; for ((i = 0; i < 5; i++)); do push; done; when=
# Fill the filesystem: a filler file the test can delete takes every free block.
dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null
# ... less a few pages, so that a commit runs out of space halfway through its WAL frames.
truncate -s -200K "$mnt/filler"
sync
# Push until refused: the WAL may still hold a few commits in space it already has.
code= full=0 other=
for ((i = 0; i < 200; i++)); do
  push
  case $code in 200) ;; 507 | 503) full=1; break ;; *) other=$code; break ;; esac
done
if [ "$full" = 1 ] && grep -qi '^Retry-After: [0-9]' "$TMPDIR/hdr" && grep -qi 'disk full' "$TMPDIR/resp"; then
  ok refused "HTTP $code at push $n, $(wc -l <"$TMPDIR/ledger") acknowledged before: $(head -c 200 "$TMPDIR/resp")"
else
  fail refused "last HTTP ${other:-$code}, want 507/503 with Retry-After and 'disk full': $(head -c 300 "$TMPDIR/resp"); headers: $(tr -d '\r' <"$TMPDIR/hdr" | tr '\n' ' ')"
fi
# More pushes while full: every one refused the same way (or, if a commit fit, acknowledged).
refused=0
for ((i = 0; i < 10; i++)); do
  push; case $code in 507 | 503) refused=$((refused + 1)) ;; 200) ;; *) fail refused-more "HTTP $code: $(head -c 200 "$TMPDIR/resp")" ;; esac
done

# Concurrent pushes while full: they share group commits, and a failed commit must fail every
# push in it. 100 pushes from 50 connections at once: each either 507 or 200 and stored.
storm=$(dirname "$STROBE")/tools/push_storm
group() { # SERVICE: runs the storm, compares its acknowledged pushes with the store ("" = same)
  "$storm" --port "${url##*:}" --clients 50 --requests 2 --seconds 50 --path "/api/v1/push?service_name=$1&time=now" \
    --ids "$TMPDIR/$1.ids" >"$TMPDIR/$1.out" 2>&1
  curl -s -m 30 -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"$1\"}" -d format=folded \
    -d from=now-6h -d until=now+1m >"$TMPDIR/$1.q"
  awk 'NR == FNR { acked["storm;" $1] = $2; next } $1 ~ /^storm;c/ { stored[$1] = $2 }
       END { for (k in acked) if (stored[k] != acked[k]) printf "missing %s; ", k
             for (k in stored) if (!(k in acked)) printf "stored but refused %s; ", k }' "$TMPDIR/$1.ids" "$TMPDIR/$1.q"
}
if [ -x "$storm" ]; then
  d=$(group gfull)
  g200=$(sed -n 's/.* ok200 \([0-9]*\).*/\1/p' "$TMPDIR/gfull.out") gerr=$(sed -n 's/.* errors \([0-9]*\).*/\1/p' "$TMPDIR/gfull.out")
  if [ -z "$d" ] && [ "$gerr" = 0 ]; then ok group-full "100 concurrent pushes while full: $g200 acknowledged and stored, the rest refused, none stored"
  else fail group-full "${d:-ledger exact}; $(cat "$TMPDIR/gfull.out")"; fi
else echo "SKIP $name/group-full: $storm is not built (make build/tools/push_storm)"; fi

m=$(missing)
if [ -z "$m" ]; then ok ledger-full "$(wc -l <"$TMPDIR/ledger") acknowledged pushes all answered while full"; else fail ledger-full "acknowledged but missing: $m"; fi
qc=$(curl -s -o /dev/null -w '%{http_code}' -G "$url/api/v1/labels" -d from=now-1h)
rc=$(curl -s -o /dev/null -w '%{http_code}' "$url/ready")
if [ "$qc" = 200 ] && [ "$rc" = 200 ]; then ok query-full; else fail query-full "labels HTTP $qc, /ready HTTP $rc"; fi

# Maintenance while full: whatever it manages, an answer and a server that is still up.
mc=$(curl -s -o "$TMPDIR/maint" -w '%{http_code}' -X POST -m 60 "$url/api/v1/admin/compact")
if { [ "$mc" = 200 ] || [ "$mc" = 507 ]; } && curl -sf "$url/ready" >/dev/null; then
  ok maintenance "compact + retention: HTTP $mc"
else fail maintenance "HTTP $mc $(head -c 200 "$TMPDIR/maint"); alive: $(kill -0 "$pid" 2>&1 && echo yes)"; fi

rej=$(curl -s "$url/metrics" | awk '/^strobe_rejected_total\{reason="disk_full"\}/ { print $2 }')
if [ "${rej:-0}" -ge $((refused + 1)) ] 2>/dev/null; then ok metrics "disk_full $rej"; else fail metrics "strobe_rejected_total{reason=\"disk_full\"} is '${rej:-}', want >= $((refused + 1))"; fi

# A crash while full (kill -9), and a restart on the still-full disk: it must come up (the WAL
# replayed), answer the ledger and keep refusing pushes cleanly.
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
start
m=$(missing)
push
if [ -z "$m" ] && { [ "$code" = 507 ] || [ "$code" = 200 ]; }; then ok restart-full "kill -9 and restart on the full disk: ledger whole, next push HTTP $code"
else fail restart-full "missing: ${m:-none}; next push HTTP $code $(head -c 200 "$TMPDIR/resp")"; fi

# Space returns: ingest resumes by itself.
rm -f "$mnt/filler"
good=0
for ((i = 0; i < 5; i++)); do push; [ "$code" = 200 ] && good=$((good + 1)); done
if [ "$good" = 5 ]; then ok resumes "5 of 5 pushes 200 after the filler was deleted, no restart"; else fail resumes "$good of 5 pushes 200 after the space returned: $(head -c 200 "$TMPDIR/resp")"; fi
if [ -x "$storm" ]; then
  d=$(group gafter)
  g200=$(sed -n 's/.* ok200 \([0-9]*\).*/\1/p' "$TMPDIR/gafter.out")
  if [ -z "$d" ] && [ "$g200" = 100 ]; then ok group-after "100 concurrent pushes after the space returned: all acknowledged and stored"
  else fail group-after "${d:-ledger exact}; $(cat "$TMPDIR/gafter.out")"; fi
fi
m=$(missing)
if [ -z "$m" ]; then ok ledger-after "$(wc -l <"$TMPDIR/ledger") acknowledged"; else fail ledger-after "acknowledged but missing: $m"; fi

# And after kill -9: the WAL left behind is replayed, nothing acknowledged is lost.
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
start
m=$(missing)
if [ -z "$m" ]; then ok ledger-restart "$(wc -l <"$TMPDIR/ledger") acknowledged, all there after kill -9"; else fail ledger-restart "acknowledged but missing: $m"; fi
exit $st
