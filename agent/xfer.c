/* Transfer jobs: request parsing, the child process, staging and commit (see xfer.h). */
#include "xfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "msg.h"
#include "pack.h"
#include "paths.h"
#include "probe.h"
#include "proto.h"
#include "strv.h"
#include "sys.h"
#include "treemove.h"
#include "unpack.h"
#include "walk.h"

#define STAGE_PREFIX ".sbx-stage"

/* A non-empty string field (NULL for an empty one or one holding a NUL). */
static char *dup_field(const struct sbx_field *f)
{
	return f->len == 0 ? NULL : sbx_field_strdup(f);
}

void sbx_xfer_req_free(struct sbx_xfer_req *r)
{
	free(r->path);
	free(r->only);
	sbx_strv_free(r->names);
	sbx_strv_free(r->exclude);
	memset(r, 0, sizeof *r);
}

int sbx_xfer_parse(int upload, const uint8_t *p, size_t len, struct sbx_xfer_req *r,
                   struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	r->upload = upload;
	size_t nn = 0, ne = 0;
	struct sbx_msgr rd;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&rd, p, len);
	while ((rc = sbx_msgr_next(&rd, &f)) == 1) {
		int64_t v = 0;
		char *s;
		switch (f.tag) {
		case SBX_T_PATH:
			if ((s = dup_field(&f)) == NULL)
				goto bad;
			free(r->path);
			r->path = s;
			break;
		case SBX_T_ONLY:
			/* One component: the file lands in the target folder under this name. */
			if ((s = dup_field(&f)) == NULL || strchr(s, '/') != NULL ||
			    strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strlen(s) > 255) {
				free(s);
				goto bad;
			}
			free(r->only);
			r->only = s;
			break;
		case SBX_T_NAMES:
		case SBX_T_EXCLUDE:
			if ((s = dup_field(&f)) == NULL)
				goto bad;
			if (sbx_strv_push(f.tag == SBX_T_NAMES ? &r->names : &r->exclude,
			                  f.tag == SBX_T_NAMES ? &nn : &ne, s) != 0)
				goto bad;
			break;
		case SBX_T_XMODE:
		case SBX_T_READABLE:
		case SBX_T_OPEN:
		case SBX_T_FORCE_WALK:
		case SBX_T_SKIP_UNSAFE:
			if (sbx_field_i64(&f, &v) != 0 || v < 0 || v > 1)
				goto bad;
			if (f.tag == SBX_T_XMODE)
				r->xmode = (int)v;
			else if (f.tag == SBX_T_READABLE)
				r->readable = (int)v;
			else if (f.tag == SBX_T_OPEN)
				r->open = (int)v;
			else if (f.tag == SBX_T_FORCE_WALK)
				r->force_walk = (int)v;
			else
				r->skip_unsafe = (int)v;
			break;
		default:
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (r->path == NULL || r->path[0] != '/') {
		sbx_xfer_req_free(r);
		return sbx_err_set(e, SBX_EUSAGE, 0, "a transfer needs an absolute PATH");
	}
	return 0;
bad:
	sbx_xfer_req_free(r);
	return sbx_err_set(e, SBX_EUSAGE, 0, "malformed transfer request");
}

/* ---- the child ---- */

struct out {
	int res_fd;
	struct sbx_msgw w;
	uint8_t buf[SBX_XFER_RES_MAX];
	char notes[1024];
};

static void note(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct out *o, const char *fmt, ...)
{
	size_t len = strlen(o->notes);
	if (len + 4 >= sizeof o->notes)
		return;
	if (len > 0) {
		memcpy(o->notes + len, "; ", 3);
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->notes + len, sizeof o->notes - len, fmt, ap);
	va_end(ap);
}

static void send_result(struct out *o)
{
	const uint8_t *b = o->buf;
	size_t left = o->w.len;
	while (left > 0) {
		ssize_t n = write(o->res_fd, b, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		b += n;
		left -= (size_t)n;
	}
}

_Noreturn static void fail_exit(struct out *o, const struct sbx_err *e)
{
	sbx_msgw_init(&o->w, o->buf, sizeof o->buf);
	sbx_msgw_i64(&o->w, SBX_T_STATUS, e->cls);
	sbx_msgw_i64(&o->w, SBX_T_ERRNO, e->errnum);
	sbx_msgw_str(&o->w, SBX_T_MESSAGE, e->msg);
	if (o->notes[0] != '\0')
		sbx_msgw_str(&o->w, SBX_T_NOTE, o->notes);
	send_result(o);
	_exit(1);
}

/* Opens the folder at the physical absolute path phys by the safe walk from "/", creating
 * missing components (0755) when create is set: phys is already physical, so a link appearing
 * now is a race and refused. */
static int open_phys_dir(const char *phys, int create, struct sbx_err *e)
{
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "open /");
	char rel[4096];
	snprintf(rel, sizeof rel, "%s", phys + 1);
	if (rel[0] == '\0')
		return root;
	struct sbx_walk w;
	sbx_walk_init(&w, 0);
	int fd = sbx_walk_dir(&w, root, rel, create, O_RDONLY, "", e);
	close(root);
	if (fd < 0)
		sbx_err_prefix(e, "the folder %s", phys);
	return fd;
}

/* Opens a folder to every user (a+rwx, keeping a sticky bit), as upload_path's prepare does;
 * where that is not allowed the folder must at least be writable by us. */
static int open_to_all(int fd, const char *what, struct out *o, struct sbx_err *e)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "stat %s", what);
	if ((st.st_mode & 0777) == 0777)
		return 0;
	if (fchmod(fd, (st.st_mode & 07000) | 0777) == 0)
		return 0;
	int err = errno;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (access(proc, W_OK | X_OK) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, err,
		                   "%s cannot be opened to all users and is not writable by uid %u",
		                   what, (unsigned)geteuid());
	note(o, "%s left at mode %04o (cannot open it to all users as uid %u: %s)", what,
	     (unsigned)(st.st_mode & 07777), (unsigned)geteuid(), strerror(err));
	return 0;
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Empties the folder fd except the entry keep. */
static int empty_except(int fd, const char *keep, struct sbx_err *e)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		return sbx_err_set(e, SBX_ETRANSFER, errno, "list the target");
	}
	rewinddir(d);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	int rc = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, keep) == 0)
			continue;
		char *s = strdup(de->d_name);
		if (s == NULL || sbx_strv_push(&names, &n, s) != 0) {
			rc = sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "list the target");
			break;
		}
	}
	closedir(d);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = sbx_rmtree_at(fd, names[i], e);
	sbx_strv_free(names);
	return rc;
}

