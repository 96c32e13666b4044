/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to lib/otlp.c and lib/otlp_view.c: an OTLP series as a pprof view (strobe/pprof_view.h)
 * rather than a profile model, for the server's ingest. The dictionary's strings, functions,
 * mappings and locations are already flat tables indexed by number, which is what a view is;
 * building a model from them interned each entity and stack node into hash tables that the
 * store then mapped again into its own. A view hands the store the dictionary's tables (checked
 * once per request) and the samples' frames as dictionary location indices, so the store maps
 * each entity once (store/ingest_view.c).
 */
#ifndef STROBE_LIB_OTLP_VIEW_H
#define STROBE_LIB_OTLP_VIEW_H

#include "otlp_profiles_service.pb-c.h"
#include "strobe/pprof_view.h"

typedef struct otlp_vdict otlp_vdict;

/* The request's dictionary as view tables: 0, -EINVAL when an entry names something outside
 * its table (the caller then builds the model, whose errors are the reference), -ENOMEM. */
int otlp_vdict_open(const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d,
		    otlp_vdict **out);
void otlp_vdict_free(otlp_vdict *vd);

/* The OTLP profiles of one series (one sample type each, in the order of hdr's types) as a view
 * whose header is hdr (taken over on success). 0; -EINVAL when the view cannot say what the
 * model would (a sample with attributes or a link, a bad index, a value overflow): build the
 * model instead; -ENOMEM. */
int otlp_view_build(otlp_vdict *vd,
		    const Opentelemetry__Proto__Profiles__V1development__Profile *const *profs,
		    uint32_t n, strobe_profile *hdr, strobe_pprof_view **out);
/* A view of otlp_view_build: its own arrays and header (not the dictionary's tables). */
void otlp_view_free(strobe_pprof_view *v);

#endif
