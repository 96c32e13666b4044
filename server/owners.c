// SPDX-License-Identifier: Apache-2.0
/*
 * Owners: the config's "owners" map from a label's values to the teams that own them, so that a
 * regression names who should look at it:
 *
 *   "owners": { "service_name": { "checkout": "payments", "search": "discovery" },
 *               "namespace":    { "billing": "payments" } }
 *
 * Checked when the config is loaded (an object of objects of non-empty strings, bounded), kept
 * as JSON text in the config (as "scrape" is) and looked up per request: the map is small and a
 * request that needs it already queries the store.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

enum { OWNERS_MAX = 100000, OWNERS_NAME_MAX = 256 };

int strobe_server_owners_config(json_t *v, strobe_server_config *c, strobe_err *err)
{
	if (!json_is_object(v))
		return strobe_errf(err, -EINVAL, "config: \"owners\" must be an object of label "
						 "names, each an object of value: team");
	const char *label, *value;
	json_t *vals, *team;
	size_t n = 0;
	json_object_foreach(v, label, vals) {
		if (!*label || strlen(label) > OWNERS_NAME_MAX || !json_is_object(vals))
			return strobe_errf(err, -EINVAL,
					   "config: \"owners\".\"%.64s\" must be an object of "
					   "value: team (label names 1 to %d bytes)",
					   label, OWNERS_NAME_MAX);
		json_object_foreach(vals, value, team) {
			const char *t = json_string_value(team);
			if (!t || !*t || strlen(t) > OWNERS_NAME_MAX || strlen(value) > OWNERS_NAME_MAX)
				return strobe_errf(err, -EINVAL,
						   "config: \"owners\".\"%.64s\".\"%.64s\" must be a "
						   "team name of 1 to %d bytes",
						   label, value, OWNERS_NAME_MAX);
			if (++n > OWNERS_MAX)
				return strobe_errf(err, -EINVAL,
						   "config: \"owners\" has more than %d entries",
						   OWNERS_MAX);
		}
	}
	char *s = json_dumps(v, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	free(c->owners_json);
	c->owners_json = s;
	return 0;
}

char *srv_owner_of(const strobe_server_config *c, const char *const *names,
		   const char *const *values, size_t n, const char **label)
{
	if (!c->owners_json || !n)
		return NULL;
	json_t *root = json_loads(c->owners_json, 0, NULL);
	char *team = NULL;
	for (size_t i = 0; root && i < n && !team; i++) {
		const char *t = json_string_value(json_object_get(json_object_get(root, names[i]),
								  values[i]));
		if (t) {
			team = strdup(t);
			if (label)
				*label = names[i];
		}
	}
	json_decref(root);
	return team;
}
