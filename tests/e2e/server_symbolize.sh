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

if command -v go >/dev/null; then
	q team-a pprof after.pb.gz
	lines=$(go tool pprof -lines -top after.pb.gz 2>/dev/null | grep -E ' burn_(60|30|10) .*cpu_split\.c:[0-9]+' | head -3)
	if [ -n "$lines" ]; then ok $name/file-line "$(tr -s ' ' <<<"$lines" | tr '\n' ';')"
	else fail $name/file-line "no burn_* with cpu_split.c:LINE: $(go tool pprof -lines -top after.pb.gz 2>&1 | head -12 | tr '\n' ';')"; fi
elif [ "${CI:-}" = true ]; then fail $name/file-line "go is not installed (scripts/deps.sh check installs golang-go)"
else skip $name/file-line "go is not installed"; fi

kill "$pid"; wait "$pid" 2>/dev/null; pid=
exit $st
