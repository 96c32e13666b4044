// SPDX-License-Identifier: Apache-2.0
/*
 * The reader of libstrobe-heap.so's channel (include/strobe/heap_channel.h): copies a channel
 * file into a validated private snapshot, turns it into strobe's profile model (heap: Go's four
 * sample types, un-biased per stack by Go's formula; locks: contentions and delay), and lists the
 * sampled allocations still live at exit as possible leaks.
 *
 * Everything in the file is untrusted (another process writes it, and may be buggy, hostile or
 * still writing): every count is checked against the caps and the file's length, every stack
 * index in a live entry against the stack table, and the maps text is parsed line by line with
 * bounded fields. A bad file is refused with a message; it never makes the reader read outside
 * what it mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/heap_channel.h"
#include "strobe/profile.h"

void strobe_heap_snap_free(strobe_heap_snap *s)
{
	if (!s)
		return;
	free(s->stacks);
	free(s->live);
	free(s->maps);
	free(s);
}

int strobe_heap_snap_parse(const void *buf, size_t len, strobe_heap_snap **out, strobe_err *err)
{
	*out = NULL;
	if (len < sizeof(strobe_heap_hdr) || len < STROBE_HEAP_HDR_SIZE)
		return strobe_errf(err, -EINVAL, "heap channel: %zu bytes, shorter than its header",
				   len);
	strobe_heap_snap *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memcpy(&s->hdr, buf, sizeof(s->hdr));
	const strobe_heap_hdr *h = &s->hdr;
	int rc = -EINVAL;
	if (memcmp(h->magic, STROBE_HEAP_MAGIC, 8) != 0) {
		strobe_errf(err, rc, "heap channel: bad magic (not a strobe-heap file)");
		goto fail;
	}
	if (h->version != STROBE_HEAP_VERSION || h->hdr_size != STROBE_HEAP_HDR_SIZE) {
		strobe_errf(err, rc, "heap channel: version %" PRIu32 " header %" PRIu32
				     " (this reader knows version %u)", h->version, h->hdr_size,
			    STROBE_HEAP_VERSION);
		goto fail;
	}
	if (h->max_stacks > STROBE_HEAP_MAX_STACKS || h->live_slots > STROBE_HEAP_MAX_LIVE ||
	    h->maps_cap > STROBE_HEAP_MAX_MAPS || h->max_depth != STROBE_HEAP_MAX_DEPTH) {
		strobe_errf(err, rc, "heap channel: table sizes over the caps (stacks %" PRIu32
				     ", live %" PRIu32 ", maps %" PRIu32 ", depth %" PRIu32 ")",
			    h->max_stacks, h->live_slots, h->maps_cap, h->max_depth);
		goto fail;
	}
	/* each area within len, without overflow (sizes are capped above, offsets are not) */
	uint64_t st_end = (uint64_t)h->max_stacks * sizeof(strobe_heap_stack);
	uint64_t lv_end = (uint64_t)h->live_slots * sizeof(strobe_heap_live);
	if (h->stacks_off < STROBE_HEAP_HDR_SIZE || h->stacks_off > len ||
	    st_end > len - h->stacks_off || h->live_off > len || lv_end > len - h->live_off ||
	    h->maps_off > len || h->maps_cap > len - h->maps_off || (h->stacks_off & 7) ||
	    (h->live_off & 7)) {
		strobe_errf(err, rc, "heap channel: areas outside the file's %zu bytes", len);
		goto fail;
	}
	if (h->state != STROBE_HEAP_RUNNING && h->state != STROBE_HEAP_EXITED) {
		strobe_errf(err, rc, "heap channel: unknown state %" PRId32, h->state);
		goto fail;
	}
	rc = -ENOMEM;
	/* stacks: the reserved ones that are ready */
	uint32_t n = h->stacks_reserved < h->max_stacks ? h->stacks_reserved : h->max_stacks;
	s->stacks = calloc(n ? n : 1, sizeof(strobe_heap_stack));
	if (!s->stacks)
		goto fail;
	const strobe_heap_stack *src = (const void *)((const char *)buf + h->stacks_off);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ready;
		__atomic_load(&src[i].ready, &ready, __ATOMIC_ACQUIRE);
		if (ready != STROBE_HEAP_READY)
			continue; /* being written: left as an empty stack with no values */
		memcpy(&s->stacks[i], &src[i], sizeof(src[i]));
		strobe_heap_stack *d = &s->stacks[i];
		if (d->depth > STROBE_HEAP_MAX_DEPTH ||
		    (d->kind != STROBE_HEAP_KIND_ALLOC && d->kind != STROBE_HEAP_KIND_LOCK)) {
			strobe_errf(err, -EINVAL, "heap channel: stack %" PRIu32 " has depth %" PRIu32
					     " kind %" PRIu32, i, d->depth, d->kind);
			rc = -EINVAL;
			goto fail;
		}
		/* a writer's counters only grow, frees after allocs: a pair read one sample
		 * apart, or a corrupt file, must not give negative in-use values */
		if (d->free_count > d->alloc_count)
			d->free_count = d->alloc_count;
		if (d->free_bytes > d->alloc_bytes)
			d->free_bytes = d->alloc_bytes;
	}
	s->nstacks = n;
	/* live entries: the compact snapshot the library writes at exit */
	const strobe_heap_live *lv = (const void *)((const char *)buf + h->live_off);
	uint32_t nl = h->state == STROBE_HEAP_EXITED ? h->live_count : 0;
	if (nl > h->live_slots)
		nl = h->live_slots;
	s->live = malloc((nl ? nl : 1) * sizeof(*s->live));
	if (!s->live)
		goto fail;
	for (uint32_t i = 0; i < nl; i++) {
		strobe_heap_live e;
		memcpy(&e, &lv[i], sizeof(e));
		if (e.ptr <= STROBE_HEAP_LIVE_TOMB || e.stack >= n)
			continue;
		s->live[s->nlive++] = e;
	}
	/* maps: the published prefix, cut at its last complete line */
	size_t ml = h->maps_len <= h->maps_cap ? h->maps_len : h->maps_cap;
	s->maps = malloc(ml + 1);
	if (!s->maps)
		goto fail;
	memcpy(s->maps, (const char *)buf + h->maps_off, ml);
	while (ml && s->maps[ml - 1] != '\n')
		ml--;
	s->maps[ml] = 0;
	s->maps_len = ml;
	s->hdr.exe[sizeof(s->hdr.exe) - 1] = 0;
	s->hdr.service[sizeof(s->hdr.service) - 1] = 0;
	*out = s;
	return 0;
