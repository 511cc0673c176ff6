/* Probe handlers: KIND, STAT, RESOLVE and LANDS_CLEAR, each from REQUEST payload to RESPONSE
 * payload. They only read (stat, lstat, readlink, realpath): nothing is created or opened for
 * writing, and a probe the agent cannot answer is an error, never a guess. */
#include "probe.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "proto.h"

static void put_error(struct sbx_msgw *w, const struct sbx_err *e)
{
	sbx_msgw_i64(w, SBX_T_STATUS, e->cls);
	sbx_msgw_i64(w, SBX_T_ERRNO, e->errnum);
	sbx_msgw_str(w, SBX_T_MESSAGE, e->msg);
}

/* Every handler ends here: a partial response must never reach the host, so an overflowed one
 * is replaced as a whole. */
static void finish(struct sbx_msgw *w)
{
	if (!w->overflow)
		return;
	sbx_msgw_init(w, w->buf, w->cap);
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_EUSAGE);
	sbx_msgw_i64(w, SBX_T_ERRNO, 0);
	sbx_msgw_str(w, SBX_T_MESSAGE, "response too large");
}

static void fail(struct sbx_msgw *w, const struct sbx_err *e)
{
	put_error(w, e);
	finish(w);
}

/* A path field as a C string. One the kernel could not take (PATH_MAX or longer) is the
 * kernel's answer, ENAMETOOLONG, so a long path reads as a failed probe rather than a bad
 * request; empty or NUL-holding ones are a caller's bug. */
static int field_path(const struct sbx_field *f, char *out, size_t cap, const char *what,
                      struct sbx_err *err)
{
	if (f->len == 0)
		return sbx_err_set(err, SBX_EUSAGE, 0, "empty %s", what);
	if (f->len >= cap)
		return sbx_err_set(err, SBX_EPROBE, ENAMETOOLONG, "%s of %lu bytes", what,
		                   (unsigned long)f->len);
	if (sbx_field_str(f, out, cap) != 0)
		return sbx_err_set(err, SBX_EUSAGE, 0, "%s holds a NUL byte", what);
	return 0;
}

/* The single PATH of a KIND, RESOLVE or LANDS_CLEAR request. The whole payload is checked
 * before the path is decoded, so a malformed request is always SBX_EUSAGE. */
static int one_path(const uint8_t *req, size_t len, char *out, size_t cap, struct sbx_err *err)
{
	struct sbx_msgr r;
	struct sbx_field f;
	struct sbx_field path = {0};
	int n = 0;
	int rc;
	sbx_msgr_init(&r, req, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag == SBX_T_PATH && n++ == 0)
			path = f;
	}
	if (rc < 0)
		return sbx_err_set(err, SBX_EUSAGE, 0, "malformed request");
	if (n == 0)
		return sbx_err_set(err, SBX_EUSAGE, 0, "request has no PATH");
	if (n > 1)
		return sbx_err_set(err, SBX_EUSAGE, 0, "request has %d PATH fields, wants one", n);
	return field_path(&path, out, cap, "PATH", err);
}

/* path made absolute from the current directory but not normalized: a ".." must still meet
 * the symlink before it when the result is resolved. */
static int absolute(const char *path, char *out, size_t cap, struct sbx_err *err)
{
	int n;
	if (path[0] == '/') {
		n = snprintf(out, cap, "%s", path);
	} else {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof cwd) == NULL)
			return sbx_err_set(err, SBX_EPROBE, errno, "getcwd for %s", path);
		n = snprintf(out, cap, "%s/%s", cwd, path);
	}
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, SBX_EPROBE, ENAMETOOLONG, "absolute path of %s", path);
	return 0;
}

