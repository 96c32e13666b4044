/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's in-kernel off-CPU collection (agent/offcpu.c loads agent/offcpu.bpf.c; the two
 * share the layout of agent/offcpu.h, as libbpf-tools lays out a tool): the kernel
 * sums blocked time per (thread, kernel stack, user stack), and the agent drains the sums once
 * per interval into the sampler's aggregate, where they are symbolized and labelled like the
 * perf path's off-CPU samples. Private to agent/.
 *
 * User stacks are walked in the program, with no stack copy: by the binaries' unwind tables
 * (.eh_frame, made into rows the program binary-searches: offcpu_tables.c) where they are
 * loaded, by frame pointers elsewhere.
 */
#ifndef STROBE_OFFCPU_H
#define STROBE_OFFCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/sampler.h"

typedef struct strobe_offcpu_opts {
	const pid_t *pids;      /* only these processes and their children; none = all */
	unsigned npids;
	bool kernel;            /* kernel stacks too */
	int64_t min_block_ns;   /* shorter intervals are counted, not recorded */
	unsigned max_entries;   /* distinct (thread, stacks) sums per interval; stack maps
				   hold half as many stacks each. 0 = 16384 */
	uint32_t table_rows;    /* capacity of the unwind rows' map (8 bytes a row);
				   0 = frame pointers only */
	const char *proc_root;  /* where /proc is (NULL: /proc), for the tables' loader */
} strobe_offcpu_opts;

/* The unwind tables the program walks user stacks by (agent/offcpu_tables.c). */
typedef struct strobe_otables_stats {
	uint64_t procs_loaded;   /* processes whose mappings were written (again) */
	uint64_t procs_failed;   /* ... that could not be read (gone, no permission) */
	uint64_t exec_races;     /* ... read again: the process exec'd meanwhile */
	uint32_t procs;          /* processes with mappings in the kernel now */
	uint32_t binaries;       /* binaries with rows in the kernel */
	uint32_t binaries_none;  /* binaries without usable tables (frame pointers there) */
	uint32_t binaries_full;  /* binaries left out: the rows' map was full */
	uint32_t binaries_async; /* large binaries whose rows the builder thread made */
	uint32_t binaries_by_file; /* ... findable by their file, for processes whose mappings are
				      not loaded yet (map ubins) */
	uint64_t rows;           /* rows in the kernel */
	uint64_t rows_max;       /* the map's capacity */
	int64_t build_ns;        /* spent building rows, in all */
	int64_t wait_ns_sum, wait_ns_max; /* from a request to its mappings in the kernel */
	uint64_t waits;
} strobe_otables_stats;

typedef struct strobe_offcpu_stats {
	uint64_t intervals;      /* off-CPU intervals summed in the kernel */
	uint64_t short_blocks;   /* below min_block_ns */
	uint64_t starts_full;    /* switch-outs lost: no per-thread storage (kernel memory) */
	uint64_t counts_full;    /* intervals lost: too many distinct stacks in one interval */
	uint64_t stack_errors;   /* stack walks that failed (stack map full, hash collision) */
	uint64_t stacks_missing; /* sums whose stacks were gone when read (thread off CPU for
				    more than an interval while its generation was cleared) */
	uint64_t entries;        /* sums read */
	uint64_t kstacks_reused; /* switch-outs whose kernel stack was not walked again */
	uint64_t ustacks_reused; /* switch-outs whose user stack was not walked again */
	uint64_t table_frames;   /* user frames stepped by unwind tables */
	uint64_t fp_frames;      /* ... by frame pointers, with tables on (no table there) */
	uint64_t table_stops;    /* walks ended by a rule the program does not follow */
	uint64_t no_maps;        /* walks of processes whose mappings were not loaded yet */
	uint64_t rewalks;        /* ... walked again once they were, the thread still off CPU */
	uint64_t user_ns;        /* off-CPU time summed with a user stack */
	uint64_t prov_ns;        /* ... of which with one walked without the mappings */
	strobe_otables_stats tables;
	char tables_off[256];    /* why the table walk asked for did not load ("": it did) */
} strobe_offcpu_stats;

typedef struct strobe_offcpu strobe_offcpu;

/* Loads the programs (not attached yet). NULL + errno, with the reason in err: no BTF, no
 * privilege, a kernel without tp_btf. */
strobe_offcpu *strobe_offcpu_open(const strobe_offcpu_opts *o, strobe_err *err);
int strobe_offcpu_attach(strobe_offcpu *b, strobe_err *err);
void strobe_offcpu_detach(strobe_offcpu *b);
/* Moves the sums collected since the last call into s (see sampler_add_offcpu). */
int strobe_offcpu_collect(strobe_offcpu *b, strobe_sampler *s);
void strobe_offcpu_get_stats(strobe_offcpu *b, strobe_offcpu_stats *st);
/* The table walk's maps (urows, umaps, uwant, ureq, uexec, ubins, in that order), for another
 * program to share them and this program's table loader (strobe_locks_opts.share_tables);
 * -ENOENT when the walk is off. The fds stay owned by b. */
#define STROBE_TABLE_MAPS 6
int strobe_offcpu_table_maps(const strobe_offcpu *b, int fds[STROBE_TABLE_MAPS]);
void strobe_offcpu_close(strobe_offcpu *b);

#endif
