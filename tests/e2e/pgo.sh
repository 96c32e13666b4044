#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PGO export (docs/pgo.md), each file checked by the tool that consumes it, on a profile strobe
# record took of bench/pgo_vm.c (a bytecode interpreter, built -O2 -g, non-PIE for BOLT):
#   - autofdo: llvm-profdata show --sample parses it and finds the interpreter loop hot;
#     clang -fprofile-sample-use builds with it with -Werror and no output on stderr, the IR
#     carries the profile's branch weights (none without it), the binary prints the same checksum;
#   - discriminators: built -fdebug-info-for-profiling, the profile has OFFSET.D lines and clang
#     reports applying samples at discriminated offsets; llvm-profdata and Go's pprof read them;
#   - bolt: llvm-bolt (bolt-16) reads the fdata, profiles main and vm_run, and the rewritten binary
#     prints the same checksum;
#   - go: Go's own CPU profile (build/fixtures) trimmed; go tool pprof -raw (an independent
#     decoder) shows one sample type, start lines on every function, fewer samples and bytes;
#     `go build -pgo` is tried where Go is 1.21+ (Debian 12's 1.19 has no PGO: SKIP says so);
#   - refusals, never an empty file: folded input (no lines), a heap profile, unsymbolized
#     addresses, bolt without the binary; from the server an empty window (404), an unknown
#     format (400) and bolt before the executable is uploaded (422), then after it (200).
# Needs root for strobe record (SKIP elsewhere); each tool's case SKIPs where it is missing.
set -u
name=pgo
. "$(dirname "$0")/lib/record.sh"
. "$(dirname "$0")/lib/server.sh"
need_perf_events
for d in /usr/lib/llvm-16/bin /usr/lib/llvm-15/bin; do [ -d $d ] && PATH=$PATH:$d; done
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
cd "$TMPDIR" || exit 1
CC=$(command -v clang || command -v cc)
$CC -O2 -g -fno-pie -no-pie -Wl,--emit-relocs -o vm "$ROOT/bench/pgo_vm.c" ||
	{ fail $name/build "cannot build bench/pgo_vm.c"; exit 1; }
want=$(./vm 30)
if ! rec $name 120 -F 999 -o vm.pb.gz -- ./vm 30; then fail $name/record "$(recerr $name)"; exit 1; fi
nsamp=$("$STROBE_FAST" convert -t folded --sample-index samples vm.pb.gz 2>/dev/null | awk '{s += $NF} END {print s+0}')

# ---- AutoFDO ----------------------------------------------------------------------------------------
if "$STROBE" pgo autofdo -o vm.afdo vm.pb.gz 2>afdo.err; then
	ok $name/autofdo-write "$(cat afdo.err)"
else fail $name/autofdo-write "$(errof afdo.err)"; fi
if ! command -v llvm-profdata >/dev/null; then skip $name/autofdo-profdata "llvm-profdata is not installed (scripts/deps.sh check)"
elif llvm-profdata show --sample --all-functions vm.afdo >show.txt 2>show.err; then
	# vm_run's total as LLVM read it, against the samples whose leaf is in vm_run or what it inlines
	tot=$(awk -F'[:,] *' '/^Function: vm_run:/ {print $3}' show.txt)
	all=$(awk -F'[:,] *' '/^Function: / {s += $3} END {print s+0}' show.txt)
	flat=$("$STROBE_FAST" top --sample-index samples vm.pb.gz | awk '$NF=="vm_run" || $NF=="pop" || $NF=="push" {s+=$1} END {print s+0}')
	# Leaf samples on line 0 (clang's dispatch code) have no line to count at: at least half
	# of vm_run's leaf samples must be on its lines, and never more than were taken.
	if [ -n "$tot" ] && [ "$flat" -gt 0 ] && [ $((2 * tot)) -ge "$flat" ] && [ "$tot" -le "$nsamp" ] &&
		grep -q '^Function: main:' show.txt; then
		ok $name/autofdo-profdata "vm_run $tot samples on its lines and calls (leaf samples in it and its inlines: $flat, of $nsamp)"
	else fail $name/autofdo-profdata "vm_run '$tot', its leaf samples $flat: $(head -c 300 show.txt)"; fi
