/* Placement of archive members under a root fd. Each member's parent is opened afresh from
 * the root by the safe walk (shared/walk.h: no symlink is ever followed on the way),
 * the final name is created relative to that parent fd, and directory metadata waits for
 * sbx_put_finish, applied through fds so a directory swapped for a link changes nothing. A hard
 * link to a member not placed yet waits for sbx_put_finish too, and is then made by the same
 * rules as any other. */
#include "tree_put.h"
#include "member.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Creating or opening a name that something else keeps changing is retried this often. */
#define PUT_TRIES 8
/* What malloc adds to each block, for SBX_PUT_STATE_MAX's count. */
#define ALLOC_OVERHEAD 16

struct deferred {
	int fd;     /* O_RDONLY|O_DIRECTORY fd, or -1 beyond the fd budget */
	char *name; /* normalized name: for messages, and for re-opening when fd is -1 */
	dev_t dev;
	ino_t ino;
	size_t depth, seq;
	unsigned mode;
	long long uid, gid, sec;
	long nsec;
};

/* A hard link whose target did not exist yet when it was placed (a forward reference). */
struct pending_link {
	char *name;   /* normalized member name */
	char *raw;    /* the member name as in the archive, for messages */
	char *target; /* normalized target member name */
	char *rawlink;
	int dropped; /* the name was redefined by a later member: the last one wins */
};

struct sbx_put {
	int root;
	enum sbx_put_mode mode;
	struct sbx_walk w;
	int refused; /* a member was refused: finish applies nothing */
	struct pending_link *links;
	size_t nlinks, caplinks, live_links;
	size_t *ltab; /* open addressing: pending link index + 1 by name; 0 is empty */
	size_t ltab_cap;
	struct deferred *dirs;
	size_t ndirs, capdirs, kept, max_kept, seq;
	size_t state;         /* bytes held for dirs and links (SBX_PUT_STATE_MAX) */
	int file_fd;          /* the open file member, or -1 */
	int not_root;         /* sandbox mode without root: owners are best effort */
	uint64_t owners_kept; /* members whose archive owner could not be set (not root) */
	char *file_name;
	unsigned file_mode;
	long long file_uid, file_gid, file_sec;
	long file_nsec;
	int file_mode_set; /* host modes: created with its final mode, no fchmod needed */
	/* Host modes only (a private staging folder nobody else writes): the parent folder of
	 * the last file member, kept open for the next file in the same folder. The sandbox's
	 * mode re-resolves every member from the root: a folder held open could be moved by a
	 * process of the sandbox between two members. */
	int pdir_fd;
	char *pdir_name;
	mode_t umask; /* host modes: the process's umask (07777: unknown) */
};

/* Records a refusal of member raw: "member RAW: RULE". */
static int refuse(struct sbx_put *p, struct sbx_err *e, int errnum, const char *raw,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int refuse(struct sbx_put *p, struct sbx_err *e, int errnum, const char *raw,
                  const char *fmt, ...)
{
	char rule[200];
	char name[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof rule, fmt, ap);
	va_end(ap);
	p->refused = 1;
	return sbx_err_set(e, SBX_ETRANSFER, errnum, "member %s: %s",
	                   sbx_err_show(raw, name, sizeof name), rule);
}

/* Takes n more bytes of the state kept between members, or refuses the member raw. */
static int charge(struct sbx_put *p, size_t n, const char *raw, struct sbx_err *e)
{
	if (n > SBX_PUT_STATE_MAX - p->state)
		return refuse(p, e, 0, raw,
		              "more than %u MiB of directory metadata and pending hard links would "
		              "be held (the limit)",
		              SBX_PUT_STATE_MAX >> 20);
	p->state += n;
	return 0;
}

static void close_dir(struct sbx_put *p, int fd)
{
	if (fd >= 0 && fd != p->root && fd != p->pdir_fd)
		close(fd);
}

static void drop_pdir(struct sbx_put *p)
{
	if (p->pdir_fd >= 0)
		close(p->pdir_fd);
	p->pdir_fd = -1;
	free(p->pdir_name);
	p->pdir_name = NULL;
}

/* The process's umask from /proc/self/status (reading it with umask() would change it for a
 * moment, under every other thread of the caller); 07777 when unknown. */
static mode_t read_umask(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned v = 07777;
	char line[128];
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "Umask: %o", &v) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return (mode_t)(v & 07777);
}

