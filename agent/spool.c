// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's spool: profiles waiting to be pushed, oldest first, within a byte limit. Each
 * item is one file (written to a temp name, fsynced, renamed), so a crash or restart loses
 * nothing that was queued and a half-written file is never taken for an item. When the limit
 * would be passed, the oldest items are dropped first and counted: recent data is worth more
 * than old data to someone looking at an incident. The item the sender is pushing is never the
 * one dropped (the next oldest goes instead): a profile counted as dropped must not also reach
 * the server, so the spool may pass its limit by that one item while the push is in flight.
 * Also the backoff the sender retries with.
 *
 * File format ("%016llx.spool", the id in hex so names sort by age):
 *   "STSP1\n" | u32 meta_len | u64 body_len | u32 crc32(meta, body) | meta | body
 * (little-endian as the host writes it; the spool never moves between machines).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "strobe/agent.h"

#define MAGIC "STSP1\n"
#define HDR (6 + 4 + 8 + 4)
#define META_MAX (64u * 1024)
#define BODY_MAX (256u * 1024 * 1024)

typedef struct item {
	uint64_t id, size;
	char *meta;  /* in memory: memory-only spool, or the disk write failed */
	void *body;
	size_t len;
} item;

struct strobe_spool {
	char *dir;
	uint64_t max;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t wcv; /* strobe_spool_wake only: the sender's backoff (strobe_spool_sleep) */
	item *q;
	size_t head, n, cap; /* ring of n items from head */
	uint64_t next_id;
	uint64_t busy_id; /* the item strobe_spool_peek handed out, until remove or release */
	bool busy;
	strobe_spool_stats st;
	unsigned wakes;
};

static item *at(strobe_spool *sp, size_t i) { return &sp->q[(sp->head + i) % sp->cap]; }

static int push_back(strobe_spool *sp, item it)
{
	if (sp->n == sp->cap) {
		size_t nc = sp->cap ? sp->cap * 2 : 64;
		item *nq = malloc(nc * sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		for (size_t i = 0; i < sp->n; i++)
			nq[i] = *at(sp, i);
		free(sp->q);
		sp->q = nq;
		sp->cap = nc;
		sp->head = 0;
	}
	*at(sp, sp->n++) = it;
	sp->st.items++;
	sp->st.bytes += it.size;
	return 0;
}

static void file_of(const strobe_spool *sp, uint64_t id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%016" PRIx64 ".spool", sp->dir, id);
}

static void forget(strobe_spool *sp, item *it)
{
	if (sp->dir && !it->meta) {
		char path[4096];
		file_of(sp, it->id, path, sizeof(path));
		unlink(path);
	}
	free(it->meta);
	free(it->body);
	sp->st.items--;
	sp->st.bytes -= it->size;
}

static void pop_front(strobe_spool *sp)
{
	forget(sp, at(sp, 0));
	sp->head = (sp->head + 1) % sp->cap;
	sp->n--;
}

static void remove_at(strobe_spool *sp, size_t i)
{
	if (i == 0) {
		pop_front(sp);
		return;
	}
	forget(sp, at(sp, i));
	for (size_t j = i; j + 1 < sp->n; j++)
		*at(sp, j) = *at(sp, j + 1);
	sp->n--;
}

/* Drops the oldest item that is not being pushed, counting it; false when there is none. */
static bool drop_oldest(strobe_spool *sp)
{
	size_t i = sp->n && sp->busy && at(sp, 0)->id == sp->busy_id ? 1 : 0;
	if (i >= sp->n)
		return false;
	sp->st.dropped++;
	sp->st.dropped_bytes += at(sp, i)->size;
	remove_at(sp, i);
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Reads the header of a spool file; returns the item size, or 0 when it is not a valid one. */
static uint64_t check_header(const char *path, uint32_t *mlen, uint64_t *blen, uint32_t *crc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	unsigned char h[HDR];
	struct stat sb;
	bool ok = read(fd, h, HDR) == HDR && fstat(fd, &sb) == 0 && memcmp(h, MAGIC, 6) == 0;
	close(fd);
	if (!ok)
		return 0;
	memcpy(mlen, h + 6, 4);
	memcpy(blen, h + 10, 8);
	memcpy(crc, h + 18, 4);
	if (*mlen > META_MAX || *blen > BODY_MAX || (uint64_t)sb.st_size != HDR + *mlen + *blen)
		return 0;
	return (uint64_t)sb.st_size;
}

static int scan(strobe_spool *sp, strobe_err *err)
{
	DIR *d = opendir(sp->dir);
	if (!d)
		return strobe_errf(err, -errno, "spool %s: %s", sp->dir, strerror(errno));
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	char path[4096];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *end;
		uint64_t id = strtoull(e->d_name, &end, 16);
		snprintf(path, sizeof(path), "%s/%s", sp->dir, e->d_name);
		if (strlen(e->d_name) != 22 || end != e->d_name + 16 || strcmp(end, ".spool") != 0) {
			/* temp files of a crashed write, or something foreign: not ours to keep */
			if (strncmp(e->d_name, "tmp-", 4) == 0 || strstr(e->d_name, ".spool")) {
				unlink(path);
				sp->st.corrupt++;
			}
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			uint64_t *ni = realloc(ids, cap * sizeof(*ni));
			if (!ni) {
				free(ids);
				closedir(d);
				return -ENOMEM;
			}
			ids = ni;
		}
		ids[n++] = id;
	}
	closedir(d);
	if (n)
		qsort(ids, n, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		file_of(sp, ids[i], path, sizeof(path));
		uint32_t ml, crc;
		uint64_t bl, size = check_header(path, &ml, &bl, &crc);
		if (!size) {
			unlink(path);
			sp->st.corrupt++;
			continue;
		}
		if (push_back(sp, (item){.id = ids[i], .size = size}) < 0) {
			free(ids);
			return -ENOMEM;
		}
		if (ids[i] >= sp->next_id)
			sp->next_id = ids[i] + 1;
	}
	free(ids);
	/* A smaller limit than last time: the oldest go. */
	while (sp->st.bytes > sp->max && drop_oldest(sp))
		;
	return 0;
}

strobe_spool *strobe_spool_open(const char *dir, uint64_t max_bytes, strobe_err *err)
{
	strobe_spool *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->max = max_bytes ? max_bytes : 64u << 20;
	sp->next_id = 1;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	pthread_cond_init(&sp->wcv, NULL);
	if (dir) {
		sp->dir = strdup(dir);
		if (!sp->dir)
			goto fail;
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			strobe_errf(err, -e, "spool %s: cannot create it: %s", dir, strerror(e));
			errno = e;
			goto fail;
		}
		int rc = scan(sp, err);
		if (rc < 0) {
			errno = -rc;
			goto fail;
		}
	}
	return sp;
fail:;
	int e = errno;
	strobe_spool_close(sp);
	errno = e;
	return NULL;
}

