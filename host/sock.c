/* Sockets inside a sandbox reached from this machine (host/session.h): a folder resolved in the
 * sandbox's root through /proc/PID/root (openat2 RESOLVE_IN_ROOT), the listener's pid, its pid
 * namespace. Used by the direct socket (direct.c) and init's sockets (resident.c). */
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

int sbx_same_pidns(pid_t a, pid_t b)
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
int sbx_connect_in(pid_t pid, const char *dir, const char *sock, struct sbx_err *e)
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
void sbx_big_buffers(int c)
{
	int big = 1 << 20;
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
}

/* The listener's pid (as this machine sees it) of a connected unix socket; 0 if unknown. */
pid_t sbx_listener(int c)
{
	struct ucred cr;
	socklen_t n = sizeof cr;
	return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0 && cr.pid > 0 ? cr.pid : 0;
}