/* Opens the directory holding the last component of norm (a normalized member name; it is
 * modified while walking and restored). *dfd may be p->root (close with close_dir); *base
 * points into norm. Works component by component past PATH_MAX. */
static int open_parent(struct sbx_put *p, char *norm, int create, const char *raw, const char *what,
                       int *dfd, const char **base, struct sbx_err *e)
{
	char *slash = strrchr(norm, '/');
	if (slash == NULL) {
		*dfd = p->root;
		*base = norm;
		return 0;
	}
	*base = slash + 1;
	if (p->pdir_name != NULL) {
		*slash = '\0';
		int same = strcmp(norm, p->pdir_name) == 0;
		*slash = '/';
		if (same) {
			*dfd = p->pdir_fd;
			return 0;
		}
	}
	*slash = '\0';
	int fd = sbx_walk_dir(&p->w, p->root, norm, create, O_PATH, what, e);
	*slash = '/';
	if (fd < 0) {
		if (p->w.missing)
			return -1;
		char name[80];
		p->refused = 1;
		return sbx_err_prefix(e, "member %s", sbx_err_show(raw, name, sizeof name));
	}
	*dfd = fd;
	return 0;
}

static const char *kind_name(int type)
{
	switch (type) {
	case 'f':
		return "file";
	case 'd':
		return "directory";
	case 'l':
		return "symlink";
	default:
		return "hard link";
	}
}

/* Makes room for a new entry named base under dfd: nothing there is fine (0); a directory
 * stays for a directory member (1, merge); a symlink or file goes (unlinked, never followed);
 * anything else over a directory, or a directory over a non-symlink, is refused. */
static int clear_slot(struct sbx_put *p, int dfd, const char *base, int type, const char *raw,
                      struct sbx_err *e)
{
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT)
			return 0;
		return refuse(p, e, errno, raw, "cannot inspect the existing entry");
	}
	if (S_ISDIR(st.st_mode)) {
		if (type == 'd')
			return 1;
		return refuse(p, e, 0, raw, "a %s cannot replace a directory", kind_name(type));
	}
	if (type == 'd' && !S_ISLNK(st.st_mode))
		return refuse(p, e, 0, raw, "a directory cannot replace a file");
	if (unlinkat(dfd, base, 0) != 0 && errno != ENOENT)
		return refuse(p, e, errno, raw, "cannot replace the existing entry");
	return 0;
}

static struct timespec mtime_of(long long sec, long nsec)
{
	struct timespec ts = {.tv_sec = (time_t)sec, .tv_nsec = nsec};
	if (nsec < 0 || nsec >= 1000000000L)
		ts.tv_nsec = 0;
	return ts;
}

/* Host modes: no set-id, no group/other write; directories keep u+rwx. */
static mode_t host_mode(unsigned mode, int dir)
{
	mode_t m = (mode_t)(mode & 07777u & ~06000u & ~022u);
	return dir ? (m | 0700) : m;
}

/* Owner (sandbox), then mode, then mtime, through fd. */
static int apply_meta(struct sbx_put *p, int fd, int dir, unsigned mode, long long uid,
                      long long gid, long long sec, long nsec, const char *raw, struct sbx_err *e)
{
	mode_t m;
	if (p->mode == SBX_PUT_SANDBOX) {
		if (fchown(fd, (uid_t)uid, (gid_t)gid) != 0) {
			if (!(p->not_root && errno == EPERM))
				return refuse(p, e, errno, raw, "cannot set owner %lld:%lld", uid,
				              gid);
			p->owners_kept++; /* not root: the member keeps the agent's owner */
		}
		m = (mode_t)(mode & 07777u);
	} else {
		m = host_mode(mode, dir);
	}
	if (!(p->file_mode_set && !dir) && fchmod(fd, m) != 0)
		return refuse(p, e, errno, raw, "cannot set mode %04o", (unsigned)m);
	struct timespec ts[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, mtime_of(sec, nsec)};
	if (futimens(fd, ts) != 0)
		return refuse(p, e, errno, raw, "cannot set mtime");
	return 0;
}

