/* Tree moves and removals through directory fds (see treemove.h). */
#include "treemove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

static int rename2(int odir, const char *oname, int ndir, const char *nname, unsigned flags)
{
#ifdef SYS_renameat2
	return (int)syscall(SYS_renameat2, odir, oname, ndir, nname, flags);
#else
	(void)odir, (void)oname, (void)ndir, (void)nname, (void)flags;
	errno = ENOSYS;
	return -1;
#endif
}

/* Opens a directory entry for reading without following a link; a directory the caller owns
 * but may not read or search is opened up to 0700 first (through an O_PATH fd, never by
 * name). */
static int open_subdir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return fd;
	int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	int rc = chmod(proc, 0700);
	close(pfd);
	if (rc != 0) {
		errno = EACCES;
		return -1;
	}
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Directory entries other than . and .., one at a time; NULL at the end. */
static const char *next_name(DIR *d)
{
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			return de->d_name;
	return NULL;
}

static int rm_in(int fd, int depth, struct sbx_err *e);

int sbx_rmtree_at(int dirfd, const char *name, struct sbx_err *e)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0
		                       : sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
			return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", name);
		return 0;
	}
	int fd = open_subdir(dirfd, name);
	if (fd < 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", name);
	int rc = rm_in(fd, 0, e);
	close(fd);
	if (rc != 0)
		return -1;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", name);
	return 0;
}

/* Removes everything inside the directory fd (which stays open and is not closed). The
 * listing is restarted after every removal round so a directory changing underneath is
 * emptied anyway. */
static int rm_in(int fd, int depth, struct sbx_err *e)
{
	if (depth > 4096)
		return sbx_err_set(e, SBX_ETRANSFER, ELOOP, "remove: tree deeper than 4096 levels");
	for (int round = 0; round < 1000; round++) {
		int dfd = dup(fd);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (d == NULL) {
			if (dfd >= 0)
				close(dfd);
			return sbx_err_set(e, SBX_ETRANSFER, errno, "remove: list a folder");
		}
		rewinddir(d);
		int removed = 0;
		const char *n;
		while ((n = next_name(d)) != NULL) {
			struct stat st;
			if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
				if (errno == ENOENT)
					continue;
				closedir(d);
				return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", n);
			}
			if (S_ISDIR(st.st_mode)) {
				int sub = open_subdir(fd, n);
				if (sub < 0) {
					closedir(d);
					return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", n);
				}
				int rc = rm_in(sub, depth + 1, e);
				close(sub);
				if (rc != 0) {
					closedir(d);
					return -1;
				}
				if (unlinkat(fd, n, AT_REMOVEDIR) != 0 && errno != ENOENT) {
					closedir(d);
					return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", n);
				}
			} else if (unlinkat(fd, n, 0) != 0 && errno != ENOENT) {
				closedir(d);
				return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", n);
			}
			removed++;
		}
		closedir(d);
		if (removed == 0)
			return 0;
	}
	return sbx_err_set(e, SBX_ETRANSFER, EBUSY, "remove: a folder keeps refilling");
}

/* ---- merge ---- */

struct merge {
	int with_owner;
	int check; /* 1: the first pass (look only) */
	char path[4096];
	struct sbx_err *e;
};

static size_t push_name(struct merge *m, const char *n)
{
	size_t len = strlen(m->path);
	snprintf(m->path + len, sizeof m->path - len, "%s%s", len ? "/" : "", n);
	return len;
}

static int merge_in(struct merge *m, int src, int dst, int depth);

