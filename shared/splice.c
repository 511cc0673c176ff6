/* The staging pipe (splice.h). */
#include "splice.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frame.h"
#include "proto.h"

void sbx_splice_open(struct sbx_splice *st, int out_fd)
{
	struct stat sb;
	int p[2];
	st->r = st->w = -1;
	st->limit = 0;
	if (fstat(out_fd, &sb) != 0 || !(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)) ||
	    pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
		return;
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	int cap = fcntl(p[1], F_GETPIPE_SZ);
	if (cap < 2 * (int)SBX_DATA_CHUNK) {
		close(p[0]);
		close(p[1]);
		return;
	}
	st->r = p[0];
	st->w = p[1];
	st->limit = (size_t)cap / 2;
}

void sbx_splice_close(struct sbx_splice *st)
{
	if (st->r >= 0) {
		close(st->r);
		close(st->w);
	}
	st->r = st->w = -1;
}

ssize_t sbx_splice_in(struct sbx_splice *st, struct sbx_outq *q, int from_fd, size_t max,
                      uint32_t stream, uint8_t ch)
{
	if (st->r < 0 || q->spliced + max > st->limit) {
		errno = EAGAIN;
		return -1;
	}
	ssize_t n = splice(from_fd, NULL, st->w, NULL, max, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n <= 0)
		return n;
	if (sbx_outq_push_spliced(q, SBX_LANE_BULK, SBX_F_DATA, 0, stream, &ch, 1, (size_t)n) != 0)
		return SBX_SPLICE_LOST;
	return n;
}

int sbx_splice_full(const struct sbx_splice *st, const struct sbx_outq *q)
{
	return st->r >= 0 && q->spliced + SBX_DATA_CHUNK > st->limit;
}

int sbx_splice_out(struct sbx_splice *st, struct sbx_outq *q, int fd)
{
	for (int round = 0; round < 16; round++) {
		size_t due = sbx_outq_splice_due(q);
		size_t want = due;
		struct iovec iov[32];
		int n = 0;
		ssize_t w;
		if (due > 0) {
			w = splice(st->r, NULL, fd, NULL, due, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (w == 0)
				errno = EIO; /* the payload promised cannot follow its head */
		} else {
			n = sbx_outq_iov(q, iov, 32);
			if (n == 0)
				return 0;
			w = writev(fd, iov, n);
			for (int i = 0; i < n; i++)
				want += iov[i].iov_len;
		}
		if (w == 0 && due == 0)
			return 0;
		if (w <= 0)
			return w < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
		if (due > 0)
			sbx_outq_spliced(q, (size_t)w);
		else
			sbx_outq_advance(q, (size_t)w);
		if ((size_t)w < want)
			return 0;
	}
	return 0;
}
