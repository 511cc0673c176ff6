/* Write-behind (archive/wbehind.h): SLOTS slots of SLOT bytes, filled in turn by the caller
 * and taken in the same turn by up to WRITERS threads; a slot is free again once every slot
 * before it is written too. */
#include "wbehind.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT (256 * 1024)
#define SLOTS 16
/* Writing into fresh pages (tmpfs, the page cache) costs about as much as the rest of an
 * unpack together. The kernel serialises writes into one file and every member is drained
 * before the next, so the second thread mostly waits on the first; still, with one 1 GiB
 * uploads were slower (2.56 s against 2.15 s median, docs/transfers.md). */
#define WRITERS 2

struct slot {
	int fd;
	off_t at;
	size_t len;
	int done;
};

struct sbx_wb {
	pthread_t thread[WRITERS];
	int threads;
	pthread_mutex_t mu;
	pthread_cond_t more, room; /* the threads wait for more; the caller for room */
	struct slot slot[SLOTS];
	unsigned char *data; /* SLOTS * SLOT bytes */
	/* slots filled so far; taken by a thread so far; written, with all before them */
	uint64_t head, taken, tail;
	int err; /* errno of the first failed write since the last drain */
	int stop;
};

int sbx_pwrite_all(int fd, const void *buf, size_t n, off_t at)
{
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		p += w;
		n -= (size_t)w;
		at += w;
	}
	return 0;
}

static void *run(void *arg)
{
	struct sbx_wb *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->taken == w->head && !w->stop)
			pthread_cond_wait(&w->more, &w->mu);
		if (w->taken == w->head)
			break;
		unsigned i = (unsigned)(w->taken++ % SLOTS);
		struct slot s = w->slot[i];
		int failed = w->err != 0;
		pthread_mutex_unlock(&w->mu);
		/* After a failure the rest is dropped: the caller reports the first one. */
		int err =
		        failed ? 0 : sbx_pwrite_all(s.fd, w->data + (size_t)i * SLOT, s.len, s.at);
		pthread_mutex_lock(&w->mu);
		if (err != 0 && w->err == 0)
			w->err = err;
		w->slot[i].done = 1;
		while (w->tail < w->taken && w->slot[w->tail % SLOTS].done) {
			w->slot[w->tail % SLOTS].done = 0;
			w->tail++;
		}
		pthread_cond_signal(&w->room);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void destroy(struct sbx_wb *w)
{
	pthread_cond_destroy(&w->more);
	pthread_cond_destroy(&w->room);
	pthread_mutex_destroy(&w->mu);
	free(w->data);
	free(w);
}

struct sbx_wb *sbx_wb_new(void)
{
	struct sbx_wb *w = calloc(1, sizeof *w);
	if (w == NULL)
		return NULL;
	w->data = malloc((size_t)SLOTS * SLOT);
	if (w->data == NULL || pthread_mutex_init(&w->mu, NULL) != 0) {
		free(w->data);
		free(w);
		return NULL;
	}
	pthread_cond_init(&w->more, NULL);
	pthread_cond_init(&w->room, NULL);
	/* One writer on a single CPU: a second would only take turns with it. */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus > 1 ? WRITERS : 1;
	while (w->threads < want && pthread_create(&w->thread[w->threads], NULL, run, w) == 0)
		w->threads++;
	if (w->threads == 0) {
		destroy(w);
		return NULL;
	}
	return w;
}

int sbx_wb_write(struct sbx_wb *w, int fd, off_t at, const void *p, size_t n)
{
	const unsigned char *b = p;
	pthread_mutex_lock(&w->mu);
	while (n > 0) {
		while (w->head - w->tail == SLOTS && w->err == 0)
			pthread_cond_wait(&w->room, &w->mu);
		if (w->err != 0)
			break;
		size_t k = n < SLOT ? n : SLOT;
		unsigned i = (unsigned)(w->head % SLOTS);
		/* The slot is the caller's until head moves past it: copy without the lock. */
		pthread_mutex_unlock(&w->mu);
		memcpy(w->data + (size_t)i * SLOT, b, k);
		pthread_mutex_lock(&w->mu);
		w->slot[i] = (struct slot){fd, at, k, 0};
		w->head++;
		pthread_cond_signal(&w->more);
		b += k;
		n -= k;
		at += (off_t)k;
	}
	int err = w->err;
	pthread_mutex_unlock(&w->mu);
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

int sbx_wb_drain(struct sbx_wb *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->tail != w->head)
		pthread_cond_wait(&w->room, &w->mu);
	int err = w->err;
	w->err = 0;
	pthread_mutex_unlock(&w->mu);
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

void sbx_wb_free(struct sbx_wb *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->more);
	pthread_mutex_unlock(&w->mu);
	for (int t = 0; t < w->threads; t++)
		pthread_join(w->thread[t], NULL);
	destroy(w);
}