else fail $name/autofdo-profdata "$(errof show.err)"; fi
if [ "$(basename "$CC")" != clang ]; then skip $name/autofdo-clang "clang is not installed"
else
	if clang -O2 -g -Werror -fprofile-sample-use=vm.afdo -o vm.afdo.bin "$ROOT/bench/pgo_vm.c" 2>clang.err &&
		[ ! -s clang.err ] && [ "$(./vm.afdo.bin 30)" = "$want" ]; then
		ok $name/autofdo-clang "-Werror, no warnings, same checksum"
	else fail $name/autofdo-clang "$(errof clang.err)"; fi
	with=$(clang -O2 -g -fprofile-sample-use=vm.afdo -S -emit-llvm -o - "$ROOT/bench/pgo_vm.c" 2>/dev/null | grep -c 'branch_weights')
	without=$(clang -O2 -g -S -emit-llvm -o - "$ROOT/bench/pgo_vm.c" 2>/dev/null | grep -c 'branch_weights')
	if [ "$with" -gt 0 ] && [ "$without" = 0 ]; then ok $name/autofdo-used "$with branch weights from the profile, $without without"
	else fail $name/autofdo-used "branch weights: $with with the profile, $without without"; fi
fi

# ---- discriminators ------------------------------------------------------------------------------------
# bench/pgo_kernels.c (its hot loops put several blocks on one line: pgo_vm.c's discriminators
# are on inlined call sites only). Built -fdebug-info-for-profiling, the line table gives blocks
# of one line discriminators; the
# recording carries them (pprof Line field 100) to `strobe pgo autofdo`, which writes LLVM's base
# discriminator as OFFSET.D. The proof that they are the right ones: clang's sample loader, which
# looks each instruction up by its own (offset, base discriminator), reports applying samples at
# discriminated offsets (-Rpass-analysis=sample-profile: "Applied N samples ... (offset: 5.1)").
if [ "$(basename "$CC")" != clang ]; then skip $name/discriminators "clang is not installed"
elif ! clang -O2 -g -fdebug-info-for-profiling -fno-pie -no-pie -o vmd "$ROOT/bench/pgo_kernels.c"; then
	fail $name/discriminators "cannot build bench/pgo_kernels.c with -fdebug-info-for-profiling"
elif ! rec $name-dip 120 -F 999 -o vmd.pb.gz -- ./vmd 60; then fail $name/discriminators "$(recerr $name-dip)"
elif ! "$STROBE" pgo autofdo -o vmd.afdo vmd.pb.gz 2>vmd.err; then fail $name/discriminators "$(errof vmd.err)"
else
	nd=$(grep -cE '^ +[0-9]+\.[0-9]+: ' vmd.afdo)
	share=$(sed -n 's/.*; \([0-9.]*\)% on lines with a discriminator.*/\1/p' vmd.err)
	applied=$(clang -O2 -g -fdebug-info-for-profiling -fno-pie -no-pie -fprofile-sample-use=vmd.afdo \
		-Rpass-analysis=sample-profile -c -o /dev/null "$ROOT/bench/pgo_kernels.c" 2>&1 |
		grep -cE 'Applied [0-9]+ samples from profile \(offset: [0-9]+\.[0-9]+\)')
	if [ "$nd" -gt 0 ] && [ "$applied" -gt 0 ] && awk -v s="${share:-0}" 'BEGIN {exit !(s > 0)}'; then
		ok $name/discriminators "$nd discriminated lines ($share % of the samples); clang applied samples at $applied discriminated offsets"
	else fail $name/discriminators "discriminated lines $nd, share '$share', clang applied at $applied discriminated offsets: $(errof vmd.err)"; fi
	if command -v llvm-profdata >/dev/null && ! llvm-profdata show --sample vmd.afdo >/dev/null 2>prof.err; then
		fail $name/discriminators-profdata "$(errof prof.err)"
	elif command -v go >/dev/null && ! go tool pprof -raw vmd.pb.gz >/dev/null 2>raw.err; then
		fail $name/discriminators-pprof "Go's pprof does not read a recording with discriminators: $(errof raw.err)"
	else ok $name/discriminators-readers "llvm-profdata reads the text$(command -v go >/dev/null && echo ", go tool pprof the recording (field 100 skipped)")"; fi
