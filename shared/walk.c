/* The safe walk (see walk.h). */
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

/* Creating or opening a name that something else keeps changing is retried this often. */
#define TRIES 8

#ifdef SBX_WEAK_PLACEMENT
#define NOFOLLOW 0
#define RESOLVE 0
#else
#define NOFOLLOW O_NOFOLLOW
#define RESOLVE (SBX_RESOLVE_BENEATH | SBX_RESOLVE_NO_SYMLINKS | SBX_RESOLVE_NO_MAGICLINKS)
#endif

void sbx_walk_init(struct sbx_walk *w, int force_walk)
{
	w->walk = force_walk != 0;
	w->soft = 0;
	w->missing = 0;
}

static int openat2_retry(int dfd, const char *path, int flags)
{
	/* EAGAIN: a rename elsewhere raced the lookup; the kernel asks for a retry. */
	for (int i = 0; i < 64; i++) {
		int fd = sbx_openat2(dfd, path, (uint64_t)flags, RESOLVE);
		if (fd >= 0 || errno != EAGAIN)
			return fd;
	}
	return -1;
}

/* openat2 missing (old kernel) or filtered (seccomp): the component walk takes over. */
static int no_openat2(int err)
{
	return err == ENOSYS || err == EPERM || err == E2BIG;
}

int sbx_walk_open(struct sbx_walk *w, int dfd, const char *comp, int how)
{
	/* With O_NOFOLLOW|O_DIRECTORY a symlink fails with ENOTDIR or ELOOP. */
	int flags = how | O_DIRECTORY | NOFOLLOW | O_CLOEXEC;
	if (!w->walk) {
		int fd = openat2_retry(dfd, comp, flags);
		if (fd >= 0 || !no_openat2(errno))
			return fd;
		w->walk = 1;
	}
	return openat(dfd, comp, flags);
}

/* fmt holds two %s: what, then comp as it may be shown. */
static int refuse(struct sbx_err *e, int err, const char *fmt, const char *what, const char *comp)
{
	char c[80];
	return sbx_err_set(e, SBX_ETRANSFER, err, fmt, what, sbx_err_show(comp, c, sizeof c));
}

/* One component: comp under dfd opened as a folder (how), made 0755 when missing and create is
 * set. */
static int step(struct sbx_walk *w, int dfd, const char *comp, int create, int how,
                const char *what, struct sbx_err *e)
{
	for (int tries = 0; tries < TRIES; tries++) {
		int fd = sbx_walk_open(w, dfd, comp, how);
		if (fd >= 0)
			return fd;
		int err = errno;
		if (err == ENOENT && create) {
			if (mkdirat(dfd, comp, 0700) != 0) {
				if (errno == EEXIST)
					continue;
				return refuse(e, errno, "%scannot create directory %s", "", comp);
			}
			/* mkdirat's mode passes through the umask: set 0755 through an fd. */
			fd = sbx_walk_open(w, dfd, comp, O_RDONLY);
			if (fd < 0)
				continue;
			if (fchmod(fd, 0755) != 0) {
				err = errno;
				close(fd);
				return refuse(e, err, "%scannot set the mode of %s", "", comp);
			}
			return fd;
		}
		if (err == ENOENT && w->soft) {
			w->missing = 1;
			return -1;
		}
		if (err == ENOENT)
			return refuse(e, 0, "%spath component %s does not exist", what, comp);
		if (err == ENOTDIR || err == ELOOP || err == EXDEV) {
			struct stat st;
			if (fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			if (S_ISLNK(st.st_mode))
				return refuse(e, 0,
				              "%spath component %s is a symlink (never followed)",
				              what, comp);
			if (!S_ISDIR(st.st_mode))
				return refuse(e, 0, "%spath component %s is not a directory", what,
				              comp);
			continue;
		}
		return refuse(e, err, "%scannot open path component %s", what, comp);
	}
	return refuse(e, 0, "%spath component %s keeps changing", what, comp);
}

int sbx_walk_dir(struct sbx_walk *w, int root, char *path, int create, int how, const char *what,
                 struct sbx_err *e)
{
	w->missing = 0;
	if (!w->walk) {
		int fd = openat2_retry(root, path, how | O_DIRECTORY | NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			return fd;
		if (no_openat2(errno))
			w->walk = 1;
		/* Otherwise a missing folder, a symlink, or a path past PATH_MAX: the walk creates
		 * the first and names the second precisely. */
	}
	int cur = root;
	char *c = path;
	for (;;) {
		char *end = strchr(c, '/');
		if (end != NULL)
			*end = '\0';
		int fd = step(w, cur, c, create, end != NULL ? O_PATH : how, what, e);
		if (end != NULL)
			*end = '/';
		if (cur != root)
			close(cur);
		if (fd < 0 || end == NULL)
			return fd;
		cur = fd;
		c = end + 1;
	}
}
