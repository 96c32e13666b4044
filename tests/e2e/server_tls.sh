#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server over HTTPS and the clients that verify it, with a throwaway CA this test makes
# (certtool, Debian's gnutls-bin): a CA, a server certificate for 127.0.0.1 and localhost signed
# by it, a second CA nobody trusts, a certificate for another host name, an expired one.
#   ready          the start line says https; /ready answers over https (127.0.0.1 and localhost)
#   metrics        /metrics says strobe_tls_enabled 1 and the certificate's expiry (2 days away)
#   push-query     strobe push --ca, then strobe query --ca: the stacks and totals that were pushed
#   wrong-ca       a client trusting another CA is refused: non-zero exit, a message naming the
#                  server, curl's reason and the CA file; nothing stored
#   system-ca      without --ca (the system's CAs) the same refusal, with a hint to give --ca
#   wrong-host     a certificate of the right CA for another host name is refused too (that
#                  server's certificate and key come from the config, tls_cert and tls_key)
#   plain-http     http:// to the TLS port fails (curl and strobe push, which suggests https://);
#                  nothing stored
#   bad-files      missing file, a key as certificate, junk as key, a certificate as key, a key
#                  of another pair, one without the other, an expired certificate: exit 2, an
#                  error naming the file and what is wrong, no data directory
#   agent          strobe agent --server https://... --ca pushes its profiles; the server stored
#                  exactly as many as the agent counts as pushed, with the workload's frames
#   agent-wrong-ca an agent trusting another CA: every push fails verification, is counted
#                  (push.failed) and kept in the spool (none rejected or dropped), last_error says
#                  why; nothing of it stored
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
name0=server_tls
command -v curl >/dev/null || { echo "SKIP $name0: curl is not installed"; exit 0; }
if ! command -v certtool >/dev/null; then
	# scripts/deps.sh check installs it: in CI its absence is a broken setup, not a skip
	[ "${CI:-}" = true ] && { echo "FAIL $name0: certtool is not installed (scripts/deps.sh check: gnutls-bin)"; exit 1; }
	echo "SKIP $name0: certtool is not installed (apt-get install gnutls-bin; scripts/deps.sh check)"
	exit 0
fi
kill_at_exit pid apid wpid
D=$TMPDIR/pki
mkdir -p "$D"

# ---- the throwaway PKI --------------------------------------------------------------------------
key() { certtool --generate-privkey --key-type=ecdsa --outfile "$1" 2>/dev/null; }
ca() { # NAME CN
	key "$D/$1.key"
	printf 'cn = "%s"\nca\ncert_signing_key\nexpiration_days = 2\n' "$2" >"$D/$1.tmpl"
	certtool --generate-self-signed --load-privkey "$D/$1.key" --template "$D/$1.tmpl" \
		--outfile "$D/$1.pem" 2>/dev/null
}
cert() { # NAME KEY CA TEMPLATE-LINES...
	local n=$1 k=$2 c=$3
	shift 3
	printf '%s\n' "$@" tls_www_server signing_key encryption_key >"$D/$n.tmpl"
	certtool --generate-certificate --load-privkey "$D/$k.key" --load-ca-certificate "$D/$c.pem" \
		--load-ca-privkey "$D/$c.key" --template "$D/$n.tmpl" --outfile "$D/$n.pem" 2>/dev/null
}
ca ca "strobe test CA"
ca other "someone else's CA"
key "$D/srv.key"
key "$D/stranger.key"
cert srv srv ca 'cn = "localhost"' 'dns_name = "localhost"' 'ip_address = "127.0.0.1"' 'expiration_days = 2'
cert elsewhere srv ca 'cn = "elsewhere.example"' 'dns_name = "elsewhere.example"' 'expiration_days = 2'
cert old srv ca 'cn = "localhost"' 'ip_address = "127.0.0.1"' 'activation_date = "2020-01-01 00:00:00"' 'expiration_date = "2020-06-01 00:00:00"'
for f in ca other srv elsewhere old; do
	[ -s "$D/$f.pem" ] || { fail "$name0/pki" "certtool did not make $f.pem"; exit 1; }
done

# tls_server OPTIONS...: starts the server on a free loopback port with OPTIONS (the certificate
# and key), waits for its https start line, sets pid, port and surl.
tls_server() {
	rm -rf "$TMPDIR/data"
	: >"$TMPDIR/log"
	"$STROBE" server --data "$TMPDIR/data" --listen 127.0.0.1:0 "$@" 2>"$TMPDIR/log" & pid=$!
	local i
	port=
	for ((i = 0; i < 300; i++)); do
		port=$(sed -n 's|.*listening on https://127.0.0.1:\([0-9]*\) .*|\1|p' "$TMPDIR/log")
		[ -n "$port" ] && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	surl=https://127.0.0.1:$port
}
stop_server() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }
# total SERVICE: the sum of the folded values stored for that service in the last 10 minutes
total() {
	"$STROBE" query --ca "$D/ca.pem" -s "$surl" -t folded --from now-10m \
		"samples:samples:count:samples:count{service_name=\"$1\"}" 2>"$TMPDIR/q.err" |
		awk '{ s += $NF } END { print s + 0 }'
}

