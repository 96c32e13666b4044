#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where tokens may and may not be.
#   server-config-mode  a server config holding tokens is refused at mode 644 (others) and 640
#                       (group), naming the file and "chmod 600 FILE"; 600 starts; a config
#                       without tokens is not held to it
#   agent-config-mode   the same for the agent's config with "token"; at 600 the agent's pushes
#                       with that token are stored
#   url-credentials     push, query and agent refuse a --server URL with user:password@ or
#                       ?token=, without quoting it; the server takes no ?token= either
#   no-leak             a server and two agents (one with a wrong token) run with distinctive
#                       tokens, plus failed auth of every kind, bad configs next to a token and
#                       CLI errors: no token string in the server's stderr, the agents' logs,
#                       /metrics, the agents' /status and /metrics, any error body or CLI message
set -u
# shellcheck source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"
command -v curl >/dev/null || { echo "SKIP server_secrets: curl is not installed"; exit 0; }
kill_at_exit pid apid apid2 apid3 wpid
T=server_secrets
TA=tokA-c0ffee5e11 TB=tokB-deadbeef77 TADM=tokAdm-5eed1e55aa TW=tokWrong-0badf00d99
TBAD=tokBad-1dea5c0ff TBARE=tokbareletterszq TAG=tokAg-7e57ab1e01
SEEN=$TMPDIR/seen # every text the test saw; grepped for the tokens at the end
mkdir -p "$SEEN"
keep() { cp "$1" "$SEEN/$2"; }

# ---- config file modes --------------------------------------------------------------------------
cat >"$TMPDIR/cfg.json" <<JSON
{ "admin_token": "$TADM",
  "tenants": [ { "id": "team-a", "token": "$TA" }, { "id": "team-b", "token": "$TB" },
               { "id": "team-ag", "token": "$TAG" } ] }
JSON
try_server() { # MODE FILE: starts the server on FILE at MODE; prints its exit status and stderr
	chmod "$1" "$2"
	timeout 20 "$STROBE" server --data "$TMPDIR/d0" --listen 127.0.0.1:0 --config "$2" >/dev/null 2>"$TMPDIR/e"
	echo "$? $(cat "$TMPDIR/e")"
}
o644=$(try_server 644 "$TMPDIR/cfg.json"); o640=$(try_server 640 "$TMPDIR/cfg.json")
echo "$o644" >"$SEEN/mode644"; echo "$o640" >"$SEEN/mode640"
want="holds tokens but is readable by"
if [[ $o644 == "2 "*"$TMPDIR/cfg.json $want others (mode 0644): run chmod 600 $TMPDIR/cfg.json"* ]] &&
	[[ $o640 == "2 "*"$want its group (mode 0640): run chmod 600 $TMPDIR/cfg.json"* ]]; then
	ok $T/server-config-mode "${o644#2 }"
else fail $T/server-config-mode "644: $o644; 640: $o640"; fi
echo '{ "retention": "7d", "tenants": [ { "id": "open" } ] }' >"$TMPDIR/notok.json"
chmod 644 "$TMPDIR/notok.json"
start_server --config "$TMPDIR/notok.json"
ok $T/no-token-config-any-mode "a 644 config without tokens starts"
kill "$pid"; wait "$pid" 2>/dev/null; pid=

# The server of the rest of the test, its config at 600.
chmod 600 "$TMPDIR/cfg.json"
start_server --config "$TMPDIR/cfg.json"
ok $T/server-config-600 "starts"

# ---- tokens in URLs -------------------------------------------------------------------------------
n=0 bad=
for u in "http://user:$TA@127.0.0.1:1" "http://127.0.0.1:1/?token=$TA" "http://127.0.0.1:1/x?a=1&access_token=$TA"; do
	"$STROBE" query --server "$u" 'x{}' >/dev/null 2>"$SEEN/url$n.query"; c1=$?
	"$STROBE" push --server "$u" --service s --time now "$GOPROF/go_cpu.pb.gz" >/dev/null 2>"$SEEN/url$n.push"; c2=$?
	[ "$c1 $c2" = "2 2" ] && grep -q 'the URL carries credentials' "$SEEN/url$n.query" "$SEEN/url$n.push" || bad+=" $u: $c1 $c2"
	n=$((n + 1))
done
c=$(curl -s -o "$SEEN/urltok.body" -w '%{http_code}' -H 'X-Scope-OrgID: team-a' "$url/api/v1/labels?token=$TA")
if [ -z "$bad" ] && [ "$c" = 401 ]; then ok $T/url-credentials "push, query refuse user:pw@ and ?token=; the server 401s ?token="
else fail $T/url-credentials "$bad; server: $c"; fi

