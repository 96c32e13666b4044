/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The heap/lock channel: the file-backed shared-memory area through which libstrobe-heap.so (the
 * LD_PRELOAD library, preload/) hands its samples to a reader in another process (strobe record
 * -e heap|mutex today, the agent later), and the reader's API (lib/heap_channel.c).
 *
 * One file per process image: $STROBE_HEAP_DIR/strobe-heap.<pid> (default dir /dev/shm; when an
 * exec'd image finds its pid's file taken, strobe-heap.<pid>.<n>, n = 1..15). Fixed layout, all
 * integers little-endian native, offsets from the start of the file:
 *
 *   header      (4096 bytes)           struct strobe_heap_hdr
 *   stacks      hdr.max_stacks entries struct strobe_heap_stack, each with its frames inline
 *   live        hdr.live_slots entries struct strobe_heap_live: at exit, the live_count sampled
 *                                      allocations still live, compact
 *   maps text   hdr.maps_cap bytes     /proc/self/maps lines of executable file mappings
 *
 * Ownership and consistency rules (the writer is the profiled process, any number of its
 * threads; the reader is another process that maps the file read-only, or reads a copy):
 *   - The writer never blocks on and never waits for a reader; it takes no lock a reader holds.
 *     The only field a reader may write is hdr.paused (nonzero: stop taking new samples).
 *   - Stacks are append-only. A writer (under the library's lock) takes index i =
 *     hdr.stacks_reserved, backs its bytes, stores i + 1 there, writes kind, depth, hash and
 *     frames, then stores ready = STROBE_HEAP_READY with release order. A reader takes min(stacks_reserved, max_stacks) entries and skips those not ready.
 *     Frames of a ready entry never change again; its counters only grow (relaxed atomic adds,
 *     each counter read alone is exact, a pair such as count/bytes may be one sample apart).
 *     The same stack can appear twice (two threads racing to add it): readers sum them.
 *   - Sparse, and backed only where written: a page of a tmpfs file touched while the
 *     filesystem is full faults (SIGBUS), and even reading a hole of a shared mapping backs it.
 *     The writer backs (fallocate) the header at creation and every other area as it grows
 *     (stacks up to stacks_reserved, the maps text up to maps_len, the live area at exit).
 *     A reader must not map the file to read it: it reads with pread (holes read as zeros
 *     without being backed), and only the areas in use.
 *   - The live table (the sampled allocations not yet freed, for in-use and leaks) is private
 *     to the process while it runs (in-use values come from the stacks' counters). In the
 *     destructor the library copies its entries, compact, into the live area, sets live_count,
 *     then state EXITED: a reader takes live entries only from an EXITED file.
 *   - The maps text is append-only, so that a library unloaded by dlclose is still there to
 *     name its frames: each refresh (at start, when a sampled PC falls outside every executable
 *     range of the last refresh, at exit) appends the lines of executable file mappings not
 *     already listed (same address, offset, inode and path), then publishes the
 *     new maps_len with release order. A reader copies maps_len bytes (read with acquire). One
 *     writer at a time, by a try-lock a writer never waits on; for an address, the last line
 *     that covers it wins (a range can be reused by another library after a dlclose).
 *   - state goes RUNNING -> EXITED once, in the library's destructor, after the program's exit
 *     handlers: then exit_ns is set, the maps text is final and nothing changes any more.
 *     A file left RUNNING belongs to a process that is running, was killed, or exec'd.
 * A reader must treat every byte as untrusted: sizes, counts, offsets and stack indexes are
 * checked against the file's length and the caps below (the fuzz target feeds it garbage).
 */
#ifndef STROBE_HEAP_CHANNEL_H
#define STROBE_HEAP_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_HEAP_MAGIC "STRBHEAP"  /* 8 bytes, no NUL */
#define STROBE_HEAP_VERSION 1u
#define STROBE_HEAP_HDR_SIZE 4096u
#define STROBE_HEAP_READY 0x52454459u /* "REDY" */
#define STROBE_HEAP_MAX_DEPTH 64u     /* frames kept per stack (the innermost ones) */
/* Caps a reader enforces on a file's own numbers (a writer uses these or less). */
#define STROBE_HEAP_MAX_STACKS (1u << 20)
#define STROBE_HEAP_MAX_LIVE (1u << 22)
#define STROBE_HEAP_MAX_MAPS (16u << 20)
#define STROBE_HEAP_DEFAULT_RATE (512u * 1024u)

enum strobe_heap_state { STROBE_HEAP_RUNNING = 1, STROBE_HEAP_EXITED = 2 };
enum strobe_heap_kind { STROBE_HEAP_KIND_ALLOC = 1, STROBE_HEAP_KIND_LOCK = 2 };
enum strobe_heap_live_mark { STROBE_HEAP_LIVE_EMPTY = 0, STROBE_HEAP_LIVE_BUSY = 1,
			     STROBE_HEAP_LIVE_TOMB = 2 };

typedef struct strobe_heap_hdr {
	char magic[8];
	uint32_t version, hdr_size;
	uint64_t file_size;
	int32_t pid, state;
	uint64_t rate;          /* mean bytes between heap samples; 0 = heap sampling off */
	uint64_t lock_sample_ns;/* a wait of d ns is kept with probability min(1, d/this) */
	uint64_t start_ns;      /* CLOCK_MONOTONIC when the library started in this image */
	uint64_t start_unix_ns; /* CLOCK_REALTIME at the same moment */
	uint64_t exit_ns;       /* CLOCK_MONOTONIC in the destructor (state EXITED), else 0 */
	uint32_t paused;        /* written by the reader: nonzero = take no new samples */
	uint32_t flags;         /* STROBE_HEAP_F_* */
	uint32_t max_stacks, max_depth, live_slots, maps_cap;
	uint64_t stacks_off, live_off, maps_off;
	uint32_t stacks_reserved; /* entries taken (<= max_stacks); some may not be ready yet */
	uint32_t maps_len;
	uint32_t maps_lock;       /* writer's try-lock for the maps text; readers ignore it */
	uint32_t live_count;      /* entries in the live area, written at exit (state EXITED) */
	/* What was lost, so a reader can say so. */
	uint64_t dropped_stacks;  /* samples whose stack found no room in the stack table */
	uint64_t dropped_live;    /* sampled allocations the live table had no slot for */
	uint64_t truncated_stacks;/* stacks deeper than max_depth (cut at the root end) */
	uint64_t maps_refreshes;
	char exe[256];            /* /proc/self/exe at start, NUL-terminated (may be cut) */
	/* STROBE_SERVICE (else PYROSCOPE_APPLICATION_NAME) at start, NUL-terminated, "" when
	 * neither: the agent's name for a process that exits before the agent reads its
	 * environment. Writers before it left zeros here (the header's page is zero-filled). */
	char service[128];
} strobe_heap_hdr;
_Static_assert(sizeof(strobe_heap_hdr) <= STROBE_HEAP_HDR_SIZE, "the header fits its page");

#define STROBE_HEAP_F_MAPS_TRUNCATED 1u /* the maps text did not fit maps_cap */

typedef struct strobe_heap_stack {
	uint32_t ready, kind;   /* STROBE_HEAP_READY once frames are written; strobe_heap_kind */
	uint32_t depth;         /* frames used, <= max_depth */
	/* Heap: the size class of the allocations counted here (strobe_heap_size_class). One
	 * call stack gets an entry per class, so that Go's per-entry un-biasing by the average
	 * size is applied to allocations of nearly one size: a stack that allocates both 16 B and
	 * 1 MiB blocks would otherwise have its small ones counted as if they were big (their
	 * objects underestimated a thousandfold). Readers sum the classes of a stack. */
	uint32_t size_class;
	uint64_t hash;
	/* Heap: raw sampled sums (not yet un-biased). */
	uint64_t alloc_count, alloc_bytes, free_count, free_bytes;
	/* Locks: already weighted by 1/probability (sampling by delay): milli-contentions, ns. */
	uint64_t lock_count_milli, lock_delay_ns;
	uint64_t frames[STROBE_HEAP_MAX_DEPTH]; /* return addresses, innermost first */
} strobe_heap_stack;

typedef struct strobe_heap_live {
	uint64_t ptr, size;
	uint32_t stack, pad_;  /* index into the stack table */
	uint64_t time_ns;      /* CLOCK_MONOTONIC at the allocation */
} strobe_heap_live;

/* ---- sampler math, shared by the library and the reader's tests ----------------------------- */

/* xorshift64*: a per-thread generator; state must be nonzero. */
static inline uint64_t strobe_heap_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* ln(x) for x in (0, 1], without libm (the library depends on libc alone): x = m * 2^e with m
 * in [1, 2), ln m = 2 atanh((m-1)/(m+1)) by its series; |error| < 1e-9, plenty for sampling. */
static inline double strobe_heap_ln(double x)
{
	union { double d; uint64_t u; } v = {.d = x};
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	v.u = (v.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
	double s = (v.d - 1) / (v.d + 1), s2 = s * s, t = s, sum = 0;
	for (int k = 1; k <= 21; k += 2) {
		sum += t / k;
		t *= s2;
	}
	return 2 * sum + e * 0.69314718055994530942;
}

/* Bytes until the next sample: an exponential variate of mean `mean` (a Poisson process on
 * allocated bytes, as Go and jemalloc sample), at least 1. */
static inline uint64_t strobe_heap_next_sample(uint64_t *rng, uint64_t mean)
{
	/* 53 random bits -> u in (0, 1] */
	double u = (double)((strobe_heap_rand(rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double d = -strobe_heap_ln(u) * (double)mean;
	if (d < 1)
		return 1;
	if (d > 1e18)
		return (uint64_t)1e18;
	return (uint64_t)d;
}

/* Four classes per power of two (as jemalloc's size classes): sizes in one class differ by less
 * than 19 %, which keeps the average-size un-biasing within about 1 % of the exact one. */
static inline uint32_t strobe_heap_size_class(uint64_t size)
{
	if (size < 4)
		return (uint32_t)size;
	uint32_t lg = 63u - (uint32_t)__builtin_clzll(size);
	return lg << 2 | (uint32_t)((size >> (lg - 2)) & 3);
}

/* ---- the reader ------------------------------------------------------------------------------ */

struct strobe_profile;
struct strobe_err;

/* A validated private copy of one channel file. */
typedef struct strobe_heap_snap {
	strobe_heap_hdr hdr;       /* copied; offsets and sizes checked */
	strobe_heap_stack *stacks; /* nstacks ready entries (not-ready ones zeroed: depth 0) */
	uint32_t nstacks;
	strobe_heap_live *live;    /* nlive consistent live entries (ptr a real address) */
	uint32_t nlive;
	char *maps;                /* maps text, NUL-terminated; "" when none could be copied */
	size_t maps_len;
} strobe_heap_snap;

/* Validates and copies a channel from memory (a mapping of the file, or bytes). Returns 0 and
 * *out, or -EINVAL/-ENOMEM with a message. Caps: the header's counts must be within the
 * STROBE_HEAP_MAX_* above and the areas within len. */
int strobe_heap_snap_parse(const void *buf, size_t len, strobe_heap_snap **out,
			   struct strobe_err *err);
/* Maps the file read-only, parses it, unmaps it. */
int strobe_heap_snap_read(const char *path, strobe_heap_snap **out, struct strobe_err *err);
void strobe_heap_snap_free(strobe_heap_snap *s);
/* Sets or clears the paused flag in a channel file (the reader's one write). */
int strobe_heap_set_paused(const char *path, bool paused);

/* Go's un-biasing (runtime/pprof scaleHeapSample): count samples of `bytes` bytes in all, taken
 * at mean rate R, stand for count*scale objects and bytes*scale bytes, with
 * scale = 1 / (1 - exp(-(bytes/count)/R)). rate 0 or count 0: scale 1. */
double strobe_heap_scale(uint64_t count, uint64_t bytes, uint64_t rate);

/* One source frame, filled by the caller's namer (strobe's symbolizer in the CLI). */
typedef struct strobe_heap_frame {
	const char *function, *file;
	int64_t line, column, start_line;
} strobe_heap_frame;
/* Names the code at file offset `offset` of the object at `path` (a return address - 1):
 * fills out[0..n) innermost first, returns n (0: unnamed). */
typedef int (*strobe_heap_namer)(void *ctx, const char *path, uint64_t offset,
				 strobe_heap_frame *out, int max);

typedef struct strobe_heap_profile_opts {
	enum strobe_heap_kind kind; /* ALLOC: the four heap types; LOCK: contentions + delay */
	strobe_heap_namer namer;    /* NULL: addresses and mappings only */
	void *namer_ctx;
	bool pid_label;             /* a pid label on every sample */
	/* The build ID of the object at `path` as lower-case hex into hex[cap] (NUL-terminated;
	 * "" when unknown), for the mappings; NULL: none. The channel holds no build IDs: the
	 * reader takes them from the files, which are usually still there. */
	void (*build_id)(void *ctx, const char *path, char *hex, size_t cap);
	/* More labels on every sample: "key=value" strings (at most 16 used). */
	const char *const *labels;
	uint32_t nlabels;
	/* An earlier snapshot of the same process image (same pid and start_ns), or NULL: the
	 * cumulative values (allocations; lock contentions and delay) are then what happened
	 * since it, stack by stack (an agent's interval), while the in-use values stay what is
	 * live now. */
	const strobe_heap_snap *base;
} strobe_heap_profile_opts;

/* Adds the snapshot's samples to p (p's sample types are set on first use and must match):
 * heap: alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes, each
 * un-biased per stack; locks: contentions/count, delay/nanoseconds. Frames outside every mapped
 * file keep their address with no mapping. Returns 0/-errno. */
int strobe_heap_profile_add(struct strobe_profile *p, const strobe_heap_snap *s,
			    const strobe_heap_profile_opts *o, struct strobe_err *err);

/* Possible leaks: the sampled allocations still live at exit, grouped by stack, leaving out
 * those made in the last tenth of the run (younger than exit - (exit - start) / 10). Only for a
 * snapshot whose state is EXITED (else 0 leaks). *out (malloc'd) is sorted by un-biased bytes,
 * largest first. */
typedef struct strobe_heap_leak {
	uint32_t stack;           /* index in s->stacks */
	uint64_t count, bytes;    /* sampled, raw */
	double objects, space;    /* un-biased */
} strobe_heap_leak;
int strobe_heap_leaks(const strobe_heap_snap *s, strobe_heap_leak **out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
