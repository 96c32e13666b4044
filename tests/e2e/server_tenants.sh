#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tenant isolation through every door. The routes come from the server itself
# (`strobe server --list-routes`, the table of server/routes.c), so a route added there is
# covered here or fails this test: a route the test has no case for is "add a case for ROUTE",
# and a known route whose access class changed (a tenant route made public) fails too.
#
# Tenants team-a and team-b both have tokens (config file, mode 600). team-a pushes data whose
# every name carries "amark" (service, label name and value, profile name, functions), through
# the native push and Pyroscope's /ingest. Then, for every tenant route:
#   - B's token with A's X-Scope-OrgID, no token, and A's token in the URL (?token=) are 401/403;
#   - reads: the same request as A's (A's selectors) made with B's credentials answers 200 and no
#     byte of "amark" (pprof bodies gunzipped first), while A's answer has it (so the request
#     would have shown A's data); every format the UI's download links use is asked for;
#   - writes: B's write with A's X-Scope-OrgID is refused, B's own write lands in B, and after
#     all of them A's view holds nothing of B's ("xmark", "bmark").
# Admin routes refuse both tenants' tokens and take the admin token; public routes answer
# without credentials and show nothing of A's.
set -u
if ! command -v curl >/dev/null; then echo "SKIP server_tenants: curl is not installed"; exit 0; fi
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
st=0
fail() { echo "FAIL server_tenants/$1: $2"; st=1; }
ok() { echo "ok server_tenants/$1${2:+ ($2)}"; }
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT

TA=tokA-9c1e55d0b7 TB=tokB-41f09e2a6c TADM=tokAdmin-7d2b8e31f4
cat >"$TMPDIR/cfg.json" <<JSON
{ "admin_token": "$TADM",
  "tenants": [ { "id": "team-a", "token": "$TA" }, { "id": "team-b", "token": "$TB" } ] }
JSON
chmod 600 "$TMPDIR/cfg.json"
start_server --config "$TMPDIR/cfg.json"

# hit WHO CURL-ARGS...: the request with WHO's credentials; the body goes to $TMPDIR/body
# (gunzipped when it is gzip), the status is printed.
#   a, b: the tenant with its own token; ba: B's token with A's X-Scope-OrgID; none: no
#   credentials; urltok: A's X-Scope-OrgID and A's token as ?token= instead of the header;
#   adm: the admin token alone; adma: the admin token with A's X-Scope-OrgID.
hit() {
	local who=$1 h=()
	shift
	case $who in
	a) h=(-H 'X-Scope-OrgID: team-a' -H "Authorization: Bearer $TA") ;;
	b) h=(-H 'X-Scope-OrgID: team-b' -H "Authorization: Bearer $TB") ;;
	ba) h=(-H 'X-Scope-OrgID: team-a' -H "Authorization: Bearer $TB") ;;
	urltok) h=(-H 'X-Scope-OrgID: team-a') ;;
	adm) h=(-H "Authorization: Bearer $TADM") ;;
	adma) h=(-H 'X-Scope-OrgID: team-a' -H "Authorization: Bearer $TADM") ;;
	none) ;;
	esac
	local u=()
	# With -G the token joins the other query parameters (curl 7.88 drops --url-query there).
	if [ "$who" = urltok ]; then
		if [ "$1" = -G ]; then u=(--data-urlencode "token=$TA"); else u=(--url-query "token=$TA"); fi
	fi
	curl -s -o "$TMPDIR/raw" -w '%{http_code}' "${h[@]}" "${u[@]}" "$@"
	if [ "$(head -c 2 "$TMPDIR/raw" | od -An -tx1 | tr -d ' ')" = 1f8b ]; then
		gzip -dc <"$TMPDIR/raw" >"$TMPDIR/body" 2>/dev/null
	else
		cp "$TMPDIR/raw" "$TMPDIR/body"
	fi
}
# --url-query is curl 7.87+; Debian 12 has 7.88. Older: the token goes on the URL by hand.
curl --help all 2>/dev/null | grep -q -- --url-query || { echo "SKIP server_tenants: curl lacks --url-query"; exit 0; }

