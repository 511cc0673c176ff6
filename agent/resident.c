/* The resident agent's socket (agent/resident.h). */
#include "resident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "paths.h"
#include "proto.h"

/* A folder of ours at parent/name: made 0700, or one already there that is a real folder
 * owned by us (never followed through a symlink). Its fd, or -1. */
static int own_dir(const char *parent, const char *name, int create)
{
	int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (create && mkdirat(pfd, name, 0700) != 0 && errno != EEXIST) {
		close(pfd);
		return -1;
	}
	int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(pfd);
	struct stat st;
	if (dfd < 0 || fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (create ? fchmod(dfd, 0700) != 0 : (st.st_mode & 022) != 0)) {
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	return dfd;
}

int sbx_sock_listen(const char *dir, const char *sock, char *err, size_t cap)
{
	int saved = ENOENT;
	char where[16];
	for (const char *at = SBX_SOCKET_DIRS; sbx_dir_next(&at, "", where, sizeof where);) {
		int dfd = own_dir(where, dir, 1);
		if (dfd < 0) {
			saved = errno;
			continue;
		}
		unlinkat(dfd, sock, 0); /* a restarted container's old socket */
		/* Bound from inside the folder (the caller is single-threaded): the name cannot be
		 * switched under us, and /proc is not needed. */
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int ok = fd >= 0 && fchdir(dfd) == 0 &&
		         bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 64) == 0;
		saved = errno;
		if (chdir("/") != 0) {
			/* "/" always resolves; nothing else to do */
		}
		if (ok) {
			close(dfd);
			return fd;
		}
		if (fd >= 0)
			close(fd);
		close(dfd);
	}
	snprintf(err, cap, "no folder for the %s socket: %s", dir, strerror(saved));
	errno = saved;
	return -1;
}

int sbx_sock_connect(const char *dir, const char *sock)
{
	int saved = ENOENT;
	char where[16], path[64];
	for (const char *at = SBX_SOCKET_DIRS; sbx_dir_next(&at, "", where, sizeof where);) {
		int dfd = own_dir(where, dir, 0);
		if (dfd < 0)
			continue;
		close(dfd);
		/* By name: a folder swapped after the check can only put another listener there,
		 * which the callers' protocol does not trust (agent/keeper.h). */
		const char *one = where;
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		if (!sbx_dir_next(&one, dir, path, sizeof path) ||
		    snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", path, sock) >=
		            (int)sizeof a.sun_path)
			continue;
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int rc = fd >= 0 ? connect(fd, (struct sockaddr *)&a, sizeof a) : -1;
		saved = errno;
		if (rc == 0)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	errno = saved;
	return -1;
}

int sbx_resident_listen(char *err, size_t cap)
{
	return sbx_sock_listen(SBX_RESIDENT_DIR, SBX_RESIDENT_SOCK, err, cap);
}

int sbx_resident_accept(int lfd)
{
	int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return -1;
	/* Outside this pid namespace, the peer's pid does not map here: 0. Every process of the
	 * container, and of any namespace below it, has a pid here. */
	struct ucred cr;
	socklen_t n = sizeof cr;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &n) != 0 || n != sizeof cr || cr.pid != 0) {
		close(c);
		return -1;
	}
	return c;
}