int sbx_put_open(struct sbx_put **out, int root_fd, enum sbx_put_mode mode, int force_walk,
                 struct sbx_err *e)
{
	*out = NULL;
	if (mode != SBX_PUT_SANDBOX && mode != SBX_PUT_DATA && mode != SBX_PUT_KEEP)
		return sbx_err_set(e, SBX_EUSAGE, 0, "tree_put: unknown mode %d", (int)mode);
	struct stat st;
	if (fstat(root_fd, &st) != 0 || !S_ISDIR(st.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, 0, "tree_put: the root is not a directory fd");
	struct sbx_put *p = calloc(1, sizeof *p);
	if (p == NULL)
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "tree_put");
	p->root = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	if (p->root < 0) {
		int err = errno;
		free(p);
		return sbx_err_set(e, SBX_ETRANSFER, err, "tree_put: dup of the root fd");
	}
	p->mode = mode;
	p->not_root = mode == SBX_PUT_SANDBOX && geteuid() != 0;
	sbx_walk_init(&p->w, force_walk);
	p->file_fd = -1;
	p->pdir_fd = -1;
	p->umask = mode == SBX_PUT_SANDBOX ? 07777 : read_umask();
	struct rlimit rl;
	rlim_t lim = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		lim = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
	p->max_kept = lim > 64 ? (size_t)(lim / 2) : 8;
	*out = p;
	return 0;
}

static int count_depth(const char *norm)
{
	int d = 1;
	for (const char *s = norm; *s != '\0'; s++)
		d += *s == '/';
	return d;
}

/* Keeps fd (an O_RDONLY directory) for sbx_put_finish, or past the fd budget its name and
 * identity. Consumes fd. */
static int defer_dir(struct sbx_put *p, int fd, const char *norm, const struct sbx_put_member *m,
                     struct sbx_err *e)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int err = errno;
		close(fd);
		return refuse(p, e, err, m->name, "cannot inspect the directory");
	}
	size_t nlen = strlen(norm) + 1;
	if (charge(p, nlen + ALLOC_OVERHEAD, m->name, e) != 0) {
		close(fd);
		return -1;
	}
	if (p->ndirs == p->capdirs) {
		size_t n = p->capdirs ? p->capdirs * 2 : 32;
		if (charge(p, (n - p->capdirs) * sizeof *p->dirs, m->name, e) != 0) {
			close(fd);
			return -1;
		}
		struct deferred *d = realloc(p->dirs, n * sizeof *d);
		if (d == NULL) {
			close(fd);
			return refuse(p, e, ENOMEM, m->name, "cannot defer the directory mode");
		}
		p->dirs = d;
		p->capdirs = n;
	}
	struct deferred *d = &p->dirs[p->ndirs];
	*d = (struct deferred){.fd = fd,
	                       .dev = st.st_dev,
	                       .ino = st.st_ino,
	                       .depth = (size_t)count_depth(norm),
	                       .seq = p->seq++,
	                       .mode = m->mode,
	                       .uid = m->uid,
	                       .gid = m->gid,
	                       .sec = m->mtime_sec,
	                       .nsec = m->mtime_nsec};
	d->name = strdup(norm);
	if (d->name == NULL) {
		close(fd);
		return refuse(p, e, ENOMEM, m->name, "cannot defer the directory mode");
	}
	p->ndirs++;
	if (p->kept >= p->max_kept) {
		close(fd);
		d->fd = -1;
	} else {
		p->kept++;
	}
	return 0;
}

static int put_dir(struct sbx_put *p, int dfd, const char *base, const char *norm,
                   const struct sbx_put_member *m, struct sbx_err *e)
{
	for (int tries = 0; tries < PUT_TRIES; tries++) {
		int r = clear_slot(p, dfd, base, 'd', m->name, e);
		if (r < 0)
			return -1;
		if (r == 0 && mkdirat(dfd, base, 0700) != 0) {
			if (errno == EEXIST)
				continue;
			return refuse(p, e, errno, m->name, "cannot create the directory");
		}
		int fd = sbx_walk_open(&p->w, dfd, base, O_RDONLY);
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV)
				continue;
			return refuse(p, e, errno, m->name, "cannot open the directory");
		}
		return defer_dir(p, fd, norm, m, e);
	}
	return refuse(p, e, 0, m->name, "the entry keeps changing");
}

