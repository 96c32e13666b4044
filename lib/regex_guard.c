/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cost check every user-given regular expression passes before regcomp: selectors of the
 * server's queries (untrusted), the agent's process patterns, the toolkit's --focus/--ignore.
 *
 * Why: glibc's regcomp copies the subexpression of every repetition operator, so repetitions of
 * repetitions grow it geometrically: "g+++...+" with 40 pluses took over 2 GB (found by
 * fuzz_agent_config), "((a{100}){100}){100}" likewise. RE2, which PromQL users write for,
 * rejects stacked operators and caps counts at 1000; the rules here are a little stricter and
 * bound the compiled size outright: stacked operators and counts over 100 are refused, and the
 * product over all operators of what each can multiply by (2 for * + ?, n + 1 for {m,n}), an
 * upper bound of the copies nesting can make, is capped at 4096.
 */
#include <stdbool.h>
#include <string.h>

#include "strobe/transform.h"

#define MAX_COUNT 100
#define MAX_PRODUCT 4096

const char *strobe_regex_too_costly(const char *re, size_t max_len)
{
	size_t n = strlen(re);
	if (n > max_len)
		return "longer than the limit on patterns";
	bool prev_rep = false;
	unsigned long product = 1;
	for (size_t i = 0; i < n; i++) {
		char c = re[i];
		if (c == '\\' && i + 1 < n) {
			i++;
			prev_rep = false;
			continue;
		}
		bool rep = c == '*' || c == '+' || c == '?' || c == '{';
		if (rep && prev_rep)
			return "stacked repetition operators";
		unsigned long f = rep ? 2 : 1;
		if (c == '{') {
			unsigned long v = 0, max = 0;
			for (size_t k = i + 1; k < n && re[k] != '}'; k++)
				if (re[k] >= '0' && re[k] <= '9') {
					v = v * 10 + (unsigned long)(re[k] - '0');
					if (v > MAX_COUNT)
						return "a repetition count over 100";
					if (v > max)
						max = v;
				} else if (re[k] == ',') {
					v = 0;
				} else {
					break;
				}
			while (i < n && re[i] != '}')
				i++;
			f = max + 1;
		}
		product *= f; /* at most 4096 * 101: no overflow */
		if (product > MAX_PRODUCT)
			return "too many repetition operators (their product is capped at 4096)";
		prev_rep = rep;
	}
	return NULL;
}
