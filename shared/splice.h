/* The staging pipe of one end of a connection: DATA payloads moved from a source pipe (a
 * job's output, an upload's archive) into it with splice and from it to the channel the same
 * way, so they are never copied through the process's memory. The frames themselves wait in
 * the output queue as spliced frames (outq.h); this file does the I/O around it. */
#ifndef SBX_SPLICE_H
#define SBX_SPLICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "outq.h"

struct sbx_splice {
	int r, w;     /* the pipe; -1 when there is none */
	size_t limit; /* payload bytes it may hold: half its size, so a move never finds it
	                 full even with part-filled pages */
};

/* A staging pipe when out_fd takes a splice (a pipe or a socket); st->r = -1 otherwise (a
 * tty, or no pipe to be had): the caller then copies as before. */
void sbx_splice_open(struct sbx_splice *st, int out_fd);
void sbx_splice_close(struct sbx_splice *st);

/* Moves up to max bytes from from_fd into the pipe and queues their DATA frame (bulk lane,
 * payload ch then the bytes) for stream. The count (> 0); 0 at from_fd's end; -1 with errno
 * when nothing was moved (EAGAIN: nothing there yet, or the pipe holds its limit; EINVAL:
 * from_fd cannot be spliced), and the caller reads the usual way; SBX_SPLICE_LOST when the
 * bytes are staged but their frame could not be queued (no memory): the connection is lost. */
#define SBX_SPLICE_LOST (-2)
ssize_t sbx_splice_in(struct sbx_splice *st, struct sbx_outq *q, int from_fd, size_t max,
                      uint32_t stream, uint8_t ch);

/* 1 when the pipe holds so much that a whole DATA chunk would not fit: the caller waits for
 * sbx_splice_out to move it on rather than read the source into memory (a copy, and its
 * frame queued behind the pipe's anyway). 0 when there is no pipe. */
int sbx_splice_full(const struct sbx_splice *st, const struct sbx_outq *q);

/* Writes what q holds to fd, the spliced payloads from the pipe, until fd would block or
 * nothing is left (at most 16 writes: the caller polls between calls). 0, or -1 with errno
 * (EIO: the pipe lacks a payload its frame promised). */
int sbx_splice_out(struct sbx_splice *st, struct sbx_outq *q, int fd);

#endif