fi

# ---- BOLT ---------------------------------------------------------------------------------------------
if "$STROBE" pgo bolt --binary vm -o vm.fdata vm.pb.gz 2>bolt.err && head -1 vm.fdata | grep -q '^no_lbr' &&
	grep -q '^1 vm_run [0-9a-f]* [0-9]*$' vm.fdata; then ok $name/bolt-write "$(cat bolt.err)"
else fail $name/bolt-write "$(errof bolt.err) $(head -c 200 vm.fdata 2>/dev/null)"; fi
if ! command -v llvm-bolt >/dev/null; then skip $name/bolt "llvm-bolt is not installed (bolt-16, scripts/deps.sh check)"
elif llvm-bolt vm -o vm.bolt -data=vm.fdata -reorder-blocks=ext-tsp -reorder-functions=hfsort \
	-split-functions -split-all-cold >bolt.log 2>&1; then
	n=$(sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' bolt.log)
	got=$(./vm.bolt 30 2>&1)
	# every function our fdata names (vm_run, and main when the sampler caught it there: how
	# many depends on what the run got on a loaded machine) has BOLT's profile
	nf=$(awk '$1 == 1 { print $2 }' vm.fdata | sort -u | wc -l)
	if [ "${n:-0}" -ge 1 ] && [ "${n:-0}" = "$nf" ] && [ "$got" = "$want" ]; then ok $name/bolt "$n functions with profile, all $nf of the fdata's; same checksum"
	else fail $name/bolt "profiled functions '${n}' of the fdata's $nf, output '$got' (want '$want'): $(grep -m3 'BOLT-\(INFO: [0-9]* out\|WARNING\|ERROR\)' bolt.log)"; fi
else fail $name/bolt "llvm-bolt failed: $(grep -m3 'ERROR' bolt.log)"; fi
# Local symbols: BOLT names them NAME/N, N counting same-named locals in address order. Two
# files each with a hot static spin(): both must be profiled under BOLT's names.
cat >l1.c <<'C'
static __attribute__((noinline)) long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += i % 7 ? i : -i; return s; }
long one(long n) { return spin(n); }
C
cat >l2.c <<'C'
static __attribute__((noinline)) long spin(long n) { long s = 1; for (long i = 0; i < n; i++) s ^= i * 3 + (s & 5); return s; }
long two(long n) { return spin(n); }
long one(long n);
int main(void) { long t = 0; for (int r = 0; r < 400; r++) t += one(400000) + two(400000); return (int)(t & 1); }
C
if $CC -O2 -g -fno-pie -no-pie -Wl,--emit-relocs -o locals l1.c l2.c && rec $name-locals 60 -F 999 -o locals.pb.gz -- ./locals &&
	"$STROBE" pgo bolt --binary locals -o locals.fdata locals.pb.gz 2>locals.err; then
	if ! grep -q '^1 spin/1 ' locals.fdata || ! grep -q '^1 spin/2 ' locals.fdata; then
		fail $name/bolt-locals "no spin/1 and spin/2 in: $(sed 1d locals.fdata | cut -d' ' -f2 | sort -u | tr '\n' ' ')"
	elif ! command -v llvm-bolt >/dev/null; then skip $name/bolt-locals "llvm-bolt is not installed"
	else
		llvm-bolt locals -o locals.bolt -data=locals.fdata -reorder-blocks=ext-tsp >lb.log 2>&1
		n=$(sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' lb.log)
		if [ "${n:-0}" -ge 2 ]; then ok $name/bolt-locals "spin/1 and spin/2: llvm-bolt profiled $n functions"
		else fail $name/bolt-locals "llvm-bolt profiled '${n}': $(grep -m2 'BOLT-' lb.log)"; fi
	fi
else fail $name/bolt-locals "$(recerr $name-locals) $(errof locals.err)"; fi

# ---- Go ------------------------------------------------------------------------------------------------
# The recorded C profile (Go's fixture, written by Go 1.19's runtime, has no start lines: it is a
# refusal case below). Go's PGO reads any CPU pprof; what it matches by is names and lines.
gin=vm.pb.gz
if ! command -v go >/dev/null; then skip $name/go "go is not installed (the independent decoder)"
elif "$STROBE" pgo go -o default.pgo "$gin" 2>go.err; then
	go tool pprof -raw default.pgo >raw.txt 2>raw.err
	types=$(awk '/^Samples:/ {getline; print; exit}' raw.txt)
	nloc=$(sed -n '/^Locations/,/^Mappings/p' raw.txt | grep -c ' s=[0-9]')
	nzero=$(sed -n '/^Locations/,/^Mappings/p' raw.txt | grep -c ' s=0\b')
	before=$(go tool pprof -raw "$gin" 2>/dev/null | sed -n '/^Samples:/,/^Locations/p' | grep -c '^ *[0-9].*:')
	after=$(sed -n '/^Samples:/,/^Locations/p' raw.txt | grep -c '^ *[0-9].*:')
	case $types in
	"samples/count" | "cpu/nanoseconds") ;; *) types="BAD:$types" ;;
	esac
	if [[ $types != BAD* ]] && [ "$nloc" -gt 0 ] && [ "$nzero" = 0 ] && [ "$after" -gt 0 ] && [ "$after" -lt "$before" ]; then
		ok $name/go-decode "one type ($types), $nloc locations all with start lines, $after samples of $before, $(stat -c %s default.pgo) of $(stat -c %s "$gin") bytes"
	else fail $name/go-decode "types '$types', $nloc locations ($nzero without start line), samples $before -> $after: $(errof raw.err)"; fi
	gv=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
	if [ "$(printf '%s\n1.21\n' "$gv" | sort -V | head -1)" != 1.21 ]; then
		skip $name/go-build "go $gv has no -pgo (Go 1.21+ reads default.pgo); checked with go tool pprof -raw instead"
	else
		mkdir -p gomod && cp "$ROOT/tests/fixtures/goservice.go" gomod/main.go && cp default.pgo gomod/ &&
			(cd gomod && go mod init pgotest >/dev/null 2>&1 && GOFLAGS=-mod=mod go build -pgo=default.pgo -o svc . ) 2>gobuild.err &&
			ok $name/go-build "go $gv built with -pgo" || fail $name/go-build "$(errof gobuild.err)"
	fi