# ---- failed auth of every kind, and the CLI's errors ------------------------------------------------
req() { # NAME CURL-ARGS...: the body into $SEEN/NAME, the status printed
	local n=$1
	shift
	curl -s -o "$SEEN/$n" -w '%{http_code}' "$@"
}
codes=$(
	req wrong -H 'X-Scope-OrgID: team-a' -H "Authorization: Bearer $TW" "$url/api/v1/labels"
	req cross -H 'X-Scope-OrgID: team-a' -H "Authorization: Bearer $TB" "$url/api/v1/series"
	req nobearer -H 'X-Scope-OrgID: team-a' -H "Authorization: $TA" "$url/api/v1/labels"
	req unknown -H 'X-Scope-OrgID: team-zz' -H "Authorization: Bearer $TA" "$url/api/v1/labels"
	req badtenant -H "X-Scope-OrgID: $TA/x" "$url/api/v1/labels"
	req admin-tenant -X POST -H "Authorization: Bearer $TA" "$url/api/v1/admin/compact"
	req admin-wrong -X POST -H "Authorization: Bearer $TW" "$url/api/v1/admin/compact"
	req admin-ok -X POST -H "Authorization: Bearer $TADM" "$url/api/v1/admin/compact"
	req push-wrong -H 'X-Scope-OrgID: team-b' -H "Authorization: Bearer $TW" --data-binary $'a;b 1\n' "$url/api/v1/push?service_name=x"
	req ingest-wrong -H 'X-Scope-OrgID: team-b' -H "Authorization: Bearer $TW" --data-binary $'a;b 1\n' "$url/ingest?name=x.cpu"
	req push-ok -H 'X-Scope-OrgID: team-b' -H "Authorization: Bearer $TB" --data-binary $'a;b 1\n' "$url/api/v1/push?service_name=x"
	req notfound -H 'X-Scope-OrgID: team-b' -H "Authorization: Bearer $TB" "$url/api/v1/nothing"
)
"$STROBE" query --server "$url" --tenant team-a --token "$TW" 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{}' >/dev/null 2>"$SEEN/cli-query-wrong"; q1=$?
"$STROBE" push --server "$url" --tenant team-a --token "$TW" --service s --time now "$GOPROF/go_cpu.pb.gz" >/dev/null 2>"$SEEN/cli-push-wrong"; q2=$?
"$STROBE" push --server "$url" --tenant team-a --token "$TA" --service s --time now "$GOPROF/go_cpu.pb.gz" >"$SEEN/cli-push-ok" 2>&1; q3=$?
"$STROBE" query --server "$url" --tenant team-a --token "$TA" -t top 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="s"}' >"$SEEN/cli-query-ok" 2>&1; q4=$?
# The CLI's token went in the header: the server reads it nowhere else, and its data is there.
if [ "$codes" = "401401401401400401401200401401200404" ] && [ "$q1 $q2 $q3 $q4" = "1 1 0 0" ] &&
	grep -q 'sha256' "$SEEN/cli-query-ok"; then
	ok $T/auth-outcomes "12 requests as expected; CLI: wrong token fails, right token (header only) pushes and reads"
else fail $T/auth-outcomes "codes $codes, CLI $q1 $q2 $q3 $q4: $(head -c 300 "$SEEN/cli-query-ok")"; fi

# ---- token files (not on the command line, where ps shows them) ---------------------------------------
printf '%s\n' "$TB" >"$TMPDIR/tokb"
chmod 600 "$TMPDIR/tokb"
"$STROBE" push --server "$url" --tenant team-b --token-file "$TMPDIR/tokb" --service tf --time now "$GOPROF/go_cpu.pb.gz" >/dev/null 2>"$SEEN/tf-ok"; t1=$?
chmod 640 "$TMPDIR/tokb"
"$STROBE" push --server "$url" --tenant team-b --token-file "$TMPDIR/tokb" --service tf --time now "$GOPROF/go_cpu.pb.gz" >/dev/null 2>"$SEEN/tf-640"; t2=$?
chmod 600 "$TMPDIR/tokb"
"$STROBE" query --server "$url" --tenant team-b --token $'x\r\nX-Scope-OrgID: team-a' 'x{}' >/dev/null 2>"$SEEN/tf-crlf"; t3=$?
"$STROBE" query --server "$url" --tenant team-b --token x --token-file "$TMPDIR/tokb" 'x{}' >/dev/null 2>"$SEEN/tf-both"; t4=$?
if [ "$t1 $t2 $t3 $t4" = "0 2 2 2" ] && grep -q "tokb holds tokens but is readable by its group (mode 0640): run chmod 600 $TMPDIR/tokb" "$SEEN/tf-640" &&
	grep -q 'control character' "$SEEN/tf-crlf" && grep -q 'not both' "$SEEN/tf-both"; then
	ok $T/token-file "600 file pushes; 640 refused with the fix; CR LF in a token refused"
