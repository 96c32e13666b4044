// SPDX-License-Identifier: Apache-2.0
/*
 * Load generator for the server benchmarks (bench/server.sh): builds realistic 10-second Go-style
 * CPU profiles in memory, then pushes them to POST /api/v1/push from N client threads (libcurl,
 * one keep-alive connection each) and prints what got through.
 *
 * A profile: 100 Hz x 10 s x two to four busy cores, i.e. 2,000-4,000 samples drawn (skewed, as
 * real hot paths are) from a fixed pool of 2,500 stacks, 3-32 frames deep, forming one call tree
 * over 800 locations and 400 functions in 6 mappings; sample types samples/count and
 * cpu/nanoseconds, period 10 ms, as Go's runtime/pprof writes them. About 1,500 distinct stacks
 * and 31 KB gzipped each. Each of the distinct profiles is drawn from its own seed, so the
 * stacks repeat across profiles (as a steady service's do) but the values and the subset differ.
 * Generation happens before the clock starts.
 *
 *   server_load URL MODE [options]
 *     MODE push: N clients push for S seconds, each to its own service_name (svc-0, svc-1...),
 *                times spread over the last day; prints profiles/s and samples/s.
 *     MODE day:  one service (service_name=day), COUNT profiles 10 s apart ending now, pushed by
 *                N clients; prints the gzipped bytes sent.
 *     MODE otlp: as push, but the same profiles as OTLP requests (POST /v1development/profiles,
 *                gzipped, service.name svc-N in the body), for bench/otlp.sh.
 *   options: -c CLIENTS (4) -s SECONDS (10) -n COUNT (8640) -k DISTINCT_PROFILES (32) -S SEED (1)
 *            -T: in push and otlp modes, profile i%K always at the same time (day start +
 *                10 s x (i%K)), so that push and otlp store the very same points
 *
 * Output: one line of key=value pairs (parsed by bench/server.sh).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strobe/codec.h"
#include "strobe/otlp.h"

enum { NMAP = 6, NFUNC = 400, NLOC = 800, NPOOL = 2500, MAXDEPTH = 32 };

typedef struct frame {
	uint16_t map;
	uint16_t fn;
	uint32_t line;
	uint64_t addr;
} frame;

static frame pool_loc[NLOC];
static uint16_t pool_depth[NPOOL];
static uint16_t pool_stack[NPOOL][MAXDEPTH];

static uint64_t rng;
static uint64_t rnd(void) /* xorshift64*: the same numbers on every libc */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static void make_pool(void)
{
	rng = 0x9e3779b97f4a7c15ull;
	for (int l = 0; l < NLOC; l++)
		pool_loc[l] = (frame){(uint16_t)(rnd() % NMAP), (uint16_t)(rnd() % NFUNC),
				      (uint32_t)(rnd() % 3000 + 1), 0};
	for (int l = 0; l < NLOC; l++)
		pool_loc[l].addr = 0x400000ull + (uint64_t)pool_loc[l].map * 0x10000000ull +
				   (uint64_t)l * 0x40 + rnd() % 0x40;
	/* Stacks form a call tree, as real ones do: each extends an earlier stack by one to three
	 * frames (the first 16 are roots: main, runtime, server loops). */
	for (int s = 0; s < NPOOL; s++) {
		int depth = 0, parent = s >= 16 ? (int)(rnd() % (uint64_t)s) : -1;
		if (parent >= 0) {
			depth = pool_depth[parent];
			memcpy(pool_stack[s], pool_stack[parent], (size_t)depth * sizeof(uint16_t));
		}
		int add = parent >= 0 ? 1 + (int)(rnd() % 3) : 3;
		for (int k = 0; k < add && depth < MAXDEPTH; k++, depth++)
			pool_stack[s][depth] = (uint16_t)(parent < 0 ? rnd() % 48 : 48 + rnd() % (NLOC - 48));
		pool_depth[s] = (uint16_t)depth;
	}
}