else fail $name/go-decode "$(errof go.err)"; fi

# ---- refusals --------------------------------------------------------------------------------------------
refuse() { # CASE WANT-IN-MESSAGE ARGS...
	local c=$1 w=$2
	shift 2
	rm -f out.x
	if "$STROBE" pgo "$@" -o out.x 2>ref.err; then fail $name/refuse-$c "accepted: $(head -c 100 out.x)"
	elif [ -e out.x ]; then fail $name/refuse-$c "left a file behind"
	elif ! grep -qi -- "$w" ref.err; then fail $name/refuse-$c "message lacks '$w': $(errof ref.err)"
	else ok $name/refuse-$c "$(errof ref.err)"; fi
}
printf 'main;vm_run 70\nmain;other 30\n' >f.folded
refuse folded-autofdo "start line" autofdo f.folded
refuse folded-go "start_line" go f.folded
[ -s "${GOPROF:-$ROOT/build/fixtures/pprof}/go_heap.pb.gz" ] && refuse heap "CPU profile" autofdo "${GOPROF:-$ROOT/build/fixtures/pprof}/go_heap.pb.gz"
[ -s "${GOPROF:-$ROOT/build/fixtures/pprof}/go_cpu.pb.gz" ] && refuse go119-no-start-lines "start_line" go "${GOPROF:-$ROOT/build/fixtures/pprof}/go_cpu.pb.gz"
refuse bolt-no-binary "--binary" bolt vm.pb.gz
if rec $name-raw 60 --no-symbolize -F 499 -o raw.pb.gz -- ./vm 5; then
	refuse unsymbolized "symbolized" autofdo raw.pb.gz
else fail $name/refuse-unsymbolized "record: $(recerr $name-raw)"; fi

