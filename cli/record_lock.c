// SPDX-License-Identifier: Apache-2.0
/*
 * strobe record -e lock: the agent's futex-wait program (include/strobe/locks.h) for a command,
 * pids or the whole host, kept apart from cmd_record.c, which calls these around its loop. The
 * sampler that cmd_record opens with STROBE_EV_LOCK alone samples at 1 Hz only for the side-band
 * records that name processes and their mappings. The program is loaded before the sampler
 * opens (the verifier takes a while, which the profile's duration should not include) and
 * attached right after; the waits summed in the kernel are added to the sampler at every round
 * and at the end, and the profile it builds is a lock profile
 * (contentions/count, delay/nanoseconds, lock_addr labels).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/locks.h"

#define TABLE_MB 8 /* the unwind rows' map (8 bytes a row), as the agent's default */
#define PRELOAD_MS 3000 /* -a: the running processes' tables loaded first, for up to this long */

strobe_locks *record_lock_open(const char *cmd, const strobe_sampler_opts *so)
{
	strobe_err err = {{0}};
	strobe_locks_opts lo = {
		.pids = so->all ? NULL : so->pids,
		.npids = so->all ? 0 : so->npids,
		.min_wait_ns = so->min_block_ns,
		.table_rows = so->call_graph == STROBE_CG_FP ? 0 : (uint32_t)TABLE_MB << 17,
		.preload_ms = PRELOAD_MS,
	};
	strobe_locks *lk = strobe_locks_open(&lo, &err);
	if (!lk) {
		cli_err(cmd, "-e lock: %s", err.msg[0] ? err.msg : strerror(errno));
		return NULL;
	}
	strobe_locks_stats st;
	strobe_locks_get_stats(lk, &st);
	if (st.tables_off[0])
		cli_err(cmd, "-e lock: user stacks by frame pointers only: the unwind-table walk "
			"did not load (%s)", st.tables_off);
	return lk;
}

int record_lock_attach(const char *cmd, strobe_locks *lk)
{
	strobe_err err = {{0}};
	int rc = strobe_locks_attach(lk, &err);
	if (rc < 0)
		cli_err(cmd, "-e lock: %s", err.msg);
	return rc;
}

int record_lock_collect(const char *cmd, strobe_locks *lk, strobe_sampler *s)
{
	int rc = strobe_locks_collect(lk, s);
	if (rc < 0)
		cli_err(cmd, "-e lock: reading the kernel's sums: %s", strerror(-rc));
	return rc;
}

void record_lock_stop(strobe_locks *lk)
{
	if (lk)
		strobe_locks_detach(lk);
}

void record_lock_close(const char *cmd, strobe_locks *lk, strobe_sampler *s, bool quiet)
{
	if (!lk)
		return;
	strobe_locks_detach(lk);
	if (s)
		record_lock_collect(cmd, lk, s);
	strobe_locks_stats st;
	strobe_locks_get_stats(lk, &st);
	strobe_locks_close(lk);
	if (quiet)
		return;
	fprintf(stderr, "strobe record: %" PRIu64 " futex waits summed, %" PRIu64
		" returned without sleeping (not counted)", st.waits, st.not_slept);
	if (st.short_waits)
		fprintf(stderr, ", %" PRIu64 " shorter than --min-block", st.short_waits);
	uint64_t lost = st.starts_full + st.counts_full + st.stack_errors + st.stacks_missing;
	if (lost)
		fprintf(stderr, ", %" PRIu64 " lost or without a stack (maps full)", lost);
	fputc('\n', stderr);
	if (getenv("STROBE_DEBUG"))
		fprintf(stderr, "strobe record: lock tables: %" PRIu64 " processes loaded, request to "
			"load mean %.1f ms max %.1f ms; walks without them %" PRIu64 "\n",
			st.procs_loaded,
			st.table_waits ? (double)st.table_wait_ns_sum / (double)st.table_waits / 1e6 : 0,
			(double)st.table_wait_ns_max / 1e6, st.no_maps);
}
