/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Automatic regression detection and its webhook (server/notify.c): a thread of the server
 * that watches each service's version label, compares a new version with the previous one
 * through the engine of /api/v1/regressions once it has settled, and POSTs one JSON
 * notification per regression set to the webhook the config names.
 */
#ifndef SRV_NOTIFY_H
#define SRV_NOTIFY_H

#include <stdio.h>

#include "strobe/server.h"

struct json_t;
typedef struct srv_notify srv_notify;

/* Checks the config's "notify" section and keeps it as JSON text in *out. */
int srv_notify_config(struct json_t *v, char **out, strobe_err *err);
/* Starts the notifier thread of srv (its config's notify_json; NULL when there is none, or
 * with err set when it cannot start). */
srv_notify *srv_notify_start(strobe_server *srv, strobe_err *err);
/* Stops and joins the thread (a transfer in flight is aborted), then frees. */
void srv_notify_stop(srv_notify *n);
/* Its counters in the Prometheus text format, for GET /metrics. */
void srv_notify_metrics(srv_notify *n, FILE *f);

#endif
