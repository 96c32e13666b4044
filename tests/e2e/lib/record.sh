# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/record_*.sh, the truth tests of `strobe record`: the workloads in
# build/workloads (tests/workloads/*.c) measure what they really did and write it to a truth
# file; these helpers run the recorder, fold its profile and report verdict lines.
#
#   need_workloads W...          exits with a FAIL line when a workload is not built, and with a
#                                SKIP line (and why) when perf_event cannot be used here
#   rec NAME TIMEOUT ARGS...     $STROBE_FAST record ARGS under a time limit; status also in $rc,
#                                stderr in $TMPDIR/NAME.err (recerr NAME prints its start)
#   fold PPROF OUT INDEX [convert options]  folded stacks of one sample type (stderr in OUT.err)
#   ok/fail/skip NAME TEXT       verdict lines; fail sets st=1 (exit status of the script)
#   errof FILE                   the first lines of FILE, on one line, for a FAIL message
#   truth_share TRUTH FN         100 * FN / process_cpu_ns from a truth file
#   perf_cpu_folded OUT ARGS...  perf record -e cpu-clock -F 999 -g -- ARGS, collapsed by strobe
#   perf_offcpu_folded OUT ARGS...  perf sched_switch + switch events -- ARGS, folded ns (perf_offcpu.awk)
#   complete FOLDED LEAF REGEX   % of the value of the stacks holding frame LEAF that match REGEX
#   sum FOLDED REGEX             the value of the stacks matching REGEX
#   atleast A B                  true when A (not "nan") >= B
#   window_cpu PPROF LOG         ns of CPU a workload used inside the profile's own time window
#                                (Time, Duration), from its cpu_split -l LOG: what it really got
#   split_complete FOLDED TRUTH TOL  cpu_split's burn_60/30/10 shares within TOL pp of TRUTH and
#                                >= 99% of each under start_thread;thread_main;run_rounds;burn_X:
#                                appends to $detail, and what is off to $bad
#   sites_above_libc FOLDED TRUTH TOL  offcpu_block's blocking functions each directly above its
#                                libc frame (site_nanosleep;...nanosleep...) for within TOL % of
#                                its truth: appends to $detail and $bad the same way
_rec_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=shares.sh
. "$_rec_lib/shares.sh"
ROOT=$(cd "$_rec_lib/../../.." && pwd)
WL=$ROOT/build/workloads
STROBE_FAST=${STROBE_FAST:-$ROOT/build/strobe}
STROBE=${STROBE:-$ROOT/build/strobe-san}
st=0

ok() { echo "ok $1${2:+ ($2)}"; }
fail() { echo "FAIL $1: $2"; st=1; }
skip() { echo "SKIP $1: $2"; }
errof() { [ -s "$1" ] && head -3 "$1" | cut -c1-200 | tr '\n' ' ' || echo "(no message)"; }
_fname() { tr '/ ' '__' <<<"$1"; }

# need_files FILE...: each built file is there, or this test FAILs naming it (they are made by
# `make all workloads`, which make check runs first).
need_files() {
	local f
	for f in "$@"; do
		if [ ! -e "$f" ]; then
			echo "FAIL $(basename "$0" .sh): $f is missing (make all workloads)"
			exit 1
		fi
	done
}

need_workloads() {
	need_perf_events
	local w
	for w in "$@"; do
		if [ ! -x "$WL/$w" ]; then
			echo "FAIL $(basename "$0" .sh): $WL/$w is missing (make workloads)"
			exit 1
		fi
	done
}

# The recorder needs perf_event with kernel frames and the sched tracepoints: root (or
# CAP_PERFMON) on a kernel that has them. Elsewhere the truth tests cannot run: say so and why.
need_perf_events() {
	local name
	name=$(basename "$0" .sh)
	if [ "$(id -u)" -ne 0 ]; then
		echo "SKIP $name: needs root (perf_event with kernel frames and sched tracepoints)"
		exit 0
	fi
	if [ ! -e /proc/sys/kernel/perf_event_paranoid ]; then
		echo "SKIP $name: this kernel has no perf_event support"
		exit 0
	fi
}

rec() { # NAME TIMEOUT ARGS...: status of strobe record, also in $rc (124: ran past TIMEOUT s)
	local name=$1 limit=$2 f
	shift 2
	f=$(_fname "$name")
	timeout -k 5 "$limit" "$STROBE_FAST" record "$@" >"$TMPDIR/$f.out" 2>"$TMPDIR/$f.err"
	rc=$?
	return $rc
}
recerr() { errof "$TMPDIR/$(_fname "$1").err"; }

fold() { # PPROF OUT INDEX [convert options...]
	local in=$1 out=$2 idx=$3
	shift 3
	"$STROBE_FAST" convert -t folded --sample-index "$idx" -o "$out" "$@" "$in" 2>"$out.err"
}