# ---- the server ----------------------------------------------------------------------------------------------
if ! command -v curl >/dev/null; then skip $name/server "curl is not installed"; exit $st; fi
start_server
SEL='process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="vm"}'
"$STROBE" push --server "$url" --service vm vm.pb.gz >push.out 2>&1 || fail $name/push "$(errof push.out)"
get() { # FORMAT OUT [curl args, default the last hour]: the status
	local f=$1 o=$2
	shift 2
	[ $# = 0 ] && set -- -d from=now-1h
	curl -s -o "$o" -w '%{http_code}' -G "$url/api/v1/pgo" --data-urlencode "query=$SEL" -d "format=$f" "$@"
}
c=$(get autofdo srv.afdo)
if [ "$c" = 200 ] && { ! command -v llvm-profdata >/dev/null || llvm-profdata show --sample srv.afdo >/dev/null 2>&1; } &&
	grep -q '^vm_run:' srv.afdo; then ok $name/server-autofdo "200, $(wc -l <srv.afdo) lines, llvm-profdata reads it"
else fail $name/server-autofdo "$c $(head -c 200 srv.afdo)"; fi
"$STROBE" pgo autofdo --server "$url" --from now-1h -o cli.afdo "$SEL" 2>cli.err
if cmp -s cli.afdo srv.afdo; then ok $name/server-cli "strobe pgo --server wrote the same file"
else fail $name/server-cli "$(errof cli.err)"; fi
c=$(get go srv.pgo)
if [ "$c" = 200 ] && go tool pprof -raw srv.pgo 2>/dev/null | grep -q 'vm_run .* s=[1-9]'; then ok $name/server-go "200, decoded, vm_run with its start line"
else fail $name/server-go "$c $(head -c 200 srv.pgo)"; fi
# discriminators through the server: pprof ingest, the store's location blobs, the merge
if [ -s vmd.pb.gz ]; then
	"$STROBE" push --server "$url" --service vmd vmd.pb.gz >push2.out 2>&1 || fail $name/push "$(errof push2.out)"
	c=$(curl -s -o srvd.afdo -w '%{http_code}' -G "$url/api/v1/pgo" -d format=autofdo -d from=now-1h \
		--data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="vmd"}')
	nsd=$(grep -cE '^ +[0-9]+\.[0-9]+: ' srvd.afdo)
	if [ "$c" = 200 ] && [ "$nsd" -gt 0 ]; then ok $name/server-discriminators "200, $nsd discriminated lines (the file's: $nd)"
	else fail $name/server-discriminators "$c, $nsd discriminated lines: $(head -c 200 srvd.afdo)"; fi
fi
c=$(get autofdo empty.txt -d from=now-3h -d to=now-2h)
if [ "$c" = 404 ] && grep -q 'no samples' empty.txt; then ok $name/server-empty "404: $(head -c 120 empty.txt)"
else fail $name/server-empty "$c $(head -c 200 empty.txt)"; fi
c=$(get pdf bad.txt)
if [ "$c" = 400 ] && grep -q 'format' bad.txt; then ok $name/server-format "400: $(head -c 120 bad.txt)"
else fail $name/server-format "$c $(head -c 200 bad.txt)"; fi
c=$(get bolt nobin.txt)
if [ "$c" = 422 ] && grep -q 'debuginfo' nobin.txt; then ok $name/server-bolt-nobinary "422: $(head -c 120 nobin.txt)"
else fail $name/server-bolt-nobinary "$c $(head -c 200 nobin.txt)"; fi
"$STROBE" debuginfo upload --server "$url" vm >up.out 2>&1 || fail $name/upload "$(errof up.out)"
c=$(get bolt srv.fdata)
# the store keeps cpu nanoseconds, the file samples: the same sites, other units
if [ "$c" = 200 ] && cmp -s <(cut -d' ' -f1-3 srv.fdata | sed 1d) <(cut -d' ' -f1-3 vm.fdata | sed 1d); then
	ok $name/server-bolt "200, the same $(sed 1d srv.fdata | wc -l) sites as strobe pgo bolt --binary"
else fail $name/server-bolt "$c $(head -c 200 srv.fdata)"; fi
exit $st
