// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's symbol uploads (--symbolize server, on unless --no-upload-symbols): a binary that
 * kept its symbol table (not stripped) is sent once per build ID to the server's debug-info
 * store, so that the server names its frames as this host could have. The server is asked
 * first (GET /api/v1/debuginfo/ID), so a build ID it already has costs one small request; a
 * stripped binary is never sent (it has nothing to name with; its debug file comes from CI or
 * debuginfod).
 *
 * A thread of its own with its own connection, so that a large upload never delays a profile
 * push. The file is streamed from disk by libcurl's read callback: it never enters the agent's
 * memory (page cache is not its RSS). The export offers candidates without blocking; a queue of
 * QUEUE_MAX and a set of the build IDs already handled (SEEN_MAX, then forgotten: asked again)
 * bound what this holds. A failed upload is forgotten too, so the next export offers it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "agent_impl.h"
#include "strobe/elf_image.h"
#include "strobe/http_client.h"
#include "strobe/symbolize.h"

#define QUEUE_MAX 64
#define SEEN_MAX 4096
#define MAX_UPLOAD ((off_t)512 << 20) /* larger binaries are left to CI uploads */

typedef struct symup_item {
	char hex[129];
	char path[4096];
} symup_item;

struct agent_symup {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool stop; /* also read by the transfer's progress callback */
	symup_item q[QUEUE_MAX];
	unsigned nq;
	char (*seen)[129]; /* build IDs offered and not failed: SEEN_MAX, reset when full */
	unsigned nseen;
};

static bool seen_has(agent_symup *u, const char *hex)
{
	for (unsigned i = 0; i < u->nseen; i++)
		if (!strcmp(u->seen[i], hex))
			return true;
	return false;
}

void agent_symup_offer(strobe_agent *a, const char *hex, const char *path)
{
	agent_symup *u = a->symup;
	if (!u || strlen(hex) >= sizeof(u->q[0].hex) || strlen(path) >= sizeof(u->q[0].path))
		return;
	pthread_mutex_lock(&u->mu);
	if (!seen_has(u, hex) && u->nq < QUEUE_MAX) {
		if (u->nseen == SEEN_MAX)
			u->nseen = 0; /* forget them all: each costs one GET again, once */
		snprintf(u->seen[u->nseen++], sizeof(u->seen[0]), "%s", hex);
		snprintf(u->q[u->nq].hex, sizeof(u->q[0].hex), "%s", hex);
		snprintf(u->q[u->nq].path, sizeof(u->q[0].path), "%s", path);
		u->nq++;
		pthread_cond_signal(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
}

static void forget(agent_symup *u, const char *hex)
{
	pthread_mutex_lock(&u->mu);
	for (unsigned i = 0; i < u->nseen; i++)
		if (!strcmp(u->seen[i], hex)) {
			memcpy(u->seen[i], u->seen[--u->nseen], sizeof(u->seen[0]));
			break;
		}
	pthread_mutex_unlock(&u->mu);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* A stop ends an upload in flight at once (the agent's stop must not wait for a big file). */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	return atomic_load(&((agent_symup *)ctx)->stop) ? 1 : 0;
}

static size_t read_file(char *buf, size_t size, size_t n, void *ctx)
{
	return fread(buf, 1, size * n, ctx);
}

/* Whether the file is worth sending: ELF with a symbol table (or DWARF), its build ID the one
 * the profile carries, within MAX_UPLOAD. Only the headers are read (mapped, then unmapped). */
static bool worth_sending(const char *path, const char *hex, off_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return false;
	bool ok = false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size <= MAX_UPLOAD) {
		void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (img != MAP_FAILED) {
			unsigned flags = 0;
			const uint8_t *id = NULL;
			size_t idn = strobe_elf_contents(img, (size_t)st.st_size, &flags) == 0
					     ? strobe_elf_build_id_of(img, (size_t)st.st_size, &id)
					     : 0;
			char got[2 * 64 + 1] = "";
			if (idn && idn <= 64)
				strobe_build_id_hex(id, idn, got);
			ok = (flags & (STROBE_ELF_SYMTAB | STROBE_ELF_DEBUG_INFO)) && !strcmp(got, hex);
			munmap(img, (size_t)st.st_size);
			*size = st.st_size;
		}
	}
	close(fd);
	return ok;
}

/* 0: stored or nothing to do; -1: failed (to be offered again). */
static int upload(strobe_agent *a, CURL *c, const symup_item *it)
{
	const strobe_agent_opts *o = a->o;
	off_t size = 0;
	if (!worth_sending(it->path, it->hex, &size))
		return 0;
	char url[4200];
	size_t sl = strlen(o->server);
	snprintf(url, sizeof url, "%s%sapi/v1/debuginfo/%s", o->server,
		 sl && o->server[sl - 1] == '/' ? "" : "/", it->hex);
	/* Asked first: a build ID the server has costs this GET only. */
	agent_resp r = {.len = 0};
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, agent_resp_keep);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if (curl_easy_perform(c) != CURLE_OK)
		return -1;
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status == 200) {
		json_t *j = json_loads(r.buf, 0, NULL);
		bool have = j && json_is_true(json_object_get(j, "debuginfo"));
		json_decref(j);
		if (have) {
			pthread_mutex_lock(&a->mu);
			a->st.symbols_on_server++;
			pthread_mutex_unlock(&a->mu);
			return 0;
		}
	} else if (status != 404) {
		return -1;
	}
	FILE *f = fopen(it->path, "rb");
	if (!f)
		return 0; /* gone since: nothing to send */
	r.len = 0;
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, read_file);
	curl_easy_setopt(c, CURLOPT_READDATA, f);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
	CURLcode cr = curl_easy_perform(c);
	fclose(f);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, NULL);
	curl_easy_setopt(c, CURLOPT_READDATA, NULL);
	status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cr == CURLE_OK && status == 200) {
		pthread_mutex_lock(&a->mu);
		a->st.symbols_uploaded++;
		pthread_mutex_unlock(&a->mu);
		agent_log(a, STROBE_LOG_INFO, "symbols of %s (build ID %s, %" PRId64 " bytes) sent "
			  "to the server", it->path, it->hex, (int64_t)size);
		return 0;
	}
	agent_log(a, STROBE_LOG_WARN, "sending the symbols of %s: %s", it->path,
		  cr != CURLE_OK ? curl_easy_strerror(cr) : r.buf);
	/* A 4xx other than 429 will not change: not offered again until the set is reset. */
	return cr == CURLE_OK && status >= 400 && status < 500 && status != 429 ? 0 : -1;
}