else fail $T/token-file "exits $t1 $t2 $t3 $t4: $(cat "$SEEN"/tf-*)"; fi

# ---- bad configs next to a token --------------------------------------------------------------------
# jansson's messages quote the text "near" the error: an unterminated string, a newline or a bad
# escape in one quote the token whole, a bare word its letters (so TBARE is letters only).
printf '{ "tenants": [ { "id": "a", "token": "%s' "$TBAD" >"$TMPDIR/bad1.json"
printf '{ "tenants": [ { "id": "a", "token": %s } ] }\n' "$TBARE" >"$TMPDIR/bad2.json"
printf '{ "tenants": [ { "id": "a", "token": "%s" } ], "admin_token": "%s" }\n' "$TBAD" "$TBAD" >"$TMPDIR/bad3.json"
printf '{ "server": "http://127.0.0.1:1", "token": %s }\n' "$TBARE" >"$TMPDIR/bad4.json"
printf '{ "server": "http://127.0.0.1:1", "token": "%s\\u00" }\n' "$TBAD" >"$TMPDIR/bad5.json"
printf '{ "server": "http://127.0.0.1:1", "token": "%s\n" }\n' "$TBAD" >"$TMPDIR/bad6.json"
printf '{ "tenants": [ { "id": "a", "token": "%s\n" } ] }\n' "$TBAD" >"$TMPDIR/bad7.json"
# A scrape target's URL is a label of the public /metrics: no credentials in it.
printf '{ "scrape": [ { "url": "http://u:%s@127.0.0.1:1" } ] }\n' "$TBAD" >"$TMPDIR/bad8.json"
chmod 600 "$TMPDIR"/bad*.json
bc=
for i in 1 2 3 7 8; do timeout 20 "$STROBE" server --data "$TMPDIR/d0" --listen 127.0.0.1:0 --config "$TMPDIR/bad$i.json" >/dev/null 2>"$SEEN/badcfg$i"; bc+="$? "; done
for i in 4 5 6; do timeout 20 "$STROBE" agent --config "$TMPDIR/bad$i.json" >/dev/null 2>"$SEEN/badcfg$i"; bc+="$? "; done
if [ "$bc" = "2 2 2 2 2 2 2 2 " ] && grep -q "bad1.json:1:" "$SEEN/badcfg1" && grep -q "bad4.json:1:" "$SEEN/badcfg4" &&
	grep -q "scrape target 1: the URL carries credentials" "$SEEN/badcfg8"; then
	ok $T/bad-configs "8 refused: $(head -c 80 "$SEEN/badcfg2")"
else fail $T/bad-configs "exits $bc: $(cat "$SEEN"/badcfg*)"; fi

# ---- agents: the token from a 600 config, a wrong one from the command line --------------------------
agents=0
if [ "$(id -u)" -ne 0 ] || [ ! -e /proc/sys/kernel/perf_event_paranoid ] || [ ! -x "$WL/cpu_split" ]; then
	echo "SKIP $T/agent-config-mode: needs root, perf_event and build/workloads/cpu_split"
