/* The agent's side of TCP forwarding (docs/forwarding.md): listeners on 127.0.0.1 inside,
 * connections to addresses inside, each a stream on the session under its own credit. All its
 * sockets sit in one epoll set, so the serve loop polls one fd. Nothing is allocated until a
 * FWD_LISTEN or an OPEN arrives; a connection's buffer holds only what its socket did not take. */
#ifndef SBX_AGENT_FWD_H
#define SBX_AGENT_FWD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "frame.h"
#include "msg.h"
#include "outq.h"

struct sbx_fwd;

/* Answers a FWD_LISTEN (stream is the request's, kept as the listener id) into w; *fp is made
 * on first use. Returns -1 (with *e) only when memory runs out. */
int sbx_fwd_listen(struct sbx_fwd **fp, struct sbx_outq *out, uint32_t stream, const uint8_t *p,
                   size_t len, struct sbx_msgw *w, struct sbx_err *e);
/* Answers a FWD_UNLISTEN into w. */
void sbx_fwd_unlisten(struct sbx_fwd *f, const uint8_t *p, size_t len, struct sbx_msgw *w);

/* 1 when a DATA or CREDIT on that stream is forwarding's (an agent id, or a connection the
 * host opened). */
int sbx_fwd_owns(const struct sbx_fwd *f, uint32_t stream);

/* OPEN, RESET, and DATA or CREDIT on a stream sbx_fwd_owns. -1 with *e: the host broke the
 * protocol (or memory ran out); the session ends. */
int sbx_fwd_frame(struct sbx_fwd **fp, struct sbx_outq *out, const struct sbx_frame *fr,
                  struct sbx_err *e);

/* Before each poll: the epoll fd to watch (-1: none), timeout lowered to the next connect
 * deadline, connects past it reset, sockets re-armed that may be read again. */
int sbx_fwd_prepare(struct sbx_fwd *f, int *timeout);
/* The epoll fd was ready: accept, connect completions, reads within credit, writes. */
int sbx_fwd_step(struct sbx_fwd *f, struct sbx_err *e);

/* Resets every connection (SO_LINGER 0), closes the listeners and the epoll fd, frees. */
void sbx_fwd_free(struct sbx_fwd **fp);

#endif
