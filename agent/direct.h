/* The direct socket (docs/protocol.md, "DIRECT"): on request the agent listens on a unix socket
 * in a private folder; the first connection that comes from outside the agent's pid namespace
 * and sends the request's token becomes the session's channel in both directions, and the
 * exec channel's stdin stays open only as a lifeline (its end ends the agent). Everything
 * else that connects is closed unanswered. The socket and its folder go as soon as the socket
 * is taken, refused for good, or past its deadline. */
#ifndef SBX_AGENT_DIRECT_H
#define SBX_AGENT_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct sbx_direct {
	int fd; /* listening socket; -1: none */
	char dir[96];
	char path[104]; /* dir + "/s" */
	uint8_t token[SBX_DIRECT_TOKEN_LEN];
	int64_t deadline_ns;
	int refused; /* connections refused so far */
};

void sbx_direct_init(struct sbx_direct *l);

/* Makes the folder (0700, SBX_DIRECT_PREFIX and 6 random characters in the first of
 * SBX_SANDBOX_DIRS that takes it) and the
 * listening socket. 0, or -1 with errno and a message in err. */
int sbx_direct_listen(struct sbx_direct *l, const uint8_t *token, int64_t deadline_ns, char *err,
                      size_t cap);

/* Takes one pending connection: the connected socket (non-blocking) when it passed both
 * checks; -1 when it did not (closed; keep listening while l->fd >= 0: after 16 refusals the
 * listener is closed). */
int sbx_direct_take(struct sbx_direct *l);

/* Removes the socket and its folder and closes the listener (idempotent). */
void sbx_direct_close(struct sbx_direct *l);

/* Closes an offer past its deadline; returns timeout (poll's, ms, -1: none) shortened to the
 * deadline while one is open. */
int sbx_direct_timeout(struct sbx_direct *l, int timeout);

/* The switch to c, a connection sbx_direct_take passed, once the serve loop drained what it
 * had queued: with quiet set (nothing left queued or half read on the exec channel), c becomes
 * the session's channel both ways (*in_fd, and *out_fd a dup of it), the exec channel's stdin
 * the lifeline (*life_fd), and /dev/null takes stdout's number. -1 with *why (c closed, nothing
 * changed) when not quiet or out of descriptors. */
int sbx_direct_switch(int c, int quiet, int *in_fd, int *out_fd, int *life_fd, const char **why);

/* Reads the lifeline after the switch: 1 when it ended (so does the session), 0 when nothing
 * came, -1 when bytes came (the host wrote where it must not). */
int sbx_direct_life(int fd);

#endif