else
	agents=1
	cat >"$TMPDIR/agent.json" <<JSON
{ "server": "$url", "tenant": "team-ag", "token": "$TAG", "interval": 1, "frequency": 49 }
JSON
	chmod 644 "$TMPDIR/agent.json"
	timeout 20 "$STROBE" agent --config "$TMPDIR/agent.json" --admin 127.0.0.1:0 >/dev/null 2>"$SEEN/agent644"
	a644=$?
	"$WL/cpu_split" -o "$TMPDIR/cpu.truth" 60 >/dev/null & wpid=$!
	chmod 600 "$TMPDIR/agent.json"
	start_agent "$TMPDIR/agent.log" --config "$TMPDIR/agent.json" --pid "$wpid"
	apid2=$apid admin2=$admin
	start_agent "$TMPDIR/agentw.log" -i 1 -F 49 --pid "$wpid" --tenant team-a --token "$TW"
	apid3=$apid admin3=$admin
	# A config that names a token file need not be 600 itself (it holds no token).
	printf '{ "server": "%s", "tenant": "team-b", "token_file": "%s", "interval": 1, "frequency": 49 }\n' "$url" "$TMPDIR/tokb" >"$TMPDIR/agentf.json"
	chmod 644 "$TMPDIR/agentf.json"
	start_agent "$TMPDIR/agentf.log" --config "$TMPDIR/agentf.json" --pid "$wpid"
	adminf=$admin admin=$admin3
	for _ in $(seq 200); do
		[ "$(admin=$admin2 status_field push.pushed)" -ge 1 ] 2>/dev/null &&
			[ "$(status_field push.rejected)" -ge 1 ] 2>/dev/null && break
		sleep 0.1
	done
	curl -s "$admin2/status" >"$SEEN/agent-status"; curl -s "$admin2/metrics" >"$SEEN/agent-metrics"
	curl -s "$admin/status" >"$SEEN/agentw-status"; curl -s "$admin/metrics" >"$SEEN/agentw-metrics"
	for _ in $(seq 100); do [ "$(admin=$adminf status_field push.pushed)" -ge 1 ] 2>/dev/null && break; sleep 0.1; done
	curl -s "$adminf/status" >"$SEEN/agentf-status"
	pushed=$(admin=$admin2 status_field push.pushed) rejected=$(status_field push.rejected)
	pushedf=$(admin=$adminf status_field push.pushed)
	stop_agent; apid=$apid2; stop_agent; apid=$apid3; stop_agent
	kill $wpid 2>/dev/null; wait $wpid 2>/dev/null; wpid=
	keep "$TMPDIR/agent.log" agent.log; keep "$TMPDIR/agentw.log" agentw.log
	keep "$TMPDIR/agentf.log" agentf.log
	if [ "${pushedf:-0}" -ge 1 ]; then ok $T/agent-token-file "$pushedf pushes stored with the token of its token_file"
	else fail $T/agent-token-file "pushed ${pushedf:-?}: $(tail -3 "$TMPDIR/agentf.log")"; fi
	if [ "$a644" = 2 ] && grep -q "agent.json holds tokens but is readable by others (mode 0644): run chmod 600 $TMPDIR/agent.json" "$SEEN/agent644" &&
		[ "${pushed:-0}" -ge 1 ]; then
		ok $T/agent-config-mode "644 refused; at 600 $pushed pushes stored with the file's token"
	else fail $T/agent-config-mode "644: exit $a644 $(cat "$SEEN/agent644"); 600: pushed ${pushed:-?}"; fi
	if [ "${rejected:-0}" -ge 1 ] && grep -q 'push refused' "$SEEN/agentw.log"; then
		ok $T/agent-wrong-token "$rejected pushes refused, logged: $(grep -m1 -o 'push refused.*' "$SEEN/agentw.log" | cut -c1-90)"
	else fail $T/agent-wrong-token "rejected ${rejected:-?}: $(tail -3 "$SEEN/agentw.log")"; fi
fi

# ---- no token anywhere ----------------------------------------------------------------------------------
curl -s "$url/metrics" >"$SEEN/metrics"
kill "$pid"; wait "$pid" 2>/dev/null; pid=
keep "$TMPDIR/log" server.log
# Not vacuous: the server logged, the error bodies and messages are there.
nf=$(find "$SEEN" -type f -size +0 | wc -l)
leaks=$(grep -l -e "$TA" -e "$TB" -e "$TADM" -e "$TW" -e "$TBAD" -e "$TBARE" -e "$TAG" -r "$SEEN")
if [ -n "$leaks" ]; then
	fail $T/no-leak "$(for f in $leaks; do echo "$(basename "$f"): $(grep -o -e ".\{0,50\}tok[A-Za-z]*-[0-9a-f]*.\{0,20\}" "$f" | head -1)"; done | tr '\n' ';')"
elif [ "$nf" -lt $((30 + 6 * agents)) ] || ! grep -q strobe_request_duration "$SEEN/metrics"; then
	fail $T/no-leak "only $nf non-empty texts to look at"
else ok $T/no-leak "no token in $nf texts: server stderr, /metrics, error bodies, CLI messages$([ $agents = 1 ] && echo ", agents' logs, /status, /metrics")"; fi
exit $st
