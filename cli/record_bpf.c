// SPDX-License-Identifier: Apache-2.0
/*
 * strobe record -e cpu, -e offcpu and -e wall on the agent's eBPF programs (the default, where
 * they load; --mode perf keeps the perf path): on-CPU samples counted in the kernel by the
 * sampling program (include/strobe/oncpu.h), off-CPU time summed by the sched_switch program
 * (include/strobe/offcpu.h), each walking user stacks by the binaries' unwind tables in the
 * kernel, so no sample and no stack copy crosses to user space. Kept apart from cmd_record.c,
 * which calls these around its loop, as it does record_lock.c's.
 *
 * The sampler cmd_record opens still reads the side-band records that name processes and their
 * mappings (its cpu-clock events at 1 Hz, their samples dropped: strobe_sampler_opts
 * cpu_external and offcpu_external); the kernel's sums are added to it at every round and at the
 * end. The programs are loaded before the sampler opens (the verifier takes a while, which the
 * profile's duration should not include) and attached right after.
 *
 * --mode auto (the default) falls back to the perf path when a program does not load (no BTF,
 * no privilege, a kernel without the helpers), saying why once; --mode bpf makes that an error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/offcpu.h"
#include "strobe/oncpu.h"

#define TABLE_MB 8 /* the unwind rows' map (8 bytes a row), as the agent's default */

struct record_bpf {
	strobe_oncpu *oc;
	strobe_offcpu *ob;
};

static void bpf_free(record_bpf *b)
{
	if (!b)
		return;
	strobe_oncpu_close(b->oc); /* first: it may walk by the off-CPU program's tables */
	strobe_offcpu_close(b->ob);
	free(b);
}

record_bpf *record_bpf_open(const char *cmd, strobe_sampler_opts *so, int mode)
{
	bool cpu = so->events & STROBE_EV_CPU, off = so->events & STROBE_EV_OFFCPU;
	if (mode == RECORD_MODE_PERF || (!cpu && !off) || (so->events & STROBE_EV_LOCK))
		return NULL;
	const char *why = NULL;
	if (so->cycles)
		why = "-e cycles counts the hardware cycle counter, which the eBPF path does not";
	else if (so->keep_idle)
		why = "--idle keeps the idle task's samples, which the eBPF path drops";
	else if (so->call_graph == STROBE_CG_DWARF)
		why = "--call-graph dwarf unwinds copies of the stack here, with libdw (.debug_frame "
		      "too), which is the perf path; the eBPF walk reads .eh_frame in the kernel";
	if (why) {
		if (mode == RECORD_MODE_BPF)
			cli_err(cmd, "--mode bpf: %s", why);
		return NULL;
	}
	record_bpf *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	strobe_err err = {{0}};
	uint32_t rows = so->call_graph == STROBE_CG_FP ? 0 : (uint32_t)TABLE_MB << 17;
	const pid_t *pids = so->all ? NULL : so->pids;
	unsigned npids = so->all ? 0 : so->npids;
	if (off) {
		strobe_offcpu_opts oo = {.pids = pids, .npids = npids, .kernel = so->kernel,
					 .min_block_ns = so->min_block_ns, .table_rows = rows};
		if (!(b->ob = strobe_offcpu_open(&oo, &err)))
			goto fail;
	}
	if (cpu) {
		int share[STROBE_TABLE_MAPS];
		strobe_oncpu_opts co = {.pids = pids, .npids = npids, .kernel = so->kernel,
					/* a sample per period of each target thread's CPU time,
					 * as the perf path's */
					.per_task = true, .enable_on_exec = so->enable_on_exec,
					.freq = so->freq, .interval_ms = 1000, .table_rows = rows,
					/* no preload: the window would start seconds late; the
					 * program asks for each process's tables as it meets it */
					.preload_ms = 0,
					/* new images, for the C SDK's label offsets */
					.fresh = true,
					/* their tables at their exec: a recording's first samples */
					.ask_at_exec = true,
					/* ... and those walked before them unwound here (not in
					 * the e2e tests that measure the kernel's walk alone) */
					.copy_unwalked = getenv("STROBE_TEST_NO_COPIES") == NULL,
					/* the e2e tests' way to send every sample that way */
					.copy_all = getenv("STROBE_TEST_COPY_ALL") != NULL,
					/* ... and theirs to show what finding rows by file does */
					.no_by_file = getenv("STROBE_TEST_NO_BY_FILE") != NULL};
		if (b->ob && rows && strobe_offcpu_table_maps(b->ob, share) == 0)
			co.share_tables = share;
		if (!(b->oc = strobe_oncpu_open(&co, &err)))
			goto fail;
	}
	so->cpu_external = b->oc != NULL;
	so->offcpu_external = b->ob != NULL;
	return b;
fail:
	if (mode == RECORD_MODE_BPF)
		cli_err(cmd, "--mode bpf: %s", err.msg[0] ? err.msg : strerror(errno));
	else
		cli_err(cmd, "using the perf path: %s", err.msg[0] ? err.msg : strerror(errno));
	bpf_free(b);
	return NULL;
}