static int make_profile(uint64_t seed, int nsamples, int64_t t_ns, uint8_t **out, size_t *len,
			long *nstacks, strobe_profile **keep)
{
	rng = seed * 0x2545f4914f6cdd1dull + 1;
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return -1;
	strobe_profile_add_type(p, "samples", "count");
	strobe_profile_add_type(p, "cpu", "nanoseconds");
	p->period = 10000000;
	p->period_type = (strobe_value_type){strobe_str_intern0(p, "cpu"),
					     strobe_str_intern0(p, "nanoseconds")};
	p->time_nanos = t_ns;
	p->duration_nanos = 10 * 1000000000ll;
	uint32_t maps[NMAP];
	char buf[160], file[96];
	for (int m = 0; m < NMAP; m++) {
		snprintf(buf, sizeof(buf), m ? "/usr/lib/x86_64-linux-gnu/libdep%d.so.1" : "/app/server",
			 m);
		snprintf(file, sizeof(file), "%016llx%08x", 0xabcdef0123456789ull * (unsigned)(m + 1),
			 (unsigned)m);
		strobe_mapping mp = {.start = 0x400000ull + (uint64_t)m * 0x10000000ull,
				     .limit = 0x400000ull + (uint64_t)(m + 1) * 0x10000000ull,
				     .filename = strobe_str_intern0(p, buf),
				     .build_id = strobe_str_intern0(p, file), .has_functions = 1,
				     .has_filenames = 1, .has_line_numbers = 1};
		maps[m] = strobe_mapping_intern(p, &mp);
	}
	uint32_t *counts = calloc(NPOOL, sizeof(*counts));
	if (!counts)
		return -1;
	for (int i = 0; i < nsamples; i++) {
		double u = (double)(rnd() >> 11) / 9007199254740992.0;
		counts[(int)(u * u * NPOOL)]++;
	}
	long n = 0;
	for (int s = 0; s < NPOOL; s++) {
		if (!counts[s])
			continue;
		uint32_t st = 0;
		for (int d = 0; d < pool_depth[s]; d++) {
			const frame *f = &pool_loc[pool_stack[s][d]];
			snprintf(buf, sizeof(buf), "github.com/example/svc/pkg%d.(*Type%d).Method%d",
				 f->fn % 97, f->fn % 13, f->fn);
			snprintf(file, sizeof(file), "/src/svc/pkg%d/file%d.go", f->fn % 97, f->fn % 7);
			strobe_function fn = {.name = strobe_str_intern0(p, buf),
					      .system_name = strobe_str_intern0(p, buf),
					      .filename = strobe_str_intern0(p, file),
					      .start_line = f->fn % 500 + 1};
			strobe_line ln = {.function = strobe_function_intern(p, &fn), .line = f->line};
			uint32_t loc = strobe_location_intern(p, maps[f->map], f->addr, &ln, 1, false);
			st = strobe_stack_push(p, st, loc);
		}
		int64_t v[2] = {counts[s], (int64_t)counts[s] * 10000000};
		strobe_sample_add(p, st, 0, v);
		n++;
	}
	free(counts);
	int r = strobe_pprof_encode(p, out, len);
	if (keep)
		*keep = p;
	else
		strobe_profile_free(p);
	*nstacks = n;
	return r;
}

typedef struct prof {
	uint8_t *data;
	size_t len;
	long stacks;
	uint8_t **otlp; /* otlp mode: the request for each client (its service.name), gzipped */
	size_t *otlp_len;
} prof;

static prof *profs;
static int nprofs = 32, nclients = 4, seconds = 10, count = 8640;
static const char *base_url;
static int mode_day, mode_otlp, fixed_times;
static int64_t day_start;
static atomic_long next_idx, done_profiles, done_samples, done_bytes, errors;
static atomic_int stop;

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return sz * n;
}

