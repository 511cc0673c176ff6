/* Tree moves and removals through directory fds (see treemove.h). Folders are listed with
 * getdents64 into one buffer and resumed at the kernel's cookie (lseek), so neither a removal
 * nor a merge holds a folder's names in memory; a removal climbs back up through "..", checked
 * against the device and inode it came down through, so it holds no fd per level. */
#include "treemove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

/* A folder that keeps refilling while it is emptied is given up after this many passes. */
#define ROUNDS 1000
#define MERGE_DEPTH 4096

static int same_obj(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* chmod of the entry name of dirfd to mode, through an O_PATH fd (never by a path that could
 * be swapped for a link). */
static int chmod_entry(int dirfd, const char *name, mode_t mode)
{
	int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	int rc = chmod(proc, mode);
	close(pfd);
	return rc;
}

/* Opens a directory entry for reading without following a link; a directory the caller owns
 * but may not read or search is opened up to 0700 first. */
static int open_subdir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return fd;
	if (chmod_entry(dirfd, name, 0700) != 0) {
		errno = EACCES;
		return -1;
	}
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* ---- listing: getdents64 records, resumable at a cookie ---- */

struct lister {
	int fd;
	size_t len, pos;
	char buf[8192] __attribute__((aligned(8)));
};

struct ent {
	const char *name; /* into the lister's buffer: valid until the next list_* call */
	unsigned char type;
	int64_t next; /* the cookie of the position after this entry */
};

static int list_start(struct lister *l, int fd, int64_t at)
{
	l->fd = fd;
	l->len = l->pos = 0;
	return lseek(fd, (off_t)at, SEEK_SET) < 0 ? -1 : 0;
}

/* 1 and *en, 0 at the end, -1 with errno. "." and ".." are skipped. */
static int list_next(struct lister *l, struct ent *en)
{
	for (;;) {
		if (l->pos >= l->len) {
			long n = sbx_getdents64(l->fd, l->buf, sizeof l->buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -1 : 0;
			l->len = (size_t)n;
			l->pos = 0;
		}
		/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
		const char *p = l->buf + l->pos;
		uint16_t reclen;
		memcpy(&reclen, p + 16, sizeof reclen);
		if (reclen < 20 || reclen > l->len - l->pos) {
			errno = EIO;
			return -1;
		}
		l->pos += reclen;
		memcpy(&en->next, p + 8, sizeof en->next);
		en->type = (unsigned char)p[18];
		en->name = p + 19;
		if (strcmp(en->name, ".") != 0 && strcmp(en->name, "..") != 0)
			return 1;
	}
}

static int is_dir(int dirfd, const struct ent *en, int *dir)
{
	if (en->type != DT_UNKNOWN) {
		*dir = en->type == DT_DIR;
		return 0;
	}
	struct stat st;
	if (fstatat(dirfd, en->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	*dir = S_ISDIR(st.st_mode);
	return 0;
}

/* ---- removal ---- */

/* One folder of the path being removed: 32 bytes, its name in the stack of names (a tree as
 * deep as a 512 KiB member name makes is some 260,000 levels). */
struct level {
	uint64_t dev, ino; /* the folder, as opened */
	int64_t resume;    /* its parent's listing goes on from here once it is gone */
	uint32_t name;     /* offset of its name in names (the top has none) */
	uint16_t rounds;   /* passes over its listing that removed something */
	uint8_t removed;   /* this pass removed something: one more pass from the start */
};

struct rm {
	struct level *lv;
	size_t d, cap; /* lv[0..d]: the top to the folder being emptied */
	char *names;   /* the levels' names, NUL-terminated, a stack */
	size_t nlen, ncap;
	const char *top_name;
	struct sbx_err *e;
};

static const char *name_of(const struct rm *r, size_t i)
{
	return r->names + r->lv[i].name;
}

static int same_level(const struct stat *st, const struct level *l)
{
	return (uint64_t)st->st_dev == l->dev && (uint64_t)st->st_ino == l->ino;
}

/* Pushes a level for the folder name (identity from the opened fd's st). */
static int push_level(struct rm *r, const char *name, const struct stat *st, int64_t resume)
{
	size_t n = strlen(name) + 1;
	if (r->d + 1 == r->cap) {
		struct level *t = realloc(r->lv, 2 * r->cap * sizeof *t);
		if (t == NULL)
			return -1;
		r->lv = t;
		r->cap *= 2;
	}
	if (r->ncap - r->nlen < n || r->nlen + n > UINT32_MAX) {
		size_t c = r->ncap * 2 + n;
		char *t = c <= UINT32_MAX ? realloc(r->names, c) : NULL;
		if (t == NULL)
			return -1;
		r->names = t;
		r->ncap = c;
	}
	memcpy(r->names + r->nlen, name, n);
	r->lv[++r->d] = (struct level){.dev = (uint64_t)st->st_dev,
	                               .ino = (uint64_t)st->st_ino,
	                               .resume = resume,
	                               .name = (uint32_t)r->nlen};
	r->nlen += n;
	return 0;
}

static void pop_level(struct rm *r)
{
	r->nlen = r->lv[r->d].name;
	r->d--;
}

/* The path below the top to level d, for messages: its last bytes when long. */
static const char *where(const struct rm *r, size_t d, char *buf, size_t cap)
{
	size_t pos = cap - 1;
	buf[pos] = '\0';
	for (size_t i = d; i >= 1; i--) {
		size_t n = strlen(name_of(r, i));
		if (n + 4 > pos) {
			if (pos >= 3) {
				pos -= 3;
				memcpy(buf + pos, "...", 3);
			}
			break;
		}
		pos -= n;
		memcpy(buf + pos, name_of(r, i), n);
		if (i > 1)
			buf[--pos] = '/';
	}
	return buf + pos;
}

/* unlinkat, adding u+rwx to the folder once when the caller owns it but may not change it. */
static int unlink_in(int dirfd, const char *name, int flags)
{
	if (unlinkat(dirfd, name, flags) == 0 || errno == ENOENT)
		return 0;
	if (errno != EACCES && errno != EPERM)
		return -1;
	int err = errno;
	struct stat st;
	if (fstat(dirfd, &st) != 0 || (st.st_mode & 0700) == 0700 ||
	    fchmod(dirfd, (st.st_mode & 07777) | 0700) != 0) {
		errno = err;
		return -1;
	}
	return unlinkat(dirfd, name, flags) == 0 || errno == ENOENT ? 0 : -1;
}

/* Opens level k again from the top by the names that led there, each checked against the
 * folder first opened; -1 when one no longer is. */
static int rewalk(int top, const struct rm *r, size_t k)
{
	int fd = top;
	for (size_t i = 1; i <= k; i++) {
		int n = openat(fd, name_of(r, i), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		int ok = n >= 0 && fstat(n, &st) == 0 && same_level(&st, &r->lv[i]);
		if (fd != top)
			close(fd);
		if (!ok) {
			if (n >= 0)
				close(n);
			return -1;
		}
		fd = n;
	}
	return fd;
}

/* "remove TOP/PATH[/ENTRY]: what" for the folder at level d. */
static int rm_fail(const struct rm *r, int err, size_t d, const char *entry, const char *what)
{
	char buf[160];
	const char *path = where(r, d, buf, sizeof buf);
	return sbx_err_set(r->e, SBX_ETRANSFER, err, "remove %s%s%s%s%s: %s", r->top_name,
	                   path[0] ? "/" : "", path, entry ? "/" : "", entry ? entry : "", what);
}

/* Empties the folder top: down into each subfolder in turn (closing the one above), back up
 * when it is empty, removing it there. */
static int rm_walk(struct rm *r, struct lister *l, int top)
{
	int cur = top;
	struct stat st;
	if (fstat(top, &st) != 0 || list_start(l, top, 0) != 0)
		return rm_fail(r, errno, 0, NULL, "cannot list it");
	r->lv[0] = (struct level){.dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino};
	int rc = -1;
	for (;;) {
		struct level *lv = &r->lv[r->d];
		struct ent en;
		int got = list_next(l, &en);
		if (got < 0) {
			rc = rm_fail(r, errno, r->d, NULL, "cannot list it");
			break;
		}
		if (got == 1) {
			int dir;
			if (is_dir(cur, &en, &dir) != 0) {
				if (errno == ENOENT)
					continue;
				rc = rm_fail(r, errno, r->d, en.name, "cannot inspect it");
				break;
			}
			if (!dir) {
				if (unlink_in(cur, en.name, 0) != 0) {
					rc = rm_fail(r, errno, r->d, en.name, "cannot remove it");
					break;
				}
				lv->removed = 1;
				continue;
			}
			int sub = open_subdir(cur, en.name);
			if (sub < 0 || fstat(sub, &st) != 0) {
				int err = errno;
				if (sub >= 0)
					close(sub);
				if (err == ENOENT || err == ENOTDIR) {
					lv->removed =
					        1; /* gone or no longer a folder: look again */
					continue;
				}
				rc = rm_fail(r, err, r->d, en.name, "cannot open it");
				break;
			}
			if (push_level(r, en.name, &st, en.next) != 0) {
				close(sub);
				rc = rm_fail(r, ENOMEM, r->d, en.name, "cannot go deeper");
				break;
			}
			if (cur != top)
				close(cur);
			cur = sub;
			if (list_start(l, cur, 0) != 0) {
				rc = rm_fail(r, errno, r->d, NULL, "cannot list it");
				break;
			}
			continue;
		}
		/* The end of this folder's listing. Anything removed: look again from the start
		 * (a listing that changes under its reader may skip names). */
		if (lv->removed) {
			if (++lv->rounds > ROUNDS) {
				rc = rm_fail(r, EBUSY, r->d, NULL, "it keeps refilling");
				break;
			}
			lv->removed = 0;
			if (list_start(l, cur, 0) != 0) {
				rc = rm_fail(r, errno, r->d, NULL, "cannot list it");
				break;
			}
			continue;
		}
		if (r->d == 0) {
			rc = 0;
			break;
		}
		/* Empty: up to the parent (through "..", or by name from the top when ".." is
		 * not the folder we came down from), then remove it there. */
		int up = r->d == 1 ? top : openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up >= 0 && up != top && (fstat(up, &st) != 0 || !same_level(&st, lv - 1))) {
			close(up);
			up = -1;
		}
		if (up < 0 && (up = rewalk(top, r, r->d - 1)) < 0) {
			rc = rm_fail(r, 0, r->d, NULL,
			             "a folder on its path was moved during the removal");
			break;
		}
		close(cur);
		cur = up;
		if (unlink_in(cur, name_of(r, r->d), AT_REMOVEDIR) != 0) {
			rc = rm_fail(r, errno, r->d, NULL, "cannot remove it");
			break;
		}
		int64_t resume = lv->resume;
		pop_level(r);
		r->lv[r->d].removed = 1;
		if (list_start(l, cur, resume) != 0) {
			rc = rm_fail(r, errno, r->d, NULL, "cannot list it");
			break;
		}
	}
	if (cur != top)
		close(cur);
	return rc;
}

static int rm_in(int top, const char *top_name, struct sbx_err *e)
{
	struct rm r = {.cap = 64, .ncap = 1024, .top_name = top_name, .e = e};
	struct lister *l = malloc(sizeof *l);
	r.lv = malloc(r.cap * sizeof *r.lv);
	r.names = malloc(r.ncap);
	int rc = l != NULL && r.lv != NULL && r.names != NULL
	                 ? rm_walk(&r, l, top)
	                 : sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "remove %s", top_name);
	free(r.names);
	free(r.lv);
	free(l);
	return rc;
}

int sbx_rmtree_in(int fd, struct sbx_err *e)
{
	return rm_in(fd, ".", e);
}

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
		return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s: cannot open it", name);
	int rc = rm_in(fd, name, e);
	close(fd);
	if (rc != 0)
		return -1;
	if (unlink_in(dirfd, name, AT_REMOVEDIR) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "remove %s", name);
	return 0;
}

/* ---- the commit's checks ---- */

int sbx_dir_private(int fd, const char *what, struct sbx_err *e)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "%s", what);
	uid_t me = geteuid();
	if (st.st_uid != me && st.st_uid != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "%s is owned by uid %u, who could rename what a transfer puts "
		                   "there: refused",
		                   what, (unsigned)st.st_uid);
	if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "%s (mode %04o) is writable by other users and not sticky: they "
		                   "could rename what a transfer puts there: refused",
		                   what, (unsigned)(st.st_mode & 07777));
	return 0;
}