static int put_file(struct sbx_put *p, int dfd, const char *base, const struct sbx_put_member *m,
                    int *out, struct sbx_err *e)
{
	/* Host modes create with the final mode when the umask keeps it whole; the sandbox's
	 * sets the owner first, so it creates 0600 and sets the mode after. */
	mode_t cm = 0600;
	int mode_set = 0;
	if (p->mode != SBX_PUT_SANDBOX && (host_mode(m->mode, 0) & p->umask) == 0) {
		cm = host_mode(m->mode, 0);
		mode_set = 1;
	}
	for (int tries = 0; tries < PUT_TRIES; tries++) {
		/* Created first, the slot cleared only when something is there (the common case
		 * of a new name costs one call). */
		int fd =
		        openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, cm);
		if (fd < 0) {
			if (errno == EEXIST) {
				if (clear_slot(p, dfd, base, 'f', m->name, e) < 0)
					return -1;
				continue;
			}
			return refuse(p, e, errno, m->name, "cannot create the file");
		}
		p->file_mode_set = mode_set;
		p->file_name = strdup(m->name);
		if (p->file_name == NULL) {
			close(fd);
			return refuse(p, e, ENOMEM, m->name, "out of memory");
		}
		p->file_fd = fd;
		p->file_mode = m->mode;
		p->file_uid = m->uid;
		p->file_gid = m->gid;
		p->file_sec = m->mtime_sec;
		p->file_nsec = m->mtime_nsec;
		*out = fd;
		return 0;
	}
	return refuse(p, e, 0, m->name, "the entry keeps changing");
}

static int put_symlink(struct sbx_put *p, int dfd, const char *base, const char *norm,
                       const struct sbx_put_member *m, struct sbx_err *e)
{
	char t[80];
	if (m->link == NULL || m->link[0] == '\0')
		return refuse(p, e, 0, m->name, "empty symlink target");
	if (p->mode == SBX_PUT_DATA && !sbx_member_link_inside(norm, m->link))
		return refuse(p, e, 0, m->name, "symlink target %s leaves the root",
		              sbx_err_show(m->link, t, sizeof t));
	for (int tries = 0; tries < PUT_TRIES; tries++) {
		if (clear_slot(p, dfd, base, 'l', m->name, e) < 0)
			return -1;
		if (symlinkat(m->link, dfd, base) != 0) {
			if (errno == EEXIST)
				continue;
			return refuse(p, e, errno, m->name, "cannot create the symlink");
		}
		if (p->mode == SBX_PUT_SANDBOX &&
		    fchownat(dfd, base, (uid_t)m->uid, (gid_t)m->gid, AT_SYMLINK_NOFOLLOW) != 0) {
			if (!(p->not_root && errno == EPERM))
				return refuse(p, e, errno, m->name, "cannot set owner %lld:%lld",
				              m->uid, m->gid);
			p->owners_kept++;
		}
		struct timespec ts[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
		                         mtime_of(m->mtime_sec, m->mtime_nsec)};
		if (utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW) != 0)
			return refuse(p, e, errno, m->name, "cannot set the symlink's mtime");
		return 0;
	}
	return refuse(p, e, 0, m->name, "the entry keeps changing");
}

/* FNV-1a of a name, for the pending-link table. */
static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

/* The table slot holding name, or the empty slot where it would go. */
static size_t *ltab_slot(struct sbx_put *p, const char *name)
{
	size_t mask = p->ltab_cap - 1;
	for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
		size_t v = p->ltab[i];
		if (v == 0 || strcmp(p->links[v - 1].name, name) == 0)
			return &p->ltab[i];
	}
}

/* A later member named like a pending link replaces it (the last definition wins). */
static void drop_pending(struct sbx_put *p, const char *norm)
{
	if (p->live_links == 0)
		return;
	size_t *slot = ltab_slot(p, norm);
	if (*slot != 0 && !p->links[*slot - 1].dropped) {
		p->links[*slot - 1].dropped = 1;
		p->live_links--;
	}
}

static int ltab_grow(struct sbx_put *p)
{
	size_t n = p->ltab_cap ? p->ltab_cap * 2 : 64;
	size_t *t = calloc(n, sizeof *t); /* charged by the caller */
	if (t == NULL)
		return -1;
	free(p->ltab);
	p->ltab = t;
	p->ltab_cap = n;
	for (size_t i = 0; i < p->nlinks; i++)
		*ltab_slot(p, p->links[i].name) = i + 1;
	return 0;
}

