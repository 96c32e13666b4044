#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How the server refuses requests, against the real binary:
#   uri-too-long  a URL past the server's cap (64 KiB) is a JSON 414, not the HTTP library's HTML
#   uri-long-ok   a URL just under the cap is served
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_rejects: curl is not installed"; exit 0; fi
st=0
fail() { echo "FAIL server_rejects/$1: $2"; st=1; }
ok() { echo "ok server_rejects/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
start_server

# ---- uri-too-long / uri-long-ok --------------------------------------------------------------------
long=$(head -c 100000 /dev/zero | tr '\0' a)
code=$(curl -s -o "$TMPDIR/r1" -w '%{http_code} %{content_type}' "$url/api/v1/labels?x=$long")
if [ "${code%% *}" = 414 ] && grep -q '"error"' "$TMPDIR/r1" && [[ $code == *application/json* ]]; then
  ok uri-too-long "$(cut -c1-120 "$TMPDIR/r1")"
else fail uri-too-long "HTTP $code $(head -c 200 "$TMPDIR/r1")"; fi
code=$(curl -s -o "$TMPDIR/r2" -w '%{http_code}' "$url/api/v1/labels?x=${long:0:60000}")
if [ "$code" = 200 ]; then ok uri-long-ok "a 60 kB URL"
else fail uri-long-ok "HTTP $code $(head -c 200 "$TMPDIR/r2")"; fi

kill $pid; wait $pid 2>/dev/null; pid=
exit $st
