// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the agent's config parser: any bytes either parse (then every string
 * option is set or NULL, every label is KEY=VALUE with a valid key, the numbers in range) or
 * fail with -EINVAL and a message; nothing leaks or crashes, and the options free cleanly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	strobe_err err = {{0}};
	int rc = strobe_agent_config_parse((const char *)data, size, "fuzz.json", &o, &err);
	if (rc < 0) {
		if (rc != -EINVAL && rc != -ENOMEM)
			abort();
		if (rc == -EINVAL && !err.msg[0])
			abort(); /* every refusal says why */
	} else {
		if (o.freq < 1 || o.freq > 10000 || o.interval_s < 1 || o.interval_s > 3600)
			abort();
		for (unsigned i = 0; i < o.nlabels; i++)
			if (!strchr(o.labels[i], '=') || o.labels[i][0] == '=')
				abort();
	}
	strobe_agent_opts_free(&o);
	return 0;
}