tls_server --tls-cert "$D/srv.pem" --tls-key "$D/srv.key"
name=$name0/ready
r1=$(curl -sS --cacert "$D/ca.pem" "$surl/ready" 2>&1)
r2=$(curl -sS --cacert "$D/ca.pem" "https://localhost:$port/ready" 2>&1)
if [ -z "$port" ]; then fail "$name" "no https start line: $(errof "$TMPDIR/log")"; exit 1
elif [ "$r1" != ok ] || [ "$r2" != ok ]; then fail "$name" "/ready over https: '$r1' / '$r2'"
else ok "$name" "$(head -1 "$TMPDIR/log" | cut -c1-90)"; fi

name=$name0/metrics
m=$(curl -sS --cacert "$D/ca.pem" "$surl/metrics")
on=$(awk '$1 == "strobe_tls_enabled" { print $2 }' <<<"$m")
exp=$(awk '$1 == "strobe_tls_certificate_expiry_seconds" { print $2 }' <<<"$m")
left=$(( ${exp:-0} - $(date +%s) ))
if [ "$on" != 1 ]; then fail "$name" "strobe_tls_enabled '$on'"
# certtool's expiration_days = 2: between one and two days (and a little) from now
elif [ "$left" -lt 86400 ] || [ "$left" -gt $((2 * 86400 + 600)) ]; then fail "$name" "the expiry is $left s from now, not about 2 days"
else ok "$name" "strobe_tls_enabled 1, certificate expires in $((left / 3600)) h"; fi

# ---- clients ------------------------------------------------------------------------------------
name=$name0/push-query
printf 'main;handle;parse 7\nmain;handle;render 5\nmain;idle 3\n' >"$TMPDIR/known.folded"
if ! "$STROBE" push --ca "$D/ca.pem" -s "$surl" --service tls-ok "$TMPDIR/known.folded" >"$TMPDIR/push.out" 2>"$TMPDIR/push.err"; then
	fail "$name" "push over https failed: $(errof "$TMPDIR/push.err")"
elif ! "$STROBE" query --ca "$D/ca.pem" -s "https://localhost:$port" -t folded --from now-10m \
	'samples:samples:count:samples:count{service_name="tls-ok"}' >"$TMPDIR/got.folded" 2>"$TMPDIR/q.err"; then
	fail "$name" "query over https failed: $(errof "$TMPDIR/q.err")"
elif ! diff <(sort "$TMPDIR/known.folded") <(sort "$TMPDIR/got.folded") >/dev/null; then
	fail "$name" "pushed $(tr '\n' '|' <"$TMPDIR/known.folded"), got $(tr '\n' '|' <"$TMPDIR/got.folded")"
else
	ok "$name" "3 stacks, total $(total tls-ok) of 15, back as pushed"
fi

# refused NAME SERVICE WANT-REGEX PUSH-OPTIONS...: the push must fail, say WANT and the server,
# and store nothing under SERVICE.
refused() {
	local n=$1 svc=$2 want=$3 rc t
	shift 3
	"$STROBE" push "$@" --service "$svc" "$TMPDIR/known.folded" >"$TMPDIR/r.out" 2>"$TMPDIR/r.err"
	rc=$?
	t=$(total "$svc")
	if [ "$rc" = 0 ]; then fail "$n" "the push succeeded: $(cat "$TMPDIR/r.out")"
	elif ! grep -Eq -- "$want" "$TMPDIR/r.err" || ! grep -q "127.0.0.1:$port" "$TMPDIR/r.err"; then
		fail "$n" "exit $rc, but the message does not say '$want' and the server: $(errof "$TMPDIR/r.err")"
	elif [ "$t" != 0 ]; then fail "$n" "refused, yet $t samples of $svc were stored"
	else ok "$n" "exit $rc: $(cut -c1-160 "$TMPDIR/r.err")"; fi
}
refused "$name0/wrong-ca" tls-wrong "certificate.*other\.pem" --ca "$D/other.pem" -s "$surl"
refused "$name0/system-ca" tls-system "certificate.*--ca FILE" -s "$surl"
# query with the wrong CA: refused too (its output would be someone else's data)
if "$STROBE" query --ca "$D/other.pem" -s "$surl" -t folded 'samples:samples:count:samples:count{service_name="tls-ok"}' >"$TMPDIR/wq.out" 2>"$TMPDIR/wq.err" ||
	! grep -q "certificate" "$TMPDIR/wq.err" || [ -s "$TMPDIR/wq.out" ]; then
	fail "$name0/wrong-ca-query" "query with another CA: $(errof "$TMPDIR/wq.err") $(head -c 100 "$TMPDIR/wq.out")"