enum place {
	IN_PARENT, /* stage beside the target in its parent, rename (or exchange) into place */
	IN_TARGET, /* stage inside the target folder, merge (or empty then merge) */
};

_Noreturn static void upload(const struct sbx_xfer_req *r, struct out *o, int commit_fd)
{
	struct sbx_err e;
	sbx_err_clear(&e);
	char phys[4096], parent[4096], base[256];
	if (sbx_resolve_physical(r->path, phys, sizeof phys, &e) != 0) {
		e.cls = SBX_ETRANSFER;
		fail_exit(o, &e);
	}
	const char *slash = strrchr(phys, '/');
	if (strlen(slash + 1) >= sizeof base) {
		sbx_err_set(&e, SBX_ETRANSFER, ENAMETOOLONG, "target %s", r->path);
		fail_exit(o, &e);
	}
	snprintf(base, sizeof base, "%s", slash + 1);
	snprintf(parent, sizeof parent, "%.*s", slash == phys ? 1 : (int)(slash - phys), phys);

	/* The target: what is there now decides where the staging folder goes. */
	struct stat tst, pst;
	int exists = lstat(phys, &tst) == 0;
	if (!exists && errno != ENOENT) {
		sbx_err_set(&e, SBX_ETRANSFER, errno, "target %s", r->path);
		fail_exit(o, &e);
	}
	if (exists && !S_ISDIR(tst.st_mode) && r->xmode == SBX_XMODE_MERGE) {
		sbx_err_set(&e, SBX_ETRANSFER, ENOTDIR, "target %s is not a folder", r->path);
		fail_exit(o, &e);
	}
	enum place where = IN_PARENT;
	if (base[0] == '\0') {
		if (r->xmode == SBX_XMODE_REPLACE) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "refusing to replace /");
			fail_exit(o, &e);
		}
		where = IN_TARGET;
	} else if (exists && S_ISDIR(tst.st_mode)) {
		/* A mount point cannot be exchanged: stage inside it instead. */
		int mount = lstat(parent, &pst) == 0 && pst.st_dev != tst.st_dev;
		where = r->xmode == SBX_XMODE_MERGE || mount ? IN_TARGET : IN_PARENT;
	}
	int home = where == IN_TARGET ? open_phys_dir(phys, 0, &e) : open_phys_dir(parent, 1, &e);
	if (home < 0)
		fail_exit(o, &e);
	if (where == IN_TARGET && r->open && open_to_all(home, r->path, o, &e) != 0)
		fail_exit(o, &e);
	char stage[64];
	int sfd = sbx_mkstage(home, STAGE_PREFIX, stage, sizeof stage, &e);
	if (sfd < 0)
		fail_exit(o, &e);

	struct sbx_unpack_opts uo = {.in_fd = 0,
	                             .root_fd = sfd,
	                             .mode = SBX_PUT_SANDBOX,
	                             .force_walk = r->force_walk,
	                             .readable = r->readable,
	                             .tee_fd = -1,
	                             .only = r->only};
	struct sbx_unpack_stats st;
	memset(&st, 0, sizeof st);
	int rc = sbx_unpack(&uo, &st, &e);
	/* The host's word: its SHA-256 of what it sent, or nothing (cancelled, channel lost). */
	uint8_t want[SBX_SHA256_LEN];
	if (rc == 0) {
		ssize_t n = read_full(commit_fd, want, sizeof want);
		if (n != (ssize_t)sizeof want)
			rc = sbx_err_set(&e, SBX_EUNAVAILABLE, 0,
			                 "the upload was abandoned before COMMIT (cancelled or the "
			                 "channel was lost); %s is unchanged",
			                 r->path);
		else if (memcmp(want, st.sha256, sizeof want) != 0) {
			char a[65], b[65];
			sbx_hex(want, SBX_SHA256_LEN, a);
			sbx_hex(st.sha256, SBX_SHA256_LEN, b);
			rc = sbx_err_set(
			        &e, SBX_ETRANSFER, 0,
			        "the archive's SHA-256 differs: the host sent %s, the agent "
			        "read %s; %s is unchanged",
			        a, b, r->path);
		}
	}
	if (rc == 0 && st.owners_kept > 0)
		note(o,
		     "%llu members keep uid %u: the agent does not run as root, so the archive's "
		     "owners could not be set",
		     (unsigned long long)st.owners_kept, (unsigned)geteuid());
	if (rc == 0) {
		/* Commit. */
		mode_t top = r->open ? 0777 : 0755;
		if (where == IN_PARENT) {
			if (fchmod(sfd, top) != 0) {
				rc = sbx_err_set(&e, SBX_ETRANSFER, errno, "mode of %s", r->path);
			} else if (!exists) {
				if (renameat(home, stage, home, base) != 0)
					rc = sbx_err_set(&e, SBX_ETRANSFER, errno,
					                 "move the new tree to %s", r->path);
			} else if (sbx_renameat2(home, stage, home, base, SBX_RENAME_EXCHANGE) !=
			           0) {
				rc = sbx_err_set(&e, SBX_ETRANSFER, errno,
				                 "exchange the new tree with %s", r->path);
			} else if (sbx_rmtree_at(home, stage, &e) != 0) {
				/* The new tree is in place; the old one is left beside it. */
				note(o, "the old tree is left at %s/%s: %s", parent, stage, e.msg);
				sbx_err_clear(&e);
			}
		} else {
			if (r->xmode == SBX_XMODE_REPLACE)
				rc = empty_except(home, stage, &e);
			if (rc == 0)
				rc = sbx_tree_merge(sfd, home, 1, &e);
			struct sbx_err e2;
			if (sbx_rmtree_at(home, stage, &e2) != 0 && rc == 0)
				note(o, "staging folder left: %s", e2.msg);
		}
	}
	if (rc != 0) {
		struct sbx_err e2;
		if (sbx_rmtree_at(home, stage, &e2) != 0)
			note(o, "staging folder %s/%s left: %s", where == IN_TARGET ? phys : parent,
			     stage, e2.msg);
		fail_exit(o, &e);
	}
	sbx_msgw_init(&o->w, o->buf, sizeof o->buf);
	sbx_msgw_i64(&o->w, SBX_T_STATUS, 0);
	sbx_msgw_bytes(&o->w, SBX_T_SHA256, st.sha256, sizeof st.sha256);
	sbx_msgw_i64(&o->w, SBX_T_FILES, (int64_t)st.files);
	sbx_msgw_i64(&o->w, SBX_T_DIRS, (int64_t)st.dirs);
	sbx_msgw_i64(&o->w, SBX_T_LINKS, (int64_t)(st.symlinks + st.hardlinks));
	sbx_msgw_i64(&o->w, SBX_T_BYTES, (int64_t)st.data_bytes);
	sbx_msgw_i64(&o->w, SBX_T_ARCHIVE_BYTES, (int64_t)st.archive_bytes);
	sbx_msgw_str(&o->w, SBX_T_PHYSICAL, phys);
	if (o->notes[0] != '\0')
		sbx_msgw_str(&o->w, SBX_T_NOTE, o->notes);
	send_result(o);
	_exit(0);
}

