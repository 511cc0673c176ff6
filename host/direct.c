/* The host's side of the direct socket (docs/protocol.md, "DIRECT"): once a session is open
 * through an exec channel whose far side runs on this machine (podman's containers), the
 * agent offers a unix socket and the session moves there, leaving the exec channel's relays
 * (podman, conmon) out of every later round trip. The agent's answer is the sandbox's word:
 * the path is checked for its one shape, resolved inside the sandbox's root (openat2
 * RESOLVE_IN_ROOT through /proc/PID/root), and the listener must be a process of the
 * sandbox's pid namespace before the token is sent. Any failure leaves the session where it
 * was, on the exec channel. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "session.h"
#include "paths.h"
#include "sys.h"

/* One of SBX_SANDBOX_DIRS + "/" SBX_DIRECT_PREFIX + 6 of [A-Za-z0-9] + "/s": what
 * agent/direct.c makes. The folder part (without "/s") goes to dir. */
static int direct_shape(const char *p, char *dir, size_t cap)
{
	char want[64];
	for (const char *at = SBX_SANDBOX_DIRS;
	     sbx_dir_next(&at, SBX_DIRECT_PREFIX, want, sizeof want);) {
		size_t n = strlen(want);
		if (strncmp(p, want, n) != 0)
			continue;
		const char *x = p + n;
		for (int k = 0; k < 6; k++)
			if (!((x[k] >= 'a' && x[k] <= 'z') || (x[k] >= 'A' && x[k] <= 'Z') ||
			      (x[k] >= '0' && x[k] <= '9')))
				return 0;
		if (strcmp(x + 6, "/s") != 0 || (size_t)(x + 6 - p) >= cap)
			return 0;
		memcpy(dir, p, (size_t)(x + 6 - p));
		dir[x + 6 - p] = '\0';
		return 1;
	}
	return 0;
}

/* Connects to the direct socket the agent offered at path; -1 with e set. */
static int reach(pid_t pid, const char *path, struct sbx_err *e)
{
	char dir[96];
	if (!direct_shape(path, dir, sizeof dir))
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "direct socket: the agent offered '%.80s'",
		                   path);
	struct sbx_err ce;
	int c = sbx_connect_in(pid, dir, "s", &ce);
	if (c < 0)
		return sbx_err_set(e, ce.cls, ce.errnum, "direct socket: %s", ce.msg);
	pid_t l = sbx_listener(c);
	if (l == 0 || !sbx_same_pidns(l, pid)) {
		close(c);
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "direct socket: the socket's listener is not in the sandbox");
	}
	return c;
}

int sbx_session_direct(struct sbx_session *s, pid_t pid, struct sbx_err *e)
{
	if (s->life_in >= 0 || s->eng.streams != NULL || !sbx_outq_empty(&s->eng.out))
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "direct socket: only on a quiet session, once");
	uint8_t token[SBX_DIRECT_TOKEN_LEN];
	if (getrandom(token, sizeof token, 0) != (ssize_t)sizeof token)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "direct socket: getrandom");
	uint8_t buf[96];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DIRECT);
	sbx_msgw_bytes(&w, SBX_T_TOKEN, token, sizeof token);
	struct sbx_op *p;
	if (sbx_call(s, &w, &p, e) != 0)
		return -1;
	char path[128] = "";
	struct sbx_field f;
	int ok = sbx_msg_find(p->resp, p->resp_len, SBX_T_PATH, &f) == 1 &&
	         sbx_field_str(&f, path, sizeof path) == 0;
	sbx_op_free(p);
	if (!ok)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "direct socket: no path in the answer");
	if (!sbx_outq_empty(&s->eng.out))
		return sbx_err_set(e, SBX_EUSAGE, 0, "direct socket: the session was not quiet");
	/* From here the agent may switch at any moment: nothing more goes on its stdin. */
	int c = reach(pid, path, e);
	if (c < 0)
		return -1;
	int64_t deadline = sbx_now_ns() + (int64_t)(s->timeout * 1e9);
	uint8_t ack = 0;
	ssize_t r = -1;
	/* MSG_NOSIGNAL: a refusal may close the socket first; never a SIGPIPE in the caller. */
	int refused = 0;
	if (send(c, token, sizeof token, MSG_NOSIGNAL) != (ssize_t)sizeof token)
		refused = errno == EPIPE || errno == ECONNRESET;
	else if (sbx_fd_wait(c, POLLIN, deadline, "direct socket", e) == 0)
		r = read(c, &ack, 1);
	/* A refused connection is closed unread by the agent: EOF, or a reset when the token was
	 * still unread there. The agent stays on the exec channel. */
	if (refused || r == 0 || (r < 0 && errno == ECONNRESET)) {
		close(c);
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "direct socket: the agent refused it");
	}
	if (r != 1 || ack != SBX_DIRECT_ACK) {
		close(c);
		/* The agent may have switched already: the session cannot go on either way. */
		sbx_err_set(e, SBX_EUNAVAILABLE, 0,
		            "direct socket: no answer from the agent on it");
		return sbx_session_fail(s, SBX_EUNAVAILABLE, 0,
		                        "direct socket: no answer from the agent on it");
	}
	int in = fcntl(c, F_DUPFD_CLOEXEC, 3);
	if (in < 0) {
		close(c);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "direct socket: dup");
	}
	sbx_big_buffers(c);
	fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
	s->life_in = s->to_fd;
	s->life_out = s->from_fd;
	s->to_fd = c;
	s->from_fd = in;
	return 0;
}