int sbx_move_verified(int from_dir, const char *from, int to_dir, const char *to, int fd,
                      int noreplace, const char *what, struct sbx_err *e)
{
	struct stat want, got;
	if (fstat(fd, &want) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "move to %s", what);
	if (fstatat(from_dir, from, &got, AT_SYMLINK_NOFOLLOW) != 0 || !same_obj(&got, &want))
		return sbx_err_set(e, SBX_ETRANSFER, 0,
		                   "move to %s: the staged entry was replaced by another process; "
		                   "nothing was moved",
		                   what);
	int r;
	if (noreplace) {
		r = sbx_renameat2(from_dir, from, to_dir, to, SBX_RENAME_NOREPLACE);
		if (r != 0 && (errno == ENOSYS || errno == EINVAL)) {
			/* No renameat2 here: the name checked, then a plain rename. */
			if (fstatat(to_dir, to, &got, AT_SYMLINK_NOFOLLOW) == 0) {
				errno = EEXIST;
			} else {
				r = renameat(from_dir, from, to_dir, to);
			}
		}
	} else {
		r = renameat(from_dir, from, to_dir, to);
	}
	if (r != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "move to %s", what);
	if (fstatat(to_dir, to, &got, AT_SYMLINK_NOFOLLOW) != 0 || !same_obj(&got, &want))
		return sbx_err_set(
		        e, SBX_ETRANSFER, 0,
		        "%s is not what this transfer staged: another process replaced it "
		        "during the commit",
		        what);
	return 0;
}