/* Records the hard link norm -> target for sbx_put_finish. Consumes nothing. */
static int add_pending(struct sbx_put *p, const char *norm, const char *target,
                       const struct sbx_put_member *m, struct sbx_err *e)
{
	size_t strs = strlen(norm) + strlen(m->name) + strlen(target) + strlen(m->link) + 4 +
	              4 * ALLOC_OVERHEAD;
	if (charge(p, strs, m->name, e) != 0)
		return -1;
	if (p->nlinks == p->caplinks) {
		size_t n = p->caplinks ? p->caplinks * 2 : 16;
		if (charge(p, (n - p->caplinks) * sizeof *p->links, m->name, e) != 0)
			return -1;
		struct pending_link *l = realloc(p->links, n * sizeof *l);
		if (l == NULL)
			return refuse(p, e, ENOMEM, m->name, "cannot defer the hard link");
		p->links = l;
		p->caplinks = n;
	}
	if ((p->nlinks + 1) * 2 > p->ltab_cap) {
		/* The table doubles; the old one is freed once the new one is filled. */
		size_t grow = p->ltab_cap ? p->ltab_cap : 64;
		if (charge(p, grow * sizeof *p->ltab, m->name, e) != 0)
			return -1;
		if (ltab_grow(p) != 0)
			return refuse(p, e, ENOMEM, m->name, "cannot defer the hard link");
	}
	struct pending_link *l = &p->links[p->nlinks];
	*l = (struct pending_link){.name = strdup(norm),
	                           .raw = strdup(m->name),
	                           .target = strdup(target),
	                           .rawlink = strdup(m->link)};
	if (l->name == NULL || l->raw == NULL || l->target == NULL || l->rawlink == NULL) {
		free(l->name);
		free(l->raw);
		free(l->target);
		free(l->rawlink);
		return refuse(p, e, ENOMEM, m->name, "cannot defer the hard link");
	}
	/* drop_pending ran for this name already: the slot is empty or holds a dropped one. */
	*ltab_slot(p, norm) = p->nlinks + 1;
	p->nlinks++;
	p->live_links++;
	return 0;
}

/* Links base under dfd to target (a normalized member name, walked from the root without
 * following any symlink). Returns 0, -1 refused, or 1 when defer is set and the target (or a
 * directory on its path) does not exist yet. raw and rawlink name the member in messages. */
static int link_to(struct sbx_put *p, int dfd, const char *base, char *target, const char *raw,
                   const char *rawlink, int defer, struct sbx_err *e)
{
	char t[80];
	int tdfd;
	const char *tbase;
	p->w.soft = defer;
	int r = open_parent(p, target, 0, raw, "hard-link target ", &tdfd, &tbase, e);
	p->w.soft = 0;
	if (r != 0)
		return p->w.missing ? 1 : -1;
	int rc = -1;
	struct stat st;
	if (fstatat(tdfd, tbase, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT && defer)
			rc = 1;
		else
			refuse(p, e, errno == ENOENT ? 0 : errno, raw, "hard-link target %s %s",
			       sbx_err_show(rawlink, t, sizeof t),
			       errno == ENOENT ? "does not exist" : "cannot be inspected");
		goto out;
	}
	/* A symlink inside the root is linked as itself (linkat without AT_SYMLINK_FOLLOW). */
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		refuse(p, e, 0, raw, "hard-link target %s is not a regular file",
		       sbx_err_show(rawlink, t, sizeof t));
		goto out;
	}
	for (int tries = 0; tries < PUT_TRIES; tries++) {
		if (clear_slot(p, dfd, base, 'h', raw, e) < 0)
			goto out;
		if (linkat(tdfd, tbase, dfd, base, 0) == 0) {
			rc = 0;
			goto out;
		}
		if (errno != EEXIST) {
			refuse(p, e, errno, raw, "cannot link to %s",
			       sbx_err_show(rawlink, t, sizeof t));
			goto out;
		}
	}
	refuse(p, e, 0, raw, "the entry keeps changing");
out:
	close_dir(p, tdfd);
	return rc;
}