fail:
	strobe_heap_snap_free(s);
	return rc;
}

/* A channel file is read with pread, never mapped: reading a hole of a shared tmpfs mapping
 * would back it with memory (and fault if the filesystem is full), while pread returns zeros.
 * Only the areas in use are read, into a private buffer laid out like the file. */
int strobe_heap_snap_read(const char *path, strobe_heap_snap **out, strobe_err *err)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strobe_errf(err, -errno, "%s: %s", path, strerror(errno));
	struct stat st;
	strobe_heap_hdr h;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < STROBE_HEAP_HDR_SIZE ||
	    (uint64_t)st.st_size > (uint64_t)1 << 31 ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		close(fd);
		return strobe_errf(err, -EINVAL, "%.200s: not a heap channel file", path);
	}
	size_t len = (size_t)st.st_size;
	uint8_t *buf = calloc(1, len); /* untouched pages cost nothing */
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* each extent clamped to the file; parse checks the header's numbers properly */
	struct { uint64_t off, n; } ext[4] = {
		{0, STROBE_HEAP_HDR_SIZE},
		{h.stacks_off, (uint64_t)(h.stacks_reserved < h.max_stacks ? h.stacks_reserved
									   : h.max_stacks) *
				       sizeof(strobe_heap_stack)},
		{h.live_off, h.state == STROBE_HEAP_EXITED ? (uint64_t)h.live_count *
								     sizeof(strobe_heap_live) : 0},
		{h.maps_off, h.maps_len}};
	int rc = 0;
	for (int i = 0; i < 4 && rc == 0; i++) {
		uint64_t off = ext[i].off, n = ext[i].n;
		if (off >= len)
			continue;
		if (n > len - off)
			n = len - off;
		for (uint64_t done = 0; done < n;) {
			ssize_t r = pread(fd, buf + off + done, (size_t)(n - done), (off_t)(off + done));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = strobe_errf(err, r < 0 ? -errno : -EIO, "%.200s: %s", path,
						 r < 0 ? strerror(errno) : "shorter than it says");
				break;
			}
			done += (uint64_t)r;
		}
	}
	close(fd);
	if (rc == 0) {
		rc = strobe_heap_snap_parse(buf, len, out, err);
		if (rc < 0 && err) {
			char msg[sizeof(err->msg)];
			memcpy(msg, err->msg, sizeof(msg));
			strobe_errf(err, rc, "%.200s: %.300s", path, msg);
		}
	}
	free(buf);
	return rc;
}

