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

static int same_ns(pid_t a, pid_t b)
{
	char pa[64], pb[64];
	struct stat sa, sb;
	snprintf(pa, sizeof pa, "/proc/%d/ns/pid", (int)a);
	snprintf(pb, sizeof pb, "/proc/%d/ns/pid", (int)b);
	return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

/* Connects to the socket sock in the folder dir (absolute, as the sandbox sees it) inside the
 * sandbox whose process pid is given, the folder resolved inside the sandbox's root. The
 * connected socket, or -1 with e set. */
static int connect_in(pid_t pid, const char *dir, const char *sock, struct sbx_err *e)
{
	char root[64], via[64];
	snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "%s", root);
	int dfd = sbx_openat2(rfd, dir[1] != '\0' ? dir + 1 : ".", O_PATH | O_DIRECTORY | O_CLOEXEC,
	                      SBX_RESOLVE_IN_ROOT | SBX_RESOLVE_NO_MAGICLINKS);
	int err = errno;
	close(rfd);
	if (dfd < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "%s inside", dir);
	snprintf(via, sizeof via, "/proc/self/fd/%d/%s", dfd, sock);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, via, strlen(via) + 1);
	/* Non-blocking: a listener that takes nothing (a full backlog) is an error, not a hang. */
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
		err = errno;
		if (c >= 0)
			close(c);
		close(dfd);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "connect %s/%s", dir, sock);
	}
	close(dfd);
	return c;
}

/* 1 MiB each way (best effort): a wake-up per MiB of a transfer, not per 200 KiB. */
static void big_buffers(int c)
{
	int big = 1 << 20;
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
}

/* The listener's pid (as this machine sees it) of a connected unix socket; 0 if unknown. */
static pid_t listener(int c)
{
	struct ucred cr;
	socklen_t n = sizeof cr;
	return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0 && cr.pid > 0 ? cr.pid : 0;
}

/* Connects to the direct socket the agent offered at path; -1 with e set. */
static int reach(pid_t pid, const char *path, struct sbx_err *e)
{
	char dir[96];
	if (!direct_shape(path, dir, sizeof dir))
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "direct socket: the agent offered '%.80s'",
		                   path);
	struct sbx_err ce;
	int c = connect_in(pid, dir, "s", &ce);
	if (c < 0)
		return sbx_err_set(e, ce.cls, ce.errnum, "direct socket: %s", ce.msg);
	pid_t l = listener(c);
	if (l == 0 || !same_ns(l, pid)) {
		close(c);
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "direct socket: the socket's listener is not in the sandbox");
	}
	return c;
}

int sbx_session_resident(struct sbx_session **out, pid_t pid, double timeout_s, struct sbx_err *e)
{
	*out = NULL;
	sbx_err_set(e, SBX_EUNAVAILABLE, 0, "no resident agent in the sandbox of process %d",
	            (int)pid);
	char dir[64];
	for (const char *at = SBX_SOCKET_DIRS;
	     sbx_dir_next(&at, SBX_RESIDENT_DIR, dir, sizeof dir);) {
		struct sbx_err ce;
		int c = connect_in(pid, dir, SBX_RESIDENT_SOCK, &ce);
		if (c < 0)
			continue;
		/* Only the sandbox's init made that listener: anything else there is a process of
		 * the sandbox posing as the agent. */
		if (listener(c) != pid) {
			close(c);
			sbx_err_set(e, SBX_EPROTOCOL, 0,
			            "resident agent: the listener at %s is not the sandbox's init",
			            dir);
			continue;
		}
		/* An init that is there answers at once: the HELLO gets at most 10 s. */
		double t = timeout_s > 0 ? timeout_s : 30;
		big_buffers(c);
		if (sbx_session_open_fd(out, c, t < 10 ? t : 10, e) != 0)
			return -1;
		sbx_session_set_timeout(*out, t);
		(*out)->resident = 1;
		return 0;
	}
	return -1;
}

static int read_exact(int c, uint8_t *b, size_t n, int64_t deadline, struct sbx_err *e)
{
	while (n > 0) {
		if (sbx_fd_wait(c, POLLIN, deadline, "keeper", e) != 0)
			return -1;
		ssize_t r = read(c, b, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return sbx_err_set(e, SBX_EUNAVAILABLE, r < 0 ? errno : 0,
			                   "keeper: no answer");
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One request and its answer on the keeper socket (agent/keeper.h): [u32 length][bytes], each
 * way. */
static int keeper_io(int c, const uint8_t *req, size_t len, uint8_t *ans, size_t cap, size_t *n,
                     int64_t deadline, struct sbx_err *e)
{
	uint8_t h[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                (uint8_t)len};
	if (send(c, h, 4, MSG_NOSIGNAL) != 4 || send(c, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "keeper: send");
	if (read_exact(c, h, 4, deadline, e) != 0)
		return -1;
	*n = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	if (*n > cap)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "keeper: answer too large");
	return read_exact(c, ans, *n, deadline, e);
}

int sbx_keeper_setup_at(pid_t pid, const uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e)
{
	sbx_err_set(e, SBX_EUNAVAILABLE, 0, "no keeper in the sandbox of process %d", (int)pid);
	char dir[64];
	for (const char *at = SBX_SOCKET_DIRS;
	     sbx_dir_next(&at, SBX_KEEPER_DIR, dir, sizeof dir);) {
		struct sbx_err ce;
		int c = connect_in(pid, dir, SBX_KEEPER_SOCK, &ce);
		if (c < 0)
			continue;
		if (listener(c) != pid) {
			close(c);
			sbx_err_set(e, SBX_EPROTOCOL, 0,
			            "keeper: the listener at %s is not the sandbox's init", dir);
			continue;
		}
		uint8_t req[96], ans[1024];
		struct sbx_msgw w;
		sbx_msgw_init(&w, req, sizeof req);
		sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SETUP);
		sbx_msgw_i64(&w, SBX_T_KEEP, 1);
		sbx_msgw_bytes(&w, SBX_T_SECRET, secret, SBX_SECRET_LEN);
		size_t n = 0;
		int rc = keeper_io(c, req, w.len, ans, sizeof ans, &n, sbx_now_ns() + 5000000000LL,
		                   e);
		memset(req, 0, sizeof req);
		close(c);
		if (rc != 0)
			return -1;
		return sbx_response_status(ans, n, e);
	}
	return -1;
}

int sbx_session_direct(struct sbx_session *s, pid_t pid, struct sbx_err *e)
{
	if (s->life_in >= 0 || s->streams != NULL || !sbx_outq_empty(&s->out))
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
	struct sbx_stream *p;
	if (sbx_call(s, &w, &p, e) != 0)
		return -1;
	char path[128] = "";
	struct sbx_field f;
	int ok = sbx_msg_find(p->resp, p->resp_len, SBX_T_PATH, &f) == 1 &&
	         sbx_field_str(&f, path, sizeof path) == 0;
	sbx_stream_free(s, p);
	if (!ok)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "direct socket: no path in the answer");
	if (!sbx_outq_empty(&s->out))
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
		s->broken = 1;
		s->broken_err = *e;
		return -1;
	}
	int in = fcntl(c, F_DUPFD_CLOEXEC, 3);
	if (in < 0) {
		close(c);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "direct socket: dup");
	}
	big_buffers(c);
	fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
	s->life_in = s->to_fd;
	s->life_out = s->from_fd;
	s->to_fd = c;
	s->from_fd = in;
	return 0;
}