void strobe_spool_close(strobe_spool *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->n; i++) {
		item *it = at(sp, i);
		free(it->meta);
		free(it->body);
	}
	free(sp->q);
	free(sp->dir);
	pthread_mutex_destroy(&sp->mu);
	pthread_cond_destroy(&sp->cv);
	pthread_cond_destroy(&sp->wcv);
	free(sp);
}

static int write_file(const strobe_spool *sp, uint64_t id, const char *meta, const void *body,
		      size_t len)
{
	char tmp[4096], path[4096];
	snprintf(tmp, sizeof(tmp), "%s/tmp-%016" PRIx64, sp->dir, id);
	file_of(sp, id, path, sizeof(path));
	uint32_t ml = (uint32_t)strlen(meta);
	uint64_t bl = len;
	uint32_t crc = (uint32_t)crc32(0, (const Bytef *)meta, ml);
	crc = (uint32_t)crc32(crc, body, (uInt)len);
	unsigned char h[HDR];
	memcpy(h, MAGIC, 6);
	memcpy(h + 6, &ml, 4);
	memcpy(h + 10, &bl, 8);
	memcpy(h + 18, &crc, 4);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	bool ok = write(fd, h, HDR) == HDR && write(fd, meta, ml) == (ssize_t)ml &&
		  write(fd, body, len) == (ssize_t)len && fdatasync(fd) == 0;
	int e = errno;
	close(fd);
	if (!ok || rename(tmp, path) < 0) {
		e = ok ? errno : e;
		unlink(tmp);
		return -(e ? e : EIO);
	}
	return 0;
}

int strobe_spool_add(strobe_spool *sp, const char *meta, const void *body, size_t len)
{
	size_t ml = strlen(meta);
	if (ml > META_MAX || len > BODY_MAX)
		return -EMSGSIZE;
	uint64_t size = HDR + ml + len;
	pthread_mutex_lock(&sp->mu);
	sp->st.added++;
	if (size > sp->max) { /* would not fit even alone */
		sp->st.dropped++;
		sp->st.dropped_bytes += size;
		pthread_mutex_unlock(&sp->mu);
		return 0;
	}
	while (sp->st.bytes + size > sp->max && drop_oldest(sp))
		;
	uint64_t id = sp->next_id++;
	int rc = 0;
	item it = {.id = id, .size = size};
	if (sp->dir)
		rc = write_file(sp, id, meta, body, len);
	if (!sp->dir || rc < 0) {
		it.meta = strdup(meta);
		it.body = malloc(len ? len : 1);
		it.len = len;
		if (!it.meta || !it.body) {
			free(it.meta);
			free(it.body);
			pthread_mutex_unlock(&sp->mu);
			return -ENOMEM;
		}
		memcpy(it.body, body, len);
	}
	if (push_back(sp, it) < 0) {
		free(it.meta);
		free(it.body);
		rc = -ENOMEM;
	}
	pthread_cond_broadcast(&sp->cv);
	pthread_mutex_unlock(&sp->mu);
	return rc;
}

