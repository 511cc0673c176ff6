/* The sockets of a sandbox's init (sbx made the sandbox): the resident agent's, which takes
 * sessions with no exec at all (docs/runners.md, "The resident agent"), and the keeper's, which
 * takes the sandbox's secret before anything else runs there (docs/supervision.md, "Trust").
 * Only a listener that is the sandbox's PID 1 itself is trusted with either. */
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

int sbx_session_resident(struct sbx_session **out, pid_t pid, double timeout_s, struct sbx_err *e)
{
	*out = NULL;
	sbx_err_set(e, SBX_EUNAVAILABLE, 0, "no resident agent in the sandbox of process %d",
	            (int)pid);
	char dir[64];
	for (const char *at = SBX_SOCKET_DIRS;
	     sbx_dir_next(&at, SBX_RESIDENT_DIR, dir, sizeof dir);) {
		struct sbx_err ce;
		int c = sbx_connect_in(pid, dir, SBX_RESIDENT_SOCK, &ce);
		if (c < 0)
			continue;
		/* Only the sandbox's init made that listener: anything else there is a process of
		 * the sandbox posing as the agent. */
		if (sbx_listener(c) != pid) {
			close(c);
			sbx_err_set(e, SBX_EPROTOCOL, 0,
			            "resident agent: the listener at %s is not the sandbox's init",
			            dir);
			continue;
		}
		/* An init that is there answers at once: the HELLO gets at most 10 s. */
		double t = timeout_s > 0 ? timeout_s : 30;
		sbx_big_buffers(c);
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
		int c = sbx_connect_in(pid, dir, SBX_KEEPER_SOCK, &ce);
		if (c < 0)
			continue;
		if (sbx_listener(c) != pid) {
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
