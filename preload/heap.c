// SPDX-License-Identifier: Apache-2.0
/*
 * libstrobe-heap.so, heap half: interposes the allocator family, samples allocations by bytes
 * (a per-thread countdown drawn from an exponential distribution of mean STROBE_HEAP_RATE bytes,
 * default 512 KiB, as Go and jemalloc do), records each sampled allocation's call stack with
 * libgcc's unwinder (the binaries' unwind tables: complete without frame pointers), keeps the
 * sampled allocations that are still live in a table a free consults, and publishes all of it
 * through the shared-memory channel described in include/strobe/heap_channel.h.
 *
 * Costs. An unsampled malloc is the real malloc plus one thread-local subtraction and a branch.
 * An unsampled free is the real free plus a lookup in a 64 KiB filter of counters indexed by a
 * hash of the pointer (nonzero only for slots that hold a live sampled allocation): the live
 * table itself, and its lock, are reached only on a filter hit. Layouts are never changed: no
 * header is added to any allocation.
 *
 * Safety. The first allocations (those glibc's dlsym makes while the real functions are being
 * resolved) come from a small static arena whose blocks free() recognises and ignores. A
 * per-thread guard keeps the library from sampling its own allocations (and the unwinder's, if
 * it ever made any). The one lock (a spin lock over the stack index and the live table) is held
 * for a few hundred instructions (plus an fallocate when a new call stack needs the file to
 * grow), never across a call that could allocate, reset in a fork child, and skipped, not
 * waited for, when a signal handler re-enters on the thread holding it. The channel file's
 * pages are backed before they are first touched (see reserve), so a full /dev/shm drops
 * samples instead of raising SIGBUS; the live table is private memory, copied to the file at
 * exit.
 * If the library cannot start (no channel file, no memory), it says so once on stderr and turns
 * into plain calls through. A fork child gets its own channel file at its first sample; exec
 * carries LD_PRELOAD and STROBE_HEAP_* in the environment.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "internal.h"
#include "live_table.h"
#include "unwind_cache.h"

__thread heap_tls strobe_heap_tls __attribute__((tls_model("initial-exec")));
uint64_t strobe_lock_sample_ns;

/* ---- the real functions -------------------------------------------------------------------- */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static size_t (*real_usable)(void *);
/* glibc's own entry points: the fallback if dlsym finds no next definition. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_int resolving; /* dlsym in progress: serve allocations from the arena */

/* ---- the bootstrap arena --------------------------------------------------------------------- */

/* dlsym may calloc its error state before malloc itself is known. Blocks carry their size in a
 * 16-byte header (for realloc and malloc_usable_size) and are never reused. */
#define ARENA_SIZE (64u * 1024u)
static _Alignas(64) unsigned char arena[ARENA_SIZE];
static atomic_size_t arena_used;

static inline bool in_arena(const void *p)
{
	return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + ARENA_SIZE;
}

static void *arena_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	if (n > ARENA_SIZE || align > 4096)
		return NULL;
	size_t need = (n + 15) & ~(size_t)15;
	size_t old = atomic_load(&arena_used), start;
	do {
		start = (old + 16 + align - 1) & ~(align - 1); /* room for the header before it */
		if (start + need > ARENA_SIZE)
			return NULL;
	} while (!atomic_compare_exchange_weak(&arena_used, &old, start + need));
	*(size_t *)(arena + start - 16) = n;
	return arena + start; /* static storage: already zero, as calloc needs */
}

static inline size_t arena_size(const void *p)
{
	return *(const size_t *)((const unsigned char *)p - 16);
}

static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void strobe_heap_resolve(void)
{
	if (LIKELY(real_free != NULL))
		return;
	int expected = 0;
	if (!atomic_compare_exchange_strong(&resolving, &expected, 1))
		return; /* this or another thread is at it: callers fall back meanwhile */
	void *f;
	real_malloc = (f = next_sym("malloc")) ? f : (void *)__libc_malloc;
	real_calloc = (f = next_sym("calloc")) ? f : (void *)__libc_calloc;
	real_realloc = (f = next_sym("realloc")) ? f : (void *)__libc_realloc;
	real_memalign = (f = next_sym("memalign")) ? f : (void *)__libc_memalign;
	real_posix_memalign = next_sym("posix_memalign");
	real_aligned_alloc = next_sym("aligned_alloc");
	real_valloc = next_sym("valloc");
	real_pvalloc = next_sym("pvalloc");
	real_usable = next_sym("malloc_usable_size");
	void (*fr)(void *) = (f = next_sym("free")) ? f : (void *)__libc_free;
	__atomic_store_n(&real_free, fr, __ATOMIC_RELEASE); /* last: it tells the others are set */
	atomic_store(&resolving, 0);
}

/* ---- start-up state -------------------------------------------------------------------------- */

