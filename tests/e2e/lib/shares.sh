# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by tests/e2e/record_*.sh: compares what a recorder saw with the truth a workload
# (tests/workloads/*.c) measured about itself.
#
#   shares FOLDED fn...        -> "total\tVALUE\tSTACKS" then "fn\tVALUE\tSHARE%" lines (shares.awk)
#   field SHARES fn            -> the VALUE of fn from shares' output ("total" for the total)
#   pct SHARES fn              -> the SHARE% of fn
#   truth FILE key             -> the value of "key value" in a workload's truth file
#   within_pp GOT WANT PP      -> status 0 when |GOT - WANT| <= PP (percentage points)
#   within_rel GOT WANT PCT    -> status 0 when |GOT - WANT| <= PCT% of WANT (WANT > 0)
#   ratio_pct A B              -> 100 * A / B, %.2f
#   folded_of PPROF OUT [convert options...] -> `strobe convert -t folded` of a profile, status of it
#
# Values are compared with awk, in floating point; a missing or empty value always fails.
_shares_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

shares() { local f=$1; shift; awk -f "$_shares_lib/shares.awk" -v fns="$(printf '%s\n' "$@")" "$f"; }
field() { awk -F'\t' -v k="$2" '$1 == k { print $2; f = 1; exit } END { exit !f }' <<<"$1"; }
pct() { awk -F'\t' -v k="$2" '$1 == k && k != "total" { print $3; f = 1; exit } END { exit !f }' <<<"$1"; }
truth() { awk -v k="$2" '$1 == k { print $2; f = 1; exit } END { exit !f }' "$1"; }
_num() { [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }
within_pp() {
	_num "${1:-}" && _num "${2:-}" || return 1
	awk -v g="$1" -v w="$2" -v t="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= t) }'
}
# proc_cpu_ms PID: the CPU (user + system) the process has used so far, in ms, from /proc (what
# a workload really got, to judge sample counts on a loaded machine by); empty once it is gone.
proc_cpu_ms() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f\n", ($12 + $13) * 1000 / hz }' <<<"$st"
}
within_rel() {
	_num "${1:-}" && _num "${2:-}" || return 1
	awk -v g="$1" -v w="$2" -v t="$3" 'BEGIN { if (w <= 0) exit 1; d = g - w; if (d < 0) d = -d; exit !(100 * d / w <= t) }'
}
ratio_pct() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (b == 0) print "nan"; else printf "%.2f\n", 100 * a / b }'; }
folded_of() { local in=$1 out=$2; shift 2; "${STROBE_FAST:-$STROBE}" convert -t folded -o "$out" "$@" "$in"; }