static int put_hardlink(struct sbx_put *p, int dfd, const char *base, const char *norm,
                        const struct sbx_put_member *m, struct sbx_err *e)
{
	const char *why;
	char t[80];
	if (m->link == NULL)
		return refuse(p, e, 0, m->name, "hard link without a target");
	size_t len = strlen(m->link);
	char *target = malloc(len + 1);
	if (target == NULL)
		return refuse(p, e, ENOMEM, m->name, "hard link");
	if (sbx_member_name(m->link, target, len + 1, &why) != 0) {
		refuse(p, e, 0, m->name, "hard-link target %s: %s",
		       sbx_err_show(m->link, t, sizeof t), why);
		free(target);
		return -1;
	}
	if (strcmp(target, norm) == 0) {
		free(target);
		return refuse(p, e, 0, m->name, "hard link to itself");
	}
	int rc = link_to(p, dfd, base, target, m->name, m->link, 1, e);
	if (rc == 1) {
		/* A forward reference: the target comes later in the archive. open_parent
		 * restored target; it is still the normalized name. */
		rc = add_pending(p, norm, target, m, e);
	}
	free(target);
	return rc;
}

/* Makes the pending hard links, in archive order, by the rules of put_hardlink; a target
 * still missing now is refused. */
static int finish_links(struct sbx_put *p, struct sbx_err *e)
{
	for (size_t i = 0; i < p->nlinks; i++) {
		struct pending_link *l = &p->links[i];
		if (l->dropped)
			continue;
		int dfd;
		const char *base;
		if (open_parent(p, l->name, 1, l->raw, "", &dfd, &base, e) != 0)
			return -1;
		int rc = link_to(p, dfd, base, l->target, l->raw, l->rawlink, 0, e);
		close_dir(p, dfd);
		if (rc != 0)
			return -1;
		l->dropped = 1;
		p->live_links--;
	}
	return 0;
}

static int valid_id(long long id)
{
	return id >= 0 && id < 0xffffffffLL && (long long)(uid_t)id == id &&
	       (long long)(gid_t)id == id;
}

static size_t longest_comp(const char *norm)
{
	size_t best = 0;
	while (*norm != '\0') {
		size_t n = strcspn(norm, "/");
		best = n > best ? n : best;
		norm += n + (norm[n] == '/');
	}
	return best;
}