/* ---- merge ---- */

struct merge {
	int flags;
	int check;         /* 1: the first pass (look only) */
	struct stat stage; /* src_fd itself */
	struct lister *l;  /* one listing buffer for every level, resumed at cookies */
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

/* One staged entry n; *recursed when the listing buffer was used below. */
static int merge_entry(struct merge *m, int src, int dst, const char *n, int depth, int *recursed)
{
	struct stat ss, ds;
	if (fstatat(src, n, &ss, AT_SYMLINK_NOFOLLOW) != 0)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "staged %s", m->path);
	int have = fstatat(dst, n, &ds, AT_SYMLINK_NOFOLLOW) == 0;
	if (!have && errno != ENOENT)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "%s", m->path);
	int sdir = S_ISDIR(ss.st_mode), ddir = have && S_ISDIR(ds.st_mode);
	if (ddir && same_obj(&ds, &m->stage))
		return sbx_err_set(m->e, SBX_ETRANSFER, 0, "%s: the name of the staging folder",
		                   m->path);
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
		*recursed = 1;
		int rc = merge_in(m, sfd, dfd, depth + 1);
		if (rc == 0 && !m->check) {
			/* The existing folder takes the staged one's metadata, owner first (chown
			 * clears set-id bits), mtime last (the moves above changed it). */
			if (m->flags & SBX_MERGE_OWNER)
				(void)fchown(dfd, ss.st_uid, ss.st_gid);
			struct timespec t[2] = {{0, UTIME_OMIT}, ss.st_mtim};
			if (fchmod(dfd, ss.st_mode & 07777) != 0 || futimens(dfd, t) != 0)
				rc = sbx_err_set(m->e, SBX_ETRANSFER, errno, "set the mode of %s",
				                 m->path);
			else if (unlink_in(src, n, AT_REMOVEDIR) != 0)
				rc = sbx_err_set(m->e, SBX_ETRANSFER, errno, "staged %s", m->path);
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
		if (sbx_renameat2(src, n, dst, n, SBX_RENAME_NOREPLACE) == 0)
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
	if (sbx_renameat2(src, n, dst, n, SBX_RENAME_EXCHANGE) != 0)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "replace %s with a folder", m->path);
	return sbx_rmtree_at(src, n, m->e);
}

