/* The run folder's files, opened and read one safe way (agent/rundir.h). */
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int sbx_rundir_open(const char *dir, int create, struct sbx_err *e)
{
	if (create && mkdir(dir, 0700) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUSAGE, errno, "create run folder %s", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno,
		                   "run folder %s (a symlink is never followed)", dir);
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		close(fd);
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "run folder %s must be owned by uid %u and not writable by "
		                   "group or other",
		                   dir, (unsigned)geteuid());
	}
	return fd;
}

int sbx_rundir_exists(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int sbx_rundir_is_file(int dfd, const char *name)
{
	return sbx_rundir_size(dfd, name) >= 0;
}

int64_t sbx_rundir_size(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)
	               ? (int64_t)st.st_size
	               : -1;
}

int sbx_rundir_create(int dfd, const char *name, struct sbx_err *e)
{
	for (int i = 0;; i++) {
		int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		                0600);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST || i > 0)
			return sbx_err_set(e, SBX_ETRANSFER, errno, "create %s", name);
		unlinkat(dfd, name, 0);
	}
}

static const char *kind(mode_t m)
{
	return S_ISFIFO(m)   ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISLNK(m)  ? "a symlink"
	       : S_ISDIR(m)  ? "a folder"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	                     : "a special file";
}

int sbx_rundir_open_file(int dfd, const char *name, struct stat *st, struct sbx_err *e)
{
	/* Looked at first, so nothing but a regular file is ever opened (opening a device can
	 * act); checked again on the descriptor, since the name may change in between. */
	if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) != 0)
		return sbx_err_set(e, errno == ENOENT ? SBX_EUSAGE : SBX_ETRANSFER, errno, "%s",
		                   name);
	if (!S_ISREG(st->st_mode))
		return sbx_err_set(e, SBX_ETRANSFER, 0, "%s is %s, not a regular file", name,
		                   kind(st->st_mode));
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? sbx_err_set(e, SBX_ETRANSFER, 0,
		                                    "%s is a symlink, not a regular file", name)
		                      : sbx_err_set(e, errno == ENOENT ? SBX_EUSAGE : SBX_ETRANSFER,
		                                    errno, "%s", name);
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return sbx_err_set(e, SBX_ETRANSFER, 0, "%s is %s, not a regular file", name,
		                   kind(st->st_mode));
	}
	return fd;
}

ssize_t sbx_rundir_read(int dfd, const char *name, char *buf, size_t cap, struct sbx_err *e)
{
	struct stat st;
	int fd = sbx_rundir_open_file(dfd, name, &st, e);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			close(fd);
			return sbx_err_set(e, SBX_ETRANSFER, err, "read %s", name);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	close(fd);
	return (ssize_t)n;
}

int sbx_rundir_write(int dfd, const char *name, const void *data, size_t len, struct sbx_err *e)
{
	char tmp[96];
	snprintf(tmp, sizeof tmp, ".%s.%ld.tmp", name, (long)getpid());
	unlinkat(dfd, tmp, 0); /* one this process left behind (a crash, a recycled pid) */
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "create %s", tmp);
	const char *p = data;
	size_t left = len;
	int err = 0;
	while (left > 0 && err == 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			err = w < 0 ? errno : EIO;
		else
			p += w, left -= (size_t)w;
	}
	if (err == 0 && fsync(fd) != 0)
		err = errno;
	if (close(fd) != 0 && err == 0)
		err = errno;
	if (err == 0 && renameat(dfd, tmp, dfd, name) != 0)
		err = errno;
	if (err != 0) {
		unlinkat(dfd, tmp, 0);
		return sbx_err_set(e, SBX_ETRANSFER, err, "write %s", name);
	}
	return 0;
}

int sbx_rundir_activation(int dfd, int64_t *n, struct sbx_err *e)
{
	*n = 1;
	if (!sbx_rundir_exists(dfd, "activation"))
		return 0;
	char buf[24];
	ssize_t len = sbx_rundir_read(dfd, "activation", buf, sizeof buf, e);
	if (len < 0)
		return -1;
	int64_t v = 0;
	ssize_t i = 0;
	for (; i < len && i < 18 && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (buf[i] - '0');
	if (i == 0 || v <= 0 || (i < len && !(buf[i] == '\n' && i + 1 == len)))
		return sbx_err_set(e, SBX_ETRANSFER, 0,
		                   "activation does not hold an activation number");
	*n = v;
	return 0;
}

int sbx_rundir_alive(int dfd)
{
	struct stat st;
	struct sbx_err e;
	int fd = sbx_rundir_open_file(dfd, "supervisor.pid", &st, &e);
	if (fd < 0)
		return 0;
	int alive = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return alive;
}

int sbx_rundir_rearm(const char *dir, struct sbx_err *e)
{
	static const char *const moved[] = {"receipt.sig",    "output.log", "state",
	                                    "supervisor.pid", "stop",       "expire",
	                                    "receipt.json"};
	int fd = sbx_rundir_open(dir, 0, e), sub = -1, rc = -1;
	if (fd < 0)
		return -1;
	int64_t n;
	char name[40];
	if (sbx_rundir_exists(fd, "closing")) {
		sbx_err_set(e, SBX_EUSAGE, 0, "run folder %s is closing", dir);
		goto out;
	}
	if (sbx_rundir_alive(fd)) {
		sbx_err_set(e, SBX_EUSAGE, 0, "run folder %s: a run is still alive", dir);
		goto out;
	}
	/* Never a guess: a default number would move this activation's files over an earlier
	 * one's. */
	if (sbx_rundir_activation(fd, &n, e) != 0) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		sbx_err_set(e, SBX_EUSAGE, 0, "run folder %s: %s", dir, why);
		goto out;
	}
	snprintf(name, sizeof name, "activation-%" PRId64, n);
	if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
		sbx_err_set(e, SBX_ETRANSFER, errno, "create %s/%s", dir, name);
		goto out;
	}
	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		sbx_err_set(e, SBX_ETRANSFER, errno, "open %s/%s", dir, name);
		goto out;
	}
	/* No receipt, but the previous rearm moved it before it could bump `activation`. */
	int resumed =
	        !sbx_rundir_exists(fd, "receipt.json") && sbx_rundir_exists(sub, "receipt.json");
	if (!resumed && !sbx_rundir_exists(fd, "receipt.json")) {
		sbx_err_set(e, SBX_EUSAGE, 0, "run folder %s has no receipt yet", dir);
		goto out;
	}
	for (size_t i = 0; !resumed && i < sizeof moved / sizeof moved[0]; i++) {
		if (renameat(fd, moved[i], sub, moved[i]) != 0 && errno != ENOENT) {
			sbx_err_set(e, SBX_ETRANSFER, errno, "move %s into %s", moved[i], name);
			goto out;
		}
	}
	char num[24];
	int len = snprintf(num, sizeof num, "%" PRId64 "\n", n + 1);
	rc = sbx_rundir_write(fd, "activation", num, (size_t)len, e);
out:
	if (sub >= 0)
		close(sub);
	close(fd);
	return rc;
}
