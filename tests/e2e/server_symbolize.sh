#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Naming on the server (server/late_names.c): a stripped program recorded with bare addresses
# (strobe record --no-symbolize, as an agent in server mode sends them) is pushed; it queries as
# addresses until its separate debug file is uploaded (strobe debuginfo upload), and then the
# same stored profile shows cpu_split's functions:
#   - burn_60/30/10 within 5 points of the truth the workload logged, each >= 99% under
#     thread_main;run_rounds (the names strobe record gives on the host, record_cpu.sh; libc,
#     whose debug file is not uploaded, stays addresses);
#   - file:line on the frames (go tool pprof -lines on the queried pprof);
#   - the callers' call sites at the lines strobe record gives on the host for the same binary;
#   - another tenant's copy of the same profile stays addresses (uploads are per tenant).
# Needs perf_event (root) for the recording: SKIP elsewhere, like the recorder's truth tests.
set -u
name=server_symbolize
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
for t in curl objcopy strip; do
	command -v $t >/dev/null || { echo "SKIP $name: $t is not installed"; exit 0; }
done
need_workloads cpu_split
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
cd "$TMPDIR" || exit 1

cp "$WL/cpu_split" cpu_split.stripped && objcopy --only-keep-debug "$WL/cpu_split" cpu_split.debug &&
	strip cpu_split.stripped || { fail $name/build "cannot make the stripped copy and its debug file"; exit 1; }
if ! rec "$name" 120 --no-symbolize -F 499 -o raw.pb.gz -- ./cpu_split.stripped -c 2 -o truth 100; then
	fail $name/record "exit $rc: $(recerr "$name")"; exit 1
fi
start_server
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="split"}'
for t in team-a team-b; do
	"$STROBE" push --server "$url" --tenant $t --service split raw.pb.gz >push.$t 2>&1 ||
		{ fail $name/push "$t: $(cat push.$t)"; exit 1; }
done
q() { # TENANT FORMAT OUT
	"$STROBE" query --server "$url" --tenant "$1" --from now-1h -f "$2" -o "$3" "$SEL" 2>"$3.err"
}

q team-a folded before.folded || fail $name/before "$(cat before.folded.err)"
if ! grep -q burn_ before.folded && grep -q 'cpu_split.stripped+0x' before.folded; then
	ok $name/addresses-before "$(wc -l <before.folded) stacks of bare addresses"
else fail $name/addresses-before "$(head -c 300 before.folded)"; fi

out=$("$STROBE" debuginfo upload --server "$url" --tenant team-a cpu_split.debug 2>&1) ||
	fail $name/upload "$out"
q team-a folded after.folded || fail $name/after "$(cat after.folded.err)"
# As split_complete (lib/record.sh) judges strobe record, but from thread_main: libc stays
# addresses here (its debug file was not uploaded), so start_thread is not named.
detail= bad=
s=$(shares after.folded burn_60 burn_30 burn_10)
for fn in burn_60 burn_30 burn_10; do
	got=$(pct "$s" "$fn"); want=$(truth_share truth "$fn")
	c=$(complete after.folded "$fn" ";thread_main;run_rounds;$fn(;|\$)")
	detail+="$fn ${got}% (truth ${want}%, ${c}% under thread_main;run_rounds) "
	within_pp "$got" "$want" 5 || bad+="$fn share; "
	atleast "$c" 99 || bad+="$fn stacks; "
done
if [ -z "$bad" ]; then ok $name/named-after-upload "$detail"
else fail $name/named-after-upload "$bad: $detail"; fi

q team-b folded other.folded
if ! grep -q burn_ other.folded && grep -q 'cpu_split.stripped+0x' other.folded; then
	ok $name/per-tenant "team-b's copy stays addresses"
else fail $name/per-tenant "team-b sees names from team-a's upload: $(grep -o 'burn_[0-9]*' other.folded | sort -u | tr '\n' ' ')"; fi

# Many tenants at once (more than the 16 symbolizers kept: evictions while others name): every
# query answers, none waits on another forever.
# (wait on the jobs started here by pid: a bare wait would wait for the server too)
bg=()
for t in $(seq 1 20); do
	"$STROBE_FAST" push --server "$url" --tenant "many$t" --service split raw.pb.gz >/dev/null 2>&1 & bg+=($!)