else ok "$name0/wrong-ca-query" "$(cut -c1-120 "$TMPDIR/wq.err")"; fi

name=$name0/plain-http
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ready"); crc=$?
"$STROBE" push -s "http://127.0.0.1:$port" --service tls-plain "$TMPDIR/known.folded" >/dev/null 2>"$TMPDIR/p.err"; prc=$?
t=$(total tls-plain)
if [ "$crc" = 0 ] || [ "$code" = 200 ]; then fail "$name" "curl http:// to the TLS port: exit $crc, HTTP $code"
elif [ "$prc" = 0 ]; then fail "$name" "strobe push over http:// to the TLS port succeeded"
elif ! grep -q "its URL is https://" "$TMPDIR/p.err"; then fail "$name" "the push's error does not suggest https://: $(errof "$TMPDIR/p.err")"
elif [ "$t" != 0 ]; then fail "$name" "$t samples stored from a plain-http push"
else ok "$name" "curl exit $crc (HTTP $code); push: $(cut -c1-100 "$TMPDIR/p.err")"; fi

# ---- the agent ----------------------------------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	skip "$name0/agent" "needs root (perf_event)"
	skip "$name0/agent-wrong-ca" "needs root (perf_event)"
elif [ ! -x "$WL/cpu_split" ]; then
	fail "$name0/agent" "$WL/cpu_split is missing (make workloads)"
else
	STROBE_SERVICE=tls-agent "$WL/cpu_split" -o "$TMPDIR/cpu.truth" 60 & wpid=$!
	ingested() { curl -s --cacert "$D/ca.pem" "$surl/metrics" | awk '$1 == "strobe_ingested_profiles_total{tenant=\"anonymous\",source=\"push\"}" { print $2 }'; }
	name=$name0/agent
	before=$(ingested)
	url=$surl
	start_agent "$TMPDIR/agent.log" --ca "$D/ca.pem" -F 99 -i 1 --pid "$wpid" --host tls-agent --max-cpu 50
	for _ in $(seq 150); do [ "$(status_field push.pushed)" -ge 3 ] 2>/dev/null && break; sleep 0.2; done
	pushed=$(status_field push.pushed); failed=$(status_field push.failed)
	stop_agent || fail "$name" "the agent exited with status $? on SIGTERM: $(errof "$TMPDIR/agent.log")"
	after=$(ingested)
	"$STROBE" query --ca "$D/ca.pem" -s "$surl" -t folded --from now-10m \
		'process_cpu:cpu:nanoseconds:cpu:nanoseconds{host="tls-agent"}' >"$TMPDIR/agent.folded" 2>"$TMPDIR/aq.err"
	burn=$(grep -c 'burn_60' "$TMPDIR/agent.folded")
	stored=$(( ${after:-0} - ${before:-0} ))
	# /status was read before the final push at stop: the server may hold one or two more.
	if ! [ "${pushed:-0}" -ge 3 ] 2>/dev/null; then fail "$name" "only ${pushed:-?} pushes acknowledged in 30 s (failed ${failed:-?}): $(grep -m2 'push' "$TMPDIR/agent.log" | cut -c1-200 | tr '\n' ' ')"
	elif [ "$failed" != 0 ]; then fail "$name" "$failed pushes failed: $(grep -m1 'push failed' "$TMPDIR/agent.log" | cut -c1-200)"
	elif [ "$stored" -lt "$pushed" ] || [ "$stored" -gt $((pushed + 3)) ]; then fail "$name" "the agent counts $pushed pushes (then one last at stop), the server stored $stored"
	elif [ "$burn" = 0 ]; then fail "$name" "no burn_60 stacks of the workload stored: $(errof "$TMPDIR/aq.err")"
	else ok "$name" "$pushed pushes acknowledged over https ($stored stored by the server after the final push), $burn burn_60 stacks"; fi

	name=$name0/agent-wrong-ca
	url=$surl
	start_agent "$TMPDIR/agent2.log" --ca "$D/other.pem" -F 99 -i 1 --pid "$wpid" --host tls-wrong-agent --max-cpu 50
	for _ in $(seq 150); do [ "$(status_field push.failed)" -ge 3 ] 2>/dev/null && break; sleep 0.2; done
	failed=$(status_field push.failed); pushed=$(status_field push.pushed)
	rejected=$(status_field push.rejected); items=$(status_field spool.items)
	dropped=$(status_field spool.dropped); lerr=$(status_field last_error)
	kill -9 "$apid"; wait "$apid" 2>/dev/null; apid=
	"$STROBE" query --ca "$D/ca.pem" -s "$surl" -t folded --from now-10m \
		'process_cpu:cpu:nanoseconds:cpu:nanoseconds{host="tls-wrong-agent"}' >"$TMPDIR/wrong.folded" 2>"$TMPDIR/wq2.err"
	if ! [ "${failed:-0}" -ge 3 ] 2>/dev/null; then fail "$name" "push.failed ${failed:-?} after 30 s"
	elif [ "$pushed" != 0 ] || [ "$rejected" != 0 ]; then fail "$name" "pushed $pushed, rejected $rejected (want 0 and 0: retried, not dropped)"
	elif ! [ "${items:-0}" -ge 1 ] 2>/dev/null || [ "$dropped" != 0 ]; then fail "$name" "spool items ${items:-?}, dropped ${dropped:-?}: the profiles must wait in the spool"
	elif ! grep -q 'certificate' <<<"$lerr" || ! grep -q "127.0.0.1:$port" <<<"$lerr"; then fail "$name" "last_error does not say why: '$lerr'"
	elif ! grep -q 'push failed, will retry' "$TMPDIR/agent2.log"; then fail "$name" "the log does not say the push failed: $(errof "$TMPDIR/agent2.log")"
	elif [ -s "$TMPDIR/wrong.folded" ]; then fail "$name" "the server stored profiles of the agent it should have refused"
	else ok "$name" "$failed failed pushes, $items profiles kept in the spool; last_error: $(cut -c1-120 <<<"$lerr")"; fi
	kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