truth_share() {
	local v t
	v=$(truth "$1" "$2") && t=$(truth "$1" process_cpu_ns) || return 1
	ratio_pct "$v" "$t"
}

perf_cpu_folded() { # OUT CMD...
	local out=$1
	shift
	perf record -q -B -e cpu-clock -F 999 -g -o "$out.data" -- "$@" >"$out.log" 2>&1 || return 1
	perf script -i "$out.data" 2>>"$out.log" | "$STROBE_FAST" collapse >"$out" 2>>"$out.log"
}

perf_offcpu_folded() { # OUT CMD...
	local out=$1
	shift
	perf record -q -B -g -e sched:sched_switch --switch-events -o "$out.data" -- "$@" >"$out.log" 2>&1 || return 1
	perf script -i "$out.data" --ns --show-switch-events -F comm,tid,time,event,trace,ip,sym 2>>"$out.log" |
		awk -f "$_rec_lib/perf_offcpu.awk" >"$out"
}

# complete FOLDED LEAF REGEX: % of the value of stacks holding frame LEAF whose whole stack matches
# REGEX (frames joined by ';', root first)
complete() {
	awk -v leaf="$2" -v re="$3" '
		{ line = $0; sp = match(line, / [0-9]+$/); if (!sp) next
		  v = substr(line, sp + 1) + 0; stack = substr(line, 1, sp - 1)
		  if (index(";" stack ";", ";" leaf ";") == 0) next
		  all += v; if (stack ~ re) good += v }
		END { if (!all) { print "nan"; exit 1 } printf "%.2f\n", 100 * good / all }' "$1"
}
# sum FOLDED REGEX: the value of the stacks matching REGEX
sum() { awk -v re="$2" '{ sp = match($0, / [0-9]+$/); if (sp && substr($0, 1, sp - 1) ~ re) t += substr($0, sp + 1) } END { printf "%.0f\n", t }' "$1"; }
window_cpu() {
	local hdr t0 dur
	hdr=$(go tool pprof -raw "$1" 2>/dev/null | head -8) || return 1
	t0=$(date -d "$(sed -n 's/^Time: \(.*\) UTC$/\1/p' <<<"$hdr")" +%s%N 2>/dev/null) || return 1
	dur=$(sed -n 's/^Duration: //p' <<<"$hdr")
	[ -n "$t0" ] && [ -n "$dur" ] || return 1
	# the log's CPU clock, linearly interpolated at the window's two ends
	awk -v a="$t0" -v d="$dur" 'BEGIN { b = a + d * 1e9 }
		function at(t,   i) { if (t <= T[1]) return C[1]; for (i = 2; i <= n; i++) if (T[i] >= t)
			return C[i - 1] + (C[i] - C[i - 1]) * (t - T[i - 1]) / (T[i] - T[i - 1]); return C[n] }
		{ n++; T[n] = $1; C[n] = $2 } END { if (n < 2) exit 1; printf "%.0f\n", at(b) - at(a) }' "$2"
}
atleast() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "nan" && a + 0 >= b + 0) }'; }
split_complete() {
	local fn got want c s
	s=$(shares "$1" burn_60 burn_30 burn_10)
	for fn in burn_60 burn_30 burn_10; do
		got=$(pct "$s" "$fn"); want=$(truth_share "$2" "$fn")
		c=$(complete "$1" "$fn" "^((__)?clone3?;)?start_thread;thread_main;run_rounds;$fn(;|\$)")
		detail+="$fn ${got}% (truth ${want}%, ${c}% complete) "
		within_pp "$got" "$want" "$3" || bad+="$fn share; "
		atleast "$c" 99 || bad+="$fn stacks; "
	done
}
declare -A _SITE_RE=(
	[site_nanosleep_outer]=';site_nanosleep_outer;site_nanosleep;[^;]*nanosleep[^;]*;'
	[site_mutex_outer]=';site_mutex_outer;site_mutex_lock;[^;]*(pthread_mutex_lock|lll_lock)[^;]*;'
	[site_read_outer]=';site_read_outer;site_read;[^;]*read[^;]*;')
sites_above_libc() {
	local site got want
	for site in site_nanosleep_outer site_mutex_outer site_read_outer; do
		got=$(sum "$1" "${_SITE_RE[$site]}"); want=$(truth "$2" "$site")
		detail+="${site%_outer} $(awk -v g="$got" 'BEGIN { printf "%.1f", g / 1e6 }') ms (truth $(awk -v w="$want" 'BEGIN { printf "%.1f", w / 1e6 }')) "
		within_rel "$got" "$want" "$3" || bad+="${site%_outer} "
	done
}