done
wait "${bg[@]}"
bg=()
for t in $(seq 1 20); do "$STROBE_FAST" debuginfo upload --server "$url" --tenant "many$t" cpu_split.debug >/dev/null 2>&1 & bg+=($!); done
wait "${bg[@]}"
bg=()
for round in 1 2; do
	for t in $(seq 1 20) a b; do
		tn=many$t; [ "$t" = a ] && tn=team-a; [ "$t" = b ] && tn=team-b
		timeout 60 curl -s -o "many.$t.$round" -w '%{http_code}\n' -H "X-Scope-OrgID: $tn" -G "$url/api/v1/query" \
			--data-urlencode "query=$SEL" -d from=now-1h -d format=folded >"many.$t.$round.code" & bg+=($!)
	done
done
wait "${bg[@]}"
codes=$(cat many.*.code | sort | uniq -c | tr -s ' ' | tr '\n' ';')
named=$(grep -l ';run_rounds;burn_60' many.[0-9]*.[12] | wc -l)
if [ "$codes" = " 44 200;" ] && [ "$named" = 40 ]; then ok $name/many-tenants "44 concurrent queries of 22 tenants answered, the 20 uploaders' named"
else fail $name/many-tenants "codes: $codes; named: $named of 40"; fi

if command -v go >/dev/null; then
	q team-a pprof after.pb.gz
	lines=$(go tool pprof -lines -top after.pb.gz 2>/dev/null | grep -E ' burn_(60|30|10) .*cpu_split\.c:[0-9]+' | head -3)
	if [ -n "$lines" ]; then ok $name/file-line "$(tr -s ' ' <<<"$lines" | tr '\n' ';')"
	else fail $name/file-line "no burn_* with cpu_split.c:LINE: $(go tool pprof -lines -top after.pb.gz 2>&1 | head -12 | tr '\n' ';')"; fi
	# Cross-check with the recorder: the same binary recorded with its debug info on the host
	# names the callers' call sites at the same lines (a caller's address is its return
	# address: naming it as is would give the line after the call).
	if rec "$name-local" 120 -F 499 -o local.pb.gz -- "$WL/cpu_split" -c 1 -o truth.local 100; then
		a=$(go tool pprof -lines -top -nodecount=200 after.pb.gz 2>/dev/null | grep -oE '(run_rounds|thread_main) [^ ]*cpu_split\.c:[0-9]+' | sed 's# .*/# #' | sort -u)
		b=$(go tool pprof -lines -top -nodecount=200 local.pb.gz 2>/dev/null | grep -oE '(run_rounds|thread_main) [^ ]*cpu_split\.c:[0-9]+' | sed 's# .*/# #' | sort -u)
		if [ -n "$a" ] && [ "$a" = "$b" ]; then ok $name/same-as-record "call sites $(tr '\n' ' ' <<<"$a")"
		else fail $name/same-as-record "server: $(tr '\n' ' ' <<<"$a") record: $(tr '\n' ' ' <<<"$b")"; fi
	else fail $name/same-as-record "record: exit $rc: $(recerr "$name-local")"; fi
elif [ "${CI:-}" = true ]; then fail $name/file-line "go is not installed (scripts/deps.sh check installs golang-go)"
else skip $name/file-line "go is not installed"; fi

kill "$pid"; wait "$pid" 2>/dev/null; pid=

# ---- debuginfod as the source (elfutils' server on loopback, serving a directory) --------------
# The debug file is only in debuginfod's directory: a server started with --debuginfod names the
# profile from it. Then debuginfod is stopped (SIGSTOP: connections hang, as a dead host's do):
# a query whose build ID is not cached yet is still answered (its frames stay addresses), and
# another tenant's copy of the first profile is named from what was fetched before.
if ! command -v debuginfod >/dev/null; then
	if [ "${CI:-}" = true ]; then fail $name/debuginfod "debuginfod is not installed (scripts/deps.sh check)"
	else skip $name/debuginfod "debuginfod is not installed (package debuginfod)"; fi
	exit $st