fi
stop_server

name=$name0/wrong-host
# (given by the config file this time, with a thread pool: both paths serve TLS)
printf '{"tls_cert": "%s", "tls_key": "%s", "threads": 2}\n' "$D/elsewhere.pem" "$D/srv.key" >"$TMPDIR/tls.json"
tls_server --config "$TMPDIR/tls.json"
"$STROBE" push --ca "$D/ca.pem" -s "$surl" --service tls-wronghost "$TMPDIR/known.folded" >/dev/null 2>"$TMPDIR/h.err"; hrc=$?
if [ -z "$port" ]; then fail "$name" "the server did not start: $(errof "$TMPDIR/log")"
elif [ "$hrc" = 0 ]; then fail "$name" "a push to 127.0.0.1 accepted a certificate for elsewhere.example"
elif ! grep -q 'host name' "$TMPDIR/h.err"; then fail "$name" "exit $hrc, but no word of the host name: $(errof "$TMPDIR/h.err")"
else ok "$name" "exit $hrc: $(cut -c1-140 "$TMPDIR/h.err")"; fi
stop_server

# ---- bad certificate and key files --------------------------------------------------------------
echo 'not a certificate' >"$D/junk.pem"
bad() { # NAME WANT-REGEX SERVER-OPTIONS...
	local n=$1 want=$2 rc
	shift 2
	rm -rf "$TMPDIR/data"
	timeout 20 "$STROBE" server --data "$TMPDIR/data" --listen 127.0.0.1:0 "$@" 2>"$TMPDIR/b.err"; rc=$?
	if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then fail "$name0/$n" "the server started (exit $rc)"
	elif ! grep -Eq -- "$want" "$TMPDIR/b.err"; then fail "$name0/$n" "exit $rc, want /$want/: $(errof "$TMPDIR/b.err")"
	elif [ -e "$TMPDIR/data" ]; then fail "$name0/$n" "refused, but the data directory was created"
	else ok "$name0/$n" "exit $rc: $(cut -c16-150 "$TMPDIR/b.err")"; fi
}
bad bad-missing "TLS certificate $D/nope.pem: No such file" --tls-cert "$D/nope.pem" --tls-key "$D/srv.key"
bad bad-cert "TLS certificate $D/srv.key: not a PEM certificate" --tls-cert "$D/srv.key" --tls-key "$D/srv.key"
bad bad-junk-key "TLS key $D/junk.pem: not an unencrypted PEM private key" --tls-cert "$D/srv.pem" --tls-key "$D/junk.pem"
bad bad-key "TLS key $D/ca.pem: not an unencrypted PEM private key" --tls-cert "$D/srv.pem" --tls-key "$D/ca.pem"
bad bad-pair "TLS key $D/stranger.key does not go with the certificate $D/srv.pem: .*not match" --tls-cert "$D/srv.pem" --tls-key "$D/stranger.key"
bad bad-alone "without --tls-key" --tls-cert "$D/srv.pem"
bad bad-alone-key "--tls-key given \($D/srv.key\) without --tls-cert" --tls-key "$D/srv.key"
bad bad-expired "TLS certificate $D/old.pem expired on 2020-06-01" --tls-cert "$D/old.pem" --tls-key "$D/srv.key"
exit $st