# ---- A's data, with a marker in every name ------------------------------------------------------
TYPE_A='amarkprof:samples:count:samples:count'
SEL_A="$TYPE_A{service_name=\"amark-svc\"}"
c1=$(hit a --data-binary $'main;amark_fn_push 70\nmain;other 30\n' \
	"$url/api/v1/push?name=amarkprof&service_name=amark-svc&labels=%7Bamark_label%3D%22amark-value%22%7D&time=now")
c2=$(hit a --data-binary $'main;amark_fn_ingest 40\n' \
	"$url/ingest?name=amark-ingest.cpu%7Bamark_label%3Damark-value%7D&format=folded")
if [ "$c1 $c2" = "200 200" ]; then ok setup "team-a pushed through /api/v1/push and /ingest"
else fail setup "push $c1, ingest $c2: $(cat "$TMPDIR/body")"; exit 1; fi
INGEST_SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="amark-ingest"}'

# ---- the checks every tenant route gets -----------------------------------------------------------
# refused ROUTE CURL-ARGS...: B's token with A's tenant, no token, the token in the URL: 401/403.
refused() {
	local r=$1 who c bad=
	shift
	for who in ba none urltok; do
		c=$(hit $who "$@")
		case $c in 401 | 403) ;; *) bad+=" $who:$c" ;; esac
	done
	if [ -z "$bad" ]; then ok "$r/refused" "B's token for A, no token, ?token=: 401"
	else fail "$r/refused" "answered$bad: $(head -c 200 "$TMPDIR/body")"; fi
}
# read_case ROUTE NAME CURL-ARGS...: A sees "amark", B (same request) gets 200 without it. , when
# set, is a sed expression that drops what the reply echoes of the request (range's "type").
strip=
read_case() {
	local r=$1 n=$2 ca cb
	shift 2
	ca=$(hit a "$@")
	local sa
	sa=$(grep -ac amark "$TMPDIR/body")
	cb=$(hit b "$@")
	[ -n "$strip" ] && sed -i "$strip" "$TMPDIR/body"
	if [ "$ca" != 200 ] || [ "$sa" = 0 ]; then
		fail "$r/$n" "team-a's own request: $ca, $(head -c 200 "$TMPDIR/body") (no marker: the case would prove nothing)"
	elif [ "$cb" != 200 ]; then
		fail "$r/$n" "team-b: $cb $(head -c 200 "$TMPDIR/body")"
	elif grep -aq amark "$TMPDIR/body"; then
		fail "$r/$n" "team-b sees team-a's data: $(grep -ao '.\{0,40\}amark.\{0,40\}' "$TMPDIR/body" | tr -d "\0" | head -2)"
	else ok "$r/$n" "A sees its marker, B ($(wc -c <"$TMPDIR/body") bytes) none"; fi
}
G=(-G)
case_query() {
	local f
	for f in json folded pprof svg flat top; do
		# an SVG's heading echoes the selector asked (its title and subtitle lines)
		[ $f = svg ] && strip='s/<text id="\(sub\)\?title"[^<]*<\/text>//g'
		read_case "$1" "$f" "${G[@]}" "$url/api/v1/query" --data-urlencode "query=$SEL_A" -d from=now-10m -d format=$f
		strip=
	done
	read_case "$1" ingested "${G[@]}" "$url/api/v1/query" --data-urlencode "query=$INGEST_SEL" -d from=now-10m -d format=folded
	refused "$1" "${G[@]}" "$url/api/v1/query" --data-urlencode "query=$SEL_A" -d from=now-10m
}
case_diff() {
	local f
	for f in svg json flat top functions; do
		# An empty base (an hour ago), so that even top, which lists changes only, has A's rows.
		[ $f = svg ] && strip='s/<text id="\(sub\)\?title"[^<]*<\/text>//g'
		read_case "$1" "$f" "${G[@]}" "$url/api/v1/diff" --data-urlencode "base=$SEL_A" --data-urlencode "new=$SEL_A" \
			-d base_from=now-2h -d base_to=now-1h -d new_from=now-10m -d format=$f
		strip=
	done
	refused "$1" "${G[@]}" "$url/api/v1/diff" --data-urlencode "base=$SEL_A" --data-urlencode "new=$SEL_A"
}
# Regressions: A's window against itself answers 200 (nothing grew); B asking with A's
# selector finds no samples in its own tenant (422) and sees nothing of A's.
case_regressions() {
	local ca cb a=(-G "$url/api/v1/regressions" --data-urlencode "query=$SEL_A" -d base_from=now-10m -d new_from=now-10m)
	ca=$(hit a "${a[@]}")
	cb=$(hit b "${a[@]}")
	if [ "$ca" != 200 ]; then fail "$1" "team-a's own request: $ca"
	elif [ "$cb" != 422 ] || grep -aq amark "$TMPDIR/body"; then fail "$1" "team-b: $cb $(head -c 200 "$TMPDIR/body") (want 422, nothing of A's)"
	else ok "$1" "A 200, B 422 without A's data"; fi
	refused "$1" "${a[@]}"
}
case_range() {
	strip='s/"type":"[^"]*"//'
	read_case "$1" group_by "${G[@]}" "$url/api/v1/range" --data-urlencode "query=$SEL_A" -d from=now-10m -d step=1m -d group_by=amark_label
	strip=
	refused "$1" "${G[@]}" "$url/api/v1/range" --data-urlencode "query=$SEL_A" -d from=now-10m -d step=1m
}
case_labels() {
	read_case "$1" all "${G[@]}" "$url/api/v1/labels" -d from=now-10m
	refused "$1" "${G[@]}" "$url/api/v1/labels"
}
case_label_values() {
	local p=${2//\{name\}/amark_label} s=${2//\{name\}/service_name}
	read_case "$1" amark_label "${G[@]}" "$url$p" -d from=now-10m
	read_case "$1" service_name "${G[@]}" "$url$s" -d from=now-10m
	refused "$1" "${G[@]}" "$url$s"
}
case_profile_types() {
	read_case "$1" all "${G[@]}" "$url/api/v1/profile_types" -d from=now-10m
	refused "$1" "${G[@]}" "$url/api/v1/profile_types"
}
case_series() {
	read_case "$1" all "${G[@]}" "$url/api/v1/series" -d from=now-10m
	read_case "$1" match "${G[@]}" "$url/api/v1/series" -d from=now-10m --data-urlencode "match={amark_label=\"amark-value\"}"
	refused "$1" "${G[@]}" "$url/api/v1/series"
}
# GET /api/v1/cost and /api/v1/leaks (server/cost.c, server/leaks.c): A's functions by cost; A's
# in-use series growing at amark_leak_fn over 4 minutes (pprofs made by protoc) as a leak.
case_cost() {
	read_case "$1" by_function "${G[@]}" "$url/api/v1/cost" --data-urlencode "query=$INGEST_SEL" -d from=now-10m -d by=function
	refused "$1" "${G[@]}" "$url/api/v1/cost" --data-urlencode "query=$INGEST_SEL"
}
case_leaks() {
	local i t INUSE='memory:inuse_space:bytes:space:bytes{service_name="amark-heap"}' proto
	proto=$(cd "$(dirname "$0")/../../proto" && pwd)
	if ! command -v protoc >/dev/null; then echo "SKIP server_tenants/$1: protoc (protobuf-compiler) is not installed"
	else
		t=$(date +%s)
		for i in 1 2 3 4 5 6; do
			printf 'sample_type { type: 1 unit: 2 }\nsample { location_id: [1] value: [%d] }\nlocation { id: 1 line { function_id: 1 } }\nfunction { id: 1 name: 3 }\nstring_table: ["", "inuse_space", "bytes", "amark_leak_fn", "space"]\nperiod_type { type: 4 unit: 2 }\ntime_nanos: %d000000000\n' \
				$((i * 1000000)) $((t - 420 + 60 * i)) |
				protoc --encode=perftools.profiles.Profile --proto_path="$proto" profile.proto >"$TMPDIR/leak.pb"
			hit a --data-binary @"$TMPDIR/leak.pb" "$url/api/v1/push?name=memory&service_name=amark-heap" >/dev/null
		done
		read_case "$1" growing "${G[@]}" "$url/api/v1/leaks" --data-urlencode "query=$INUSE" -d from=now-7m -d step=1m -d confidence=0.9
	fi
	refused "$1" "${G[@]}" "$url/api/v1/leaks" --data-urlencode "query=$INUSE"
}
# write_case ROUTE URL-B URL-X BODY-B BODY-X: B's write with A's X-Scope-OrgID is refused (so
# "xmark" must never show up in A's view); B's own write is stored (checked at the end).
write_case() {
	local r=$1 ub=$2 ux=$3 bb=$4 bx=$5 c
	refused "$r" --data-binary "$bx" "$ux"
	c=$(hit b --data-binary "$bb" "$ub")
	if [ "$c" = 200 ]; then ok "$r/own-write" "team-b's own write stored"
	else fail "$r/own-write" "team-b's write: $c $(head -c 200 "$TMPDIR/body")"; fi
}
case_push() {
	write_case "$1" "$url/api/v1/push?name=bmarkprof&service_name=bmark-svc&time=now" \
		"$url/api/v1/push?name=xmarkprof&service_name=xmark-svc&time=now" \
		$'main;bmark_fn_push 5\n' $'main;xmark_fn_push 5\n'
}
case_ingest() {
	write_case "$1" "$url/ingest?name=bmark-ingest.cpu&format=folded" "$url/ingest?name=xmark-ingest.cpu&format=folded" \
		$'main;bmark_fn_ingest 5\n' $'main;xmark_fn_ingest 5\n'
}
case_otlp() { # bodies encoded by protoc from the OTLP fixture, the service and a function renamed
	local fx
	fx=$(cd "$(dirname "$0")/../.." && pwd)
	if ! command -v protoc >/dev/null; then echo "SKIP server_tenants/$1: protoc (protobuf-compiler) is not installed"; return; fi
	for m in bmark xmark; do
		sed -e "s/1700000000000000000/0/" -e "s/\"checkout\"/\"$m-otlp\"/" -e "s/\"hash\"/\"${m}_fn_otlp\"/" \
			"$fx/tests/fixtures/otlp/two_types.txtpb" |
			protoc --encode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest \
				--proto_path="$fx/proto" otlp_profiles_service.proto > "$TMPDIR/$m.otlp" ||
			{ fail "$1" "protoc (protobuf-compiler) could not encode the OTLP fixture"; return; }
	done
	write_case "$1" "$url/v1development/profiles" "$url/v1development/profiles" "@$TMPDIR/bmark.otlp" "@$TMPDIR/xmark.otlp"
}
# Grafana's routes (server/connect.c, server/render.c): Connect calls as JSON, legacy GETs.
J=(-H 'Content-Type: application/json')
case_connect_querier() {
	refused "$1" "${J[@]}" -d '{}' "$url/querier.v1.QuerierService/LabelNames"
	read_case "$1" LabelValues "${J[@]}" -d '{"name":"amark_label"}' "$url/querier.v1.QuerierService/LabelValues"
	read_case "$1" Series "${J[@]}" -d '{"matchers":["{amark_label=\"amark-value\"}"]}' "$url/querier.v1.QuerierService/Series"
	read_case "$1" SelectMergeStacktraces "${J[@]}" -d "{\"profileTypeID\":\"$TYPE_A\",\"labelSelector\":\"{service_name=\\\"amark-svc\\\"}\"}" \
		"$url/querier.v1.QuerierService/SelectMergeStacktraces"
	read_case "$1" SelectMergeProfile "${J[@]}" -d "{\"profileTypeID\":\"$TYPE_A\",\"labelSelector\":\"{}\"}" \
		"$url/querier.v1.QuerierService/SelectMergeProfile"
	read_case "$1" SelectSeries "${J[@]}" -d "{\"profileTypeID\":\"$TYPE_A\",\"groupBy\":[\"amark_label\"],\"step\":60}" \
		"$url/querier.v1.QuerierService/SelectSeries"
}
case_connect_settings() {
	local c
	refused "$1" "${J[@]}" -d '{}' "$url$2"
	c=$(hit a "${J[@]}" -d '{}' "$url$2")
	if [ "$c" = 200 ]; then ok "$1/own" "team-a: 200"; else fail "$1/own" "team-a: $c $(head -c 200 "$TMPDIR/body")"; fi
}
case_connect_push() {
	local bb bx c
	bb=$(printf 'main;bmark_fn_pushv1 5\n' | base64 -w0) bx=$(printf 'main;xmark_fn_pushv1 5\n' | base64 -w0)
	refused "$1" "${J[@]}" -d "{\"series\":[{\"labels\":[{\"name\":\"service_name\",\"value\":\"xmark-pushv1\"}],\"samples\":[{\"rawProfile\":\"$bx\"}]}]}" "$url$2"
	c=$(hit b "${J[@]}" -d "{\"series\":[{\"labels\":[{\"name\":\"service_name\",\"value\":\"bmark-pushv1\"}],\"samples\":[{\"rawProfile\":\"$bb\"}]}]}" "$url$2")
	if [ "$c" = 200 ]; then ok "$1/own-write" "team-b's own write stored"
	else fail "$1/own-write" "team-b's write: $c $(head -c 200 "$TMPDIR/body")"; fi
}
case_render() {
	refused "$1" -G "$url$2" --data-urlencode "query=$SEL_A"
	case $2 in
	*/render) read_case "$1" render "${G[@]}" "$url$2" --data-urlencode "query=$SEL_A" -d from=now-10m ;;
	*/render-diff) read_case "$1" render-diff "${G[@]}" "$url$2" --data-urlencode "leftQuery=$SEL_A" --data-urlencode "rightQuery=$SEL_A" \
		-d leftFrom=now-10m -d rightFrom=now-10m ;;
	*) read_case "$1" label-values "${G[@]}" "$url$2" -d label=amark_label -d from=now-10m ;;
	esac
}
# PGO export: A's folded samples have no start lines (422 naming them: A's data was read), B's
# window is empty (404): the same request never shows B what A has.
case_pgo() {
	local ca cb
	refused "$1" -G "$url/api/v1/pgo" --data-urlencode "query=$SEL_A" -d from=now-10m -d format=autofdo
	ca=$(hit a -G "$url/api/v1/pgo" --data-urlencode "query=$SEL_A" -d from=now-10m -d format=autofdo)
	local ba; ba=$(cat "$TMPDIR/body")
	cb=$(hit b -G "$url/api/v1/pgo" --data-urlencode "query=$SEL_A" -d from=now-10m -d format=autofdo)
	if [ "$ca" = 422 ] && grep -q 'start line' <<<"$ba" && [ "$cb" = 404 ] && grep -q 'no samples' "$TMPDIR/body"; then
		ok "$1/own" "A: 422 (its data, no start lines), B: 404 (no samples)"
	else fail "$1/own" "A $ca $(head -c 150 <<<"$ba"), B $cb $(head -c 150 "$TMPDIR/body")"; fi
}
case_admin_compact() {
	local c1 c2 c3 c4 c5
	c1=$(hit a -X POST "$url$2")
	c2=$(hit b -X POST "$url$2")
	c3=$(hit none -X POST "$url$2")
	c4=$(hit urltok -X POST "$url$2")
	c5=$(hit adm -X POST "$url$2")
	if [ "$c1 $c2 $c3 $c4" = "401 401 401 401" ] && [ "$c5" = 200 ]; then
		ok "$1/admin-only" "tenant tokens, none, ?token=: 401; admin token: 200"
	else fail "$1/admin-only" "A $c1, B $c2, none $c3, ?token= $c4, admin $c5: $(head -c 200 "$TMPDIR/body")"; fi
}
# The debug-info store: an ELF file of A's with the marker in its symbol table, and one of B's.
mk_elf() {
	printf 'int %s_fn(int x) { return x + 1; }\nint main(void) { return %s_fn(0); }\n' "$1" "$1" >"$TMPDIR/$1.c"
	cc -g -Wl,--build-id -o "$TMPDIR/$1.elf" "$TMPDIR/$1.c" && readelf -n "$TMPDIR/$1.elf" | awk '/Build ID/ {print $3}'
}
BID_A=$(mk_elf amark) BID_B=$(mk_elf bmark)
case_debuginfo_upload() {
	local ca cb
	refused "$1" --data-binary @"$TMPDIR/amark.elf" "$url/api/v1/debuginfo/$BID_A"
	ca=$(hit a --data-binary @"$TMPDIR/amark.elf" "$url/api/v1/debuginfo/$BID_A")
	cb=$(hit b --data-binary @"$TMPDIR/bmark.elf" "$url/api/v1/debuginfo/$BID_B")
	if [ "$ca $cb" = "200 200" ]; then ok "$1/own-write" "each tenant stored its own file"
	else fail "$1/own-write" "A $ca, B $cb: $(head -c 200 "$TMPDIR/body")"; fi
}
# own_only ROUTE NAME PATH: A gets 200 (with the marker when the answer is the file), B 404.
own_only() {
	local ca cb sa
	ca=$(hit a "$url$3")
	sa=$(grep -ac "amark\|$BID_A" "$TMPDIR/body")
	cb=$(hit b "$url$3")
	if [ "$ca" != 200 ] || [ "$sa" = 0 ]; then fail "$1/$2" "team-a's own request: $ca $(head -c 200 "$TMPDIR/body")"
	elif [ "$cb" != 404 ]; then fail "$1/$2" "team-b asked for team-a's build ID: $cb $(head -c 200 "$TMPDIR/body")"
	else ok "$1/$2" "A's build ID: A 200, B 404"; fi
	refused "$1" "$url$3"
}