fi
mkdir -p dsrv && cp cpu_split.debug dsrv/
bid=$(readelf -n cpu_split.debug 2>/dev/null | awk '/Build ID/ {print $3}')
dpid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; [ -n "$dpid" ] && kill -9 $dpid 2>/dev/null' EXIT
for try in 1 2 3 4 5; do
	dport=$((20000 + RANDOM % 30000))
	debuginfod -F -d "$TMPDIR/dfd.sqlite" -p $dport -t 0 -g 0 "$TMPDIR/dsrv" >dfd.log 2>&1 & dpid=$!
	for ((i = 0; i < 600; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$dport/buildid/$bid/debuginfo")" = 200 ] && break 2
		kill -0 $dpid 2>/dev/null || break
		sleep 0.1
	done
	kill -9 $dpid 2>/dev/null; wait $dpid 2>/dev/null; dpid=
done
if [ -z "$dpid" ]; then fail $name/debuginfod-start "$(tail -3 dfd.log | tr '\n' ' ')"; exit 1; fi
DEBUGINFOD_TIMEOUT=3 launch_server "$STROBE" "$TMPDIR/data2" --debuginfod "http://127.0.0.1:$dport" ||
	{ fail $name/start2 "$(head -3 "$TMPDIR/log")"; exit 1; }
for t in team-c team-d; do "$STROBE" push --server "$url" --tenant $t --service split raw.pb.gz >/dev/null 2>&1; done
q team-c folded dfd.folded
detail= bad=
s=$(shares dfd.folded burn_60 burn_30 burn_10)
for fn in burn_60 burn_30 burn_10; do
	got=$(pct "$s" "$fn"); want=$(truth_share truth "$fn")
	detail+="$fn ${got}% (truth ${want}%) "
	within_pp "$got" "$want" 5 || bad+="$fn share; "
done
if [ -z "$bad" ]; then ok $name/debuginfod "named from debuginfod: $detail"
else fail $name/debuginfod "$bad: $detail; $(head -c 200 dfd.folded)"; fi

kill -STOP $dpid
# A profile of a binary nobody has seen (protoc writes it: a mapping with a fresh build ID).
cat >fresh.txt <<'PB'
sample_type { type: 1 unit: 2 }
sample { location_id: 1 value: 5 }
mapping { id: 1 memory_start: 4096 memory_limit: 8192 filename: 3 build_id: 4 }
location { id: 1 mapping_id: 1 address: 4660 }
string_table: "" string_table: "cpu" string_table: "nanoseconds" string_table: "/opt/fresh" string_table: "c0ffee00112233445566778899aabbccddeeff00"
PB
if command -v protoc >/dev/null && protoc --proto_path="$ROOT/proto" --encode=perftools.profiles.Profile profile.proto <fresh.txt >fresh.pb; then
	"$STROBE" push --server "$url" --tenant team-c --service fresh fresh.pb >/dev/null 2>&1
	c=$(curl -s -o fresh.out -w '%{http_code}' -H 'X-Scope-OrgID: team-c' -G "$url/api/v1/query" \
		--data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="fresh"}' -d from=now-1h -d format=folded)
	if [ "$c" = 200 ] && grep -q '^\[fresh+0x234\] 5$' fresh.out; then ok $name/debuginfod-hangs "answered with the address while debuginfod hangs"
	else fail $name/debuginfod-hangs "$c: $(head -c 200 fresh.out)"; fi
elif [ "${CI:-}" = true ]; then fail $name/debuginfod-hangs "protoc is not installed (scripts/deps.sh check)"
else skip $name/debuginfod-hangs "protoc is not installed (package protobuf-compiler)"; fi
q team-d folded cached.folded
if grep -q ';run_rounds;burn_60' cached.folded; then ok $name/debuginfod-cached "named from the cache while debuginfod hangs"
else fail $name/debuginfod-cached "$(head -c 300 cached.folded)"; fi
if [ -s "$TMPDIR/data2/debuginfod-cache/$bid/debuginfo" ]; then ok $name/debuginfod-cache-dir "fetched file in DATA/debuginfod-cache"
else fail $name/debuginfod-cache-dir "$(find "$TMPDIR/data2" -maxdepth 2 | head -5 | tr '\n' ' ')"; fi
kill -9 $dpid; wait $dpid 2>/dev/null; dpid=
kill "$pid"; wait "$pid" 2>/dev/null; pid=
exit $st