enum { ST_NEW, ST_STARTING, ST_ON, ST_OFF };
static atomic_int state = ST_NEW;
static atomic_int frozen;        /* set in the destructor: the channel must not change any more */
static uint64_t rate = STROBE_HEAP_DEFAULT_RATE;
static strobe_heap_hdr *chan;    /* the mapped channel, NULL when none */
static size_t chan_size;
/* The channel's descriptor, kept to reserve its pages before they are first touched: a page of
 * a tmpfs file touched (even read) while the filesystem is full would be SIGBUS, so every area
 * is written, and read, only where backed, each area grown by fallocate in 64 KiB steps. The program
 * may close the descriptor and reuse its number: its identity is checked before each use, and
 * a failed check only stops the growth. */
static int chan_fd = -1;
static dev_t chan_dev;
static ino_t chan_ino;
static size_t stacks_backed, maps_backed; /* file offsets up to which each area is backed */
static atomic_int reserve_busy;
static strobe_heap_stack *stacks;
static strobe_heap_live *live; /* private: published only at exit (a snapshot) */
static uint32_t live_slots; /* its size: LIVE_MIN_SLOTS, doubled when 3/4 full, to LIVE_SLOTS */
static char *maps_text;
static uint32_t *stack_index;    /* private: hash slots -> stack index + 1 */
static uint32_t stack_index_slots;
static uintptr_t self_start, self_end; /* this library's mapping: its frames are skipped */
static atomic_int lock_word;     /* the spin lock over stack_index and live */
/* The unwind-step cache (unwind_cache.h): created once per image at the first start (a fork
 * child keeps it: same mappings), NULL when STROBE_HEAP_UNWIND_CACHE=0 or mmap failed. */
static strobe_uw_cache *uw_cache;
#define UW_SLOTS 8192u /* 256 KiB of address space; a page is touched when first used */
/* STROBE_HEAP_UNWIND_CHECK=FILE (tests): every cached walk is redone by libgcc and compared; the
 * counts are appended to FILE at exit, one line a process (a file, as coreutils close stderr
 * before the destructors run) */
static bool uw_check;
static char uw_check_path[256];
static uint64_t uw_checked, uw_cached, uw_differ;
static uint32_t live_count;

#define MAX_STACKS 65536u /* entries are touched (and cost memory) only when used */
#define LIVE_SLOTS 65536u     /* the cap (the file's live area has room for this many) */
#define LIVE_MIN_SLOTS 1024u /* 32 KiB at start: a small program's few live samples stay small */
#define MAPS_CAP (1u << 20)
#define MAX_RANGES 1024u
#define FILTER_BITS 16
static _Atomic uint8_t filter[1u << FILTER_BITS];

/* Executable ranges already in the maps text (private, sorted by start). */
static struct range { uintptr_t start, end; } ranges[MAX_RANGES];
static uint32_t nranges, ranges_seq;
static uint64_t last_refresh_ns;

uint64_t strobe_heap_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void say_once(const char *why)
{
	static atomic_int said;
	if (atomic_exchange(&said, 1))
		return;
	char buf[256];
	size_t n = 0;
	const char *parts[] = {"strobe-heap: cannot start (", why, "): profiling is off\n"};
	for (int i = 0; i < 3; i++)
		for (const char *c = parts[i]; *c && n < sizeof(buf); c++)
			buf[n++] = *c;
	ssize_t w = write(2, buf, n);
	(void)w;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	uint64_t x = 0;
	for (; *v >= '0' && *v <= '9'; v++) {
		if (x > (UINT64_MAX - 9) / 10)
			return dflt;
		x = x * 10 + (uint64_t)(*v - '0');
	}
	return *v ? dflt : x;
}

static char *put_str(char *d, char *end, const char *s)
{
	while (*s && d < end)
		*d++ = *s++;
	return d;
}
static char *put_u64(char *d, char *end, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 24);
	while (n && d < end)
		*d++ = tmp[--n];
	return d;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}
static const char *parse_hex(const char *s, const char *end, uintptr_t *out)
{
	uintptr_t v = 0;
	int h, n = 0;
	while (s < end && (h = hexval(*s)) >= 0 && n < 16) {
		v = v << 4 | (uintptr_t)h;
		s++;
		n++;
	}
	*out = v;
	return n ? s : NULL;
}

/* Makes sure the file's bytes [start, end) of one area are backed, so that touching them
 * cannot fault; *mark is how far that area is backed already (from its start). */
static bool reserve(size_t *mark, size_t start, size_t end)
{
	if (LIKELY(end <= __atomic_load_n(mark, __ATOMIC_ACQUIRE)))
		return true;
	if (end > chan_size || atomic_exchange(&reserve_busy, 1))
		return false; /* another thread is growing one: this caller drops its write */
	bool ok = true;
	size_t have = *mark > start ? *mark : start;
	if (end > have) {
		size_t want = start + ((end - start + 65535) & ~(size_t)65535);
		if (want > chan_size)
			want = chan_size;
		struct stat st;
		ok = chan_fd >= 0 && fstat(chan_fd, &st) == 0 && st.st_dev == chan_dev &&
		     st.st_ino == chan_ino &&
		     fallocate(chan_fd, 0, (off_t)have, (off_t)(want - have)) == 0;
		if (ok)
			__atomic_store_n(mark, want, __ATOMIC_RELEASE);
	}
	atomic_store(&reserve_busy, 0);
	return ok;
}