_Noreturn static void download(const struct sbx_xfer_req *r, struct out *o)
{
	struct sbx_err e;
	sbx_err_clear(&e);
	const char *kind = sbx_probe_kind_of(r->path);
	if (kind == NULL) {
		sbx_err_set(&e, SBX_ETRANSFER, errno, "source %s", r->path);
		fail_exit(o, &e);
	}
	if (strcmp(kind, "other") == 0) {
		sbx_err_set(&e, SBX_ETRANSFER, 0, "source %s is neither a file nor a folder",
		            r->path);
		fail_exit(o, &e);
	}
	struct sbx_pack_stats ps;
	memset(&ps, 0, sizeof ps);
	if (strcmp(kind, "absent") != 0) {
		char phys[4096], name[256];
		const char *one[2] = {NULL, NULL};
		struct sbx_pack_opts po = {.names = (const char *const *)r->names,
		                           .exclude = (const char *const *)r->exclude,
		                           .skip_unsafe = r->skip_unsafe,
		                           .out_fd = 1,
		                           /* this child packs one stream: SIGBUS is its own */
		                           .map_files = getenv("SBX_PACK_NOMAP") == NULL};
		int fd;
		if (kind[0] == 'd') {
			fd = open(r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		} else {
			/* One member named as the path names the file, read from where the path
			 * physically leads. */
			if (sbx_resolve_physical(r->path, phys, sizeof phys, &e) != 0) {
				e.cls = SBX_ETRANSFER;
				fail_exit(o, &e);
			}
			char *sl = strrchr(phys, '/');
			const char *want = strrchr(r->path, '/') + 1;
			if (strlen(sl + 1) >= sizeof name || *want == '\0') {
				sbx_err_set(&e, SBX_ETRANSFER, ENAMETOOLONG, "source %s", r->path);
				fail_exit(o, &e);
			}
			snprintf(name, sizeof name, "%s", sl + 1);
			if (sl == phys)
				sl[1] = '\0';
			else
				*sl = '\0';
			fd = open(phys, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			one[0] = name;
			po.names = one;
			po.exclude = NULL;
			po.as_name = want;
		}
		if (fd < 0) {
			sbx_err_set(&e, SBX_ETRANSFER, errno, "open %s", r->path);
			fail_exit(o, &e);
		}
		po.root_fd = fd;
		if (sbx_pack(&po, &ps, &e) != 0)
			fail_exit(o, &e);
		close(fd);
	}
	close(1);
	sbx_msgw_init(&o->w, o->buf, sizeof o->buf);
	sbx_msgw_i64(&o->w, SBX_T_STATUS, 0);
	sbx_msgw_str(&o->w, SBX_T_KIND, kind);
	if (strcmp(kind, "absent") != 0) {
		sbx_msgw_bytes(&o->w, SBX_T_SHA256, ps.sha256, sizeof ps.sha256);
		sbx_msgw_i64(&o->w, SBX_T_FILES, (int64_t)ps.files);
		sbx_msgw_i64(&o->w, SBX_T_DIRS, (int64_t)ps.dirs);
		sbx_msgw_i64(&o->w, SBX_T_LINKS, (int64_t)(ps.symlinks + ps.hardlinks));
		sbx_msgw_i64(&o->w, SBX_T_BYTES, (int64_t)ps.data_bytes);
		sbx_msgw_i64(&o->w, SBX_T_ARCHIVE_BYTES, (int64_t)ps.archive_bytes);
		sbx_msgw_i64(&o->w, SBX_T_SKIPPED, (int64_t)ps.skipped);
		sbx_msgw_i64(&o->w, SBX_T_EXCLUDED, (int64_t)ps.excluded);
	}
	send_result(o);
	_exit(0);
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

int sbx_xfer_spawn(const struct sbx_xfer_req *r, struct sbx_xfer_child *c, struct sbx_err *e)
{
	c->pid = -1;
	c->fd_in = c->fd_out = c->fd_res = c->fd_commit = -1;
	int data[2] = {-1, -1}, res[2] = {-1, -1}, com[2] = {-1, -1};
	int ok = pipe2(data, O_CLOEXEC) == 0 && pipe2(res, O_CLOEXEC) == 0 &&
	         (!r->upload || pipe2(com, O_CLOEXEC) == 0);
	if (!ok) {
		int err = errno;
		close_pair(data), close_pair(res), close_pair(com);
		return sbx_err_set(e, SBX_ETRANSFER, err, "transfer pipes");
	}
	/* Bigger pipes: fewer wake-ups per MiB (best effort). */
	fcntl(data[0], F_SETPIPE_SZ, 1 << 20);
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close_pair(data), close_pair(res), close_pair(com);
		return sbx_err_set(e, SBX_ETRANSFER, err, "fork");
	}
	if (pid == 0) {
		/* fd 0 the archive in (upload) or /dev/null, fd 1 the archive out (download) or
		 * /dev/null, fd 2 /dev/null, fd 3 the result, fd 4 the commit pipe; nothing else
		 * (the channel to the host in particular) stays open. */
		setpgid(0, 0);
		signal(SIGPIPE, SIG_IGN);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		int want[5] = {r->upload ? data[0] : nul, r->upload ? nul : data[1], nul, res[1],
		               r->upload ? com[0] : nul};
		/* Move the sources above 4 first so dup2 never overwrites one still needed. */
		for (int i = 0; i < 5; i++) {
			int t = fcntl(want[i], F_DUPFD_CLOEXEC, 10);
			if (t < 0)
				_exit(3);
			want[i] = t;
		}
		for (int i = 0; i < 5; i++)
			if (dup2(want[i], i) < 0)
				_exit(3);
		sbx_close_from(5, 0);
		struct out *o = calloc(1, sizeof *o);
		if (o == NULL)
			_exit(3);
		o->res_fd = 3;
		if (r->upload)
			upload(r, o, 4);
		download(r, o);
	}
	close(r->upload ? data[0] : data[1]);
	close(res[1]);
	if (r->upload)
		close(com[0]);
	c->pid = pid;
	c->fd_in = r->upload ? data[1] : -1;
	c->fd_out = r->upload ? -1 : data[0];
	c->fd_res = res[0];
	c->fd_commit = r->upload ? com[1] : -1;
	return 0;
}
