/* A job's stdin (stdin.h): the ring, the pipe and the credit of the bytes between them, and the
 * sink that splices an upload's payload from the connection. */
#include "stdin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "sys.h"

#define RING SBX_WINDOW_DEFAULT

void sbx_stdin_init(struct sbx_stdin *in, int fd, int end)
{
	memset(in, 0, sizeof *in);
	in->fd = fd;
	in->end = end || fd < 0;
	sbx_credit_rx_init(&in->rx, SBX_WINDOW_DEFAULT);
}

int sbx_stdin_expect(struct sbx_stdin *in, uint64_t n)
{
	return sbx_credit_rx_received(&in->rx, n);
}

/* 0 when the ring is there (allocated on first need), else -1 with errno ENOMEM. */
static int have_ring(struct sbx_stdin *in)
{
	if (in->ring == NULL && (in->ring = malloc(RING)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

static void consumed(struct sbx_stdin *in, uint64_t n, uint64_t *grant)
{
	*grant += sbx_credit_rx_consumed(&in->rx, n);
}

void sbx_stdin_close(struct sbx_stdin *in)
{
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
	in->len = in->off = 0;
	in->end = 1;
}

int sbx_stdin_data(struct sbx_stdin *in, const uint8_t *p, size_t n, uint64_t *grant)
{
	*grant = 0;
	if (in->fd < 0) {
		consumed(in, n, grant);
		return 0;
	}
	if (in->len == 0 && n > 0) {
		/* Nothing waiting: straight into the pipe, hold only what does not fit. */
		ssize_t w = write(in->fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			consumed(in, (uint64_t)w, grant);
		}
	}
	if (n == 0)
		return 0;
	if (have_ring(in) != 0)
		return -1;
	/* Credit bounds what is held to the ring's size (sbx_stdin_expect checked it). */
	size_t at = (in->off + in->len) % RING;
	size_t first = RING - at < n ? RING - at : n;
	memcpy(in->ring + at, p, first);
	memcpy(in->ring, p + first, n - first);
	in->len += n;
	return 0;
}

void sbx_stdin_pump(struct sbx_stdin *in, uint64_t *grant)
{
	*grant = 0;
	/* The contiguous part of the ring first; the wrapped rest on the next call. */
	size_t pending = in->len < RING - in->off ? in->len : RING - in->off;
	if (in->fd >= 0 && pending > 0) {
		ssize_t n = write(in->fd, in->ring + in->off, pending);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			/* EPIPE: the program closed its stdin. Return the credit of all held. */
			consumed(in, in->len, grant);
			sbx_stdin_close(in);
			return;
		}
		in->off = (in->off + (size_t)n) % RING;
		in->len -= (size_t)n;
		consumed(in, (uint64_t)n, grant);
	}
	if (in->fd >= 0 && in->end && in->len == 0)
		sbx_stdin_close(in);
}

/* Reads into the ring's free space after what it holds (contiguous part only). */
static ssize_t read_ring(struct sbx_stdin *in, int conn, uint64_t left)
{
	if (have_ring(in) != 0)
		return -1;
	size_t at = (in->off + in->len) % RING;
	size_t room = RING - in->len;
	if (room > RING - at)
		room = RING - at;
	if (room > left)
		room = (size_t)left;
	if (room == 0) {
		errno = EPROTO; /* past the credit: sbx_stdin_expect refused it already */
		return -1;
	}
	ssize_t n = read(conn, in->ring + at, room);
	if (n > 0)
		in->len += (size_t)n;
	return n;
}

ssize_t sbx_stdin_take(struct sbx_stdin *in, int conn, uint64_t left, enum sbx_stdin_how how,
                       uint8_t *scratch, size_t cap, uint64_t *grant)
{
	*grant = 0;
	if (in->fd >= 0 && in->len == 0 && how == SBX_STDIN_SPLICE) {
		ssize_t n = splice(conn, NULL, in->fd, NULL, (size_t)left,
		                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n > 0)
			consumed(in, (uint64_t)n, grant);
		if (n >= 0 || errno != EPIPE)
			return n;
		/* The program closed its stdin: drop the rest, as a write would have. */
		sbx_stdin_close(in);
	}
	if (in->fd >= 0)
		return read_ring(in, conn, left);
	ssize_t n = read(conn, scratch, left < cap ? (size_t)left : cap);
	if (n > 0)
		consumed(in, (uint64_t)n, grant);
	return n;
}

void sbx_stdin_free(struct sbx_stdin *in)
{
	sbx_stdin_close(in);
	free(in->ring);
	in->ring = NULL;
}

void sbx_sink_begin(struct sbx_sink *k, uint32_t stream, uint64_t left, int end)
{
	k->stream = stream;
	k->left = left;
	k->end = end;
	k->ring = 0;
	k->pipe_wait_ns = 0;
}

static int pipe_full(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	return poll(&p, 1, 0) == 0;
}

int sbx_sink_step(struct sbx_sink *k, int conn, struct sbx_stdin *in, uint8_t *scratch, size_t cap,
                  uint64_t *grant)
{
	ssize_t n;
	*grant = 0;
	if (in == NULL)
		n = read(conn, scratch, k->left < cap ? (size_t)k->left : cap);
	else
		n = sbx_stdin_take(in, conn, k->left, k->ring ? SBX_STDIN_RING : SBX_STDIN_SPLICE,
		                   scratch, cap, grant);
	if (n > 0) {
		k->left -= (uint64_t)n;
		k->pipe_wait_ns = 0;
		if (in != NULL && k->left == 0 && k->end)
			in->end = 1;
		return 0;
	}
	if (n == 0)
		return 1;
	if (errno == EINTR)
		return 0;
	if (errno == EINVAL && in != NULL && !k->ring) {
		k->no_splice = 1;
		k->ring = 1;
		return 0;
	}
	if (errno == EAGAIN) {
		/* Either the connection has nothing yet (poll it again) or the pipe is full (poll
		 * the pipe instead: the connection stays readable and would spin). */
		if (in != NULL && !k->ring && in->fd >= 0 && in->len == 0 && pipe_full(in->fd) &&
		    k->pipe_wait_ns == 0)
			k->pipe_wait_ns = sbx_now_ns();
		return 0;
	}
	return -1;
}

int sbx_sink_pipe(struct sbx_sink *k, const struct sbx_stdin *in, int *timeout)
{
	if (k->left == 0 || k->pipe_wait_ns == 0)
		return -1;
	int64_t left = k->pipe_wait_ns + SBX_SINK_STALL_NS - sbx_now_ns();
	if (in == NULL || in->fd < 0 || left <= 0) {
		k->ring = left <= 0;
		k->pipe_wait_ns = 0;
		return -1;
	}
	int ms = (int)((left + 999999) / 1000000);
	if (*timeout < 0 || ms < *timeout)
		*timeout = ms;
	return in->fd;
}