static void *client(void *arg)
{
	long id = (long)arg;
	CURL *c = curl_easy_init();
	if (!c)
		return NULL;
	char url[512];
	struct curl_slist *h = curl_slist_append(NULL, mode_otlp ? "Content-Type: application/x-protobuf"
								   : "Content-Type: application/octet-stream");
	if (mode_otlp)
		h = curl_slist_append(h, "Content-Encoding: gzip");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	long k = 0;
	while (!atomic_load(&stop)) {
		long i = atomic_fetch_add(&next_idx, 1);
		int64_t t;
		if (mode_day) {
			if (i >= count)
				break;
			t = day_start + i * 10 * 1000000000ll;
			snprintf(url, sizeof(url), "%s/api/v1/push?service_name=day&time=%lld",
				 base_url, (long long)t);
		} else {
			/* Each client is its own service; its profiles are 10 s apart, over the
			 * last day (the clock is only simulated). */
			t = fixed_times ? day_start + (i % nprofs) * 10 * 1000000000ll
					: day_start + (k++ % 8000) * 10 * 1000000000ll;
			if (mode_otlp)
				snprintf(url, sizeof(url), "%s/v1development/profiles", base_url);
			else
				snprintf(url, sizeof(url),
					 "%s/api/v1/push?service_name=svc-%ld&time=%lld", base_url,
					 id, (long long)t);
		}
		const prof *p = &profs[i % nprofs];
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, mode_otlp ? p->otlp[id] : p->data);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
				 (long)(mode_otlp ? p->otlp_len[id] : p->len));
		long code = 0;
		if (curl_easy_perform(c) == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		if (code != 200) {
			if (atomic_fetch_add(&errors, 1) < 3)
				fprintf(stderr, "server_load: push got HTTP %ld\n", code);
			continue;
		}
		atomic_fetch_add(&done_profiles, 1);
		atomic_fetch_add(&done_samples, p->stacks);
		atomic_fetch_add(&done_bytes, (long)(mode_otlp ? p->otlp_len[id] : p->len));
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[2], "push") && strcmp(argv[2], "day") && strcmp(argv[2], "otlp"))) {
		fprintf(stderr, "usage: server_load URL push|day|otlp [-c CLIENTS] [-s SECONDS] "
				"[-n COUNT] [-k DISTINCT] [-S SEED] [-T]\n");
		return 2;
	}
	base_url = argv[1];
	mode_day = strcmp(argv[2], "day") == 0;
	mode_otlp = strcmp(argv[2], "otlp") == 0;
	uint64_t seed = 1;
	int o;
	optind = 3;
	while ((o = getopt(argc, argv, "c:s:n:k:S:T")) != -1) {
		switch (o) {
		case 'c': nclients = atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		case 'n': count = atoi(optarg); break;
		case 'k': nprofs = atoi(optarg); break;
		case 'S': seed = strtoull(optarg, NULL, 10); break;
		case 'T': fixed_times = 1; break;
		default: return 2;
		}
	}
	if (nclients < 1 || nprofs < 1 || count < 1 || seconds < 1)
		return 2;
	make_pool();
	profs = calloc((size_t)nprofs, sizeof(*profs));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000ll;
	now = now / 10000000000ll * 10000000000ll;
	day_start = now - (int64_t)(mode_day ? count : 8000) * 10 * 1000000000ll;
	long gz = 0, st = 0;
	for (int i = 0; i < nprofs; i++) {
		/* 2,000-4,000 samples: 100 Hz for 10 s on two to four busy cores. */
		int ns = 2000 + (int)((seed * 7919 + (uint64_t)i * 104729) % 2001);
		strobe_profile *keep = NULL;
		int64_t t0p = fixed_times ? day_start + (int64_t)i * 10 * 1000000000ll : day_start;
		if (make_profile(seed * 1000 + (uint64_t)i, ns, t0p, &profs[i].data, &profs[i].len,
				 &profs[i].stacks, mode_otlp ? &keep : NULL) < 0) {
			fprintf(stderr, "server_load: cannot build a profile\n");
			return 1;
		}
		if (mode_otlp) { /* the same profile, one request per client (its service) */
			profs[i].otlp = calloc((size_t)nclients, sizeof(uint8_t *));
			profs[i].otlp_len = calloc((size_t)nclients, sizeof(size_t));
			for (int c = 0; c < nclients; c++) {
				char svc[32];
				snprintf(svc, sizeof(svc), "svc-%d", c);
				strobe_otlp_label l = {(char *)"service_name", svc};
				uint8_t *raw;
				size_t rl;
				if (strobe_otlp_encode(keep, &l, 1, &raw, &rl) < 0 ||
				    strobe_gzip(raw, rl, &profs[i].otlp[c], &profs[i].otlp_len[c]) < 0) {
					fprintf(stderr, "server_load: cannot encode OTLP\n");
					return 1;
				}
				free(raw);
			}
			strobe_profile_free(keep);
			gz += (long)profs[i].otlp_len[0] - (long)profs[i].len;
		}
		gz += (long)profs[i].len;
		st += profs[i].stacks;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pthread_t *th = calloc((size_t)nclients, sizeof(*th));
	double t0 = now_s();
	for (long i = 0; i < nclients; i++)
		pthread_create(&th[i], NULL, client, (void *)i);
	if (!mode_day) {
		sleep((unsigned)seconds);
		atomic_store(&stop, 1);
	}
	for (int i = 0; i < nclients; i++)
		pthread_join(th[i], NULL);
	double el = now_s() - t0;
	long np = atomic_load(&done_profiles);
	printf("profiles=%ld seconds=%.3f profiles_per_s=%.1f samples_per_s=%.0f bytes_sent=%ld "
	       "avg_gzip_bytes=%ld avg_stacks=%ld errors=%ld clients=%d\n",
	       np, el, np / el, atomic_load(&done_samples) / el, atomic_load(&done_bytes),
	       gz / nprofs, st / nprofs, atomic_load(&errors), nclients);
	return atomic_load(&errors) ? 1 : 0;
}