static void *symup_main(void *arg)
{
	strobe_agent *a = arg;
	agent_symup *u = a->symup;
	CURL *c = curl_easy_init();
	struct curl_slist *h = strobe_http_headers(a->o->tenant, a->o->token,
						   "Content-Type: application/octet-stream");
	if (c && h) {
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, discard);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, u);
		strobe_http_tls(c, a->o->ca);
	}
	pthread_mutex_lock(&u->mu);
	while (!atomic_load(&u->stop)) {
		if (!u->nq) {
			pthread_cond_wait(&u->cv, &u->mu);
			continue;
		}
		symup_item it = u->q[0];
		memmove(u->q, u->q + 1, --u->nq * sizeof(u->q[0]));
		pthread_mutex_unlock(&u->mu);
		if (!c || !h || upload(a, c, &it) < 0) {
			forget(u, it.hex);
			pthread_mutex_lock(&a->mu);
			a->st.symbols_failed++;
			pthread_mutex_unlock(&a->mu);
		}
		pthread_mutex_lock(&u->mu);
	}
	pthread_mutex_unlock(&u->mu);
	if (c)
		curl_easy_cleanup(c);
	curl_slist_free_all(h);
	return NULL;
}

int agent_symup_start(strobe_agent *a)
{
	agent_symup *u = calloc(1, sizeof(*u));
	if (!u || !(u->seen = calloc(SEEN_MAX, sizeof(u->seen[0])))) {
		free(u);
		return -ENOMEM;
	}
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	a->symup = u;
	int e = pthread_create(&u->thread, NULL, symup_main, a);
	if (e) {
		a->symup = NULL;
		free(u->seen);
		free(u);
		return -e;
	}
	return 0;
}

void agent_symup_stop(strobe_agent *a)
{
	agent_symup *u = a->symup;
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	atomic_store(&u->stop, true);
	pthread_cond_signal(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pthread_join(u->thread, NULL); /* an upload in flight ends within its timeout */
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u->seen);
	free(u);
	a->symup = NULL;
}