# public_case ROUTE PATH: answers without credentials, and nothing of A's in it.
public_case() {
	local c
	c=$(hit none "$url$2")
	if [ "$c" != 200 ]; then fail "$1/public" "$c $(head -c 200 "$TMPDIR/body")"
	elif grep -aq amark "$TMPDIR/body"; then fail "$1/public" "shows team-a's data: $(grep -ao '.\{0,40\}amark.\{0,40\}' "$TMPDIR/body" | head -2)"
	else ok "$1/public" "200 without credentials, nothing of team-a's"; fi
}

# ---- every route of the server's table ------------------------------------------------------------
routes=$("$STROBE" server --list-routes)
n=$(grep -c . <<<"$routes")
if [ "$n" -ge 10 ]; then ok list-routes "$n routes"; else fail list-routes "$routes"; fi
while read -r m p access; do
	r="$m $p"
	# What the test expects each route's class to be: a change is a failure, not a skip.
	case $r in
	"GET /ready" | "GET /healthz" | "GET /metrics" | "GET /" | "GET /ui/*") want="public" ;;
	"POST /api/v1/admin/compact") want="admin" ;;
	"POST /api/v1/push" | "POST /ingest" | "POST /v1development/profiles" | "GET /api/v1/query" | "GET /api/v1/diff" | "GET /api/v1/range" | "GET /api/v1/regressions" | \
		"GET /api/v1/labels" | "GET /api/v1/label/{name}/values" | "GET /api/v1/profile_types" | \
		"GET /api/v1/cost" | "GET /api/v1/leaks" | "GET /api/v1/pgo" | \
		"GET /api/v1/series" | "POST /api/v1/debuginfo/{build_id}" | "GET /api/v1/debuginfo/{build_id}" | \
		"GET /buildid/*" | "POST /querier.v1.QuerierService/{name}" | "POST /settings.v1.SettingsService/Get" | \
		"POST /push.v1.PusherService/Push" | "GET /pyroscope/render" | "GET /pyroscope/render-diff" | \
		"GET /pyroscope/label-values") want="tenant" ;;
	*) fail "$r" "add a case for $r (access: $access) to tests/e2e/server_tenants.sh"; continue ;;
	esac
	if [ "$access" != "$want" ]; then fail "$r" "the route table says $access, this test expects $want"; continue; fi
	case $r in
	"GET /ui/*") public_case "$r" /ui/index.html ;;
	GET\ /ready | GET\ /healthz | GET\ /metrics | "GET /") public_case "$r" "$p" ;;
	"POST /api/v1/push") case_push "$r" ;;
	"POST /ingest") case_ingest "$r" ;;
	"POST /v1development/profiles") case_otlp "$r" ;;
	"GET /api/v1/query") case_query "$r" ;;
	"GET /api/v1/diff") case_diff "$r" ;;
	"GET /api/v1/pgo") case_pgo "$r" ;;
	"GET /api/v1/regressions") case_regressions "$r" ;;
	"GET /api/v1/range") case_range "$r" ;;
	"GET /api/v1/labels") case_labels "$r" ;;
	"GET /api/v1/label/{name}/values") case_label_values "$r" "$p" ;;
	"GET /api/v1/profile_types") case_profile_types "$r" ;;
	"GET /api/v1/series") case_series "$r" ;;
	"GET /api/v1/cost") case_cost "$r" ;;
	"GET /api/v1/leaks") case_leaks "$r" ;;
	"POST /api/v1/admin/compact") case_admin_compact "$r" "$p" ;;
	"POST /api/v1/debuginfo/{build_id}") case_debuginfo_upload "$r" ;;
	"GET /api/v1/debuginfo/{build_id}") own_only "$r" stat "/api/v1/debuginfo/$BID_A" ;;
	"GET /buildid/*") own_only "$r" debuginfod "/buildid/$BID_A/debuginfo"; own_only "$r" executable "/buildid/$BID_A/executable" ;;
	"POST /querier.v1.QuerierService/{name}") case_connect_querier "$r" ;;
	"POST /settings.v1.SettingsService/Get") case_connect_settings "$r" "$p" ;;
	"POST /push.v1.PusherService/Push") case_connect_push "$r" "$p" ;;
	GET\ /pyroscope/*) case_render "$r" "$p" ;;
	esac
done <<<"$routes"

# ---- writes by B never land in A ----------------------------------------------------------------------
# A's every listing, and B's: B's own writes are in B (so they happened), none of B's is in A.
la=$(for q in series labels profile_types label/service_name/values; do hit a -G "$url/api/v1/$q" -d from=now-10m >/dev/null; cat "$TMPDIR/body"; done)
lb=$(for q in series label/service_name/values; do hit b -G "$url/api/v1/$q" -d from=now-10m >/dev/null; cat "$TMPDIR/body"; done)
if grep -q 'xmark\|bmark' <<<"$la"; then fail b-writes-not-in-a "team-a's view: $(grep -o '.\{0,30\}[xb]mark.\{0,30\}' <<<"$la" | head -3)"
elif ! grep -q bmark-svc <<<"$lb" || ! grep -q bmark-ingest <<<"$lb" || { command -v protoc >/dev/null && ! grep -q bmark-otlp <<<"$lb"; }; then fail b-writes-not-in-a "team-b's own writes are not in team-b: $lb"
elif grep -q 'xmark\|amark' <<<"$lb"; then fail b-writes-not-in-a "team-b's view has $(grep -o '.\{0,30\}[xa]mark.\{0,30\}' <<<"$lb" | head -3)"
else ok b-writes-not-in-a "B's writes in B only; B's writes as A refused and nowhere"; fi
# An admin token is not a tenant's: with A's X-Scope-OrgID it reads nothing.
c=$(hit adma -G "$url/api/v1/series")
if [ "$c" = 401 ]; then ok admin-not-tenant "admin token as team-a: 401"; else fail admin-not-tenant "$c"; fi

kill "$pid"; wait "$pid" 2>/dev/null; pid=
exit $st
