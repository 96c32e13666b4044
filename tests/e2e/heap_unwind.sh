#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libstrobe-heap.so's unwind-step cache (preload/unwind_cache.c) on real programs: with
# STROBE_HEAP_UNWIND_CHECK=FILE the library walks every sampled stack with the cache and again
# with libgcc's _Unwind_Backtrace, and appends per process "W walks, C by the cache, D differ
# from libgcc" to FILE at exit. At STROBE_HEAP_RATE=4096 (hundreds to thousands of samples):
# Cases (each: walks >= 20, >= 90 % of them by the cache alone, none differing from libgcc):
#   python3    an allocation-heavy script (Debian's python3: -O2, no frame pointers)
#   gcc        gcc compiling a file (the driver, cc1 and as: three programs)
#   awk        awk keeping 200 000 keys in an array
#   cxx        a C++ program: new/delete through libstdc++, threads (exits 5 on purpose)
#   dlclose    alloc_truth -m dl: libz loaded, allocating in deflateInit_ and unloaded 100 times
#              (each dlclose starts a new cache generation; libz comes back at the same address)
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
LIB=$ROOT/build/libstrobe-heap.so
need_files "$LIB" "$WL/alloc_truth" "$WL/new_delete"

# NAME RC CMD...: runs CMD (whose exit status is RC) preloaded in check mode and judges the counts its processes wrote
check() {
	local name=$1 want=$2 f ck walks cached differ procs
	shift 2
	f=$(_fname "$name")
	ck=$TMPDIR/$f.check
	mkdir -p "$TMPDIR/$f.dir"
	(cd "$TMPDIR" && LD_PRELOAD=$LIB STROBE_HEAP_DIR=$TMPDIR/$f.dir STROBE_HEAP_RATE=4096 \
		STROBE_HEAP_UNWIND_CHECK=$ck timeout -k 5 60 "$@") >"$TMPDIR/$f.out" 2>"$TMPDIR/$f.err"
	local rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$name" "exit status $rc, not $want: $(errof "$TMPDIR/$f.err")"
		return
	fi
	if [ ! -s "$ck" ]; then
		fail "$name" "no process wrote its check counts to $ck"
		return
	fi
	read -r procs walks cached differ < <(awk '{ n++; w += $3; c += $5; d += $9 } END { print n, w + 0, c + 0, d + 0 }' "$ck")
	if [ "$walks" -lt 20 ]; then
		fail "$name" "only $walks sampled stacks in $procs process(es): nothing to judge"
	elif [ "$differ" != 0 ]; then
		fail "$name" "$differ of $cached cached walks differ from libgcc's ($walks walks, $procs process(es))"
	elif [ $((cached * 100)) -lt $((walks * 90)) ]; then
		fail "$name" "only $cached of $walks walks by the cache alone (libgcc walked the rest)"
	else
		ok "$name" "$walks walks in $procs process(es), $cached by the cache, all equal to libgcc's"
	fi
}

PY=$(command -v /usr/bin/python3 || command -v python3)
if [ -n "$PY" ]; then
	cat >"$TMPDIR/alloc.py" <<'PYEOF'
import collections, json
d = collections.defaultdict(list)
for i in range(100000):
    d[i % 1000].append(("x" * (i % 200), i, [i] * (i % 7)))
s = json.dumps({k: len(v) for k, v in d.items()})
print(len(s))
PYEOF
	check heap_unwind/python3 0 "$PY" -S "$TMPDIR/alloc.py"
else
	skip heap_unwind/python3 "python3 is not installed"
fi
if command -v gcc >/dev/null; then
	check heap_unwind/gcc 0 gcc -O2 -c -o /dev/null "$ROOT/lib/heap_channel.c" -I"$ROOT/include" -D_GNU_SOURCE
else
	skip heap_unwind/gcc "gcc is not installed"
fi
awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26) }' >"$TMPDIR/big.txt"
check heap_unwind/awk 0 awk '{ a[$1] = $2 $1 } END { n = 0; for (k in a) n++; print n }' "$TMPDIR/big.txt"
check heap_unwind/cxx 5 "$WL/new_delete"
check heap_unwind/dlclose 0 "$WL/alloc_truth" -m dl -o "$TMPDIR/dl.truth"
exit $st
