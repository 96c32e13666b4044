// SPDX-License-Identifier: Apache-2.0
/*
 * Bulk loader for the fleet benchmark (bench/fleet.sh): writes a host's or a fleet's worth of
 * small CPU profiles straight into a store directory through the store's own push call
 * (strobe_store_push, the call the push API ends in), so that a day of 500 processes every 10 s
 * (4.3 M profiles) can be generated in minutes instead of the hours HTTP pushes would take. The
 * same source builds against an older store (the benchmark's "before"), as it uses only the
 * public store interface.
 *
 * Every time step is one push of every series' profile (one transaction, as group commit makes
 * of concurrent agents' pushes). A profile: STACKS stacks (default 12), 3-8 frames deep, from a
 * pool of 48 per process (its own functions under shared runtime and libc frames), one sample
 * type (cpu nanoseconds, 10 ms period), values drawn from a fixed seed.
 *
 *   fleet_load DIR host|fleet [-p PROCESSES] [-s SERVICES] [-H HOSTS] [-d SECONDS]
 *              [-i INTERVAL] [-k STACKS] [-e END_UNIX_S] [-c]
 *     host:  PROCESSES (500) series, service_name=proc-NNN, host=host-0
 *     fleet: SERVICES x HOSTS (20 x 50) series, service_name=svc-NN, host=host-NN
 *     -d: the span of time (86400), -i: seconds between profiles (10), -e: the last profile's
 *     time (default now, rounded down to INTERVAL), -c: compact at the end, as a running
 *     server's maintenance would have along the way.
 * Output: one line of key=value pairs (profiles, seconds, profiles_per_s, end).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strobe/codec.h"
#include "strobe/store.h"

enum { POOL = 48, VARIANTS = 8 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One variant of process `proc`'s profile, as folded text decoded by the toolkit. */
static strobe_profile *make_profile(int proc, int nstacks)
{
	static const char *const base[] = {"_start", "__libc_start_main", "main", "runtime.main",
					   "event_loop", "worker"};
	char text[16384];
	size_t len = 0;
	for (int k = 0; k < nstacks; k++) {
		int pick = (int)(rnd() % POOL), depth = 3 + pick % 6;
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s;%s", base[pick % 3],
					base[3 + pick % 3]);
		for (int d = 2; d < depth; d++)
			len += (size_t)snprintf(text + len, sizeof(text) - len, ";p%d_fn%d", proc,
						(pick * 7 + d * 13) % (POOL * 2));
		len += (size_t)snprintf(text + len, sizeof(text) - len, " %d\n",
					1 + (int)(rnd() % 40));
	}
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, len, "fleet", &p, &err) < 0) {
		fprintf(stderr, "fleet_load: %s\n", err.msg);
		exit(1);
	}
	p->types[0].type = strobe_str_intern0(p, "cpu");
	p->types[0].unit = strobe_str_intern0(p, "nanoseconds");
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	p->period = 10000000;
	/* samples of 10 ms */
	for (uint32_t i = 1; i <= strobe_nsamples(p); i++)
		strobe_sample_values(p, i)[0] *= 10000000;
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fleet_load DIR host|fleet [-p N] [-s N] [-H N] [-d S] [-i S] "
				"[-k N] [-e T] [-c]\n");
		return 2;
	}
	const char *dir = argv[1];
	int fleet = strcmp(argv[2], "fleet") == 0;
	int procs = 500, services = 20, hosts = 50, nstacks = 12, compact = 0;
	long span = 86400, interval = 10;
	long long end = 0;
	int o;
	optind = 3;
	while ((o = getopt(argc, argv, "p:s:H:d:i:k:e:c")) != -1) {
		switch (o) {
		case 'p': procs = atoi(optarg); break;
		case 's': services = atoi(optarg); break;
		case 'H': hosts = atoi(optarg); break;
		case 'd': span = atol(optarg); break;
		case 'i': interval = atol(optarg); break;
		case 'k': nstacks = atoi(optarg); break;
		case 'e': end = atoll(optarg); break;
		case 'c': compact = 1; break;
		default: return 2;
		}
	}
	if (!end)
		end = (long long)time(NULL) / interval * interval;
	int nser = fleet ? services * hosts : procs;
	strobe_profile **prof = calloc((size_t)nser * VARIANTS, sizeof(*prof));
	strobe_push_item *items = calloc((size_t)nser, sizeof(*items));
	strobe_labelpair *il = calloc((size_t)nser * 2, sizeof(*il));
	char (*names)[2][32] = calloc((size_t)nser, sizeof(*names));
	if (!prof || !items || !il || !names)
		return 1;
	for (int i = 0; i < nser; i++) {
		for (int v = 0; v < VARIANTS; v++)
			prof[i * VARIANTS + v] = make_profile(fleet ? i % services : i, nstacks);
		if (fleet) {
			snprintf(names[i][0], 32, "host-%02d", i / services);
			snprintf(names[i][1], 32, "svc-%02d", i % services);
			il[2 * i] = (strobe_labelpair){"host", names[i][0]};
			il[2 * i + 1] = (strobe_labelpair){"service_name", names[i][1]};
		} else {
			snprintf(names[i][1], 32, "proc-%03d", i);
			il[2 * i] = (strobe_labelpair){"service_name", names[i][1]};
		}
		items[i] = (strobe_push_item){.name = "process_cpu",
					      .labels = &il[2 * i],
					      .nlabels = fleet ? 2 : 1};
	}
	strobe_labelpair host = {"host", "host-0"};
	strobe_err err = {{0}};
	strobe_store_opts so = {.dir = dir, .retention_ns = 0, .sync_normal = true};
	strobe_store *s = strobe_store_open(&so, &err);
	if (!s) {
		fprintf(stderr, "fleet_load: %s\n", err.msg);
		return 1;
	}
	long steps = span / interval;
	double t0 = now_s();
	long long n = 0;
	for (long k = 0; k < steps; k++) {
		long long t = end - (long long)(steps - 1 - k) * interval;
		for (int i = 0; i < nser; i++) {
			items[i].profile = prof[i * VARIANTS + (int)((k + i) % VARIANTS)];
			items[i].time_ns = t * STROBE_NS_PER_S + (i % 97) * 1000000LL;
		}
		strobe_push_req rq = {"anonymous", fleet ? NULL : &host, fleet ? 0 : 1, items,
				      (size_t)nser, t * STROBE_NS_PER_S};
		strobe_push_result res;
		if (strobe_store_push(s, &rq, &res, &err) < 0) {
			fprintf(stderr, "fleet_load: push: %s\n", err.msg);
			return 1;
		}
		strobe_push_result_free(&res);
		n += nser;
	}
	double ingest = now_s() - t0;
	double tc = now_s();
	if (compact && strobe_store_compact(s, (end + 3600) * STROBE_NS_PER_S, &err) < 0) {
		fprintf(stderr, "fleet_load: compact: %s\n", err.msg);
		return 1;
	}
	tc = now_s() - tc;
	strobe_store_close(s);
	printf("profiles=%lld series=%d seconds=%.1f profiles_per_s=%.0f compact_s=%.1f end=%lld\n",
	       n, nser, ingest, n / ingest, tc, end);
	for (int i = 0; i < nser * VARIANTS; i++)
		strobe_profile_free(prof[i]);
	free(prof);
	free(items);
	free(il);
	free(names);
	return 0;
}
