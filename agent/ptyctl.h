/* The serve loop's side of terminal sessions (docs/pty.md): PTY_SPAWN starts a holder
 * (agent/ptyhold.h); ATTACH, RESIZE, SIGNAL, STATUS, DETACH and CLOSE are passed to the
 * session's holder over its socket and its answer returned; LIST asks every holder; STREAM is a
 * job whose child relays the holder's frames to the job's stdout and stderr pipes and the job's
 * stdin to the holder, so the session's bytes move under the same credit as an exec's. */
#ifndef SBX_AGENT_PTYCTL_H
#define SBX_AGENT_PTYCTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "msg.h"

void sbx_ptyctl_spawn(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_ptyctl_forward(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_ptyctl_list(const uint8_t *req, size_t len, struct sbx_msgw *w);

struct sbx_pty_relay {
	pid_t pid;
	int fd_in, fd_out, fd_err, fd_res;
};

/* STREAM: the claim checked with the holder, then the relay child forked. -1 with *e (the
 * holder's refusal, or no holder). */
int sbx_ptyctl_stream(const uint8_t *req, size_t len, struct sbx_pty_relay *c, struct sbx_err *e);

#endif
