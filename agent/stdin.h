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

#endif
