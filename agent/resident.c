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

/* A folder of ours at parent/.sbx-serve: made 0700, or one already there that is a real
 * folder owned by root (never followed through a symlink). Its fd, or -1. */
static int own_dir(const char *parent)
{
	int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (mkdirat(pfd, SBX_RESIDENT_NAME, 0700) != 0 && errno != EEXIST) {
		close(pfd);
		return -1;
	}
	int dfd = openat(pfd, SBX_RESIDENT_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(pfd);
	struct stat st;
	if (dfd < 0 || fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    fchmod(dfd, 0700) != 0) {
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	unlinkat(dfd, "s", 0); /* a restarted container's old socket */
	return dfd;
}

int sbx_resident_listen(char *err, size_t cap)
{
	static const char *const where[] = {"/", "/run", "/dev/shm", "/tmp"};
	int saved = ENOENT;
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
		int dfd = own_dir(where[i]);
		if (dfd < 0) {
			saved = errno;
			continue;
		}
		/* Bound from inside the folder (init is single-threaded): the name cannot be
		 * switched under us, and /proc is not needed. */
		struct sockaddr_un a = {.sun_family = AF_UNIX, .sun_path = "s"};
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
	snprintf(err, cap, "no folder for the resident socket: %s", strerror(saved));
	errno = saved;
	return -1;
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