int sbx_resolve_physical(const char *path, char *out, size_t cap, struct sbx_err *err)
{
	char abs[PATH_MAX];
	char real[PATH_MAX];
	char joined[2 * PATH_MAX];
	if (path[0] == '\0')
		return sbx_err_set(err, SBX_EPROBE, ENOENT, "resolve an empty path");
	if (absolute(path, abs, sizeof abs, err) != 0)
		return -1;
	/* abs[0, cut) is the prefix tried; abs + cut, the tail that does not exist yet. Only a
	 * missing component moves the cut up, as `cd -P` retries one level up: a component the
	 * agent may not search (EACCES) or a loop could hide anything, so it is an error. */
	size_t cut = strlen(abs);
	for (;;) {
		char save = abs[cut];
		abs[cut] = '\0';
		const char *r = realpath(cut > 0 ? abs : "/", real);
		int e = errno;
		if (r == NULL && ((e != ENOENT && e != ENOTDIR) || cut == 0)) {
			sbx_err_set(err, SBX_EPROBE, e, "resolve %s: realpath %s", path,
			            cut > 0 ? abs : "/");
			return -1;
		}
		abs[cut] = save;
		if (r != NULL)
			break;
		while (cut > 0 && abs[cut - 1] == '/')
			cut--;
		while (cut > 0 && abs[cut - 1] != '/')
			cut--;
		while (cut > 0 && abs[cut - 1] == '/')
			cut--;
	}
	/* The tail starts with a slash (or is empty), and ".." in it is lexical: nothing below the
	 * existing prefix exists for it to meet. */
	int n = snprintf(joined, sizeof joined, "%s%s", real, abs + cut);
	if (n < 0 || (size_t)n >= sizeof joined || sbx_path_normalize(joined, out, cap) != 0)
		return sbx_err_set(err, SBX_EPROBE, ENAMETOOLONG, "resolve %s: result too long",
		                   path);
	return 0;
}

const char *sbx_probe_kind_of(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR ? "absent" : NULL;
	return S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : "other";
}

void sbx_probe_kind(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char path[PATH_MAX];
	struct sbx_err err;
	sbx_err_clear(&err);
	if (one_path(req, len, path, sizeof path, &err) != 0) {
		fail(w, &err);
		return;
	}
	const char *kind = sbx_probe_kind_of(path);
	if (kind == NULL) {
		sbx_err_set(&err, SBX_EPROBE, errno, "stat %s", path);
		fail(w, &err);
		return;
	}
	if (strcmp(kind, "other") == 0)
		kind = "absent"; /* a fifo or a device, as `[ -d ]` and `[ -f ]` both say no */
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_OK);
	sbx_msgw_str(w, SBX_T_KIND, kind);
	finish(w);
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	if (S_ISFIFO(m))
		return "fifo";
	if (S_ISSOCK(m))
		return "socket";
	if (S_ISCHR(m))
		return "chardev";
	if (S_ISBLK(m))
		return "blockdev";
	return "unknown";
}

static int64_t mtime_ns(const struct stat *st)
{
	int64_t ns;
	/* A timestamp past year 2262 does not fit; it saturates rather than wraps. */
	if (__builtin_mul_overflow((int64_t)st->st_mtim.tv_sec, (int64_t)1000000000, &ns) ||
	    __builtin_add_overflow(ns, (int64_t)st->st_mtim.tv_nsec, &ns))
		return st->st_mtim.tv_sec < 0 ? INT64_MIN : INT64_MAX;
	return ns;
}

static void entry_error(struct sbx_msgw *e, const struct sbx_err *err)
{
	sbx_msgw_i64(e, SBX_T_ERRNO, err->errnum);
	sbx_msgw_str(e, SBX_T_MESSAGE, err->msg);
}