static int merge_entry(struct merge *m, int src, int dst, const char *n, int depth)
{
	struct stat ss, ds;
	if (fstatat(src, n, &ss, AT_SYMLINK_NOFOLLOW) != 0)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "staged %s", m->path);
	int have = fstatat(dst, n, &ds, AT_SYMLINK_NOFOLLOW) == 0;
	if (!have && errno != ENOENT)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "%s", m->path);
	int sdir = S_ISDIR(ss.st_mode), ddir = have && S_ISDIR(ds.st_mode);
	if (sdir && ddir) {
		int sfd = open_subdir(src, n);
		if (sfd < 0)
			return sbx_err_set(m->e, SBX_ETRANSFER, errno, "staged %s", m->path);
		int dfd = open_subdir(dst, n);
		if (dfd < 0) {
			int err = errno;
			close(sfd);
			return sbx_err_set(m->e, SBX_ETRANSFER, err, "%s", m->path);
		}
		int rc = merge_in(m, sfd, dfd, depth + 1);
		if (rc == 0 && !m->check) {
			/* The existing folder takes the staged one's metadata, owner first (chown
			 * clears set-id bits), mtime last (the moves above changed it). */
			if (m->with_owner)
				(void)fchown(dfd, ss.st_uid, ss.st_gid);
			struct timespec t[2] = {{0, UTIME_OMIT}, ss.st_mtim};
			if (fchmod(dfd, ss.st_mode & 07777) != 0 || futimens(dfd, t) != 0)
				rc = sbx_err_set(m->e, SBX_ETRANSFER, errno, "set the mode of %s",
				                 m->path);
		}
		close(sfd);
		close(dfd);
		return rc;
	}
	if (!sdir && ddir)
		return sbx_err_set(m->e, SBX_ETRANSFER, EISDIR,
		                   "%s: a file would replace an existing folder", m->path);
	if (m->check)
		return 0;
	if (!have) {
		if (rename2(src, n, dst, n, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != ENOSYS && errno != EINVAL)
			return sbx_err_set(m->e, SBX_ETRANSFER, errno, "move %s into place",
			                   m->path);
		/* No renameat2 (old kernel or filesystem): a plain rename, re-checked by the
		 * fallthrough below if something appeared meanwhile. */
	}
	if (!sdir) {
		if (renameat(src, n, dst, n) != 0)
			return sbx_err_set(m->e, SBX_ETRANSFER, errno, "move %s into place",
			                   m->path);
		return 0;
	}
	/* A folder over a file or a symlink: swap them, then drop the old one from staging. */
	if (!have && renameat(src, n, dst, n) == 0)
		return 0;
	if (rename2(src, n, dst, n, RENAME_EXCHANGE) != 0)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "replace %s with a folder", m->path);
	return sbx_rmtree_at(src, n, m->e);
}

static int merge_in(struct merge *m, int src, int dst, int depth)
{
	if (depth > 4096)
		return sbx_err_set(m->e, SBX_ETRANSFER, ELOOP,
		                   "merge: tree deeper than 4096 levels");
	int dfd = dup(src);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "list staged %s", m->path);
	}
	rewinddir(d);
	/* Names first, then moves: renaming out of a directory while reading it may skip
	 * entries. */
	char **names = NULL;
	size_t n = 0, cap = 0;
	const char *nm;
	int rc = 0;
	while ((nm = next_name(d)) != NULL) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **t = realloc(names, cap * sizeof *t);
			if (t == NULL) {
				rc = sbx_err_set(m->e, SBX_ETRANSFER, ENOMEM, "merge");
				break;
			}
			names = t;
		}
		if ((names[n] = strdup(nm)) == NULL) {
			rc = sbx_err_set(m->e, SBX_ETRANSFER, ENOMEM, "merge");
			break;
		}
		n++;
	}
	closedir(d);
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t keep = push_name(m, names[i]);
		rc = merge_entry(m, src, dst, names[i], depth);
		m->path[keep] = '\0';
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int sbx_tree_merge(int src_fd, int dst_fd, int with_owner, struct sbx_err *e)
{
	struct merge m = {.with_owner = with_owner, .check = 1, .e = e};
	if (merge_in(&m, src_fd, dst_fd, 0) != 0)
		return -1;
	m.check = 0;
	m.path[0] = '\0';
	return merge_in(&m, src_fd, dst_fd, 0);
}

int sbx_mkstage(int dirfd, const char *prefix, char *name, size_t cap, struct sbx_err *e)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20) ^
		             ((uint64_t)ts.tv_sec << 40) ^ (uint64_t)tries * 0x9e3779b97f4a7c15u;
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, r, sizeof r) == (ssize_t)sizeof r)
				for (size_t i = 0; i < sizeof r; i++)
					x ^= (uint64_t)r[i] << (8 * i);
			close(fd);
		}
		char suf[7];
		for (int i = 0; i < 6; i++, x /= 36)
			suf[i] = abc[x % 36];
		suf[6] = '\0';
		if ((size_t)snprintf(name, cap, "%s-%s", prefix, suf) >= cap)
			return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "staging name");
		if (mkdirat(dirfd, name, 0700) != 0) {
			if (errno == EEXIST)
				continue;
			return sbx_err_set(e, SBX_ETRANSFER, errno, "create a staging folder");
		}
		int fd2 = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd2 < 0) {
			int err = errno;
			unlinkat(dirfd, name, AT_REMOVEDIR);
			return sbx_err_set(e, SBX_ETRANSFER, err, "open the staging folder");
		}
		return fd2;
	}
	return sbx_err_set(e, SBX_ETRANSFER, EEXIST, "create a staging folder");
}