/* Whether pc lies in an executable mapping seen at the last refresh. Lock-free against the
 * refresher (a sequence count, odd while it rewrites the table): a reader that meets a rewrite
 * answers "known" and lets the next sample ask again. */
static bool range_known(uintptr_t pc)
{
	uint32_t seq = __atomic_load_n(&ranges_seq, __ATOMIC_ACQUIRE);
	if (seq & 1)
		return true;
	uint32_t lo = 0, hi = __atomic_load_n(&nranges, __ATOMIC_RELAXED);
	bool found = false;
	while (lo < hi && hi <= MAX_RANGES) {
		uint32_t mid = (lo + hi) / 2;
		uintptr_t s = __atomic_load_n(&ranges[mid].start, __ATOMIC_RELAXED);
		uintptr_t e = __atomic_load_n(&ranges[mid].end, __ATOMIC_RELAXED);
		if (pc < s) {
			hi = mid;
		} else if (pc >= e) {
			lo = mid + 1;
		} else {
			found = true;
			break;
		}
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return found || __atomic_load_n(&ranges_seq, __ATOMIC_RELAXED) != seq;
}

/* Lines already in the channel's text, by hash (a line is the same mapping only if its
 * address, offset, inode and path all are: a library loaded again at the address of one
 * unloaded before gets a line of its own). */
static uint64_t appended[4096];
static uint32_t nappended;

static uint64_t line_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h ? h : 1;
}

/* Adds h; false when it was there already (or the set is full). */
static bool appended_add(uint64_t h)
{
	const uint32_t cap = sizeof(appended) / sizeof(appended[0]);
	if (nappended >= cap / 4 * 3)
		return false;
	for (uint32_t i = (uint32_t)h & (cap - 1);; i = (i + 1) & (cap - 1)) {
		if (appended[i] == h)
			return false;
		if (!appended[i]) {
			appended[i] = h;
			nappended++;
			return true;
		}
	}
}

static struct range ranges_next[MAX_RANGES];

/* Rereads /proc/self/maps: the executable ranges for range_known (file-backed and anonymous,
 * JIT code and the vDSO included, so that their PCs do not ask again), and appends the lines of
 * file-backed ones not yet listed to the channel's maps text. One refresher at a time; a second
 * one returns at once instead of waiting. No malloc: the file is read in chunks. */