/* One STAT entry into e: the path exactly as sent, then its failure or its metadata. */
static void stat_entry(struct sbx_msgw *e, const struct sbx_field *f)
{
	char path[PATH_MAX];
	char target[PATH_MAX + 1];
	struct sbx_err err;
	struct stat st;
	ssize_t tlen = 0;
	sbx_err_clear(&err);
	sbx_msgw_bytes(e, SBX_T_PATH, f->val, f->len);
	if (field_path(f, path, sizeof path, "PATH", &err) != 0) {
		entry_error(e, &err);
		return;
	}
	if (lstat(path, &st) != 0) {
		sbx_err_set(&err, SBX_EPROBE, errno, "lstat %s", path);
		entry_error(e, &err);
		return;
	}
	if (S_ISLNK(st.st_mode)) {
		/* One byte more than any target can be, so a full buffer means truncation. */
		tlen = readlink(path, target, sizeof target);
		if (tlen < 0) {
			sbx_err_set(&err, SBX_EPROBE, errno, "readlink %s", path);
			entry_error(e, &err);
			return;
		}
		if ((size_t)tlen >= sizeof target) {
			sbx_err_set(&err, SBX_EPROBE, ENAMETOOLONG, "readlink %s", path);
			entry_error(e, &err);
			return;
		}
	}
	sbx_msgw_str(e, SBX_T_TYPE, type_name(st.st_mode));
	sbx_msgw_i64(e, SBX_T_MODE, st.st_mode & 07777);
	sbx_msgw_i64(e, SBX_T_UID_OF, st.st_uid);
	sbx_msgw_i64(e, SBX_T_GID_OF, st.st_gid);
	sbx_msgw_i64(e, SBX_T_SIZE, st.st_size);
	sbx_msgw_i64(e, SBX_T_MTIME_NS, mtime_ns(&st));
	if (S_ISLNK(st.st_mode))
		sbx_msgw_bytes(e, SBX_T_TARGET, target, (size_t)tlen);
}

void sbx_probe_stat(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	struct sbx_msgr r;
	struct sbx_field f;
	struct sbx_err err;
	size_t n = 0;
	size_t longest = 0;
	int rc;
	sbx_err_clear(&err);
	sbx_msgr_init(&r, req, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag != SBX_T_PATH)
			continue;
		n++;
		if (f.len == 0 || memchr(f.val, '\0', f.len) != NULL) {
			sbx_err_set(&err, SBX_EUSAGE, 0, "PATH %lu is empty or holds a NUL byte",
			            (unsigned long)n);
			fail(w, &err);
			return;
		}
		if (f.len > longest)
			longest = f.len;
	}
	if (rc < 0 || n == 0) {
		sbx_err_set(&err, SBX_EUSAGE, 0,
		            rc < 0 ? "malformed request" : "request has no PATH");
		fail(w, &err);
		return;
	}
	/* Room for the longest path as sent, a whole symlink target, and the small fields or an
	 * error message. A path too long to stat still gets an entry that echoes it. */
	size_t cap = longest + PATH_MAX + 1024;
	uint8_t *scratch = malloc(cap);
	if (scratch == NULL) {
		sbx_err_set(&err, SBX_EPROBE, ENOMEM, "stat of %lu paths", (unsigned long)n);
		fail(w, &err);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_OK);
	sbx_msgr_init(&r, req, len);
	while (!w->overflow && sbx_msgr_next(&r, &f) == 1) {
		if (f.tag != SBX_T_PATH)
			continue;
		struct sbx_msgw e;
		sbx_msgw_init(&e, scratch, cap);
		stat_entry(&e, &f);
		/* Sized above so this cannot happen; an overflowed entry must still not be sent. */
		if (e.overflow)
			w->overflow = 1;
		else
			sbx_msgw_bytes(w, SBX_T_ENTRY, e.buf, e.len);
	}
	free(scratch);
	finish(w);
}

void sbx_probe_resolve(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char path[PATH_MAX];
	char phys[PATH_MAX];
	struct sbx_err err;
	sbx_err_clear(&err);
	if (one_path(req, len, path, sizeof path, &err) != 0 ||
	    sbx_resolve_physical(path, phys, sizeof phys, &err) != 0) {
		fail(w, &err);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_OK);
	sbx_msgw_str(w, SBX_T_PHYSICAL, phys);
	finish(w);
}

