/* The agent's side of TCP forwarding (docs/forwarding.md): listeners inside for FWD_LISTEN,
 * connects for the host's OPEN, every connection a stream under its own credit
 * (shared/fwdtab.c). All its sockets are in one epoll set; serve polls that one fd and calls
 * sbx_fwda_step when it is ready. Nothing is allocated before the first forward. */
#ifndef SBX_AGENT_FWD_H
#define SBX_AGENT_FWD_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "fwdtab.h"
#include "msg.h"
#include "outq.h"
#include "proto.h"

struct sbx_fwda_lis {
	uint32_t id; /* the FWD_LISTEN's stream; 0: the slot is free */
	size_t max_conn;
	size_t n;
	struct sbx_fwda_sock *sock[SBX_FWD_MAX_PORTS];
};

struct sbx_fwda {
	int ep; /* -1 until a forward starts */
	struct sbx_outq *out;
	struct sbx_fwda_lis lis[SBX_FWD_MAX_LISTENERS];
	struct sbx_fwd_tab tab;
	uint32_t next_id;
	int bulk_wait; /* a socket waits for room in the bulk lane */
};

void sbx_fwda_init(struct sbx_fwda *a, struct sbx_outq *out);

/* FWD_LISTEN on stream id and FWD_UNLISTEN: the answer into w. */
void sbx_fwda_listen(struct sbx_fwda *a, uint32_t id, const uint8_t *req, size_t len,
                     struct sbx_msgw *w);
void sbx_fwda_unlisten(struct sbx_fwda *a, const uint8_t *req, size_t len, struct sbx_msgw *w);

/* A frame from the host: OPEN and RESET, and DATA or CREDIT on a connection. 1: taken; 0: not
 * a connection's (a job's DATA or CREDIT); -1: the host broke a rule (*why). */
int sbx_fwda_frame(struct sbx_fwda *a, const struct sbx_frame *f, const char **why);

/* 1 when id is an open connection stream (not a job's). */
int sbx_fwda_has(struct sbx_fwda *a, uint32_t id);

/* The fd to poll for POLLIN (-1: none), the poll timeout lowered to the next connect's
 * deadline, and the step once it is ready or the timeout came. */
int sbx_fwda_fd(const struct sbx_fwda *a);
int sbx_fwda_timeout(const struct sbx_fwda *a, int timeout_ms);
void sbx_fwda_step(struct sbx_fwda *a);

/* The bulk lane has room again: sockets held back for it are read again. */
void sbx_fwda_room(struct sbx_fwda *a);

/* The session ends: every connection reset (SO_LINGER 0), the listeners closed, all freed. */
void sbx_fwda_close(struct sbx_fwda *a);

#endif
