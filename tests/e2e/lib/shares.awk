# SPDX-License-Identifier: Apache-2.0
# Inclusive shares of named functions in folded stacks ("f1;f2;...;leaf VALUE" per line).
#
#   awk -f shares.awk -v fns="$(printf '%s\n' burn_60 burn_30 burn_10)" FILE...
#
# (names one a line, so that a name may contain spaces)
#
# A stack counts for a function when any of its frames equals the name exactly (once per stack,
# however often the function recurses in it). Prints "total<TAB>VALUE<TAB>STACKS" and then, for every
# name, "NAME<TAB>VALUE<TAB>SHARE_PERCENT" (share of the total value, %.3f). Frames may contain spaces:
# the value is whatever follows the last space. A line without a numeric value is an error
# (exit 3), so a truncated or non-folded file cannot pass as an empty profile.
BEGIN {
	n = split(fns, want, "\n")
	m = 0
	for (i = 1; i <= n; i++) if (want[i] != "") want[++m] = want[i]
	n = m
	for (i = 1; i <= n; i++) { isfn[want[i]] = 1; val[want[i]] = 0 }
	total = 0; stacks = 0; bad = 0
}
/^[ \t]*$/ { next }
{
	line = $0
	sub(/[ \t\r]+$/, "", line)
	sp = match(line, / [-0-9.eE+]+$/)
	if (!sp) { bad++; next }
	v = substr(line, sp + 1) + 0
	stack = substr(line, 1, sp - 1)
	total += v; stacks++
	k = split(stack, fr, ";")
	delete seen
	for (j = 1; j <= k; j++) {
		f = fr[j]
		if ((f in isfn) && !(f in seen)) { seen[f] = 1; val[f] += v }
	}
}
END {
	if (bad) { printf "shares.awk: %d line(s) are not folded stacks\n", bad > "/dev/stderr"; exit 3 }
	printf "total\t%.0f\t%d\n", total, stacks
	for (i = 1; i <= n; i++)
		printf("%s\t%.0f\t%.3f\n", want[i], val[want[i]], (total > 0) ? 100 * val[want[i]] / total : 0)
}
