// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the server's selector parser (query strings come straight from the
 * network) and the matching built on it, plus the time parser on the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_selector s;
	strobe_err err;
	if (strobe_selector_parse((const char *)data, size, &s, &err) == 0) {
		strobe_labelpair l[] = {{"service_name", "api"}, {"env", ""}};
		strobe_selector_match_labels(&s, l, 2);
		strobe_selector_free(&s);
	}
	char buf[80];
	size_t n = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	memcpy(buf, data, n);
	buf[n] = 0;
	int64_t t;
	strobe_time_parse(buf, 1795383649000000000LL, &t, &err);
	strobe_duration_parse(buf, &t, &err);
	return 0;
}
