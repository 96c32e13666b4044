/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cost and leaks (server/cost.c, server/cost_config.c, server/leaks.c): the "cost" section of
 * the config, and the money and energy a number of core-seconds stands for. The formulas and
 * their constants are written out in docs/cost-and-leaks.md; this header is their one home in
 * code, so the API, the CLI's table and the docs cannot drift apart.
 */
#ifndef STROBE_SERVER_COST_H
#define STROBE_SERVER_COST_H

#include <jansson.h>

#include "strobe/server.h"

#define SRV_COST_PRICE_DEFAULT 0.0425 /* $ per core-hour: Elastic's figure (docs) */
#define SRV_COST_PUE_DEFAULT 1.2
#define SRV_COST_GRID_DEFAULT 400.0 /* g CO2e per kWh */
#define SRV_SECONDS_PER_YEAR (365.25 * 86400)

void srv_cost_config_init(struct strobe_cost_config *c);
/* The "cost" object of the config: price_per_core_hour, watts_per_core, pue,
 * grid_g_co2_per_kwh, each a non-negative number in a sane range; -EINVAL naming the key. */
int srv_cost_config_parse(const json_t *v, struct strobe_cost_config *c, strobe_err *err);

/* The figures of core_seconds used over a window of window_s seconds: core-hours, dollars, the
 * mean cores busy, energy and CO2 when watts_per_core is set, and each scaled to a year
 * (x SRV_SECONDS_PER_YEAR / window_s). A new JSON object. */
json_t *srv_cost_figures(const struct strobe_cost_config *c, double core_seconds,
			 double window_s);


#endif
