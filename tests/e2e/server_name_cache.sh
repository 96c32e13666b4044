#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The naming cache (server/name_cache.c): what the server named from debug info is kept in
# DATA/debuginfo/names.sqlite, by tenant, build ID and address.
#   - a profile of bare addresses (written with protoc: two addresses of a -rdynamic program,
#     one inside an inlined function) is named from its stripped executable's dynamic symbols
#     (burn_a, no inline frame), then, after its separate debug file is uploaded, from DWARF
#     (burn_a;leaf_inl): the upload deleted the build ID's cached names;
#   - after a restart, with the uploaded files moved out of the store, the same query still
#     answers burn_a;leaf_inl: named from the cache, without any debug file (and /metrics counts
#     cache hits and no miss);
#   - another tenant's copy stays addresses (the cache is per tenant).
set -u
name=server_name_cache
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
# shellcheck source=lib/server.sh
. "$(dirname "$0")/lib/server.sh"
for t in curl cc objcopy strip addr2line nm readelf; do
	command -v $t >/dev/null || { echo "SKIP $name: $t is not installed"; exit 0; }
done
if ! command -v protoc >/dev/null; then
	if [ "${CI:-}" = true ]; then echo "FAIL $name: protoc is not installed (scripts/deps.sh check)"; exit 1; fi
	echo "SKIP $name: protoc is not installed (package protobuf-compiler)"; exit 0
fi
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
cd "$TMPDIR" || exit 1

cat >prog.c <<'C'
#include <stdlib.h>
static inline __attribute__((always_inline)) long leaf_inl(long x)
{
	return x * x + (x >> 3);
}
__attribute__((noinline)) long burn_a(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += leaf_inl(i);
	return s;
}
__attribute__((noinline)) long burn_b(long n)
{
	long s = 1;
	for (long i = 0; i < n; i++)
		s ^= i * 7;
	return s;
}
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	return (int)((burn_a(n) + burn_b(n)) & 1);
}
C
# -rdynamic: the stripped executable keeps burn_a and burn_b in its dynamic symbol table.
cc -O2 -g -rdynamic -Wl,--build-id -o prog prog.c && objcopy --only-keep-debug prog prog.debug &&
	cp prog prog.stripped && strip prog.stripped || { fail $name/build "cannot build the program"; exit 1; }
bid=$(readelf -n prog | awk '/Build ID/ {print $3}')
# An address inside the inlined leaf_inl (addr2line -i names it), and one in burn_b. The text
# segment's file offset equals its address (ld's layout), so the mapping's offset is 0.
read -r a_start a_size < <(nm -S prog | awk '$4 == "burn_a" {print $1, $2}')
in_leaf=
for ((o = 0; o < 0x$a_size; o++)); do
	a=$(printf '%x' $((0x$a_start + o)))
	if addr2line -i -f -e prog "$a" | head -1 | grep -qx leaf_inl; then in_leaf=$((0x$a)); break; fi
done
b=$(( 0x$(nm prog | awk '$3 == "burn_b" {print $1}') + 4 ))
[ -n "$in_leaf" ] || { fail $name/inline "no address of burn_a that addr2line names leaf_inl"; exit 1; }
base=$((0x555555554000))
cat >prof.txt <<PB
sample_type { type: 1 unit: 2 }
sample { location_id: 1 value: 5 }
sample { location_id: 2 value: 3 }
mapping { id: 1 memory_start: $base memory_limit: $((base + 0x5000)) filename: 3 build_id: 4 }
location { id: 1 mapping_id: 1 address: $((base + in_leaf)) }
location { id: 2 mapping_id: 1 address: $((base + b)) }
string_table: "" string_table: "cpu" string_table: "nanoseconds" string_table: "/opt/prog" string_table: "$bid"
PB
protoc --proto_path="$ROOT/proto" --encode=perftools.profiles.Profile profile.proto <prof.txt >prof.pb ||
	{ fail $name/protoc "cannot encode the profile"; exit 1; }

start_server
for t in team-a team-b; do
	"$STROBE" push --server "$url" --tenant $t --service nc prof.pb >push.$t 2>&1 ||
		{ fail $name/push "$t: $(cat push.$t)"; exit 1; }
done
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="nc"}'
q() { # TENANT OUT: the folded stacks, sorted
	"$STROBE" query --server "$url" --tenant "$1" --from now-1h -f folded "$SEL" 2>"$2.err" | sort >"$2"
}
metric() { curl -s "$url/metrics" | awk -v k="$1" '$1 == k {print $2}'; }

out=$("$STROBE" debuginfo upload --server "$url" --tenant team-a prog.stripped 2>&1) || fail $name/upload-exe "$out"
q team-a exe.folded
if grep -qx 'burn_a 5' exe.folded && grep -qx 'burn_b 3' exe.folded; then
	ok $name/dynsym "named from the executable's dynamic symbols: $(tr '\n' ' ' <exe.folded)"
else fail $name/dynsym "$(tr '\n' ' ' <exe.folded) $(cat exe.folded.err)"; fi
q team-a exe2.folded # now from the cache: the same answer
if cmp -s exe.folded exe2.folded; then ok $name/cached-same "the second query answers the same"
else fail $name/cached-same "$(tr '\n' ' ' <exe2.folded)"; fi

out=$("$STROBE" debuginfo upload --server "$url" --tenant team-a prog.debug 2>&1) || fail $name/upload-debug "$out"
q team-a debug.folded
if grep -qx 'burn_a;leaf_inl 5' debug.folded && grep -qx 'burn_b 3' debug.folded; then
	ok $name/upload-replaces "the debug file's names replace the cached ones: $(tr '\n' ' ' <debug.folded)"
else fail $name/upload-replaces "still $(tr '\n' ' ' <debug.folded) after the debug file's upload"; fi
q team-a debug2.folded # these rows are now cached

kill "$pid"; wait "$pid" 2>/dev/null; pid=
mkdir -p away && mv "$TMPDIR/data/debuginfo/team-a/$bid".* away/ ||
	{ fail $name/move "no uploaded files under data/debuginfo/team-a"; exit 1; }
launch_server "$STROBE" "$TMPDIR/data" || { fail $name/restart "$(head -3 "$TMPDIR/log")"; exit 1; }
q team-a restart.folded
if cmp -s debug.folded restart.folded; then
	ok $name/after-restart "named after a restart with the debug file gone: $(tr '\n' ' ' <restart.folded)"
else fail $name/after-restart "$(tr '\n' ' ' <restart.folded) (before the restart: $(tr '\n' ' ' <debug.folded))"; fi
hits=$(metric 'strobe_name_cache_lookups_total{result="hit"}')
misses=$(metric 'strobe_name_cache_lookups_total{result="miss"}')
if [ "${hits:-0}" -ge 2 ] && [ "${misses:-x}" = 0 ]; then ok $name/metrics "$hits cache hits, no miss"
else fail $name/metrics "hits ${hits:-none}, misses ${misses:-none}"; fi
# team-b has a debug-info store of its own (another program's file), so its query asks the cache.
printf 'int main(void) { return 0; }\n' >other.c && cc -g -Wl,--build-id -o other other.c &&
	"$STROBE" debuginfo upload --server "$url" --tenant team-b other >/dev/null 2>&1 ||
	fail $name/upload-other "cannot upload another program for team-b"
q team-b other.folded
if ! grep -q burn_ other.folded && grep -q 'prog+0x' other.folded; then
	ok $name/per-tenant "team-b's copy stays addresses"
else fail $name/per-tenant "team-b sees team-a's cached names: $(tr '\n' ' ' <other.folded)"; fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=
exit $st
