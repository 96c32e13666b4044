// SPDX-License-Identifier: Apache-2.0
/*
 * span_query: a query by span_id over a store with many profiles, through the span index
 * (store/spans.c) and through the scan it replaced (strobe_store_use_span_index off), on the
 * same store in one run. The store is written here with the store's own push call: SERIES
 * services, each pushing a small CPU profile (12 stacks) every INTERVAL seconds for an hour, each
 * profile with its own span_id and trace_id as sample labels (as span profiling makes them),
 * PROFILES in all; then QUERIES spans picked across the hour are each asked for, over the whole
 * hour, both ways, and both answers are compared (they must be identical).
 *
 *   span_query DIR [-n PROFILES] [-s SERIES] [-q QUERIES]
 *
 * Prints one line: profiles= series= ingest_s= index_ms= scan_ms= (medians) ratio= same=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strobe/codec.h"
#include "strobe/server.h"
#include "strobe/store.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static strobe_profile *make_profile(int v)
{
	char text[4096];
	size_t len = 0;
	for (int i = 0; i < 12; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"main;serve;handler%d;work%d;leaf%d %d\n", i % 4, (i + v) % 6,
					i, 1 + (i * 7 + v) % 40);
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, len, "spans", &p, &err) < 0) {
		fprintf(stderr, "span_query: %s\n", err.msg);
		exit(1);
	}
	p->types[0].type = strobe_str_intern0(p, "cpu");
	p->types[0].unit = strobe_str_intern0(p, "nanoseconds");
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	p->period = 10000000;
	return p;
}

static double run_query(strobe_store *s, const char *span, int64_t from, int64_t to,
			int64_t *total)
{
	char sel_text[256];
	snprintf(sel_text, sizeof(sel_text),
		 "process_cpu:cpu:nanoseconds:cpu:nanoseconds{span_id=\"%s\"}", span);
	strobe_selector sel;
	strobe_err err = {{0}};
	if (strobe_selector_parse(sel_text, strlen(sel_text), &sel, &err) < 0) {
		fprintf(stderr, "span_query: %s\n", err.msg);
		exit(1);
	}
	strobe_query q = {.tenant = "anonymous", .sel = &sel, .from_ns = from, .to_ns = to};
	strobe_profile *p = NULL;
	double t0 = now_s();
	if (strobe_store_query(s, &q, &p, &err) < 0) {
		fprintf(stderr, "span_query: query: %s\n", err.msg);
		exit(1);
	}
	double dt = now_s() - t0;
	*total = strobe_total(p, 0);
	strobe_profile_free(p);
	strobe_selector_free(&sel);
	return dt;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: span_query DIR [-n PROFILES] [-s SERIES] [-q QUERIES]\n");
		return 2;
	}
	const char *dir = argv[1];
	long nprof = 100000;
	int nser = 20, nq = 15, o;
	optind = 2;
	while ((o = getopt(argc, argv, "n:s:q:")) != -1) {
		switch (o) {
		case 'n': nprof = atol(optarg); break;
		case 's': nser = atoi(optarg); break;
		case 'q': nq = atoi(optarg); break;
		default: return 2;
		}
	}
	if (nprof < nser || nser < 1 || nser > 1000 || nq < 1 || nq > 1000)
		return 2;
	long steps = nprof / nser;
	int64_t end = (int64_t)time(NULL) * STROBE_NS_PER_S, step_ns = 3600 * STROBE_NS_PER_S / steps;
	int64_t start = end - steps * step_ns;
	strobe_profile *prof[8];
	for (int v = 0; v < 8; v++)
		prof[v] = make_profile(v);
	strobe_err err = {{0}};
	strobe_store_opts so = {.dir = dir, .sync_normal = true};
	strobe_store *s = strobe_store_open(&so, &err);
	if (!s) {
		fprintf(stderr, "span_query: %s\n", err.msg);
		return 1;
	}
	strobe_push_item *items = calloc((size_t)nser, sizeof(*items));
	strobe_labelpair *il = calloc((size_t)nser, sizeof(*il));
	strobe_labelpair (*sl)[2] = calloc((size_t)nser, sizeof(*sl));
	char (*names)[3][40] = calloc((size_t)nser, sizeof(*names));
	if (!items || !il || !sl || !names)
		return 1;
	double t0 = now_s();
	for (long k = 0; k < steps; k++) {
		for (int i = 0; i < nser; i++) {
			long id = k * nser + i;
			snprintf(names[i][0], 40, "svc-%03d", i);
			snprintf(names[i][1], 40, "%016lx", 0x5b00000000000000l + id * 7919);
			snprintf(names[i][2], 40, "%032lx", 0x7700000000000000l + id / 4);
			il[i] = (strobe_labelpair){"service_name", names[i][0]};
			sl[i][0] = (strobe_labelpair){"span_id", names[i][1]};
			sl[i][1] = (strobe_labelpair){"trace_id", names[i][2]};
			items[i] = (strobe_push_item){.profile = prof[(k + i) % 8],
						      .name = "process_cpu",
						      .time_ns = start + k * step_ns + i,
						      .labels = &il[i],
						      .nlabels = 1,
						      .slabels = sl[i],
						      .nslabels = 2};
		}
		strobe_push_req rq = {.tenant = "anonymous", .items = items, .nitems = (size_t)nser,
				      .now_ns = end};
		strobe_push_result res;
		if (strobe_store_push(s, &rq, &res, &err) < 0) {
			fprintf(stderr, "span_query: push: %s\n", err.msg);
			return 1;
		}
		strobe_push_result_free(&res);
	}
	double ingest = now_s() - t0;
	double *ti = calloc((size_t)nq, sizeof(double)), *ts = calloc((size_t)nq, sizeof(double));
	int same = 1;
	for (int k = 0; k < nq; k++) {
		long id = (long)((double)(nprof - 1) * (k + 0.5) / nq);
		char span[40];
		snprintf(span, sizeof(span), "%016lx", 0x5b00000000000000l + id * 7919);
		int64_t a, b;
		strobe_store_use_span_index(s, true);
		ti[k] = run_query(s, span, start, end + STROBE_NS_PER_S, &a);
		strobe_store_use_span_index(s, false);
		ts[k] = run_query(s, span, start, end + STROBE_NS_PER_S, &b);
		same &= a == b && a > 0;
	}
	qsort(ti, (size_t)nq, sizeof(double), cmp_d);
	qsort(ts, (size_t)nq, sizeof(double), cmp_d);
	double mi = ti[nq / 2] * 1000, ms = ts[nq / 2] * 1000;
	printf("profiles=%ld series=%d ingest_s=%.1f index_ms=%.3f scan_ms=%.1f ratio=%.0f same=%d\n",
	       steps * nser, nser, ingest, mi, ms, ms / mi, same);
	strobe_store_close(s);
	for (int v = 0; v < 8; v++)
		strobe_profile_free(prof[v]);
	free(items);
	free(il);
	free(sl);
	free(names);
	free(ti);
	free(ts);
	return same ? 0 : 1;
}
