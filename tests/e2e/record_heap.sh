#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record -e heap` (libstrobe-heap.so preloaded) against the truth: the workloads count
# what they allocate and write it to a truth file (tests/workloads/alloc_truth.c).
# Cases:
#   alloc      alloc_a/alloc_b/alloc_c allocate 600/300/100 MB in sizes 16 B..1 MiB: alloc_space
#              within 5 % and alloc_objects within 10 % of the truth per function (inclusive),
#              at STROBE_HEAP_RATE=16384 (the accuracy a test can demand in one second; the
#              default rate's is reported by the next case)
#   rate       the same at the default rate (512 KiB) and at 64 KiB and 4 MiB: alloc_space of each
#              function reported, judged only against 4 standard errors of the estimate,
#              sqrt(R / bytes) (at 4 MiB the 100 MB function's estimate is a few dozen samples)
#   inuse      hold_big/hold_small keep 48 MB in 64 KiB blocks and 16 MB in 256 B blocks to the
#              end while churn allocates 200 MB: inuse_space within 10 % of what they hold
#   leak       leak_site leaks 1 MB/s for 6 s while churn_a/churn_b churn 20 MB/s each: the
#              --leaks report names leak_site first and neither churning function
#   dlclose    dl_cycle loads libz with dlopen, has deflateInit_ allocate its state and unloads it
#              with dlclose, 100 times: the frames in libz are still named in the profile
#              (deflateInit2_ holds most of alloc_space), though libz is gone at exit
#   go         go tool pprof -raw reads the profile: the four sample types, Go's names
#   safety/*   python3 running an allocation-heavy script, gcc compiling a file, sort of a large
#              file, a C++ program with new/delete, threads, fork and fork+exec: the same output
#              and exit status with the library preloaded as without (and samples were taken)
#   interval   -i 1 on a 3.5 s run: numbered profiles out.1.pb.gz, out.2.pb.gz... each readable, the
#              leaking site's in-use bytes growing from one to the next
#   nolib      STROBE_HEAP_LIB naming a missing file: exit 2 with a message naming it
#   fullfs     STROBE_HEAP_DIR on a 256 KiB tmpfs left with 40 KiB free (needs root for mount):
#              the program runs as without the library (no SIGBUS from touching an unbacked
#              page); its samples are dropped
#   off        STROBE_HEAP_RATE=0: the program runs, no sample is taken
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
LIB=$ROOT/build/libstrobe-heap.so
need_files "$LIB" "$WL/alloc_truth" "$WL/new_delete"

hrec() { # NAME ARGS...: $STROBE record -e heap ARGS (stderr in $TMPDIR/NAME.err)
	local name=$1 f
	shift
	f=$(_fname "$name")
	timeout -k 5 120 "$STROBE" record -e heap "$@" >"$TMPDIR/$f.out" 2>"$TMPDIR/$f.err"
	rc=$?
	return $rc
}
# incl FOLDED FN: the inclusive value of frame FN
incl() { sum "$1" "(^|;)$2(;|$)"; }
# judge NAME FOLDED TRUTH KIND TOL FN...: each FN's inclusive value within TOL % of <FN>_<KIND>
judge() {
	local name=$1 folded=$2 tf=$3 kind=$4 tol=$5 fn got want
	shift 5
	for fn in "$@"; do
		got=$(incl "$folded" "$fn"); want=$(truth "$tf" "${fn}_$kind")
		detail+="$fn $got/$want "
		within_rel "$got" "$want" "$tol" || bad+="$fn "
	done
}

# ---- alloc ---------------------------------------------------------------------------------
name=record_heap/alloc
if ! STROBE_HEAP_RATE=16384 hrec "$name" -o "$TMPDIR/alloc.pb.gz" -- "$WL/alloc_truth" -o "$TMPDIR/alloc.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/alloc.pb.gz" "$TMPDIR/alloc.space" alloc_space ||
	! fold "$TMPDIR/alloc.pb.gz" "$TMPDIR/alloc.objects" alloc_objects; then
	fail "$name" "convert failed: $(errof "$TMPDIR/alloc.space.err")"
else
	detail="" bad=""
	judge "$name" "$TMPDIR/alloc.space" "$TMPDIR/alloc.truth" bytes 5 alloc_a alloc_b alloc_c
	sp=$detail; detail="" bb=$bad; bad=""
	judge "$name" "$TMPDIR/alloc.objects" "$TMPDIR/alloc.truth" count 10 alloc_a alloc_b alloc_c
	if [ -n "$bb$bad" ]; then
		fail "$name" "off for ${bb:+space: $bb}${bad:+objects: $bad}: space (got/truth) $sp; objects $detail"
	else
		ok "$name" "space ${sp% }; objects ${detail% }"
	fi
fi

