#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server's debug-info store (server/debuginfo.c) and `strobe debuginfo upload`:
#   - a stripped program's separate debug file and its stripped executable are stored by build
#     ID, each in its role; uploading them again is skipped by the client (it asks first) and a
#     forced re-upload stores nothing new;
#   - refused with a 4xx naming the problem: not ELF, a build ID that is not the URL's, no build
#     ID at all, a bad build ID in the URL, a file over limits.max_debuginfo_bytes (413);
#   - served back byte for byte by debuginfod's protocol, to elfutils' own client
#     (debuginfod-find), and still there after a restart of the server.
set -u
name=server_debuginfo
for t in curl cc objcopy readelf strip; do
	command -v $t >/dev/null || { echo "SKIP $name: $t is not installed"; exit 0; }
done
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
fail() { echo "FAIL $name/$1: $2"; st=1; }
ok() { echo "ok $name/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT

cd "$TMPDIR" || exit 1
cat >prog.c <<'C'
static volatile int sink;
__attribute__((noinline)) void burn_a(int n) { for (int i = 0; i < n; i++) sink += i; }
int main(void) { burn_a(1000); return 0; }
C
cc -g -O1 -Wl,--build-id -o prog prog.c && objcopy --only-keep-debug prog prog.debug &&
	cp prog prog.stripped && strip prog.stripped && cc -O1 -Wl,--build-id=none -o noid prog.c || {
	fail build "cannot build the test program"; exit 1; }
bid=$(readelf -n prog | awk '/Build ID/ {print $3}')
cat >cfg.json <<'JSON'
{ "limits": { "max_debuginfo_bytes": 1000000 } }
JSON
start_server --config cfg.json

# ---- upload through the CLI, each role once ------------------------------------------------------
out=$("$STROBE" debuginfo upload --server "$url" prog.debug 2>&1)
if grep -q '"stored":\["debuginfo"\]' <<<"$out"; then ok upload-debug "$bid as debuginfo"
else fail upload-debug "$out"; fi
out=$("$STROBE" debuginfo upload --server "$url" prog.stripped 2>&1)
if grep -q '"stored":\["executable"\]' <<<"$out"; then ok upload-exe "stripped executable as executable"
else fail upload-exe "$out"; fi
out=$("$STROBE" debuginfo upload --server "$url" prog.debug prog.stripped 2>&1)
if [ "$(grep -c 'already on the server, skipped' <<<"$out")" = 2 ]; then ok skip-stored "both asked first and skipped"
else fail skip-stored "$out"; fi
out=$("$STROBE" debuginfo upload --force --server "$url" prog.debug 2>&1)
if grep -q '"stored":\[\],"already_stored":\["debuginfo"\]' <<<"$out"; then ok force-noop "a forced re-upload changes nothing"
else fail force-noop "$out"; fi
stat=$(curl -s "$url/api/v1/debuginfo/$bid")
dsz=$(stat -c %s prog.debug) esz=$(stat -c %s prog.stripped)
if grep -q "\"debuginfo\":true,\"executable\":true,\"debuginfo_size\":$dsz,\"executable_size\":$esz" <<<"$stat"; then
	ok stat "both roles, their sizes"
else fail stat "$stat (want sizes $dsz, $esz)"; fi

# ---- refusals ---------------------------------------------------------------------------------------
refuse() { # NAME WANT-STATUS WANT-TEXT CURL-ARGS...
	local n=$1 ws=$2 wt=$3 c
	shift 3
	c=$(curl -s -o body -w '%{http_code}' "$@")
	if [ "$c" = "$ws" ] && grep -q "$wt" body; then ok "refuse-$n" "$c: $(head -c 90 body)"
	else fail "refuse-$n" "want $ws with '$wt', got $c: $(head -c 300 body)"; fi
}
refuse not-elf 400 "not an ELF file" --data-binary @prog.c "$url/api/v1/debuginfo/$bid"
refuse mismatch 400 "build ID mismatch: the URL names 00112233" --data-binary @prog.debug "$url/api/v1/debuginfo/0011223344"
refuse no-build-id 400 "no GNU build ID" --data-binary @noid "$url/api/v1/debuginfo/$bid"
refuse bad-url-id 400 "hex digits" --data-binary @prog.debug "$url/api/v1/debuginfo/xyz"
refuse empty 400 "empty body" -X POST "$url/api/v1/debuginfo/$bid"
head -c 1200000 /dev/zero >big
refuse too-big 413 "max_debuginfo_bytes" --data-binary @big "$url/api/v1/debuginfo/$bid"
# ... and without a Content-Length to refuse it by: the stream is cut at the cap.
refuse too-big-chunked 413 "max_debuginfo_bytes" -H 'Transfer-Encoding: chunked' --data-binary @big "$url/api/v1/debuginfo/$bid"
out=$("$STROBE" debuginfo upload --server "$url" prog.c 2>&1); rc=$?
if [ $rc = 1 ] && grep -q "prog.c: not an ELF file" <<<"$out"; then ok cli-not-elf "exit 1: $out"
else fail cli-not-elf "exit $rc: $out"; fi
# (names.sqlite: the naming cache, server/name_cache.c, opened by the stored uploads)
leftover=$(find data/debuginfo -type f | grep -v "/$bid\.\(debuginfo\|executable\)$" | grep -v '/names\.sqlite\(-wal\|-shm\)\?$')
if [ -z "$leftover" ]; then ok no-leftovers "refused uploads left no files"; else fail no-leftovers "$leftover"; fi

# ---- served back, by debuginfod's protocol -----------------------------------------------------------
check_served() { # WHEN
	local c
	for role in debuginfo executable; do
		want=prog.debug; [ $role = executable ] && want=prog.stripped
		c=$(curl -s -o got -w '%{http_code}' "$url/buildid/$bid/$role")
		if [ "$c" = 200 ] && cmp -s got $want; then ok "served-$role-$1" "byte for byte"
		else fail "served-$role-$1" "$c, $(wc -c <got) bytes"; fi
	done
}
check_served running
c=$(curl -s -o body -w '%{http_code}' "$url/buildid/00ff00ff/debuginfo")
if [ "$c" = 404 ]; then ok miss-404 "unknown build ID: 404"; else fail miss-404 "$c"; fi
if command -v debuginfod-find >/dev/null; then
	p=$(DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$TMPDIR/dcache debuginfod-find debuginfo "$bid" 2>&1)
	if [ -f "$p" ] && cmp -s "$p" prog.debug; then ok debuginfod-find "elfutils' client fetched the debug file"
	else fail debuginfod-find "$p"; fi
elif [ "${CI:-}" = true ]; then fail debuginfod-find "debuginfod-find is not installed (package debuginfod; scripts/deps.sh check)"
else echo "SKIP $name/debuginfod-find: debuginfod-find is not installed (package debuginfod)"; fi

kill "$pid"; wait "$pid" 2>/dev/null; pid=
launch_server "$STROBE" "$TMPDIR/data" --config cfg.json || { fail restart "$(head -5 "$TMPDIR/log")"; exit 1; }
check_served restarted
kill "$pid"; wait "$pid" 2>/dev/null; pid=
exit $st