int strobe_heap_set_paused(const char *path, bool paused)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	strobe_heap_hdr h;
	int rc = 0;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, STROBE_HEAP_MAGIC, 8) != 0) {
		rc = -EINVAL;
	} else {
		uint32_t v = paused;
		if (pwrite(fd, &v, sizeof(v), offsetof(strobe_heap_hdr, paused)) != sizeof(v))
			rc = -EIO;
	}
	close(fd);
	return rc;
}

double strobe_heap_scale(uint64_t count, uint64_t bytes, uint64_t rate)
{
	if (count == 0 || rate == 0)
		return 1;
	double avg = (double)bytes / (double)count;
	double p = 1 - exp(-avg / (double)rate);
	return p > 0 ? 1 / p : 1;
}

/* ---- building a profile ---------------------------------------------------------------------- */

typedef struct map_line {
	uint64_t start, end, offset;
	const char *path; /* into a private copy of the maps text */
	uint32_t mapping; /* profile mapping id, 0 = not yet */
} map_line;

typedef struct builder {
	strobe_profile *p;
	const strobe_heap_profile_opts *o;
	map_line *maps;
	size_t nmaps;
	char *text;
} builder;

static int parse_maps(builder *b, const char *maps, size_t len)
{
	b->text = malloc(len + 1);
	if (!b->text)
		return -ENOMEM;
	memcpy(b->text, maps, len);
	b->text[len] = 0;
	size_t cap = 0;
	for (char *line = b->text, *nl; line < b->text + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(b->text + len - line));
		if (!nl)
			break;
		*nl = 0;
		unsigned long long s, e, off;
		char perms[8];
		int pos = 0;
		/* start-end perms offset dev inode path; %n after inode points at the path */
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &s, &e, perms, &off, &pos) < 4 ||
		    !pos || e <= s || line[pos] != '/')
			continue;
		if (b->nmaps == cap) {
			cap = cap ? cap * 2 : 64;
			map_line *nm = realloc(b->maps, cap * sizeof(*nm));
			if (!nm)
				return -ENOMEM;
			b->maps = nm;
		}
		b->maps[b->nmaps++] = (map_line){s, e, off, line + pos, 0};
	}
	return 0;
}

static map_line *map_of(builder *b, uint64_t pc)
{
	for (size_t i = b->nmaps; i-- > 0;) /* the last line that covers it wins */
		if (pc >= b->maps[i].start && pc < b->maps[i].end)
			return &b->maps[i];
	return NULL;
}

static uint32_t str(strobe_profile *p, const char *s)
{
	return s ? strobe_str_intern0(p, s) : 0;
}

static uint32_t location_of(builder *b, uint64_t pc)
{
	map_line *m = map_of(b, pc);
	uint32_t mapping = 0;
	strobe_line lines[16];
	int n = 0;
	if (m) {
		if (!m->mapping) {
			strobe_mapping pm = {.start = m->start, .limit = m->end, .offset = m->offset,
					     .filename = str(b->p, m->path)};
			pm.has_functions = b->o->namer != NULL;
			if (b->o->build_id) {
				char hex[2 * 64 + 1] = "";
				b->o->build_id(b->o->namer_ctx, m->path, hex, sizeof(hex));
				hex[sizeof(hex) - 1] = 0;
				pm.build_id = str(b->p, hex);
			}
			m->mapping = strobe_mapping_intern(b->p, &pm);
			if (m->mapping == UINT32_MAX)
				return UINT32_MAX;
		}
		mapping = m->mapping;
		if (b->o->namer) {
			strobe_heap_frame fr[16];
			/* a return address: name the call instruction before it */
			n = b->o->namer(b->o->namer_ctx, m->path, pc - 1 - m->start + m->offset, fr,
					16);
			if (n < 0 || n > 16)
				n = 0;
			for (int i = 0; i < n; i++) {
				strobe_function f = {0};
				f.name = f.system_name = str(b->p, fr[i].function);
				f.filename = str(b->p, fr[i].file);
				f.start_line = fr[i].start_line;
				lines[i] = (strobe_line){.function = strobe_function_intern(b->p, &f),
							 .line = fr[i].line,
							 .column = fr[i].column};
			}
		}
	}
	return strobe_location_intern(b->p, mapping, pc, lines, (uint32_t)n, false);
}

static const char *const heap_types[4][2] = {{"alloc_objects", "count"},
					     {"alloc_space", "bytes"},
					     {"inuse_objects", "count"},
					     {"inuse_space", "bytes"}};
static const char *const lock_types[2][2] = {{"contentions", "count"},
					     {"delay", "nanoseconds"}};

