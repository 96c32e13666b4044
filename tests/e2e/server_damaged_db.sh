#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A damaged store at start, made with the server stopped: the server must refuse to start, exit
# non-zero, name the file and say what is wrong, and leave the file as it found it (nothing
# silently dropped); a WAL left by kill -9 is not damage.
#   wal-not-damage  kill -9 right after acknowledged pushes: the restart replays the WAL, all there
#   truncated       strobe.db cut to half its size
#   garbage-page    one page in the middle overwritten with random bytes (dd conv=notrunc)
#   empty           strobe.db truncated to 0 bytes (SQLite would take it for a new database)
#   check-full      --check full (integrity_check) starts on the intact store, refuses the bad page
set -u
name=server_damaged_db
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
if ! command -v curl >/dev/null; then echo "SKIP $name: curl is not installed"; exit 0; fi
if [ -n "${STROBE_TEST_CLICKHOUSE:-}" ]; then echo "SKIP $name: on the ClickHouse store: it damages the SQLite store's file (strobe.db), which the ClickHouse store does not have"; exit 0; fi
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
T='samples:samples:count:samples:count'

# Starts $STROBE on $1 (more options after it); waits until it listens or exits. Sets pid and url
# when it listens (returns 0), else returns the exit status (the log in $TMPDIR/log).
try_start() {
  local data=$1 rc
  shift
  launch_server "$STROBE" "$data" "$@" && return 0
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=; return 255; fi
  wait "$pid"; rc=$?; pid=
  return $rc
}
stop() { kill "$pid"; wait "$pid"; local rc=$?; pid=; return $rc; }

# The ledger: pushes each with a stack "ledger;pN" of value N, checked by one query.
: >"$TMPDIR/ledger"
n=0
push() {
  n=$((n + 1))
  local code
  code=$(printf 'ledger;p%d %d\nmain;work;p%d 7\n' "$n" "$n" "$n" | curl -s -o /dev/null -w '%{http_code}' \
    --data-binary @- "$url/api/v1/push?service_name=ledger&time=now")
  [ "$code" = 200 ] && echo "$n" >>"$TMPDIR/ledger"
}
missing() {
  curl -s -m 30 -G "$url/api/v1/query" --data-urlencode "query=$T{service_name=\"ledger\"}" \
    -d format=folded -d from=now-1h -d until=now+1m >"$TMPDIR/q" || { echo "query-failed"; return; }
  awk 'NR == FNR { if ($1 ~ /^ledger;p[0-9]+$/) got[substr($1, 9)] = $2; next }
       !($1 in got) || got[$1] != $1 { printf "%s ", $1 }' "$TMPDIR/q" "$TMPDIR/ledger"
}

# ---- a store of a few MB: real Go profiles under many series, and the ledger -------------------
good=$TMPDIR/good
rm -rf "$good"
try_start "$good" || { fail setup "server did not start: $(head -c 400 "$TMPDIR/log")"; exit 1; }
for ((i = 0; i < 40; i++)); do
  curl -s -o /dev/null --data-binary @"$GOPROF/go_cpu.pb.gz" "$url/api/v1/push?service_name=svc$i&time=now-$((i + 1))m"
  curl -s -o /dev/null --data-binary @"$GOPROF/go_heap.pb.gz" "$url/api/v1/push?service_name=svc$i&time=now-$((i + 1))m"
  push
done
# ---- wal-not-damage: kill -9 leaves the WAL; the restart must take it, not refuse it -------------
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
if [ -s "$good/strobe.db-wal" ]; then wal="WAL of $(stat -c %s "$good/strobe.db-wal") bytes left"; else wal="no WAL left"; fi
if try_start "$good"; then
  m=$(missing)
  if [ -z "$m" ]; then ok wal-not-damage "$wal; $(wc -l <"$TMPDIR/ledger") acknowledged pushes all there"; else fail wal-not-damage "acknowledged but missing: $m"; fi
else fail wal-not-damage "$wal; the server refused to start: $(head -c 400 "$TMPDIR/log")"; fi
stop || fail stop "clean stop exited non-zero"
size=$(stat -c %s "$good/strobe.db")
pages=$((size / 4096))

# Refusal: non-zero exit, a message naming the file and the damage, the file untouched.
expect_refusal() { # CASE DIR WORDS-REGEX [server options]
  local case=$1 dir=$2 words=$3; shift 3
  local before after rc
  before=$(cksum <"$dir/strobe.db")
  try_start "$dir" "$@"; rc=$?
  after=$(cksum <"$dir/strobe.db")
  local msg
  msg=$(tr '\n' ' ' <"$TMPDIR/log" | head -c 400)
  if [ "$rc" = 0 ]; then fail "$case" "the server started on the damaged store: $msg"; kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
  elif [ "$rc" = 255 ]; then fail "$case" "the server neither listened nor exited within 60 s: $msg"
  elif ! grep -q "$dir/strobe.db" "$TMPDIR/log"; then fail "$case" "exit $rc, but the message does not name $dir/strobe.db: $msg"
  elif ! grep -Eqi "$words" "$TMPDIR/log"; then fail "$case" "exit $rc, but the message does not say what is wrong ($words): $msg"
  elif [ "$before" != "$after" ]; then fail "$case" "exit $rc, but the server changed the damaged file"
  else ok "$case" "exit $rc: $msg"; fi
}

# ---- truncated ----------------------------------------------------------------------------------
rm -rf "$TMPDIR/trunc"; cp -r "$good" "$TMPDIR/trunc"
truncate -s $((size / 2)) "$TMPDIR/trunc/strobe.db"
expect_refusal truncated "$TMPDIR/trunc" 'damaged|malformed'

# ---- one page of garbage in the middle -----------------------------------------------------------
rm -rf "$TMPDIR/garbage"; cp -r "$good" "$TMPDIR/garbage"
head -c 4096 /dev/urandom >"$TMPDIR/page"
dd if="$TMPDIR/page" of="$TMPDIR/garbage/strobe.db" bs=4096 seek=$((pages / 2)) conv=notrunc status=none
expect_refusal garbage-page "$TMPDIR/garbage" 'damaged|malformed'

# ---- empty ---------------------------------------------------------------------------------------
rm -rf "$TMPDIR/empty"; cp -r "$good" "$TMPDIR/empty"
: >"$TMPDIR/empty/strobe.db"
expect_refusal empty "$TMPDIR/empty" 'empty'

# ---- --check full: the intact store starts, the bad page is refused -------------------------------
if try_start "$good" --check full; then
  m=$(missing)
  if [ -z "$m" ]; then ok check-full-intact "$pages pages, $(wc -l <"$TMPDIR/ledger") acknowledged pushes there"; else fail check-full-intact "missing: $m"; fi
  stop || true
else fail check-full-intact "refused the intact store: $(head -c 400 "$TMPDIR/log")"; fi
expect_refusal check-full-garbage "$TMPDIR/garbage" 'damaged|malformed' --check full
exit $st
