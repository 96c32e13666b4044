#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe record` of stripped binaries whose symbols live only in a separate debug file:
#   build-id   a copy of cpu_split built with a build ID, its debug part split off with
#              objcopy --only-keep-debug and installed as /usr/lib/debug/.build-id/xx/rest.debug
#              (root only), the binary stripped: burn_60/30/10 and main must be named and have
#              their shares (±3 pp of the truth)
#   debuglink  the same built without a build ID, its debug file found through .gnu_debuglink
#              next to the binary (no root needed)
#   unwind     cpu_split built without frame pointers and with its CFI in .debug_frame only
#              (-fno-asynchronous-unwind-tables), the debug file installed by build ID with its
#              sections compressed (--compress-debug-sections), the binary stripped: recorded with
#              --call-graph dwarf, its stacks are complete only if the unwinder reads the debug
#              file's .debug_frame (decompressed); STROBE_DEBUG's debug-frame count must be > 0
# Before recording, each stripped binary is checked to have no symbol for burn_60 (nm), so the
# names can only have come from the debug file. cpu_split -t 0 burns in the main thread, so main
# is on every stack. The installed debug file is removed on exit (trap).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
SRC=$ROOT/tests/workloads/cpu_split.c
FNS=(burn_60 burn_30 burn_10 main)
installed=""
cleanup() { local f; for f in $installed; do rm -f "$f"; rmdir "$(dirname "$f")" 2>/dev/null; done; true; }
trap cleanup EXIT

for tool in cc objcopy strip nm readelf; do
	if ! command -v $tool >/dev/null; then
		echo "SKIP record_debuglink: $tool is not installed"; exit 0
	fi
done

build() { # OUT BUILD-ID-FLAG [CFLAGS...]
	local out=$1 bid=$2; shift 2
	[ $# -gt 0 ] || set -- -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls
	cc -std=gnu17 -g "$@" -pthread "-Wl,--build-id=$bid" -o "$out" "$SRC" -lm 2>"$out.log"
}

check() { # NAME BINARY [RECORD-ARGS...]
	local name=$1 bin=$2 s fn got want bad="" detail="" f
	shift 2
	f=$TMPDIR/$(_fname "$name")
	if nm "$bin" 2>/dev/null | grep -qw burn_60 || nm -D "$bin" 2>/dev/null | grep -qw burn_60; then
		fail "$name" "the stripped binary still has a symbol for burn_60 (the test would prove nothing)"; return
	fi
	if ! rec "$name" 60 -F 999 "$@" -o "$f.pb.gz" -- "$bin" -t 0 -o "$f.truth" 3; then
		fail "$name" "strobe record failed (exit $rc): $(recerr "$name")"; return
	fi
	if ! fold "$f.pb.gz" "$f.folded" cpu; then
		fail "$name" "convert failed: $(errof "$f.folded.err")"; return
	fi
	s=$(shares "$f.folded" "${FNS[@]}")
	for fn in burn_60 burn_30 burn_10; do
		got=$(pct "$s" "$fn"); want=$(truth_share "$f.truth" "$fn")
		detail+="$fn ${got}% (truth ${want}%) "
		within_pp "$got" "$want" 3 || bad+="$fn "
	done
	got=$(pct "$s" main)
	detail+="main ${got}%"
	within_pp "$got" 100 5 || bad+="main "
	if [ "${CHECK_DEBUG_FRAME:-}" ]; then
		got=$(sed -n 's/.* debug-frame \([0-9]*\).*/\1/p' "$TMPDIR/$(_fname "$name").err" | tail -1)
		detail+=", frames stepped by .debug_frame: ${got:-none}"
		[ "${got:-0}" -gt 0 ] || bad+="(no frame stepped by .debug_frame) "
	fi
	if [ -n "$bad" ]; then fail "$name" "not named or wrong share: ${bad}($detail)"; else ok "$name" "$detail"; fi
}

# install_debug NAME BINARY [OBJCOPY-ARGS...]: its debug part under /usr/lib/debug/.build-id
install_debug() {
	local name=$1 bin=$2 bid dbg
	shift 2
	bid=$(readelf -n "$bin" | awk '/Build ID:/ { print $3; exit }')
	dbg=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
	if [ ${#bid} -lt 8 ]; then
		fail "$name" "no build ID in the binary built with --build-id=sha1"; return 1
	elif [ -e "$dbg" ]; then
		fail "$name" "$dbg exists already (left by another run?); not overwriting it"; return 1
	elif ! mkdir -p "$(dirname "$dbg")" || ! objcopy --only-keep-debug "$@" "$bin" "$dbg"; then
		fail "$name" "cannot install $dbg"; return 1
	fi
	installed+=" $dbg"
}

# ---- build-id ----------------------------------------------------------------------------------
name=record_debuglink/build-id
if [ "$(id -u)" != 0 ]; then
	skip "$name" "installing under /usr/lib/debug/.build-id needs root"
elif ! build "$TMPDIR/cpu_split_bid" sha1; then
	fail "$name" "cc failed: $(errof "$TMPDIR/cpu_split_bid.log")"
else
	if install_debug "$name" "$TMPDIR/cpu_split_bid"; then
		strip --strip-all "$TMPDIR/cpu_split_bid"
		check "$name" "$TMPDIR/cpu_split_bid"
	fi
fi

# ---- debuglink ---------------------------------------------------------------------------------
name=record_debuglink/debuglink
mkdir -p "$TMPDIR/dl"
if ! build "$TMPDIR/dl/cpu_split_dl" none; then
	fail "$name" "cc failed: $(errof "$TMPDIR/dl/cpu_split_dl.log")"
else
	(cd "$TMPDIR/dl" && objcopy --only-keep-debug cpu_split_dl cpu_split_dl.debug &&
		strip --strip-all cpu_split_dl && objcopy --add-gnu-debuglink=cpu_split_dl.debug cpu_split_dl)
	if readelf -n "$TMPDIR/dl/cpu_split_dl" | grep -q 'Build ID'; then
		fail "$name" "the binary has a build ID (the test means .gnu_debuglink alone)"
	else
		check "$name" "$TMPDIR/dl/cpu_split_dl"
	fi
fi
# ---- unwind: .debug_frame from a compressed debug file ---------------------------------------
name=record_debuglink/unwind
if [ "$(id -u)" != 0 ]; then
	skip "$name" "installing under /usr/lib/debug/.build-id needs root"
elif ! build "$TMPDIR/cpu_split_uw" sha1 -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables; then
	fail "$name" "cc failed: $(errof "$TMPDIR/cpu_split_uw.log")"
elif install_debug "$name" "$TMPDIR/cpu_split_uw" --compress-debug-sections=zlib; then
	strip --strip-all "$TMPDIR/cpu_split_uw"
	# (its .eh_frame is the C runtime's alone: _start's, none for the workload's functions)
	if readelf -SW "$TMPDIR/cpu_split_uw" | grep -q '\.debug_frame '; then
		fail "$name" "the stripped binary still has a .debug_frame (the test would prove nothing)"
	else
		STROBE_DEBUG=1 CHECK_DEBUG_FRAME=1 check "$name" "$TMPDIR/cpu_split_uw" --call-graph dwarf
	fi
fi
exit $st
