/* The agent's side of the direct socket (agent/direct.h): the offer, the checks, the switch. */
#include "direct.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "paths.h"
#include "sys.h"

#define MAX_REFUSED 16
#define TOKEN_WAIT_MS 2000

void sbx_direct_init(struct sbx_direct *l)
{
	memset(l, 0, sizeof *l);
	l->fd = -1;
}

int sbx_direct_listen(struct sbx_direct *l, const uint8_t *token, int64_t deadline_ns, char *err,
                      size_t cap)
{
	sbx_direct_close(l);
	l->refused = 0;
	l->deadline_ns = deadline_ns;
	memcpy(l->token, token, SBX_DIRECT_TOKEN_LEN);
	int saved = 0;
	for (const char *at = SBX_SANDBOX_DIRS;
	     sbx_dir_next(&at, SBX_DIRECT_PREFIX "XXXXXX", l->dir, sizeof l->dir);) {
		if (mkdtemp(l->dir) != NULL) {
			saved = 0;
			break;
		}
		saved = errno;
		l->dir[0] = '\0';
	}
	if (l->dir[0] == '\0') {
		snprintf(err, cap, "no folder for the direct socket");
		errno = saved;
		return -1;
	}
	snprintf(l->path, sizeof l->path, "%s/s", l->dir);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	_Static_assert(sizeof l->path <= sizeof a.sun_path, "a direct socket path fits sun_path");
	memcpy(a.sun_path, l->path, strlen(l->path) + 1);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    listen(l->fd, 4) != 0) {
		saved = errno;
		snprintf(err, cap, "direct socket %s: %s", l->path, strerror(saved));
		sbx_direct_close(l);
		errno = saved;
		return -1;
	}
	return 0;
}

/* 1 when the peer is outside the agent's pid namespace: its pid does not map here (0). A
 * process in the sandbox, or in a namespace below it, always has a pid here. */
static int from_outside(int fd)
{
	struct ucred c;
	socklen_t n = sizeof c;
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &n) == 0 && n == sizeof c && c.pid == 0;
}

static int token_ok(struct sbx_direct *l, int fd)
{
	uint8_t got[SBX_DIRECT_TOKEN_LEN];
	size_t have = 0;
	int64_t t0 = sbx_now_ns();
	while (have < sizeof got) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, TOKEN_WAIT_MS) <= 0)
			return 0;
		ssize_t r = read(fd, got + have, sizeof got - have);
		if (r <= 0 && !(r < 0 && (errno == EINTR || errno == EAGAIN)))
			return 0;
		have += r > 0 ? (size_t)r : 0;
		if (sbx_now_ns() - t0 > TOKEN_WAIT_MS * 1000000LL)
			return 0;
	}
	uint8_t diff = 0;
	for (size_t i = 0; i < sizeof got; i++)
		diff |= (uint8_t)(got[i] ^ l->token[i]);
	return diff == 0;
}

int sbx_direct_take(struct sbx_direct *l)
{
	if (l->fd < 0)
		return -1;
	int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0)
		return -1;
	if (from_outside(c) && token_ok(l, c)) {
		uint8_t ack = SBX_DIRECT_ACK;
		struct pollfd p = {c, POLLOUT, 0};
		if (poll(&p, 1, TOKEN_WAIT_MS) == 1 && write(c, &ack, 1) == 1) {
			sbx_direct_close(l);
			return c;
		}
	}
	close(c);
	if (++l->refused >= MAX_REFUSED)
		sbx_direct_close(l);
	return -1;
}

void sbx_direct_close(struct sbx_direct *l)
{
	if (l->fd >= 0) {
		close(l->fd);
		l->fd = -1;
	}
	if (l->path[0] != '\0')
		unlink(l->path);
	if (l->dir[0] != '\0')
		rmdir(l->dir);
	l->path[0] = l->dir[0] = '\0';
}

int sbx_direct_timeout(struct sbx_direct *l, int timeout)
{
	if (l->fd < 0)
		return timeout;
	int64_t left = l->deadline_ns - sbx_now_ns();
	if (left <= 0) {
		sbx_direct_close(l);
		return timeout;
	}
	int ms = (int)((left + 999999) / 1000000);
	return timeout < 0 || ms < timeout ? ms : timeout;
}

int sbx_direct_switch(int c, int quiet, int *in_fd, int *out_fd, int *life_fd, const char **why)
{
	if (!quiet) {
		close(c);
		*why = "direct socket: the exec channel was not quiet at the switch";
		return -1;
	}
	int out = fcntl(c, F_DUPFD_CLOEXEC, 3);
	if (out < 0) {
		close(c);
		*why = "direct socket: dup failed";
		return -1;
	}
	int big = 1 << 20;
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	/* stdout is not written again; /dev/null keeps its number taken. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, *out_fd);
		close(null);
	}
	*life_fd = *in_fd;
	*in_fd = c;
	*out_fd = out;
	return 0;
}

int sbx_direct_life(int fd)
{
	char b[64];
	ssize_t n = read(fd, b, sizeof b);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
		return 1;
	return n > 0 ? -1 : 0;
}
