// SPDX-License-Identifier: Apache-2.0
/*
 * push_storm: many HTTP clients at once against one server on loopback, one connection each,
 * driven by one poll() loop (a thousand curl processes would measure fork, not the server).
 *
 *   push_storm --port P [--clients N] [--requests R] [--seconds S] [--path PATH] [--pad BYTES]
 *              [--ids FILE] [--mode push|slow|idle]
 *
 * push: each client sends R pushes one after the other (a new connection each, as agents do),
 *   a folded profile whose one stack "storm;c<client>_r<request>" has the value
 *   client * 1000 + request + 1, padded with repeats of "storm;pad 1" to about BYTES. It prints
 *   the count of each answer (200, 429, 503, other, connection errors), how many refusals lacked
 *   a Retry-After, and writes the id and value of every acknowledged (200) push to FILE (a line
 *   as each is acknowledged), so a test can check each one is stored.
 * slow: each client sends a push one byte a second; idle: each connects and sends nothing. Both
 *   hold on until the server closes them or S seconds pass, and print how many the server
 *   closed and when.
 *
 * Everything stops after S seconds (default 60) whatever is left.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { ST_IDLE, ST_CONNECTING, ST_SENDING, ST_READING, ST_DONE };
enum { M_PUSH, M_SLOW, M_IDLE };

typedef struct client {
	int fd, st, req;
	char *out;
	size_t outlen, off;
	char in[512];
	size_t inlen;
	double next_byte, closed_at;
} client;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int port, mode = M_PUSH, nclients = 1000, nreq = 1;
static double seconds = 60;
static size_t pad;
static const char *path = "/api/v1/push?service_name=storm&time=now";
static unsigned long n200, n429, n503, nother, nerr, nnoretry, nclosed;
static FILE *ids;

static void build_request(client *c, int i)
{
	size_t cap = 256 + pad + 64;
	char *body = malloc(cap);
	if (!body)
		exit(2);
	size_t bl = (size_t)snprintf(body, cap, "storm;c%d_r%d %ld\n", i, c->req,
				     (long)i * 1000 + c->req + 1);
	while (bl + 12 <= pad + 12 && bl + 12 < cap) {
		memcpy(body + bl, "storm;pad 1\n", 12);
		bl += 12;
	}
	free(c->out);
	c->out = malloc(bl + 512);
	if (!c->out)
		exit(2);
	c->outlen = (size_t)snprintf(c->out, 512,
				     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
				     "text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				     path, port, bl);
	memcpy(c->out + c->outlen, body, bl);
	c->outlen += bl;
	c->off = 0;
	c->inlen = 0;
	free(body);
}

static void start(client *c, int i)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->fd < 0) {
		nerr++;
		c->st = ST_DONE;
		return;
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (mode != M_IDLE)
		build_request(c, i);
	int r = connect(c->fd, (struct sockaddr *)&a, sizeof(a));
	c->st = r == 0 || errno == EINPROGRESS ? ST_CONNECTING : ST_DONE;
	if (c->st == ST_DONE) {
		nerr++;
		close(c->fd);
		c->fd = -1;
	}
	c->next_byte = now_s();
}

/* The answer of one push: counts it, records it when acknowledged. */
static void answered(client *c, int i)
{
	c->in[c->inlen < sizeof(c->in) ? c->inlen : sizeof(c->in) - 1] = 0;
	int status = 0;
	if (sscanf(c->in, "HTTP/1.%*d %d", &status) != 1)
		status = -1;
	if (status == 200) {
		n200++;
		if (ids)
			fprintf(ids, "c%d_r%d %ld\n", i, c->req, (long)i * 1000 + c->req + 1);
	} else if (status == 429 || status == 503) {
		status == 429 ? n429++ : n503++;
		if (!strcasestr(c->in, "\r\nRetry-After: "))
			nnoretry++;
	} else if (status < 0)
		nerr++;
	else
		nother++;
}