# ---- rate ----------------------------------------------------------------------------------
for r in 65536 524288 4194304; do
	name=record_heap/rate-$r
	if ! STROBE_HEAP_RATE=$r hrec "$name" -o "$TMPDIR/rate$r.pb.gz" -- "$WL/alloc_truth" -o "$TMPDIR/rate$r.truth"; then
		fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
	elif ! fold "$TMPDIR/rate$r.pb.gz" "$TMPDIR/rate$r.space" alloc_space; then
		fail "$name" "convert failed: $(errof "$TMPDIR/rate$r.space.err")"
	else
		bad="" errs=""
		for fn in alloc_a alloc_b alloc_c; do
			got=$(incl "$TMPDIR/rate$r.space" $fn); want=$(truth "$TMPDIR/rate$r.truth" ${fn}_bytes)
			tol=$(awk -v r="$r" -v w="$want" 'BEGIN { t = 400 * sqrt(r / w); printf "%.0f", t < 5 ? 5 : t }')
			errs+="$fn $(awk -v g="$got" -v w="$want" 'BEGIN { printf "%+.1f%%", 100 * (g - w) / w }') (4 se $tol%) "
			within_rel "$got" "$want" "$tol" || bad+="$fn "
		done
		if [ -n "$bad" ]; then fail "$name" "alloc_space off by more than 4 standard errors for $bad: $errs"; else ok "$name" "alloc_space error ${errs% }"; fi
	fi
done

# ---- inuse ---------------------------------------------------------------------------------
name=record_heap/inuse
if ! STROBE_HEAP_RATE=16384 hrec "$name" -o "$TMPDIR/inuse.pb.gz" -- "$WL/alloc_truth" -m inuse -o "$TMPDIR/inuse.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif ! fold "$TMPDIR/inuse.pb.gz" "$TMPDIR/inuse.space" inuse_space; then
	fail "$name" "convert failed: $(errof "$TMPDIR/inuse.space.err")"
else
	detail="" bad=""
	judge "$name" "$TMPDIR/inuse.space" "$TMPDIR/inuse.truth" live_bytes 10 hold_big hold_small
	churn=$(incl "$TMPDIR/inuse.space" churn)
	if [ -n "$bad" ]; then fail "$name" "inuse_space off by more than 10 % for $bad: $detail"
	elif [ "${churn:-0}" -gt 1048576 ]; then fail "$name" "churn (all freed) still has $churn bytes in use"
	else ok "$name" "inuse_space got/truth ${detail% }; churn $churn"; fi
fi

# ---- leak ----------------------------------------------------------------------------------
name=record_heap/leak
if ! hrec "$name" --leaks "$TMPDIR/leaks.txt" -o "$TMPDIR/leak.pb.gz" -- "$WL/alloc_truth" -m leak -t 6 -o "$TMPDIR/leak.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/leaks.txt" ]; then
	fail "$name" "no leak report written"
else
	first=$(awk '/^leak 1:/ { on = 1; next } /^leak / { on = 0 } on' "$TMPDIR/leaks.txt")
	if ! grep -q "leak_site" <<<"$first"; then
		fail "$name" "the first leak is not leak_site: $(head -4 "$TMPDIR/leaks.txt" | tr '\n' ' ')"
	elif grep -qE "churn_a|churn_b" "$TMPDIR/leaks.txt"; then
		fail "$name" "a churning site is reported: $(grep -E -m1 'churn_a|churn_b' "$TMPDIR/leaks.txt")"
	else
		ok "$name" "$(head -2 "$TMPDIR/leaks.txt" | tail -1 | cut -c1-80); truth $(truth "$TMPDIR/leak.truth" leak_bytes) bytes leaked"
	fi
fi

# ---- dlclose -------------------------------------------------------------------------------
name=record_heap/dlclose
if ! STROBE_HEAP_RATE=65536 hrec "$name" --no-leaks -o "$TMPDIR/dl.pb.gz" -- "$WL/alloc_truth" -m dl -o "$TMPDIR/dl.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ "$(truth "$TMPDIR/dl.truth" dl_cycles)" != 100 ]; then
	skip "$name" "the workload could not load libz.so.1 with dlopen ($(cat "$TMPDIR/dl.truth"))"
elif ! fold "$TMPDIR/dl.pb.gz" "$TMPDIR/dl.space" alloc_space; then
	fail "$name" "convert failed: $(errof "$TMPDIR/dl.space.err")"
else
	z=$(incl "$TMPDIR/dl.space" 'deflateInit2_'); all=$(sum "$TMPDIR/dl.space" '.')
	if [ "$(ratio_pct "${z:-0}" "${all:-0}" | cut -d. -f1)" -lt 50 ] 2>/dev/null; then
		fail "$name" "deflateInit2_ has ${z:-0} of $all bytes: libz's frames unnamed after dlclose? $(head -2 "$TMPDIR/dl.space" | cut -c1-200)"
	else
		ok "$name" "deflateInit2_ (libz, unloaded) $z of $all bytes"
	fi