static int set_types(strobe_profile *p, enum strobe_heap_kind kind, strobe_err *err)
{
	uint32_t n = kind == STROBE_HEAP_KIND_ALLOC ? 4 : 2;
	const char *const(*t)[2] = kind == STROBE_HEAP_KIND_ALLOC ? heap_types : lock_types;
	if (p->ntypes == 0) {
		for (uint32_t i = 0; i < n; i++)
			if (strobe_profile_add_type(p, t[i][0], t[i][1]) < 0)
				return -ENOMEM;
		if (kind == STROBE_HEAP_KIND_ALLOC) {
			p->period_type.type = str(p, "space");
			p->period_type.unit = str(p, "bytes");
			p->default_type = 3; /* inuse_space, as go tool pprof shows a heap profile */
		} else {
			p->period_type.type = str(p, "contentions");
			p->period_type.unit = str(p, "count");
			p->default_type = 1;
		}
		return 0;
	}
	if (p->ntypes != n)
		return strobe_errf(err, -EINVAL, "heap channel: profile has other sample types");
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(strobe_str(p, p->types[i].type), t[i][0]) != 0)
			return strobe_errf(err, -EINVAL,
					   "heap channel: profile has other sample types");
	return 0;
}

int strobe_heap_profile_add(strobe_profile *p, const strobe_heap_snap *s,
			    const strobe_heap_profile_opts *o, strobe_err *err)
{
	int rc = set_types(p, o->kind, err);
	if (rc < 0)
		return rc;
	if (o->kind == STROBE_HEAP_KIND_ALLOC)
		p->period = (int64_t)s->hdr.rate;
	uint64_t end = s->hdr.exit_ns ? s->hdr.exit_ns : s->hdr.start_ns;
	if (!p->time_nanos || (int64_t)s->hdr.start_unix_ns < p->time_nanos)
		p->time_nanos = (int64_t)s->hdr.start_unix_ns;
	if (end > s->hdr.start_ns && (int64_t)(end - s->hdr.start_ns) > p->duration_nanos)
		p->duration_nanos = (int64_t)(end - s->hdr.start_ns);
	builder b = {.p = p, .o = o};
	rc = parse_maps(&b, s->maps, s->maps_len);
	uint32_t labels = 0;
	strobe_label l[17];
	uint32_t nl = 0;
	if (o->pid_label)
		l[nl++] = (strobe_label){.key = str(p, "pid"), .num = s->hdr.pid};
	for (uint32_t i = 0; i < o->nlabels && i < 16 && o->labels; i++) {
		const char *kv = o->labels[i], *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv)
			continue;
		l[nl++] = (strobe_label){.key = strobe_str_intern(p, kv, (size_t)(eq - kv)),
					 .str = str(p, eq + 1)};
	}
	if (rc == 0 && nl) {
		labels = strobe_labelset_intern(p, l, nl);
		if (labels == UINT32_MAX)
			rc = -ENOMEM;
	}
	const strobe_heap_snap *base = o->base && o->base->hdr.pid == s->hdr.pid &&
					       o->base->hdr.start_ns == s->hdr.start_ns
					   ? o->base
					   : NULL;
	for (uint32_t i = 0; rc == 0 && i < s->nstacks; i++) {
		const strobe_heap_stack *st = &s->stacks[i];
		if (st->ready != STROBE_HEAP_READY || st->kind != (uint32_t)o->kind)
			continue;
		/* The same entry in the earlier snapshot (entries never move, their counters only
		 * grow), when it was ready there: what happened since is the difference. */
		const strobe_heap_stack *bs = base && i < base->nstacks ? &base->stacks[i] : NULL;
		if (bs && (bs->ready != STROBE_HEAP_READY || bs->kind != st->kind ||
			   bs->hash != st->hash))
			bs = NULL;
		int64_t v[4];
		if (o->kind == STROBE_HEAP_KIND_ALLOC) {
			uint64_t ac = st->alloc_count, ab = st->alloc_bytes;
			if (bs) {
				ac = ac > bs->alloc_count ? ac - bs->alloc_count : 0;
				ab = ab > bs->alloc_bytes ? ab - bs->alloc_bytes : 0;
			}
			/* a copy taken while the process runs may read a free newer than the
			 * allocation count it read first: never below zero */
			uint64_t ic = st->alloc_count > st->free_count ? st->alloc_count - st->free_count
								       : 0;
			uint64_t ib = st->alloc_bytes > st->free_bytes ? st->alloc_bytes - st->free_bytes
								       : 0;
			if (!ac && !ic)
				continue;
			uint64_t rate = s->hdr.rate;
			double sa = strobe_heap_scale(ac, ab, rate);
			double si = strobe_heap_scale(ic, ib, rate);
			v[0] = llround((double)ac * sa);
			v[1] = llround((double)ab * sa);
			v[2] = llround((double)ic * si);
			v[3] = llround((double)ib * si);
		} else {
			uint64_t cm = st->lock_count_milli, d = st->lock_delay_ns;
			if (bs) {
				cm = cm > bs->lock_count_milli ? cm - bs->lock_count_milli : 0;
				d = d > bs->lock_delay_ns ? d - bs->lock_delay_ns : 0;
			}
			if (!cm && !d)
				continue;
			v[0] = (int64_t)((cm + 500) / 1000);
			v[1] = (int64_t)d;
			if (v[0] < 0 || v[1] < 0)
				continue;
		}
		/* the stack tree is rooted at the outermost frame */
		uint32_t stack = 0;
		for (uint32_t k = st->depth; k-- > 0;) {
			uint32_t loc = location_of(&b, st->frames[k]);
			if (loc == UINT32_MAX ||
			    (stack = strobe_stack_push(p, stack, loc)) == UINT32_MAX) {
				rc = -ENOMEM;
				break;
			}
		}
		if (rc == 0)
			rc = strobe_sample_add(p, stack, labels, v);
	}
	free(b.maps);
	free(b.text);
	return rc;
}

