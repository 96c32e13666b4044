// SPDX-License-Identifier: Apache-2.0
/*
 * The "cost" section of the server's config (server/cost.h): the price of a core-hour and the
 * energy constants. Parsed here, called by one branch of server/config.c, so the cost feature
 * owns its schema.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cost.h"

void srv_cost_config_init(struct strobe_cost_config *c)
{
	c->price_per_core_hour = SRV_COST_PRICE_DEFAULT;
	c->watts_per_core = 0;
	c->pue = SRV_COST_PUE_DEFAULT;
	c->grid_g_co2_per_kwh = SRV_COST_GRID_DEFAULT;
}

int srv_cost_config_parse(const json_t *v, struct strobe_cost_config *c, strobe_err *err)
{
	if (!json_is_object(v))
		return strobe_errf(err, -EINVAL,
				   "config: \"cost\" must be an object such as "
				   "{\"price_per_core_hour\": 0.0425, \"watts_per_core\": 10}");
	static const struct {
		const char *key;
		size_t off;
		double lo, hi;
	} keys[] = {
		{"price_per_core_hour", offsetof(struct strobe_cost_config, price_per_core_hour), 0,
		 1000},
		{"watts_per_core", offsetof(struct strobe_cost_config, watts_per_core), 0, 10000},
		{"pue", offsetof(struct strobe_cost_config, pue), 1, 10},
		{"grid_g_co2_per_kwh", offsetof(struct strobe_cost_config, grid_g_co2_per_kwh), 0,
		 5000},
	};
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)v, k, x) {
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(keys[0]) && strcmp(keys[i].key, k) != 0)
			i++;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return strobe_errf(err, -EINVAL,
					   "config: unknown key \"cost.%.64s\" (price_per_core_hour, "
					   "watts_per_core, pue, grid_g_co2_per_kwh)",
					   k);
		double d = json_number_value(x);
		if (!json_is_number(x) || !isfinite(d) || d < keys[i].lo || d > keys[i].hi)
			return strobe_errf(err, -EINVAL, "config: \"cost.%s\" must be a number from %g to %g",
					   keys[i].key, keys[i].lo, keys[i].hi);
		*(double *)((char *)c + keys[i].off) = d;
	}
	return 0;
}
