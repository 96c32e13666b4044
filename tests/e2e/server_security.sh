#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server's exposure and access control end to end: loopback by default; off loopback (0.0.0.0
# and this host's own address) while some tenant needs no token, a refusal (exit status 2, a
# message saying why and what to do, no data directory created), and with --insecure a start
# with exactly one warning line (none on loopback, none with tokens); with tenant tokens, 401 without or with a wrong token, 200 with the right one; and /api/v1/series (with
# the right tokens) never shows one tenant another's series, whatever the selector.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_security: curl is not installed"; exit 0; fi
st=0
fail() { echo "FAIL server_security/$1: $2"; st=1; }
ok() { echo "ok server_security/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
cpu=$GOPROF/go_cpu.pb.gz
WARN='warning: listening on .* (not loopback) without a token for'

# run_server LISTEN_HOST [options...]: starts on port 0, waits for the listening line, sets url.
run_server() {
  local host=$1; shift
  rm -rf "$TMPDIR/data"; : >"$TMPDIR/log"
  "$STROBE" server --data "$TMPDIR/data" "$@" 2>"$TMPDIR/log" & pid=$!
  local port= i
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\) (data.*/\1/p' "$TMPDIR/log")
    [ -n "$port" ] && curl -sf "http://$host:$port/ready" >/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  url=http://$host:$port
  curl -sf "$url/ready" >/dev/null || { fail start "server did not come up: $(head -3 "$TMPDIR/log")"; exit 1; }
}
stop() { kill $pid; wait $pid; local rc=$?; pid=; return $rc; }

# ---- exposure ---------------------------------------------------------------------------------
# The default address is loopback (port 4100 may be taken here, so only the help says it).
if "$STROBE" server --help | grep -q 'default 127.0.0.1:4100'; then ok default-loopback; else fail default-loopback "help does not say 127.0.0.1:4100"; fi
# refused LISTEN NAME [options...]: the server must exit non-zero at once, say why and what to do,
# and leave no data directory behind.
refused() {
  local l=$1 name=$2 rc; shift 2
  rm -rf "$TMPDIR/data"
  timeout 20 "$STROBE" server --data "$TMPDIR/data" --listen "$l" "$@" 2>"$TMPDIR/log"; rc=$?
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then fail "$name" "started (exit $rc) on $l: $(cat "$TMPDIR/log")"
  elif ! grep -q "refusing to listen on $l (not loopback) without a token for" "$TMPDIR/log" ||
       ! grep -q 'could read and write' "$TMPDIR/log" || ! grep -q -- '--insecure' "$TMPDIR/log" ||
       ! grep -q 'token' "$TMPDIR/log"; then fail "$name" "exit $rc, but the message does not say why and how: $(cat "$TMPDIR/log")"
  elif [ -e "$TMPDIR/data" ]; then fail "$name" "refused, but the data directory was created"
  else ok "$name" "exit $rc: $(cut -c1-110 "$TMPDIR/log")..."; fi
}
refused 0.0.0.0:0 open-refused
# This host's own non-loopback address, where it has one (what a real deployment would name).
hostip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.' | head -1)
if [ -n "$hostip" ]; then refused "$hostip:0" open-refused-hostip; else echo "SKIP server_security/open-refused-hostip: this host has no non-loopback IPv4 address"; fi
# --insecure accepts it explicitly: the server starts and says once what that means.
run_server 127.0.0.1 --listen 0.0.0.0:0 --insecure
n=$(grep -c -- "$WARN" "$TMPDIR/log")
if [ "$n" = 1 ] && grep -q 'listening on 0.0.0.0:' "$TMPDIR/log" && grep -q 'accepted with --insecure' "$TMPDIR/log"; then ok insecure-warning "$(grep -- "$WARN" "$TMPDIR/log" | cut -c1-90)..."; else fail insecure-warning "$n warning lines in: $(cat "$TMPDIR/log")"; fi
stop || fail stop "exit $?"
run_server 127.0.0.1 --listen 127.0.0.1:0
if ! grep -q warning "$TMPDIR/log"; then ok loopback-quiet; else fail loopback-quiet "$(cat "$TMPDIR/log")"; fi
stop || fail stop "exit $?"

cat > "$TMPDIR/cfg.json" <<'JSON'
{ "tenants": [ { "id": "team-a", "token": "tok-a" }, { "id": "team-b", "token": "tok-b" } ] }
JSON
chmod 600 "$TMPDIR/cfg.json" # it holds tokens: the server refuses it readable by others
# One tenant without a token is as open as no tokens at all, for that tenant: refused, and with
# "insecure": true in the config (not only the flag) accepted with a warning naming the tenant.
echo '{ "tenants": [ { "id": "team-a", "token": "tok-a" }, { "id": "public" } ] }' > "$TMPDIR/half.json"
chmod 600 "$TMPDIR/half.json"
refused 0.0.0.0:0 open-tenant-refused --config "$TMPDIR/half.json"
grep -q 'for tenant public:' "$TMPDIR/log" || fail open-tenant-refused "the refusal does not name tenant public: $(cat "$TMPDIR/log")"
echo '{ "insecure": true, "tenants": [ { "id": "team-a", "token": "tok-a" }, { "id": "public" } ] }' > "$TMPDIR/half-insecure.json"
chmod 600 "$TMPDIR/half-insecure.json"
run_server 127.0.0.1 --listen 0.0.0.0:0 --config "$TMPDIR/half-insecure.json"
if grep -q -- "$WARN tenant public:" "$TMPDIR/log"; then ok open-tenant-warning "config \"insecure\": true"; else fail open-tenant-warning "$(cat "$TMPDIR/log")"; fi
stop || fail stop "exit $?"
run_server 127.0.0.1 --listen 0.0.0.0:0 --config "$TMPDIR/cfg.json"
if ! grep -q warning "$TMPDIR/log"; then ok tokens-quiet; else fail tokens-quiet "$(cat "$TMPDIR/log")"; fi

# ---- tokens -----------------------------------------------------------------------------------
code() { curl -s -o "$TMPDIR/body" -w '%{http_code}' "$@"; }
A=(-H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer tok-a')
B=(-H 'X-Scope-OrgID: team-b' -H 'Authorization: Bearer tok-b')
c1=$(code -H 'X-Scope-OrgID: team-a' --data-binary @"$cpu" "$url/api/v1/push?service_name=a-svc&time=now")
c2=$(code -H 'X-Scope-OrgID: team-a' -H 'Authorization: Bearer tok-b' --data-binary @"$cpu" "$url/api/v1/push?service_name=a-svc&time=now")
c3=$(code -H 'X-Scope-OrgID: team-a' -H 'Authorization: tok-a' -G "$url/api/v1/series")
c4=$(code -G "$url/api/v1/series")
if [ "$c1 $c2 $c3 $c4" = "401 401 401 401" ] && grep -q '"error":' "$TMPDIR/body"; then ok refused "no token, wrong token, no Bearer, no tenant: 401"; else fail refused "got $c1 $c2 $c3 $c4"; fi
# Folded bodies: one series each (a Go profile's pprof.Do labels would make several).
c5=$(code "${A[@]}" --data-binary $'main;work 7\n' "$url/api/v1/push?service_name=a-svc&time=now")
c6=$(code "${B[@]}" --data-binary $'main;work 5\n' "$url/api/v1/push?service_name=b-svc&labels=%7Benv%3D%22prod%22%7D&time=now")
if [ "$c5 $c6" = "200 200" ]; then ok accepted "right tokens: 200"; else fail accepted "got $c5 $c6"; fi

# ---- series are per tenant ----------------------------------------------------------------------
sa=$(curl -s -G "${A[@]}" "$url/api/v1/series" -d from=now-5m)
sb=$(curl -s -G "${B[@]}" "$url/api/v1/series" -d from=now-5m --data-urlencode 'match={service_name=~".+"}')
sx=$(curl -s -G "${A[@]}" "$url/api/v1/series" -d from=now-5m --data-urlencode 'match={service_name="b-svc"}' --data-urlencode 'match={env="prod"}')
wa='{"data":[{"__name__":"samples","__profile_type__":"samples:samples:count:samples:count","service_name":"a-svc"}]}'
wb='{"data":[{"__name__":"samples","__profile_type__":"samples:samples:count:samples:count","env":"prod","service_name":"b-svc"}]}'
if [ "$sa" = "$wa" ]; then ok series-own "team-a lists its series"; else fail series-own "team-a got $sa"; fi
if [ "$sb" = "$wb" ]; then ok series-own-b; else fail series-own-b "team-b got $sb"; fi
if [ "$sx" = '{"data":[]}' ]; then ok series-isolated "team-a asking for team-b's labels gets nothing"; else fail series-isolated "team-a got $sx"; fi
# Time bounds: nothing before the pushes.
so=$(curl -s -G "${A[@]}" "$url/api/v1/series" -d from=now-2h -d to=now-1h)
if [ "$so" = '{"data":[]}' ]; then ok series-window; else fail series-window "got $so"; fi
# Pushed with its pprof.Do labels, a Go CPU profile is a series per endpoint.
curl -s -o /dev/null "${A[@]}" --data-binary @"$cpu" "$url/api/v1/push?service_name=go&time=now"
m=$(curl -s -G "${A[@]}" "$url/api/v1/series" --data-urlencode 'match[]=process_cpu:samples:count:cpu:nanoseconds{service_name="go",endpoint=~"/.*"}' -d from=now-5m)
n=$(grep -o '"endpoint":"[^"]*"' <<<"$m" | sort -u | tr '\n' ' ')
if [ "$n" = '"endpoint":"/checkout" "endpoint":"/report" "endpoint":"/search" ' ] && ! grep -q '"process_cpu:cpu' <<<"$m"; then ok series-match-brackets "$n"; else fail series-match-brackets "got $m"; fi
e=$(code "${A[@]}" -G "$url/api/v1/series" --data-urlencode 'match={service_name=}')
if [ "$e" = 400 ] && grep -q '"error":"match: ' "$TMPDIR/body"; then ok series-bad-match; else fail series-bad-match "$e $(cat "$TMPDIR/body")"; fi
stop || fail stop "exit $?"
exit $st