static void finish(client *c, int i, bool got)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (mode != M_PUSH) {
		c->st = ST_DONE;
		c->closed_at = now_s();
		nclosed++;
		return;
	}
	if (got)
		answered(c, i);
	else
		nerr++;
	if (++c->req < nreq)
		start(c, i);
	else
		c->st = ST_DONE;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"port", 1, 0, 'p'},  {"clients", 1, 0, 'c'}, {"requests", 1, 0, 'r'},
		{"seconds", 1, 0, 's'}, {"path", 1, 0, 'P'},  {"pad", 1, 0, 'b'},
		{"ids", 1, 0, 'i'},   {"mode", 1, 0, 'm'},    {0, 0, 0, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'p': port = atoi(optarg); break;
		case 'c': nclients = atoi(optarg); break;
		case 'r': nreq = atoi(optarg); break;
		case 's': seconds = atof(optarg); break;
		case 'P': path = optarg; break;
		case 'b': pad = (size_t)atol(optarg); break;
		case 'i':
			if (!(ids = fopen(optarg, "w"))) {
				perror(optarg);
				return 2;
			}
			/* a line as each push is acknowledged: a test may act on the count meanwhile
			 * (server_overload/stop stops the server after 30) */
			setvbuf(ids, NULL, _IOLBF, 0);
			break;
		case 'm':
			mode = strcmp(optarg, "slow") == 0 ? M_SLOW : strcmp(optarg, "idle") == 0 ? M_IDLE : M_PUSH;
			break;
		default:
			fprintf(stderr, "usage: push_storm --port P [--clients N] [--requests R] "
					"[--seconds S] [--path PATH] [--pad BYTES] [--ids FILE] "
					"[--mode push|slow|idle]\n");
			return 2;
		}
	}
	if (port <= 0 || nclients <= 0 || nclients > 100000 || nreq <= 0) {
		fprintf(stderr, "push_storm: --port is required; --clients 1..100000\n");
		return 2;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nclients + 64) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)nclients + 64 ? rl.rlim_max : (rlim_t)nclients + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	client *cl = calloc((size_t)nclients, sizeof(*cl));
	struct pollfd *pf = calloc((size_t)nclients, sizeof(*pf));
	if (!cl || !pf)
		return 2;
	double t0 = now_s(), end = t0 + seconds;
	for (int i = 0; i < nclients; i++)
		start(&cl[i], i);
	for (;;) {
		double t = now_s();
		int live = 0;
		for (int i = 0; i < nclients; i++) {
			client *c = &cl[i];
			pf[i] = (struct pollfd){.fd = -1};
			if (c->st == ST_DONE || c->fd < 0)
				continue;
			live++;
			pf[i].fd = c->fd;
			if (c->st == ST_CONNECTING)
				pf[i].events = POLLOUT;
			else if (c->st == ST_SENDING && mode == M_PUSH)
				pf[i].events = POLLOUT | POLLIN;
			else
				pf[i].events = POLLIN;
			/* Slow: one byte when its second has come (a request never completes). */
			if (c->st == ST_SENDING && mode == M_SLOW && t >= c->next_byte &&
			    c->off < c->outlen) {
				if (send(c->fd, c->out + c->off, 1, MSG_NOSIGNAL) == 1)
					c->off++;
				c->next_byte = t + 1.0;
			}
		}
		if (!live || t >= end)
			break;
		int n = poll(pf, (nfds_t)nclients, 100);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; n > 0 && i < nclients; i++) {
			client *c = &cl[i];
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			if (c->st == ST_CONNECTING) {
				int e = 0;
				socklen_t el = sizeof(e);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el);
				if (e) {
					finish(c, i, false);
					continue;
				}
				c->st = ST_SENDING;
				if (mode != M_PUSH)
					continue;
			}
			if (c->st == ST_SENDING && mode == M_PUSH && (pf[i].revents & POLLOUT)) {
				ssize_t w = send(c->fd, c->out + c->off, c->outlen - c->off, MSG_NOSIGNAL);
				if (w < 0 && errno != EAGAIN) {
					finish(c, i, c->inlen > 0);
					continue;
				}
				if (w > 0 && (c->off += (size_t)w) == c->outlen)
					c->st = ST_READING;
			}
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				char tmp[4096];
				ssize_t rd = recv(c->fd, tmp, sizeof(tmp), 0);
				if (rd > 0) {
					size_t k = (size_t)rd;
					if (k > sizeof(c->in) - 1 - c->inlen)
						k = sizeof(c->in) - 1 - c->inlen;
					memcpy(c->in + c->inlen, tmp, k);
					c->inlen += k;
				} else if (rd == 0 || errno != EAGAIN) {
					finish(c, i, c->inlen > 0);
				}
			}
		}
	}
	unsigned long held = 0;
	double sum = 0, mx = 0;
	for (int i = 0; i < nclients; i++) {
		if (cl[i].fd >= 0) {
			held++;
			close(cl[i].fd);
		}
		if (cl[i].closed_at > 0) {
			double d = cl[i].closed_at - t0;
			sum += d;
			mx = d > mx ? d : mx;
		}
		free(cl[i].out);
	}
	if (mode == M_PUSH)
		printf("pushes %d ok200 %lu r429 %lu r503 %lu other %lu errors %lu no_retry_after %lu "
		       "unfinished %lu seconds %.1f\n",
		       nclients * nreq, n200, n429, n503, nother, nerr, nnoretry, held,
		       now_s() - t0);
	else
		printf("connections %d closed_by_server %lu still_open %lu errors %lu "
		       "mean_close_s %.1f max_close_s %.1f\n",
		       nclients, nclosed, held, nerr, nclosed ? sum / (double)nclosed : 0.0, mx);
	if (ids)
		fclose(ids);
	free(cl);
	free(pf);
	return 0;
}