int record_bpf_attach(const char *cmd, record_bpf *b, const strobe_sampler_opts *so)
{
	strobe_err err = {{0}};
	int rc = 0;
	if (b->ob)
		rc = strobe_offcpu_attach(b->ob, &err);
	if (rc == 0 && b->oc)
		rc = strobe_oncpu_attach(b->oc, so->freq, &err);
	if (rc < 0)
		cli_err(cmd, "%s", err.msg);
	return rc;
}

int record_bpf_collect(const char *cmd, record_bpf *b, strobe_sampler *s)
{
	int rc = 0;
	/* processes sampled for the first time since their exec (the command, once it has
	 * exec'd): this is when the C SDK's label offset of each is looked for; the pids
	 * themselves are not needed here */
	pid_t fresh[256];
	unsigned nf;
	do {
		nf = b->oc ? strobe_oncpu_fresh(b->oc, fresh, 256) : 0;
		strobe_oncpu_fresh_labels(b->oc, fresh, nf);
	} while (nf == 256);
	if (b->oc && (rc = strobe_oncpu_collect(b->oc, s)) < 0)
		cli_err(cmd, "reading the kernel's on-CPU sums: %s", strerror(-rc));
	if (rc == 0 && b->ob && (rc = strobe_offcpu_collect(b->ob, s)) < 0)
		cli_err(cmd, "reading the kernel's off-CPU sums: %s", strerror(-rc));
	return rc;
}

void record_bpf_exec(record_bpf *b, pid_t pid)
{
	if (b && b->oc)
		strobe_oncpu_exec(b->oc, pid);
}

void record_bpf_stop(record_bpf *b)
{
	if (!b)
		return;
	if (b->oc)
		strobe_oncpu_detach(b->oc);
	if (b->ob)
		strobe_offcpu_detach(b->ob);
}

int record_bpf_close(record_bpf *b, strobe_profile *p, bool quiet)
{
	if (!b)
		return 0;
	record_bpf_stop(b);
	char note[256];
	uint64_t lost = 0;
	if (b->oc) {
		strobe_oncpu_stats st;
		strobe_oncpu_get_stats(b->oc, &st);
		lost += st.counts_full;
		if (!quiet)
			fprintf(stderr, "strobe record: %" PRIu64 " on-CPU samples summed in the kernel",
				st.samples);
		if (st.counts_full || st.stack_errors) {
			snprintf(note, sizeof(note), "on-CPU samples dropped: %" PRIu64 " (the kernel's "
				 "map of sums full), %" PRIu64 " without a stack (stack map full)",
				 st.counts_full, st.stack_errors);
			if (p)
				strobe_profile_add_comment(p, note);
			if (!quiet)
				fprintf(stderr, "; %s", note);
		}
		if (!quiet)
			fputc('\n', stderr);
		if (getenv("STROBE_DEBUG")) /* the kernel walk and its tables (docs/record.md) */
			fprintf(stderr, "strobe record: on-CPU walks: user %" PRIu64 " before-tables %"
				PRIu64 " no-maps %" PRIu64 " table-frames %" PRIu64 " fp-frames %" PRIu64
				" table-stops %" PRIu64 " file-rows %" PRIu64 " copied %" PRIu64
				" (unwound %" PRIu64
				", ring full %" PRIu64 "); tables: processes %" PRIu64 " failed %" PRIu64
				" binaries %u (%u built apart) build-ms %.1f waits %" PRIu64
				" wait-ms mean %.2f max %.2f\n",
				st.user, st.user_prov, st.no_maps, st.table_frames, st.fp_frames,
				st.table_stops, st.file_rows, st.copied, st.copies_unwound,
				st.copy_full,
				st.tables.procs_loaded, st.tables.procs_failed,
				st.tables.binaries, st.tables.binaries_async,
				(double)st.tables.build_ns / 1e6, st.tables.waits,
				st.tables.waits ? (double)st.tables.wait_ns_sum / 1e6 /
							  (double)st.tables.waits
						: 0.0,
				(double)st.tables.wait_ns_max / 1e6);
	}
	if (b->ob) {
		strobe_offcpu_stats st;
		strobe_offcpu_get_stats(b->ob, &st);
		lost += st.starts_full + st.counts_full;
		if (!quiet)
			fprintf(stderr, "strobe record: %" PRIu64 " off-CPU intervals summed in the kernel",
				st.intervals);
		if (st.starts_full + st.counts_full + st.stack_errors + st.stacks_missing) {
			snprintf(note, sizeof(note), "off-CPU intervals dropped: %" PRIu64 " (maps full), "
				 "%" PRIu64 " stacks lost", st.starts_full + st.counts_full,
				 st.stack_errors + st.stacks_missing);
			if (p)
				strobe_profile_add_comment(p, note);
			if (!quiet)
				fprintf(stderr, "; %s", note);
		}
		if (!quiet)
			fputc('\n', stderr);
	}
	bpf_free(b);
	return lost ? 1 : 0;
}