/* Loads a file item; 0, or -EBADMSG when it is corrupt. */
static int load(const strobe_spool *sp, uint64_t id, char **meta, void **body, size_t *len)
{
	char path[4096];
	file_of(sp, id, path, sizeof(path));
	uint32_t ml, crc;
	uint64_t bl;
	if (!check_header(path, &ml, &bl, &crc))
		return -EBADMSG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -EBADMSG;
	char *m = malloc(ml + 1);
	void *b = malloc(bl ? bl : 1);
	bool ok = m && b && lseek(fd, HDR, SEEK_SET) == HDR && read(fd, m, ml) == (ssize_t)ml &&
		  read(fd, b, bl) == (ssize_t)bl;
	close(fd);
	if (ok) {
		m[ml] = 0;
		uint32_t c = (uint32_t)crc32(0, (const Bytef *)m, ml);
		c = (uint32_t)crc32(c, b, (uInt)bl);
		ok = c == crc && strlen(m) == ml;
	}
	if (!ok) {
		free(m);
		free(b);
		return -EBADMSG;
	}
	*meta = m;
	*body = b;
	*len = bl;
	return 0;
}

/* The realtime deadline timeout_ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

int strobe_spool_peek(strobe_spool *sp, int timeout_ms, uint64_t *id, char **meta, void **body,
		      size_t *len)
{
	pthread_mutex_lock(&sp->mu);
	if (!sp->n && timeout_ms > 0) {
		struct timespec ts = deadline_in(timeout_ms);
		unsigned w = sp->wakes;
		while (!sp->n && w == sp->wakes)
			if (pthread_cond_timedwait(&sp->cv, &sp->mu, &ts) == ETIMEDOUT)
				break;
	}
	while (sp->n) {
		item *it = at(sp, 0);
		*id = it->id;
		sp->busy_id = it->id;
		sp->busy = true;
		if (it->meta) {
			*meta = strdup(it->meta);
			*body = malloc(it->len ? it->len : 1);
			*len = it->len;
			if (!*meta || !*body) {
				free(*meta);
				free(*body);
				sp->busy = false;
				pthread_mutex_unlock(&sp->mu);
				return -ENOMEM;
			}
			memcpy(*body, it->body, it->len);
			pthread_mutex_unlock(&sp->mu);
			return 0;
		}
		if (load(sp, it->id, meta, body, len) == 0) {
			pthread_mutex_unlock(&sp->mu);
			return 0;
		}
		sp->st.corrupt++;
		sp->busy = false;
		pop_front(sp);
	}
	pthread_mutex_unlock(&sp->mu);
	return -ENOENT;
}

void strobe_spool_remove(strobe_spool *sp, uint64_t id)
{
	pthread_mutex_lock(&sp->mu);
	if (sp->busy && sp->busy_id == id)
		sp->busy = false;
	/* The oldest, unless a caller removes out of order; absent when it was dropped before
	 * the peek marked it. */
	for (size_t i = 0; i < sp->n; i++)
		if (at(sp, i)->id == id) {
			remove_at(sp, i);
			sp->st.removed++;
			break;
		}
	pthread_mutex_unlock(&sp->mu);
}

void strobe_spool_release(strobe_spool *sp, uint64_t id)
{
	pthread_mutex_lock(&sp->mu);
	if (sp->busy && sp->busy_id == id)
		sp->busy = false;
	pthread_mutex_unlock(&sp->mu);
}

void strobe_spool_get_stats(strobe_spool *sp, strobe_spool_stats *st)
{
	pthread_mutex_lock(&sp->mu);
	*st = sp->st;
	pthread_mutex_unlock(&sp->mu);
}

void strobe_spool_wake(strobe_spool *sp)
{
	pthread_mutex_lock(&sp->mu);
	sp->wakes++;
	pthread_cond_broadcast(&sp->cv);
	pthread_cond_broadcast(&sp->wcv);
	pthread_mutex_unlock(&sp->mu);
}

void strobe_spool_sleep(strobe_spool *sp, int timeout_ms)
{
	if (timeout_ms <= 0)
		return;
	struct timespec ts = deadline_in(timeout_ms);
	pthread_mutex_lock(&sp->mu);
	unsigned w = sp->wakes;
	while (w == sp->wakes)
		if (pthread_cond_timedwait(&sp->wcv, &sp->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&sp->mu);
}

/* ---- backoff ---------------------------------------------------------------------------------- */

void strobe_backoff_init(strobe_backoff *b, uint64_t base_ms, uint64_t max_ms, uint64_t seed)
{
	b->base_ms = base_ms ? base_ms : 1;
	b->max_ms = max_ms < b->base_ms ? b->base_ms : max_ms;
	b->attempt = 0;
	b->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

uint64_t strobe_backoff_next(strobe_backoff *b)
{
	uint64_t d = b->base_ms;
	for (unsigned i = 0; i < b->attempt && d < b->max_ms; i++)
		d *= 2;
	if (d > b->max_ms)
		d = b->max_ms;
	if (b->attempt < 64)
		b->attempt++;
	/* xorshift64: jitter so that many agents that lost the server together do not come back
	 * in lockstep */
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	uint64_t half = d / 2;
	return half + (d - half ? b->rng % (d - half + 1) : 0);
}

void strobe_backoff_reset(strobe_backoff *b) { b->attempt = 0; }