static int by_space(const void *a, const void *b)
{
	const strobe_heap_leak *x = a, *y = b;
	return x->space > y->space ? -1 : x->space < y->space;
}

static uint64_t frames_hash(const strobe_heap_stack *st)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ st->depth;
	for (uint32_t i = 0; i < st->depth; i++)
		h = (h ^ st->frames[i]) * 0x100000001b3ULL;
	return h;
}

int strobe_heap_leaks(const strobe_heap_snap *s, strobe_heap_leak **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (s->hdr.state != STROBE_HEAP_EXITED || s->hdr.exit_ns <= s->hdr.start_ns ||
	    !s->nstacks)
		return 0;
	/* async-profiler's rule: what was allocated in the last tenth of the run may just not have
	 * been freed yet */
	uint64_t cut = s->hdr.exit_ns - (s->hdr.exit_ns - s->hdr.start_ns) / 10;
	strobe_heap_leak *by = calloc(s->nstacks, sizeof(*by));
	uint32_t nslots = 2;
	while (nslots < 2 * s->nstacks)
		nslots *= 2;
	uint32_t *slot = calloc(nslots, sizeof(*slot)), *canon = calloc(s->nstacks, sizeof(*canon));
	if (!by || !slot || !canon) {
		free(by);
		free(slot);
		free(canon);
		return -ENOMEM;
	}
	/* the entries of one call stack (one per size class) are one leak */
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const strobe_heap_stack *st = &s->stacks[i];
		uint32_t k = (uint32_t)frames_hash(st) & (nslots - 1);
		canon[i] = i;
		for (;; k = (k + 1) & (nslots - 1)) {
			if (!slot[k]) {
				slot[k] = i + 1;
				break;
			}
			const strobe_heap_stack *o = &s->stacks[slot[k] - 1];
			if (o->depth == st->depth &&
			    memcmp(o->frames, st->frames, st->depth * sizeof(st->frames[0])) == 0) {
				canon[i] = slot[k] - 1;
				break;
			}
		}
	}
	/* live entries by size-class entry first: Go's scale applies per class */
	uint64_t *cnt = calloc(s->nstacks, sizeof(*cnt) * 2);
	if (!cnt) {
		free(by);
		free(slot);
		free(canon);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->nlive; i++) {
		const strobe_heap_live *e = &s->live[i];
		if (e->time_ns > cut || e->stack >= s->nstacks)
			continue;
		cnt[2 * e->stack]++;
		cnt[2 * e->stack + 1] += e->size;
	}
	for (uint32_t i = 0; i < s->nstacks; i++) {
		if (!cnt[2 * i])
			continue;
		double sc = strobe_heap_scale(cnt[2 * i], cnt[2 * i + 1], s->hdr.rate);
		strobe_heap_leak *l = &by[canon[i]];
		l->stack = canon[i];
		l->count += cnt[2 * i];
		l->bytes += cnt[2 * i + 1];
		l->objects += (double)cnt[2 * i] * sc;
		l->space += (double)cnt[2 * i + 1] * sc;
	}
	free(cnt);
	free(slot);
	free(canon);
	size_t k = 0;
	for (uint32_t i = 0; i < s->nstacks; i++)
		if (by[i].count)
			by[k++] = by[i];
	qsort(by, k, sizeof(*by), by_space);
	*out = by;
	*n = k;
	return 0;
}
