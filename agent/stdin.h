/* A job's stdin on the agent: the host's DATA bytes into the job's pipe, in order, under the
 * credit the agent grants. What the pipe cannot take at once waits in a ring of the window's
 * size. A payload still in the connection can be moved into the pipe by splice, never passing
 * through the agent's memory (uploads, docs/transfers.md). The functions that consume bytes
 * set *grant to the credit to return to the host now (0: none yet). */
#ifndef SBX_AGENT_STDIN_H
#define SBX_AGENT_STDIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "credit.h"

struct sbx_stdin {
	int fd;          /* the pipe's write end, non-blocking; -1 once closed */
	uint8_t *ring;   /* SBX_WINDOW_DEFAULT bytes, allocated when first needed */
	size_t len, off; /* len bytes held from off */
	int end;         /* no more bytes will come: fd is closed once the ring is empty */
	struct sbx_credit_rx rx;
};

/* fd < 0: a job without stdin (end is then taken as set). */
void sbx_stdin_init(struct sbx_stdin *in, int fd, int end);

/* n more payload bytes were sent by the host (arrived, or announced by a frame header with the
 * bytes still in the connection): -1 when they exceed its credit. */
int sbx_stdin_expect(struct sbx_stdin *in, uint64_t n);

/* n payload bytes at p (already expected): into the pipe at once when nothing waits, else
 * after what waits; dropped when stdin is closed. -1 (errno ENOMEM) when the ring cannot be
 * had. */
int sbx_stdin_data(struct sbx_stdin *in, const uint8_t *p, size_t n, uint64_t *grant);

/* Moves what the ring holds into the pipe (as much as fits), closes the pipe once the ring is
 * empty after the end. EPIPE (the program closed its stdin) drops what is held. */
void sbx_stdin_pump(struct sbx_stdin *in, uint64_t *grant);

enum sbx_stdin_how {
	SBX_STDIN_SPLICE, /* splice conn -> pipe when the ring is empty, else read into the ring */
	SBX_STDIN_RING,   /* read into the ring */
};

/* Takes up to left bytes of an expected payload from conn (non-blocking): into the pipe or the
 * ring as `how` says, or read into scratch (cap bytes) and dropped when stdin is closed.
 * Returns the bytes taken, 0 at conn's end, or -1 with errno: EAGAIN when nothing moved
 * (conn empty, or with SBX_STDIN_SPLICE the pipe full), EINVAL when conn cannot be spliced
 * (the caller goes on with SBX_STDIN_RING), anything else a failed read of conn. */
ssize_t sbx_stdin_take(struct sbx_stdin *in, int conn, uint64_t left, enum sbx_stdin_how how,
                       uint8_t *scratch, size_t cap, uint64_t *grant);

/* Closes the pipe; later bytes are dropped (their credit still returned). */
void sbx_stdin_close(struct sbx_stdin *in);

/* Closes and frees. */
void sbx_stdin_free(struct sbx_stdin *in);

/* The sink: an upload's DATA payload taken past the frame decoder (agent/serve.c, read_input),
 * whose bytes still in the connection go on into the job's pipe by splice, or through its ring
 * once the pipe stays full SBX_SINK_STALL_NS (a CANCEL behind the payload must not wait on a
 * stuck program) or the connection cannot be spliced. */
#define SBX_SINK_MIN (16u * 1024u) /* a payload with less than this left is not taken so */
#define SBX_SINK_STALL_NS (2 * 1000000LL)

struct sbx_sink {
	uint32_t stream;
	uint64_t left;        /* the payload's bytes still in the connection; 0: no sink */
	int end;              /* the frame had END */
	int ring;             /* the rest goes through the ring, not splice */
	int64_t pipe_wait_ns; /* since when the pipe has been full; 0: not waiting */
	int no_splice;        /* the connection cannot be spliced from (found once, for good) */
};

/* The sink takes the left bytes of stream's frame (end: the frame had END). */
void sbx_sink_begin(struct sbx_sink *k, uint32_t stream, uint64_t left, int end);

/* Moves more of the payload out of conn into in, or (in NULL: its job is gone) reads and drops
 * it; *grant as above. 0 (moved, or nothing yet), 1 at conn's end, -1 with errno when reading
 * conn failed. */
int sbx_sink_step(struct sbx_sink *k, int conn, struct sbx_stdin *in, uint8_t *scratch, size_t cap,
                  uint64_t *grant);

/* The pipe to poll for POLLOUT while the sink waits on it, or -1 (poll the connection). A wait
 * past SBX_SINK_STALL_NS turns the rest to the ring; *timeout (ms, -1: none) is shortened to
 * that moment. */
int sbx_sink_pipe(struct sbx_sink *k, const struct sbx_stdin *in, int *timeout);

#endif