/* Where phys stands to keep_out k: "inside" (or at it) or "above" it; NULL when clear. */
static const char *meets(const char *phys, const char *k)
{
	if (sbx_path_within(phys, k))
		return "inside";
	if (sbx_path_within(k, phys))
		return "above";
	return NULL;
}

/* Checks phys against one keep_out, lexically and physically. 1 with msg filled when it is
 * not clear, 0 when clear, -1 with *err when k cannot be resolved. */
static int against(const char *dir, const char *phys, const char *k, char *msg, size_t msgcap,
                   struct sbx_err *err)
{
	char kabs[PATH_MAX];
	char kname[PATH_MAX];
	char kphys[PATH_MAX];
	if (absolute(k, kabs, sizeof kabs, err) != 0)
		return -1;
	if (sbx_path_normalize(kabs, kname, sizeof kname) != 0)
		return sbx_err_set(err, SBX_EPROBE, ENAMETOOLONG, "keep_out %s", k);
	if (sbx_resolve_physical(k, kphys, sizeof kphys, err) != 0)
		return -1;
	const char *how = meets(phys, kname);
	if (how != NULL) {
		snprintf(msg, msgcap, "%s resolves to %s, %s keep_out %s", dir, phys, how, k);
		return 1;
	}
	how = meets(phys, kphys);
	if (how != NULL) {
		snprintf(msg, msgcap, "%s resolves to %s, %s keep_out %s (physically %s)", dir,
		         phys, how, k, kphys);
		return 1;
	}
	return 0;
}

void sbx_probe_lands_clear(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[PATH_MAX];
	char abs[PATH_MAX];
	char named[PATH_MAX];
	char phys[PATH_MAX];
	char k[PATH_MAX];
	char msg[4 * PATH_MAX + 128];
	struct sbx_msgr r;
	struct sbx_field f;
	struct sbx_err err;
	int clear = 1;
	sbx_err_clear(&err);
	msg[0] = '\0';
	if (one_path(req, len, dir, sizeof dir, &err) != 0) {
		fail(w, &err);
		return;
	}
	/* Every keep_out is checked before anything is resolved, so a bad one is refused even
	 * when the answer would not have needed it. */
	sbx_msgr_init(&r, req, len);
	while (sbx_msgr_next(&r, &f) == 1) {
		if (f.tag == SBX_T_KEEP_OUT && field_path(&f, k, sizeof k, "KEEP_OUT", &err) != 0) {
			fail(w, &err);
			return;
		}
	}
	if (absolute(dir, abs, sizeof abs, &err) != 0) {
		fail(w, &err);
		return;
	}
	if (sbx_path_normalize(abs, named, sizeof named) != 0) {
		sbx_err_set(&err, SBX_EPROBE, ENAMETOOLONG, "normalize %s", dir);
		fail(w, &err);
		return;
	}
	if (sbx_resolve_physical(dir, phys, sizeof phys, &err) != 0) {
		fail(w, &err);
		return;
	}
	/* Landing where the name says is the caller's to judge by that name; only a diversion
	 * through a link is this probe's business. */
	if (strcmp(phys, named) != 0) {
		sbx_msgr_init(&r, req, len);
		while (clear && sbx_msgr_next(&r, &f) == 1) {
			if (f.tag != SBX_T_KEEP_OUT)
				continue;
			sbx_field_str(&f, k, sizeof k); /* checked above */
			int rc = against(dir, phys, k, msg, sizeof msg, &err);
			if (rc < 0) {
				fail(w, &err);
				return;
			}
			clear = rc == 0;
		}
	}
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_OK);
	sbx_msgw_i64(w, SBX_T_CLEAR, clear);
	sbx_msgw_str(w, SBX_T_PHYSICAL, phys);
	if (!clear)
		sbx_msgw_str(w, SBX_T_MESSAGE, msg);
	finish(w);
}