fi

# ---- go ------------------------------------------------------------------------------------
name=record_heap/go
if ! command -v go >/dev/null; then
	skip "$name" "go is not installed (go tool pprof reads the profile)"
elif [ ! -s "$TMPDIR/alloc.pb.gz" ]; then
	fail "$name" "no profile from the alloc case"
else
	raw=$(go tool pprof -raw "$TMPDIR/alloc.pb.gz" 2>&1 | head -20)
	if grep -q "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" <<<"$raw"; then
		ok "$name" "sample types alloc_objects alloc_space inuse_objects inuse_space"
	else
		fail "$name" "go tool pprof -raw: $(head -5 <<<"$raw" | tr '\n' ' ')"
	fi
fi

# ---- safety --------------------------------------------------------------------------------
# NAME CMD...: the same stdout and exit status with the library as without; samples taken
safety() {
	local name=$1 f a b ra rb
	shift
	f=$(_fname "$name")
	(cd "$TMPDIR" && "$@") >"$TMPDIR/$f.plain" 2>"$TMPDIR/$f.plain.err"
	ra=$?
	mkdir -p "$TMPDIR/$f.dir"
	(cd "$TMPDIR" && LD_PRELOAD=$LIB STROBE_HEAP_DIR=$TMPDIR/$f.dir STROBE_HEAP_RATE=65536 "$@") >"$TMPDIR/$f.pre" 2>"$TMPDIR/$f.pre.err"
	rb=$?
	a=$(md5sum <"$TMPDIR/$f.plain"); b=$(md5sum <"$TMPDIR/$f.pre")
	nfiles=$(find "$TMPDIR/$f.dir" -name 'strobe-heap.*' | wc -l)
	if [ "$ra" != "$rb" ]; then
		fail "$name" "exit status $rb with the library, $ra without: $(errof "$TMPDIR/$f.pre.err")"
	elif [ "$a" != "$b" ]; then
		fail "$name" "output differs with the library ($(wc -c <"$TMPDIR/$f.pre") vs $(wc -c <"$TMPDIR/$f.plain") bytes)"
	elif grep -q "strobe-heap" "$TMPDIR/$f.pre.err"; then
		fail "$name" "the library complained: $(errof "$TMPDIR/$f.pre.err")"
	elif [ "$nfiles" -lt 1 ]; then
		fail "$name" "the library wrote no channel file"
	else
		ok "$name" "exit $ra, $(wc -c <"$TMPDIR/$f.plain") bytes of identical output, $nfiles process image(s)"
	fi
}

PY=$(command -v /usr/bin/python3 || command -v python3)
if [ -n "$PY" ]; then
	cat >"$TMPDIR/alloc.py" <<'EOF'
import collections, json
d = collections.defaultdict(list)
for i in range(300000):
    d[i % 1000].append(("x" * (i % 200), i, [i] * (i % 7)))
s = json.dumps({k: len(v) for k, v in d.items()})
blobs = [bytes(i % 5000) for i in range(20000)]
print(len(s), sum(len(b) for b in blobs), sum(len(v) for v in d.values()))
EOF
	safety record_heap/safety/python3 "$PY" "$TMPDIR/alloc.py"
else
	skip record_heap/safety/python3 "python3 is not installed"
fi
if command -v gcc >/dev/null; then
	safety record_heap/safety/gcc gcc -O2 -c -o /dev/stdout "$ROOT/lib/heap_channel.c" -I"$ROOT/include" -D_GNU_SOURCE
else
	skip record_heap/safety/gcc "gcc is not installed"
fi
awk 'BEGIN { srand(7); for (i = 0; i < 400000; i++) printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26) }' >"$TMPDIR/big.txt"
safety record_heap/safety/sort sort -S 64M "$TMPDIR/big.txt"
safety record_heap/safety/cxx "$WL/new_delete"
safety record_heap/safety/fork-exec sh -c 'for i in 1 2 3; do (echo "sub $i"; ls / >/dev/null); done | sort; exec cat /etc/hostname'

# ---- many ---------------------------------------------------------------------------------
# 300 short processes: each one's file is folded into the profile once it has exited and then
# removed, so the channel directory never holds more than a few
name=record_heap/many
if ! hrec "$name" --no-leaks -o "$TMPDIR/many.pb.gz" -- sh -c 'for i in $(seq 300); do ls / >/dev/null; done'; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
else
	n=$(grep -oE '[0-9]+ processes' "$TMPDIR/$(_fname "$name").err" | grep -oE '[0-9]+')
	pids=$("$STROBE_FAST" convert -t folded --sample-index alloc_space --tagfocus 'pid=.' -o - "$TMPDIR/many.pb.gz" 2>/dev/null | wc -l)
	if [ "${n:-0}" -lt 301 ]; then
		fail "$name" "${n:-no} processes read, want 301: $(recerr "$name")"
	elif [ "${pids:-0}" -lt 1 ]; then
		fail "$name" "no sample has a pid label"
	else
		ok "$name" "$n processes, samples labelled by pid"
	fi