static void maps_refresh(void)
{
	if (!chan || __atomic_exchange_n(&chan->maps_lock, 1, __ATOMIC_ACQUIRE))
		return;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[2048];
		size_t have = 0, len = chan->maps_len;
		uint32_t n = 0;
		for (;;) {
			ssize_t r = read(fd, buf + have, sizeof(buf) - have);
			if (r <= 0)
				break;
			have += (size_t)r;
			char *line = buf, *nl;
			while ((nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
				/* "start-end perms offset dev inode   path"; /proc lists them sorted */
				uintptr_t s, e;
				const char *p = parse_hex(line, nl, &s);
				if (p && p < nl && *p == '-' && (p = parse_hex(p + 1, nl, &e)) &&
				    p + 5 < nl && p[3] == 'x') {
					if (n < MAX_RANGES)
						ranges_next[n++] = (struct range){s, e};
					size_t ll = (size_t)(nl - line) + 1;
					if (memchr(p, '/', (size_t)(nl - p)) &&
					    appended_add(line_hash(line, ll))) {
						if (len + ll <= chan->maps_cap &&
						    reserve(&maps_backed, chan->maps_off,
							    chan->maps_off + len + ll)) {
							memcpy(maps_text + len, line, ll);
							len += ll;
						} else {
							chan->flags |= STROBE_HEAP_F_MAPS_TRUNCATED;
						}
					}
				}
				line = nl + 1;
			}
			have = (size_t)(buf + have - line);
			memmove(buf, line, have);
			if (have == sizeof(buf))
				have = 0; /* a line longer than the buffer: drop it */
		}
		close(fd);
		__atomic_store_n(&chan->maps_len, (uint32_t)len, __ATOMIC_RELEASE);
		chan->maps_refreshes++;
		__atomic_fetch_add(&ranges_seq, 1, __ATOMIC_ACQ_REL); /* odd: rewriting */
		for (uint32_t i = 0; i < n; i++) {
			__atomic_store_n(&ranges[i].start, ranges_next[i].start, __ATOMIC_RELAXED);
			__atomic_store_n(&ranges[i].end, ranges_next[i].end, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&nranges, n, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ranges_seq, 1, __ATOMIC_RELEASE);
	}
	last_refresh_ns = strobe_heap_now_ns();
	__atomic_store_n(&chan->maps_lock, 0, __ATOMIC_RELEASE);
}

static void fork_child(void);

/* Creates this image's channel file. Returns 0, or -1 after saying why on stderr (then the
 * library is off). */
static int chan_open(void)
{
	const char *dir = getenv("STROBE_HEAP_DIR");
	if (!dir || !*dir)
		dir = "/dev/shm";
	char path[512];
	pid_t pid = getpid();
	int fd = -1;
	for (unsigned n = 0; n < 16 && fd < 0; n++) {
		char *d = path, *end = path + sizeof(path) - 1;
		d = put_str(d, end, dir);
		d = put_str(d, end, "/strobe-heap.");
		d = put_u64(d, end, (uint64_t)pid);
		if (n) {
			d = put_str(d, end, ".");
			d = put_u64(d, end, n);
		}
		if (d >= end)
			break;
		*d = 0;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		say_once("no channel file in STROBE_HEAP_DIR");
		return -1;
	}
	/* out of the way of the low numbers a program may expect to get from its own open() */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	size_t off_stacks = STROBE_HEAP_HDR_SIZE;
	size_t off_live = off_stacks + (size_t)MAX_STACKS * sizeof(strobe_heap_stack);
	size_t off_maps = off_live + (size_t)LIVE_SLOTS * sizeof(strobe_heap_live);
	size_t size = off_maps + MAPS_CAP;
	void *m = MAP_FAILED;
	struct stat st;
	/* the header's page backed at once; the rest as it is used (reserve) */
	if (fstat(fd, &st) == 0 && ftruncate(fd, (off_t)size) == 0 &&
	    fallocate(fd, 0, 0, STROBE_HEAP_HDR_SIZE) == 0)
		m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint32_t slots = 2 * MAX_STACKS;
	/* private, anonymous: the stack index, and the live table (random access, so it would
	 * back most of its pages in the file at once); the live table goes to the file at exit.
	 * The live table starts small and grows (live_insert): a hashed table touches most of its
	 * pages, and a full-size one (2 MiB) was most of a small program's extra memory. */
	size_t priv = slots * sizeof(uint32_t);
	void *idx = m == MAP_FAILED ? MAP_FAILED
				    : mmap(NULL, priv, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *lv = idx == MAP_FAILED ? MAP_FAILED
				     : mmap(NULL, (size_t)LIVE_MIN_SLOTS * sizeof(strobe_heap_live),
					    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || idx == MAP_FAILED || lv == MAP_FAILED) {
		if (m != MAP_FAILED)
			munmap(m, size);
		if (idx != MAP_FAILED)
			munmap(idx, priv);
		close(fd);
		unlink(path);
		say_once("no memory for the channel");
		return -1;
	}
	chan_fd = fd;
	chan_dev = st.st_dev;
	chan_ino = st.st_ino;
	stacks_backed = maps_backed = 0;
	live_count = 0;
	strobe_heap_hdr *h = m;
	memcpy(h->magic, STROBE_HEAP_MAGIC, 8);
	h->version = STROBE_HEAP_VERSION;
	h->hdr_size = STROBE_HEAP_HDR_SIZE;
	h->file_size = size;
	h->pid = pid;
	h->rate = rate;
	h->lock_sample_ns = strobe_lock_sample_ns;
	h->start_ns = strobe_heap_now_ns();
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	h->start_unix_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	h->max_stacks = MAX_STACKS;
	h->max_depth = STROBE_HEAP_MAX_DEPTH;
	h->live_slots = LIVE_SLOTS;
	h->maps_cap = MAPS_CAP;
	h->stacks_off = off_stacks;
	h->live_off = off_live;
	h->maps_off = off_maps;
	ssize_t r = readlink("/proc/self/exe", h->exe, sizeof(h->exe) - 1);
	h->exe[r > 0 ? r : 0] = 0;
	const char *svc = getenv("STROBE_SERVICE"); /* (getenv does not allocate) */
	if (!svc || !*svc)
		svc = getenv("PYROSCOPE_APPLICATION_NAME");
	for (size_t i = 0; svc && svc[i] && i + 1 < sizeof(h->service); i++)
		h->service[i] = svc[i]; /* (the page is zero-filled: terminated) */
	chan_size = size;
	stacks = (strobe_heap_stack *)((char *)m + off_stacks);
	live = lv;
	live_slots = LIVE_MIN_SLOTS;
	maps_text = (char *)m + off_maps;
	stack_index = idx;
	stack_index_slots = slots;
	nranges = 0;
	nappended = 0;
	memset(appended, 0, sizeof(appended));
	chan = h;
	maps_refresh();
	__atomic_store_n(&h->state, STROBE_HEAP_RUNNING, __ATOMIC_RELEASE);
	return 0;
}

/* Starts the library once per process image (and again in a fork child). Returns true when on. */
static bool ensure_started(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (LIKELY(s == ST_ON))
		return true;
	if (s != ST_NEW)
		return false;
	int expected = ST_NEW;
	if (!atomic_compare_exchange_strong(&state, &expected, ST_STARTING))
		return false; /* another thread is starting it: skip this sample */
	strobe_heap_resolve();
	static atomic_int once;
	if (!atomic_exchange(&once, 1)) {
		/* first start in this image (a fork child inherits these) */
		rate = env_u64("STROBE_HEAP_RATE", STROBE_HEAP_DEFAULT_RATE);
		strobe_lock_sample_ns = env_u64("STROBE_LOCK_SAMPLE_NS", 100000);
		struct dl_find_object fo;
		if (_dl_find_object((void *)&ensure_started, &fo) == 0) {
			self_start = (uintptr_t)fo.dlfo_map_start;
			self_end = (uintptr_t)fo.dlfo_map_end;
		}
		pthread_atfork(NULL, NULL, fork_child);
		if (env_u64("STROBE_HEAP_UNWIND_CACHE", 1))
			uw_cache = strobe_uw_cache_new(UW_SLOTS);
		const char *ck = getenv("STROBE_HEAP_UNWIND_CHECK");
		if (ck && *ck && strlen(ck) < sizeof(uw_check_path)) {
			memcpy(uw_check_path, ck, strlen(ck) + 1);
			uw_check = true;
		}
	}
	if (chan_open() < 0) {
		strobe_lock_sample_ns = 0;
		atomic_store(&state, ST_OFF);
		return false;
	}
	atomic_store_explicit(&state, ST_ON, memory_order_release);
	return true;
}

/* In a fork child: the parent's channel is the parent's. Drop it (without touching it) and
 * start afresh, with this pid, at the next sample; nothing inherited is tracked any more. */
static void fork_child(void)
{
	if (chan)
		munmap(chan, chan_size);
	if (stack_index)
		munmap(stack_index, stack_index_slots * sizeof(uint32_t));
	if (live)
		munmap(live, (size_t)live_slots * sizeof(strobe_heap_live));
	struct stat st;
	/* the parent's descriptor, unless the program has closed it and reused its number */
	if (chan_fd >= 0 && fstat(chan_fd, &st) == 0 && st.st_dev == chan_dev &&
	    st.st_ino == chan_ino)
		close(chan_fd);
	chan_fd = -1;
	stacks_backed = maps_backed = 0;
	chan = NULL;
	stacks = NULL;
	live = NULL;
	stack_index = NULL;
	memset((void *)filter, 0, sizeof(filter));
	atomic_store(&lock_word, 0);
	atomic_store(&frozen, 0);
	int s = atomic_load(&state);
	if (s == ST_ON || s == ST_STARTING)
		atomic_store(&state, ST_NEW);
}

__attribute__((constructor)) static void heap_ctor(void)
{
	heap_tls *t = &strobe_heap_tls;
	t->guard++;
	ensure_started();
	t->guard--;
}

__attribute__((destructor)) static void heap_dtor(void)
{
	heap_tls *t = &strobe_heap_tls;
	t->guard++;
	if (atomic_load(&state) == ST_ON && chan) {
		/* The program's exit handlers have run (this runs in _dl_fini, after them): what
		 * is live now is what it left. Final maps, then the exit mark, once. */
		atomic_store(&frozen, 1);
		maps_refresh();
		/* let a sample in progress on another thread finish (bounded: never hang exit) */
		for (int i = 0; i < 1000 && atomic_load(&lock_word); i++)
			sched_yield();
		/* the live table's snapshot, compact, for the leak report */
		strobe_heap_live *out = (strobe_heap_live *)((char *)chan + chan->live_off);
		uint32_t n = 0;
		size_t live_backed = 0;
		if (reserve(&live_backed, chan->live_off,
			    chan->live_off + (size_t)live_count * sizeof(strobe_heap_live)))
			for (uint32_t i = 0; i < live_slots && n < live_count; i++)
				if (live[i].ptr > STROBE_HEAP_LIVE_TOMB)
					out[n++] = live[i];
		chan->live_count = n;
		chan->exit_ns = strobe_heap_now_ns();
		__atomic_store_n(&chan->state, STROBE_HEAP_EXITED, __ATOMIC_RELEASE);
	}
	if (uw_check) {
		char buf[160], *d = buf, *end = buf + sizeof(buf);
		d = put_str(d, end, "pid ");
		d = put_u64(d, end, (uint64_t)getpid());
		d = put_str(d, end, ": ");
		d = put_u64(d, end, __atomic_load_n(&uw_checked, __ATOMIC_RELAXED));
		d = put_str(d, end, " walks, ");
		d = put_u64(d, end, __atomic_load_n(&uw_cached, __ATOMIC_RELAXED));
		d = put_str(d, end, " by the cache, ");
		d = put_u64(d, end, __atomic_load_n(&uw_differ, __ATOMIC_RELAXED));
		d = put_str(d, end, " differ from libgcc\n");
		int fd = open(uw_check_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0) {
			ssize_t w = write(fd, buf, (size_t)(d - buf));
			(void)w;
			close(fd);
		}
	}
	t->guard--;
}

/* ---- the lock, the stack table, the live table ----------------------------------------------- */

static bool lock_take(void)
{
	for (unsigned spins = 0;; spins++) {
		if (!atomic_exchange_explicit(&lock_word, 1, memory_order_acquire))
			return true;
		if (spins > 64)
			sched_yield();
		if (spins > 100000)
			return false; /* something is very wrong: lose the sample, not the program */
	}
}
static void lock_drop(void)
{
	atomic_store_explicit(&lock_word, 0, memory_order_release);
}

static inline uint32_t filter_slot(uintptr_t p)
{
	return strobe_live_hash(p) >> (32 - FILTER_BITS);
}

static uint64_t stack_hash(uint32_t kind, uint32_t cls, const uint64_t *pc, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ kind ^ (uint64_t)cls << 8;
	for (uint32_t i = 0; i < n; i++) {
		h ^= pc[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

/* Under the lock: the index of this stack in the table, added if new; UINT32_MAX when full. */
static uint32_t stack_find_add(uint32_t kind, uint32_t cls, const uint64_t *pc, uint32_t n,
			       bool truncated)
{
	uint64_t h = stack_hash(kind, cls, pc, n);
	uint32_t mask = stack_index_slots - 1;
	for (uint32_t i = (uint32_t)h & mask, probes = 0; probes < stack_index_slots;
	     i = (i + 1) & mask, probes++) {
		uint32_t v = stack_index[i];
		if (!v) {
			/* under the lock: the count only grows here */
			uint32_t idx = chan->stacks_reserved;
			if (idx >= chan->max_stacks ||
			    !reserve(&stacks_backed, chan->stacks_off,
				     chan->stacks_off + ((size_t)idx + 1) * sizeof(strobe_heap_stack)))
				return UINT32_MAX;
			__atomic_store_n(&chan->stacks_reserved, idx + 1, __ATOMIC_RELEASE);
			strobe_heap_stack *s = &stacks[idx];
			s->kind = kind;
			s->depth = n;
			s->size_class = cls;
			s->hash = h;
			memcpy(s->frames, pc, n * sizeof(*pc));
			__atomic_store_n(&s->ready, STROBE_HEAP_READY, __ATOMIC_RELEASE);
			stack_index[i] = idx + 1;
			if (truncated)
				chan->truncated_stacks++;
			return idx;
		}
		strobe_heap_stack *s = &stacks[v - 1];
		if (s->hash == h && s->kind == kind && s->size_class == cls && s->depth == n &&
		    memcmp(s->frames, pc, n * sizeof(*pc)) == 0)
			return v - 1;
	}
	return UINT32_MAX;
}

static inline void add64(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* Under the lock: the live table (preload/live_table.h). */
static bool live_insert(uintptr_t p, uint64_t size, uint32_t stack, uint64_t now)
{
	if (live_count >= live_slots / 4 * 3 && live_slots < LIVE_SLOTS) {
		/* twice the size, rehashed; on no memory the table stays as it is (and fills) */
		uint32_t ns = live_slots * 2, nc;
		void *m = mmap(NULL, (size_t)ns * sizeof(strobe_heap_live), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			strobe_heap_live *nt = m;
			strobe_live_rehash(live, live_slots, nt, ns, &nc);
			munmap(live, (size_t)live_slots * sizeof(strobe_heap_live));
			live = nt;
			live_slots = ns;
			live_count = nc;
		}
	}
	return strobe_live_insert(live, live_slots, &live_count, p, size, stack, now);
}
static bool live_remove(uintptr_t p, strobe_heap_live *out)
{
	return strobe_live_remove(live, live_slots, &live_count, p, out);
}

/* ---- stacks ---------------------------------------------------------------------------------- */

typedef struct walk {
	uint64_t *pc;
	uint32_t n, skip_done;
	bool truncated;
} walk;

static _Unwind_Reason_Code walk_one(struct _Unwind_Context *ctx, void *arg)
{
	walk *w = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);
	if (!ip)
		return _URC_END_OF_STACK;
	if (!w->skip_done) {
		if (ip >= self_start && ip < self_end)
			return _URC_NO_REASON; /* the library's own frames */
		w->skip_done = 1;
	}
	if (w->n == STROBE_HEAP_MAX_DEPTH) {
		w->truncated = true;
		return _URC_END_OF_STACK;
	}
	w->pc[w->n++] = ip;
	return _URC_NO_REASON;
}

static uint32_t capture(uint64_t *pc, bool *truncated)
{
	walk w = {.pc = pc};
	int fast = -1;
	if (uw_cache) {
		/* the cached steps; libgcc walks the stacks they cannot (and teaches them nothing) */
		strobe_uw_req q = {.pc = pc, .max = STROBE_HEAP_MAX_DEPTH, .skip_lo = self_start,
				   .skip_hi = self_end};
		fast = strobe_uw_backtrace(uw_cache, &q);
		if (fast >= 0) {
			w.n = (uint32_t)fast;
			w.truncated = q.truncated;
		}
	}
	if (fast < 0)
		_Unwind_Backtrace(walk_one, &w);
	else if (uw_check) {
		uint64_t pc2[STROBE_HEAP_MAX_DEPTH];
		walk w2 = {.pc = pc2};
		_Unwind_Backtrace(walk_one, &w2);
		if (w2.n != w.n || w2.truncated != w.truncated || memcmp(pc, pc2, w.n * sizeof(*pc)))
			__atomic_fetch_add(&uw_differ, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&uw_cached, 1, __ATOMIC_RELAXED);
	}
	if (uw_check)
		__atomic_fetch_add(&uw_checked, 1, __ATOMIC_RELAXED);
	*truncated = w.truncated;
	/* a PC outside every executable mapping of the last refresh: a library came (dlopen)
	 * since; look again now, before a dlclose can take it away (at most every 10 ms, should
	 * a JIT keep mapping new code) */
	for (uint32_t i = 0; i < w.n; i++)
		if (!range_known((uintptr_t)pc[i])) {
			if (strobe_heap_now_ns() - last_refresh_ns > 10000000u)
				maps_refresh();
			break;
		}
	return w.n;
}

void strobe_heap_record_lock(uint64_t count_milli, uint64_t delay_ns)
{
	if (!ensure_started() || atomic_load(&frozen) || __atomic_load_n(&chan->paused, __ATOMIC_RELAXED))
		return;
	uint64_t pc[STROBE_HEAP_MAX_DEPTH];
	bool truncated;
	uint32_t n = capture(pc, &truncated);
	if (!lock_take())
		return;
	uint32_t idx = stack_find_add(STROBE_HEAP_KIND_LOCK, 0, pc, n, truncated);
	if (idx != UINT32_MAX) {
		add64(&stacks[idx].lock_count_milli, count_milli);
		add64(&stacks[idx].lock_delay_ns, delay_ns);
	} else {
		chan->dropped_stacks++;
	}
	lock_drop();
}

/* ---- the sampled paths ----------------------------------------------------------------------- */

static __attribute__((noinline)) void sample_slow(void *p, size_t size)
{
	heap_tls *t = &strobe_heap_tls;
	if (t->guard)
		return; /* our own allocation: left stays <= 0, the next one tries again */
	t->guard = 1;
	if (!t->rng) {
		uint64_t seed = strobe_heap_now_ns() ^ ((uint64_t)(uintptr_t)t << 16) ^
				((uint64_t)gettid() << 40);
		t->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
	}
	if (!ensure_started() || rate == 0) {
		t->left = INT64_MAX / 2; /* off: never come back here on this thread */
		goto out;
	}
	if (!t->inited) {
		/* the thread's first countdown; this allocation is sampled if it crosses it */
		t->inited = 1;
		t->left = (int64_t)strobe_heap_next_sample(&t->rng, rate) - (int64_t)size;
		if (t->left > 0)
			goto out;
	}
	t->left = (int64_t)strobe_heap_next_sample(&t->rng, rate);
	if (atomic_load(&frozen) || __atomic_load_n(&chan->paused, __ATOMIC_RELAXED))
		goto out;
	uint64_t pc[STROBE_HEAP_MAX_DEPTH];
	bool truncated;
	uint32_t n = capture(pc, &truncated);
	uint64_t now = strobe_heap_now_ns();
	if (!lock_take())
		goto out;
	uint32_t idx = stack_find_add(STROBE_HEAP_KIND_ALLOC, strobe_heap_size_class(size), pc, n,
				      truncated);
	if (idx == UINT32_MAX) {
		chan->dropped_stacks++;
	} else {
		add64(&stacks[idx].alloc_count, 1);
		add64(&stacks[idx].alloc_bytes, size);
		uint32_t f = filter_slot((uintptr_t)p);
		if (live_insert((uintptr_t)p, size, idx, now)) {
			uint8_t c = atomic_load_explicit(&filter[f], memory_order_relaxed);
			while (c < 255 && !atomic_compare_exchange_weak(&filter[f], &c, c + 1))
				;
		} else {
			chan->dropped_live++;
		}
	}
	lock_drop();
out:
	t->guard = 0;
}

/* A free (or realloc) of a pointer whose filter slot is nonzero: find it in the live table. */
static __attribute__((noinline)) void untrack_slow(void *p)
{
	heap_tls *t = &strobe_heap_tls;
	if (t->guard || atomic_load(&frozen) || atomic_load(&state) != ST_ON)
		return; /* a signal handler inside our own code: lose this free, not the program */
	t->guard = 1;
	if (lock_take()) {
		strobe_heap_live e;
		if (live_remove((uintptr_t)p, &e)) {
			uint32_t f = filter_slot((uintptr_t)p);
			uint8_t c = atomic_load_explicit(&filter[f], memory_order_relaxed);
			/* 255 is sticky: it may stand for more entries than it can count */
			while (c > 0 && c < 255 && !atomic_compare_exchange_weak(&filter[f], &c, c - 1))
				;
			if (e.stack < chan->max_stacks) {
				add64(&stacks[e.stack].free_count, 1);
				add64(&stacks[e.stack].free_bytes, e.size);
			}
		}
		lock_drop();
	}
	t->guard = 0;
}

static inline void account(void *p, size_t size)
{
	heap_tls *t = &strobe_heap_tls;
	t->left -= (int64_t)size;
	if (UNLIKELY(t->left <= 0))
		sample_slow(p, size);
}

static inline void untrack(void *p)
{
	if (UNLIKELY(atomic_load_explicit(&filter[filter_slot((uintptr_t)p)],
					  memory_order_relaxed)))
		untrack_slow(p);
}

/* ---- the interposed functions ---------------------------------------------------------------- */

EXPORT void *malloc(size_t n)
{
	if (UNLIKELY(!real_free)) {
		strobe_heap_resolve();
		if (!real_free)
			return arena_alloc(n, 16);
	}
	void *p = real_malloc(n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT void free(void *p)
{
	if (UNLIKELY(p == NULL))
		return;
	if (UNLIKELY(in_arena(p)))
		return;
	untrack(p);
	if (UNLIKELY(!real_free)) {
		strobe_heap_resolve();
		if (!real_free)
			return; /* cannot happen: only arena blocks exist before resolution */
	}
	real_free(p);
}

EXPORT void *calloc(size_t n, size_t size)
{
	if (UNLIKELY(!real_free)) {
		strobe_heap_resolve();
		if (!real_free) {
			size_t total;
			if (__builtin_mul_overflow(n, size, &total))
				return NULL;
			return arena_alloc(total, 16);
		}
	}
	void *p = real_calloc(n, size);
	if (LIKELY(p != NULL))
		account(p, n * size);
	return p;
}

EXPORT void *realloc(void *old, size_t n)
{
	if (UNLIKELY(!real_free))
		strobe_heap_resolve();
	if (UNLIKELY(old != NULL && in_arena(old))) {
		/* an arena block moves to the real allocator */
		void *p = malloc(n ? n : 1);
		if (p) {
			size_t m = arena_size(old);
			memcpy(p, old, m < n ? m : n);
		}
		return p;
	}
	if (UNLIKELY(!real_free))
		return old ? NULL : arena_alloc(n, 16);
	/* Before the call: once realloc returns, the old address may already be another thread's
	 * new (sampled) allocation. A failed realloc thus loses one sampled entry, no more. */
	if (old)
		untrack(old);
	void *p = real_realloc(old, n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, total);
}

EXPORT void *memalign(size_t align, size_t n)
{
	if (UNLIKELY(!real_free)) {
		strobe_heap_resolve();
		if (!real_free)
			return arena_alloc(n, align);
	}
	void *p = real_memalign(align, n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	strobe_heap_resolve();
	if (!real_posix_memalign) {
		if (!real_free) {
			void *p = arena_alloc(n, align);
			if (!p)
				return ENOMEM;
			*out = p;
			return 0;
		}
		return ENOSYS;
	}
	int rc = real_posix_memalign(out, align, n);
	if (rc == 0 && *out)
		account(*out, n);
	return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	strobe_heap_resolve();
	if (!real_aligned_alloc)
		return memalign(align, n);
	void *p = real_aligned_alloc(align, n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT void *valloc(size_t n)
{
	strobe_heap_resolve();
	if (!real_valloc)
		return memalign((size_t)sysconf(_SC_PAGESIZE), n);
	void *p = real_valloc(n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT void *pvalloc(size_t n)
{
	strobe_heap_resolve();
	if (!real_pvalloc)
		return valloc(n);
	void *p = real_pvalloc(n);
	if (LIKELY(p != NULL))
		account(p, n);
	return p;
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (in_arena(p))
		return arena_size(p);
	strobe_heap_resolve();
	return real_usable ? real_usable(p) : 0;
}

/* dlclose: the unwind cache's entries name code by address, and a library loaded later may reuse
 * an unloaded one's addresses; every dlclose therefore starts a new generation (entries learned
 * before are never read again), and while one is under way the walks ask libgcc. glibc's own
 * unloads that bypass this symbol (gconv modules, through __libc_dlclose) are not seen: see
 * docs/heap.md. */
EXPORT int dlclose(void *handle)
{
	static int (*real_dlclose)(void *);
	int (*f)(void *) = __atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
		if (!f)
			return -1;
		__atomic_store_n(&real_dlclose, f, __ATOMIC_RELEASE);
	}
	strobe_uw_cache *c = uw_cache;
	if (c)
		strobe_uw_unload_begin(c);
	int r = f(handle);
	if (c)
		strobe_uw_unload_end(c);
	return r;
}