/* Out of line: its buffer is not on the stack of every level of the merge. */
__attribute__((noinline)) static int check_private(struct merge *m, int dst)
{
	char what[sizeof m->path + 32];
	snprintf(what, sizeof what, "%s%s", m->path[0] ? "the folder " : "the target folder",
	         m->path);
	return sbx_dir_private(dst, what, m->e);
}

static int merge_in(struct merge *m, int src, int dst, int depth)
{
	if (depth > MERGE_DEPTH)
		return sbx_err_set(m->e, SBX_ETRANSFER, ELOOP, "merge: tree deeper than %d levels",
		                   MERGE_DEPTH);
	if ((m->flags & SBX_MERGE_PRIVATE) && check_private(m, dst) != 0)
		return -1;
	int moved = 0, rounds = 0;
	if (list_start(m->l, src, 0) != 0)
		return sbx_err_set(m->e, SBX_ETRANSFER, errno, "list staged %s", m->path);
	for (;;) {
		struct ent en;
		int r = list_next(m->l, &en);
		if (r < 0)
			return sbx_err_set(m->e, SBX_ETRANSFER, errno, "list staged %s", m->path);
		if (r == 0) {
			/* The moving pass empties src: what a changing listing skipped is there
			 * when it is read again. */
			if (m->check || !moved)
				return 0;
			if (++rounds > ROUNDS)
				return sbx_err_set(m->e, SBX_ETRANSFER, EBUSY,
				                   "merge: staged %s keeps refilling", m->path);
			moved = 0;
			if (list_start(m->l, src, 0) != 0)
				return sbx_err_set(m->e, SBX_ETRANSFER, errno, "list staged %s",
				                   m->path);
			continue;
		}
		char *name = strdup(en.name);
		if (name == NULL)
			return sbx_err_set(m->e, SBX_ETRANSFER, ENOMEM, "merge");
		int64_t resume = en.next;
		size_t keep = push_name(m, name);
		int recursed = 0;
		int rc = merge_entry(m, src, dst, name, depth, &recursed);
		m->path[keep] = '\0';
		free(name);
		if (rc != 0)
			return -1;
		moved = 1;
		if (recursed && list_start(m->l, src, resume) != 0)
			return sbx_err_set(m->e, SBX_ETRANSFER, errno, "list staged %s", m->path);
	}
}

int sbx_tree_merge(int src_fd, int dst_fd, int flags, struct sbx_err *e)
{
	struct merge *m = calloc(1, sizeof *m);
	struct lister *l = malloc(sizeof *l);
	int rc = -1;
	if (m == NULL || l == NULL) {
		sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "merge");
		goto out;
	}
	*m = (struct merge){.flags = flags, .check = 1, .l = l, .e = e};
	if (fstat(src_fd, &m->stage) != 0) {
		sbx_err_set(e, SBX_ETRANSFER, errno, "merge: the staging folder");
		goto out;
	}
	if (merge_in(m, src_fd, dst_fd, 0) != 0)
		goto out;
	m->check = 0;
	m->path[0] = '\0';
	rc = merge_in(m, src_fd, dst_fd, 0);
out:
	free(l);
	free(m);
	return rc;
}

int sbx_mkstage(int dirfd, const char *prefix, char *name, size_t cap, struct sbx_err *e)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		uint64_t x = (uint64_t)sbx_now_ns() ^ ((uint64_t)getpid() << 20) ^
		             (uint64_t)tries * 0x9e3779b97f4a7c15u;
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