fi

# ---- interval -----------------------------------------------------------------------------
name=record_heap/interval
if ! STROBE_HEAP_RATE=65536 hrec "$name" -i 1 --no-leaks -o "$TMPDIR/iv.pb.gz" -- "$WL/alloc_truth" -m leak -t 3.5 -o "$TMPDIR/iv.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/iv.1.pb.gz" ] || [ ! -s "$TMPDIR/iv.2.pb.gz" ] || [ ! -s "$TMPDIR/iv.pb.gz" ]; then
	fail "$name" "missing numbered profiles: $(cd "$TMPDIR" && ls iv.* | tr '\n' ' ')"
elif ! fold "$TMPDIR/iv.1.pb.gz" "$TMPDIR/iv1.f" inuse_space || ! fold "$TMPDIR/iv.2.pb.gz" "$TMPDIR/iv2.f" inuse_space; then
	fail "$name" "a numbered profile is unreadable: $(errof "$TMPDIR/iv1.f.err")"
else
	a=$(incl "$TMPDIR/iv1.f" leak_site); b=$(incl "$TMPDIR/iv2.f" leak_site)
	if [ "${a:-0}" -gt 0 ] && [ "${b:-0}" -gt "${a:-0}" ]; then
		ok "$name" "leak_site in use: $a bytes at 1 s, $b at 2 s"
	else
		fail "$name" "leak_site in use did not grow: ${a:-none} then ${b:-none}"
	fi
fi

# ---- nolib ----------------------------------------------------------------------------------
name=record_heap/nolib
STROBE_HEAP_LIB=$TMPDIR/nowhere.so hrec "$name" -o "$TMPDIR/nolib.pb.gz" -- true
if [ "$rc" -eq 2 ] && grep -q "nowhere.so" "$TMPDIR/$(_fname "$name").err"; then
	ok "$name" "exit 2: $(head -1 "$TMPDIR/$(_fname "$name").err" | cut -c1-100)"
else
	fail "$name" "exit $rc: $(recerr "$name")"
fi

# ---- fullfs -------------------------------------------------------------------------------
name=record_heap/fullfs
fs=$TMPDIR/smallfs
mkdir -p "$fs"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=256k tmpfs "$fs" 2>/dev/null; then
	skip "$name" "cannot mount a small tmpfs (needs root)"
else
	dd if=/dev/zero of="$fs/fill" bs=4k count=54 2>/dev/null
	"$WL/alloc_truth" -s 0.2 -o "$TMPDIR/full.plain" >/dev/null 2>&1
	STROBE_HEAP_DIR=$fs STROBE_HEAP_RATE=16384 LD_PRELOAD=$LIB "$WL/alloc_truth" -s 0.2 -o "$TMPDIR/full.pre" >/dev/null 2>"$TMPDIR/full.err"
	prc=$?
	f=$(ls "$fs"/strobe-heap.* 2>/dev/null | head -1)
	if [ $prc -ne 0 ]; then
		fail "$name" "the program failed with the library on a full tmpfs (exit $prc): $(errof "$TMPDIR/full.err")"
	elif ! cmp -s "$TMPDIR/full.plain" "$TMPDIR/full.pre"; then
		fail "$name" "the program's output differs on a full tmpfs"
	else
		ok "$name" "exit 0, same output; $(df -k "$fs" | awk 'NR == 2 { print $4 }') KiB left, channel ${f:+$(du -k "$f" | cut -f1) KiB backed}"
	fi
	umount "$fs"
fi

# ---- off -----------------------------------------------------------------------------------
name=record_heap/off
if ! STROBE_HEAP_RATE=0 hrec "$name" -o "$TMPDIR/off.pb.gz" -- "$WL/alloc_truth" -s 0.1 -o "$TMPDIR/off.truth"; then
	fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"
elif [ ! -s "$TMPDIR/off.truth" ]; then
	fail "$name" "the workload did not run"
elif ! fold "$TMPDIR/off.pb.gz" "$TMPDIR/off.space" alloc_space; then
	fail "$name" "convert failed: $(errof "$TMPDIR/off.space.err")"
elif [ -s "$TMPDIR/off.space" ]; then
	fail "$name" "samples taken at rate 0: $(head -1 "$TMPDIR/off.space")"
else
	ok "$name" "no samples, the workload ran"
fi
exit $st
