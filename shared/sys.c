/* The kernel calls of shared/sys.h. */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define CLOSE_RANGE_CLOEXEC_FLAG 4u

/* struct open_how of linux/openat2.h. */
struct open_how_v0 {
	uint64_t flags, mode, resolve;
};

int sbx_openat2(int dfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how_v0 how = {.flags = flags, .mode = 0, .resolve = resolve};
	return (int)syscall(SYS_openat2, dfd, path, &how, sizeof how);
}

int sbx_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int sbx_pidfd_signal(int fd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

int sbx_renameat2(int odir, const char *oname, int ndir, const char *nname, unsigned flags)
{
#ifdef SYS_renameat2
	return (int)syscall(SYS_renameat2, odir, oname, ndir, nname, flags);
#else
	(void)odir, (void)oname, (void)ndir, (void)nname, (void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

long sbx_getdents64(int fd, void *buf, size_t len)
{
	return syscall(SYS_getdents64, fd, buf, len);
}

static void close_one(int fd, int cloexec)
{
	if (cloexec)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	else
		close(fd);
}

/* The descriptors /proc/self/fd lists, read with getdents64 into the stack; -1 without /proc. */
static int close_listed(int first, int cloexec)
{
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	_Alignas(8) char buf[4096];
	long n;
	while ((n = sbx_getdents64(dfd, buf, sizeof buf)) > 0) {
		for (long pos = 0; pos < n;) {
			unsigned short reclen;
			memcpy(&reclen, buf + pos + 16, sizeof reclen);
			if (reclen < 20 || reclen > n - pos)
				break;
			const char *name = buf + pos + 19;
			pos += reclen;
			int fd = 0, digits = 0;
			for (; *name >= '0' && *name <= '9' && fd < (1 << 24); name++, digits++)
				fd = fd * 10 + (*name - '0');
			if (digits > 0 && *name == '\0' && fd >= first && fd != dfd)
				close_one(fd, cloexec);
		}
	}
	close(dfd);
	return 0;
}

void sbx_close_from(int first, int cloexec)
{
	if (syscall(SYS_close_range, (unsigned)first, ~0u,
	            cloexec ? CLOSE_RANGE_CLOEXEC_FLAG : 0u) == 0)
		return;
	if (close_listed(first, cloexec) == 0)
		return;
	struct rlimit rl;
	long max = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)max)
		max = (long)rl.rlim_cur;
	for (long fd = first; fd < max; fd++)
		close_one((int)fd, cloexec);
}

static int64_t clock_of(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t sbx_now_ns(void)
{
	return clock_of(CLOCK_MONOTONIC);
}

int64_t sbx_wall_ns(void)
{
	return clock_of(CLOCK_REALTIME);
}
