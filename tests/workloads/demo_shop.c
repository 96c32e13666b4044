// SPDX-License-Identifier: Apache-2.0
/* demo_shop: the small services `make demo` profiles (scripts/demo.sh). One program, three roles,
 * each with hot paths of its own so their flame graphs look different, and each light enough
 * (a request, then a pause) to leave the machine usable:
 *
 *   demo_shop api      handle_request -> parse_json (~30%), render_page (~50%),
 *                      compress_response (~20%) of its CPU
 *   demo_shop worker   resize_image -> blur_pass (~70%), encode_png -> deflate_block (~30%)
 *   demo_shop db       4 "conn" threads that each take one table lock and run execute_query
 *                      (scan_rows: 1 ms of CPU, read_page: 3 ms of waiting) under it: most
 *                      of their time is spent waiting for the lock in acquire_table_lock
 *                      (off-CPU; see it with the off_cpu type)
 *
 * Runs until killed, or for SECONDS when given. As in the other workloads, our functions are
 * noinline and call their spin directly, so a frame-pointer unwind names them; a function that
 * calls into glibc (built without frame pointers, so its direct caller is skipped by the unwind)
 * is wrapped in an outer one of ours that the stacks do show (read_page, client_think, ...).
 */
#include "wl_common.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static int64_t deadline = INT64_MAX;

/* Spins for `us` microseconds of this thread's CPU, in the caller's frame. */
#define BURN_US(us)                                                              \
	do {                                                                     \
		uint64_t acc_ = (uint64_t)(us);                                  \
		int64_t t0_ = wl_thread_cpu_ns();                                \
		do                                                               \
			for (int i_ = 0; i_ < 2000; i_++)                        \
				acc_ = acc_ * 6364136223846793005ULL + 1442695040888963407ULL; \
		while (wl_thread_cpu_ns() - t0_ < (int64_t)(us) * 1000);        \
		wl_sink = acc_;                                                  \
	} while (0)

/* ---- api ---------------------------------------------------------------------------------- */
static __attribute__((noinline)) void parse_json(void) { BURN_US(1500); }
static __attribute__((noinline)) void render_page(void) { BURN_US(2500); }
static __attribute__((noinline)) void compress_response(void) { BURN_US(1000); }
static __attribute__((noinline)) void handle_request(void)
{
	parse_json();
	render_page();
	compress_response();
}
static __attribute__((noinline)) void api_wait(void) { wl_sleep_ns(20000000); }
static __attribute__((noinline)) void api_pause(void) { api_wait(); }
static __attribute__((noinline)) void serve_api(void)
{
	while (wl_mono_ns() < deadline) {
		handle_request();
		api_pause();
	}
}

/* ---- worker ------------------------------------------------------------------------------- */
static __attribute__((noinline)) void blur_pass(void) { BURN_US(3500); }
static __attribute__((noinline)) void resize_image(void) { blur_pass(); }
static __attribute__((noinline)) void deflate_block(void) { BURN_US(1500); }
static __attribute__((noinline)) void encode_png(void) { deflate_block(); }
static __attribute__((noinline)) void worker_wait(void) { wl_sleep_ns(20000000); }
static __attribute__((noinline)) void worker_pause(void) { worker_wait(); }
static __attribute__((noinline)) void run_jobs(void)
{
	while (wl_mono_ns() < deadline) {
		resize_image();
		encode_png();
		worker_pause();
	}
}

/* ---- db ----------------------------------------------------------------------------------- */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static __attribute__((noinline)) void page_io(void) { wl_sleep_ns(3000000); }
static __attribute__((noinline)) void read_page(void) { page_io(); }
static __attribute__((noinline)) void scan_rows(void) { BURN_US(1000); }
/* 1 ms of CPU and 3 ms of (simulated) I/O, all under the lock: the lock is the bottleneck, not
 * the CPU, as in many a real database incident. */
static __attribute__((noinline)) void execute_query(void)
{
	scan_rows();
	read_page();
}
static __attribute__((noinline)) void lock_table(void) { pthread_mutex_lock(&table_lock); }
static __attribute__((noinline)) void acquire_table_lock(void) { lock_table(); }
static __attribute__((noinline)) void think_wait(void) { wl_sleep_ns(4000000); }
static __attribute__((noinline)) void client_think(void) { think_wait(); }
static __attribute__((noinline)) void *conn_main(void *arg)
{
	char name[16];
	snprintf(name, sizeof(name), "conn-%d", (int)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (wl_mono_ns() < deadline) {
		acquire_table_lock();
		execute_query();
		pthread_mutex_unlock(&table_lock);
		client_think();
	}
	return NULL;
}
static __attribute__((noinline)) void serve_db(void)
{
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&th[i], NULL, conn_main, (void *)(intptr_t)i)) {
			fprintf(stderr, "demo_shop: pthread_create failed\n");
			exit(1);
		}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		goto usage;
	if (argc == 3)
		deadline = wl_mono_ns() + (int64_t)(wl_parse_seconds(argv[2], "demo_shop") * 1e9);
	if (strcmp(argv[1], "api") == 0)
		serve_api();
	else if (strcmp(argv[1], "worker") == 0)
		run_jobs();
	else if (strcmp(argv[1], "db") == 0)
		serve_db();
	else
		goto usage;
	return 0;
usage:
	fprintf(stderr, "usage: demo_shop api|worker|db [SECONDS]\n");
	return 2;
}