int sbx_put_begin(struct sbx_put *p, const struct sbx_put_member *m, int *fd, struct sbx_err *e)
{
	if (fd != NULL)
		*fd = -1;
	if (p == NULL || m == NULL || m->name == NULL || fd == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_put_begin: missing argument");
	if (p->file_fd >= 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_put_begin: a file member is still open");
	int t = m->type;
	if (t != 'f' && t != 'd' && t != 'l' && t != 'h') {
		/* FIFOs, devices, sockets and anything unknown, in every mode. */
		if (t > 0x20 && t < 0x7f)
			return refuse(p, e, 0, m->name, "type '%c' is not allowed", t);
		return refuse(p, e, 0, m->name, "type %d is not allowed", t);
	}
	if (t == 'd' && sbx_member_is_root(m->name))
		return 0; /* "./": the root's own mode and owner are not the archive's to set */
	size_t len = strlen(m->name);
	char *norm = malloc(len + 1);
	if (norm == NULL)
		return refuse(p, e, ENOMEM, m->name, "out of memory");
	const char *why;
	int rc = -1;
	int dfd = -1;
	const char *base;
	if (sbx_member_name(m->name, norm, len + 1, &why) != 0) {
		refuse(p, e, 0, m->name, "%s", why);
		goto out;
	}
	if (longest_comp(norm) > NAME_MAX) {
		refuse(p, e, 0, m->name, "a path component is longer than %d bytes", NAME_MAX);
		goto out;
	}
	if (p->mode == SBX_PUT_SANDBOX && (!valid_id(m->uid) || !valid_id(m->gid))) {
		refuse(p, e, 0, m->name, "owner %lld:%lld out of range", m->uid, m->gid);
		goto out;
	}
	drop_pending(p, norm);
	if (t != 'f')
		drop_pdir(p); /* only runs of files share a kept folder */
	if (open_parent(p, norm, 1, m->name, "", &dfd, &base, e) != 0)
		goto out;
	if (t == 'f' && p->mode != SBX_PUT_SANDBOX && dfd != p->root && dfd != p->pdir_fd) {
		char *slash = strrchr(norm, '/');
		drop_pdir(p);
		p->pdir_name = strndup(norm, (size_t)(slash - norm));
		if (p->pdir_name != NULL)
			p->pdir_fd = dfd;
	}
	switch (t) {
	case 'f':
		rc = put_file(p, dfd, base, m, fd, e);
		break;
	case 'd':
		rc = put_dir(p, dfd, base, norm, m, e);
		break;
	case 'l':
		rc = put_symlink(p, dfd, base, norm, m, e);
		break;
	default:
		rc = put_hardlink(p, dfd, base, norm, m, e);
		break;
	}
	close_dir(p, dfd);
out:
	free(norm);
	return rc;
}

int sbx_put_end_file(struct sbx_put *p, int fd, struct sbx_err *e)
{
	if (p == NULL || fd < 0 || fd != p->file_fd) {
		if (fd >= 0)
			close(fd);
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_put_end_file: not the open file member");
	}
	p->file_fd = -1;
	int rc = apply_meta(p, fd, 0, p->file_mode, p->file_uid, p->file_gid, p->file_sec,
	                    p->file_nsec, p->file_name, e);
	p->file_mode_set = 0;
	if (close(fd) != 0 && rc == 0)
		rc = refuse(p, e, errno, p->file_name, "close");
	free(p->file_name);
	p->file_name = NULL;
	return rc;
}

static int deeper_first(const void *a, const void *b)
{
	const struct deferred *x = a;
	const struct deferred *y = b;
	if (x->depth != y->depth)
		return x->depth > y->depth ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Re-opens a directory beyond the fd budget by the safe walk; it must be the one placed. */
static int reopen_dir(struct sbx_put *p, struct deferred *d, struct sbx_err *e)
{
	int dfd;
	const char *base;
	if (open_parent(p, d->name, 0, d->name, "", &dfd, &base, e) != 0)
		return -1;
	int fd = sbx_walk_open(&p->w, dfd, base, O_RDONLY);
	int err = errno;
	close_dir(p, dfd);
	struct stat st;
	if (fd < 0)
		return refuse(p, e, err, d->name, "the directory cannot be re-opened");
	if (fstat(fd, &st) != 0 || st.st_dev != d->dev || st.st_ino != d->ino) {
		close(fd);
		return refuse(p, e, 0, d->name, "the directory was replaced during extraction");
	}
	return fd;
}

int sbx_put_finish(struct sbx_put *p, struct sbx_err *e)
{
	if (p == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_put_finish: no placement");
	if (p->file_fd >= 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_put_finish: a file member is still open");
	drop_pdir(p);
	if (p->refused)
		return sbx_err_set(e, SBX_ETRANSFER, 0,
		                   "a member was refused: directory modes not applied");
	/* Links first: a directory's final mode may not let anything in. */
	if (finish_links(p, e) != 0)
		return -1;
	if (p->ndirs > 0) /* qsort's array may not be NULL, even when empty */
		qsort(p->dirs, p->ndirs, sizeof *p->dirs, deeper_first);
	for (size_t i = 0; i < p->ndirs; i++) {
		struct deferred *d = &p->dirs[i];
		int fd = d->fd >= 0 ? d->fd : reopen_dir(p, d, e);
		if (fd < 0)
			return -1;
		int rc = apply_meta(p, fd, 1, d->mode, d->uid, d->gid, d->sec, d->nsec, d->name, e);
		if (d->fd < 0)
			close(fd);
		if (rc != 0)
			return -1;
	}
	return 0;
}

uint64_t sbx_put_owners_kept(const struct sbx_put *p)
{
	return p != NULL ? p->owners_kept : 0;
}

void sbx_put_free(struct sbx_put *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->ndirs; i++) {
		if (p->dirs[i].fd >= 0)
			close(p->dirs[i].fd);
		free(p->dirs[i].name);
	}
	free(p->dirs);
	for (size_t i = 0; i < p->nlinks; i++) {
		free(p->links[i].name);
		free(p->links[i].raw);
		free(p->links[i].target);
		free(p->links[i].rawlink);
	}
	free(p->links);
	free(p->ltab);
	if (p->file_fd >= 0)
		close(p->file_fd);
	free(p->file_name);
	drop_pdir(p);
	close(p->root);
	free(p);
}
