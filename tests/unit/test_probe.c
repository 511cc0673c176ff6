/* Probe handlers end to end: a request built with sbx_msgw, the handler run against a real tree
 * under /tmp, the response decoded with sbx_msgr. The tree holds the shapes that matter: links
 * to dirs, dangling links, a loop, a fifo, a socket, and links that divert into a keep_out. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "fixture.h"
#include "msg.h"
#include "probe.h"
#include "proto.h"

#define RESP_CAP (1024 * 1024)
#define REQ_CAP (64 * 1024)
#define MTIME_SEC 1700000000
#define MTIME_NSEC 123456789

typedef void (*handler)(const uint8_t *req, size_t len, struct sbx_msgw *w);

struct tree {
	char root[PATH_MAX]; /* physical: /tmp itself may be a link */
	uint8_t req[REQ_CAP];
	size_t req_len;
	uint8_t resp[RESP_CAP];
	size_t resp_len;
	char long_target[PATH_MAX]; /* PATH_MAX - 1 bytes, the longest a link may hold */
};

static char *at(const struct tree *t, const char *rel, char *buf)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", t->root, rel);
	assert_true(n > 0 && n < PATH_MAX);
	return buf;
}

/* ---- tree ------------------------------------------------------------------------------ */

static int make_tree(void **state)
{
	struct tree *t = calloc(1, sizeof *t);
	char tmpl[64];
	char p[PATH_MAX];
	char q[PATH_MAX];
	if (t == NULL || fixture_tmpdir(tmpl, sizeof tmpl, "probe") != 0 ||
	    realpath(tmpl, t->root) == NULL)
		return -1;
	*state = t;

	int fd = open(at(t, "file", p), O_WRONLY | O_CREAT | O_EXCL, 0640);
	if (fd < 0 || write(fd, "hello", 5) != 5 || close(fd) != 0 || chmod(p, 0640) != 0)
		return -1;
	struct timespec ts[2] = {{MTIME_SEC, MTIME_NSEC}, {MTIME_SEC, MTIME_NSEC}};
	if (utimensat(AT_FDCWD, p, ts, 0) != 0)
		return -1;
	if (mkdir(at(t, "dir", p), 0755) || mkdir(at(t, "dir/sub", p), 0755) ||
	    mkdir(at(t, "keep", p), 0755) || mkdir(at(t, "keep/inner", p), 0755) ||
	    mkdir(at(t, "locked", p), 0755))
		return -1;
	fd = open(at(t, "locked/inner", p), O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0 || close(fd) != 0 || chmod(at(t, "locked", p), 0) != 0)
		return -1;
	if (mkfifo(at(t, "fifo", p), 0600))
		return -1;
	if (symlink("dir", at(t, "link_dir", p)) || symlink("dir/sub", at(t, "deep", p)) ||
	    symlink("nowhere", at(t, "dangling", p)) || symlink("loop", at(t, "loop", p)) ||
	    symlink(at(t, "keep", q), at(t, "out", p)) || symlink(".", at(t, "top", p)) ||
	    symlink("dir", at(t, "elsewhere", p)) || symlink("keep", at(t, "kl", p)))
		return -1;
	memset(t->long_target, 'a', PATH_MAX - 1);
	for (size_t i = 100; i < PATH_MAX - 1; i += 100)
		t->long_target[i] = '/'; /* a target of many short names, as the kernel allows */
	t->long_target[PATH_MAX - 1] = '\0';
	if (symlink(t->long_target, at(t, "longlink", p)))
		return -1;

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || chdir(t->root) != 0)
		return -1;
	/* Bound by a relative name: sun_path is too short for every /tmp path. */
	strcpy(sa.sun_path, "sock");
	if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || close(s) != 0 || chdir("/") != 0)
		return -1;
	return 0;
}

static int remove_tree(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	if (t == NULL)
		return 0;
	chmod(at(t, "locked", p), 0755);
	int rc = fixture_rmtree(t->root);
	free(t);
	return rc == 0 ? 0 : -1;
}

/* ---- requests and responses ------------------------------------------------------------- */

static void begin(struct tree *t)
{
	t->req_len = 0;
}

static void add(struct tree *t, uint16_t tag, const char *s)
{
	struct sbx_msgw w;
	sbx_msgw_init(&w, t->req + t->req_len, REQ_CAP - t->req_len);
	sbx_msgw_str(&w, tag, s);
	assert_false(w.overflow);
	t->req_len += w.len;
}

static void run_cap(struct tree *t, handler h, size_t cap)
{
	struct sbx_msgw w;
	memset(t->resp, 0xa5, RESP_CAP);
	sbx_msgw_init(&w, t->resp, cap);
	h(t->req, t->req_len, &w);
	assert_false(w.overflow);
	t->resp_len = w.len;
}

static void run(struct tree *t, handler h)
{
	run_cap(t, h, RESP_CAP);
}

static void run1(struct tree *t, handler h, const char *path)
{
	begin(t);
	add(t, SBX_T_PATH, path);
	run(t, h);
}

static int64_t i64_of(const uint8_t *p, size_t len, uint16_t tag)
{
	struct sbx_field f;
	int64_t v;
	assert_int_equal(sbx_msg_find(p, len, tag, &f), 1);
	assert_int_equal(sbx_field_i64(&f, &v), 0);
	return v;
}

static const char *str_of(const uint8_t *p, size_t len, uint16_t tag, char *out, size_t cap)
{
	struct sbx_field f;
	assert_int_equal(sbx_msg_find(p, len, tag, &f), 1);
	assert_int_equal(sbx_field_str(&f, out, cap), 0);
	return out;
}

static int has(const uint8_t *p, size_t len, uint16_t tag)
{
	struct sbx_field f;
	return sbx_msg_find(p, len, tag, &f);
}

/* The first field is STATUS, always. */
static int64_t status(const struct tree *t)
{
	struct sbx_msgr r;
	struct sbx_field f;
	int64_t v;
	sbx_msgr_init(&r, t->resp, t->resp_len);
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(f.tag, SBX_T_STATUS);
	assert_int_equal(sbx_field_i64(&f, &v), 0);
	while ((v = sbx_msgr_next(&r, &f)) == 1)
		;
	assert_int_equal(v, 0); /* the whole response parses */
	sbx_msgr_init(&r, t->resp, t->resp_len);
	sbx_msgr_next(&r, &f);
	sbx_field_i64(&f, &v);
	return v;
}

static void expect_ok(const struct tree *t)
{
	assert_int_equal(status(t), SBX_OK);
	assert_int_equal(has(t->resp, t->resp_len, SBX_T_ERRNO), 0);
}

static void expect_error(const struct tree *t, enum sbx_err_class cls, int errnum)
{
	char msg[512];
	assert_int_equal(status(t), cls);
	assert_int_equal(i64_of(t->resp, t->resp_len, SBX_T_ERRNO), errnum);
	assert_true(strlen(str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg)) > 0);
}

static void expect_kind(struct tree *t, const char *path, const char *want)
{
	char kind[16];
	run1(t, sbx_probe_kind, path);
	expect_ok(t);
	assert_string_equal(str_of(t->resp, t->resp_len, SBX_T_KIND, kind, sizeof kind), want);
}

static char *long_path(const char *root, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	snprintf(s, n + 1, "%s", root);
	for (size_t i = strlen(root); i < n; i++)
		s[i] = i % 2 ? 'x' : '/';
	s[n] = '\0';
	return s;
}

/* ---- KIND ------------------------------------------------------------------------------- */

static void kind_answers(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	expect_kind(t, at(t, "file", p), "file");
	expect_kind(t, at(t, "dir", p), "dir");
	expect_kind(t, at(t, "dir/", p), "dir");
	expect_kind(t, at(t, "link_dir", p), "dir"); /* followed, as [ -d ] does */
	expect_kind(t, at(t, "missing", p), "absent");
	expect_kind(t, at(t, "missing/deeper", p), "absent");
	expect_kind(t, at(t, "file/x", p), "absent"); /* ENOTDIR */
	expect_kind(t, at(t, "dangling", p), "absent");
	expect_kind(t, at(t, "fifo", p), "absent");
	expect_kind(t, at(t, "sock", p), "absent");
	expect_kind(t, "/dev/null", "absent");
	expect_kind(t, "/", "dir");
}

static void kind_probe_errors_are_not_absent(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	run1(t, sbx_probe_kind, at(t, "loop", p));
	expect_error(t, SBX_EPROBE, ELOOP);
	run1(t, sbx_probe_kind, at(t, "loop/x", p));
	expect_error(t, SBX_EPROBE, ELOOP);

	/* Longer than PATH_MAX: the agent does not even try, and says why. */
	char *lp = long_path(t->root, 5000);
	run1(t, sbx_probe_kind, lp);
	expect_error(t, SBX_EPROBE, ENAMETOOLONG);
	free(lp);

	/* Short, but one name longer than NAME_MAX: the kernel's ENAMETOOLONG. */
	char name[400];
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	assert_true(snprintf(p, sizeof p, "%s/%s", t->root, name) < (int)sizeof p);
	run1(t, sbx_probe_kind, p);
	expect_error(t, SBX_EPROBE, ENAMETOOLONG);

	/* Root searches a mode 000 dir anyway; anyone else gets EACCES, which is not absent. */
	run1(t, sbx_probe_kind, at(t, "locked/inner", p));
	if (geteuid() == 0) {
		expect_ok(t);
	} else {
		expect_error(t, SBX_EPROBE, EACCES);
		run1(t, sbx_probe_resolve, at(t, "locked/inner/x", p));
		expect_error(t, SBX_EPROBE, EACCES);
	}
}

static void requests_are_checked(void **state)
{
	struct tree *t = *state;
	handler hs[] = {sbx_probe_kind, sbx_probe_resolve, sbx_probe_lands_clear, sbx_probe_stat};
	for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
		begin(t); /* no PATH */
		add(t, SBX_T_KEEP_OUT, "/x");
		run(t, hs[i]);
		expect_error(t, SBX_EUSAGE, 0);

		begin(t);
		add(t, SBX_T_PATH, "");
		run(t, hs[i]);
		expect_error(t, SBX_EUSAGE, 0);

		/* A PATH holding a NUL byte. */
		struct sbx_msgw w;
		sbx_msgw_init(&w, t->req, REQ_CAP);
		sbx_msgw_bytes(&w, SBX_T_PATH, "/tmp\0/etc", 9);
		t->req_len = w.len;
		run(t, hs[i]);
		expect_error(t, SBX_EUSAGE, 0);

		/* Truncated: the last field runs past the end. */
		begin(t);
		add(t, SBX_T_PATH, "/");
		t->req_len -= 1;
		run(t, hs[i]);
		expect_error(t, SBX_EUSAGE, 0);
	}

	/* KIND and RESOLVE take exactly one PATH; unknown tags are skipped. */
	begin(t);
	add(t, SBX_T_PATH, "/");
	add(t, SBX_T_PATH, "/tmp");
	run(t, sbx_probe_kind);
	expect_error(t, SBX_EUSAGE, 0);
	begin(t);
	add(t, 999, "ignored");
	add(t, SBX_T_PATH, "/");
	run(t, sbx_probe_resolve);
	expect_ok(t);

	/* LANDS_CLEAR refuses an empty KEEP_OUT. */
	begin(t);
	add(t, SBX_T_PATH, "/tmp");
	add(t, SBX_T_KEEP_OUT, "");
	run(t, sbx_probe_lands_clear);
	expect_error(t, SBX_EUSAGE, 0);
}

/* ---- STAT ------------------------------------------------------------------------------- */

/* The ENTRY fields of the response, in order. */
static size_t entries(const struct tree *t, struct sbx_field *out, size_t max)
{
	struct sbx_msgr r;
	struct sbx_field f;
	size_t n = 0;
	expect_ok(t);
	sbx_msgr_init(&r, t->resp, t->resp_len);
	while (sbx_msgr_next(&r, &f) == 1) {
		if (f.tag == SBX_T_ENTRY && n < max)
			out[n++] = f;
	}
	return n;
}

static void expect_entry_type(const struct sbx_field *e, const char *path, const char *type)
{
	char s[PATH_MAX];
	assert_string_equal(str_of(e->val, e->len, SBX_T_PATH, s, sizeof s), path);
	assert_int_equal(has(e->val, e->len, SBX_T_ERRNO), 0);
	assert_string_equal(str_of(e->val, e->len, SBX_T_TYPE, s, sizeof s), type);
	assert_int_equal(has(e->val, e->len, SBX_T_MODE), 1);
	assert_int_equal(has(e->val, e->len, SBX_T_UID_OF), 1);
	assert_int_equal(has(e->val, e->len, SBX_T_GID_OF), 1);
	assert_int_equal(has(e->val, e->len, SBX_T_SIZE), 1);
	assert_int_equal(has(e->val, e->len, SBX_T_MTIME_NS), 1);
	assert_int_equal(has(e->val, e->len, SBX_T_TARGET), strcmp(type, "symlink") == 0);
}

static void stat_batch(void **state)
{
	struct tree *t = *state;
	char p[8][PATH_MAX];
	char s[PATH_MAX];
	const char *names[] = {"file", "missing", "link_dir", "fifo", "dir", "dangling", "sock"};
	begin(t);
	for (size_t i = 0; i < 7; i++)
		add(t, SBX_T_PATH, at(t, names[i], p[i]));
	add(t, SBX_T_PATH, "/dev/null");
	run(t, sbx_probe_stat);
	struct sbx_field e[10];
	assert_int_equal(entries(t, e, 10), 8);

	expect_entry_type(&e[0], p[0], "file");
	assert_int_equal(i64_of(e[0].val, e[0].len, SBX_T_MODE), 0640);
	assert_int_equal(i64_of(e[0].val, e[0].len, SBX_T_SIZE), 5);
	assert_int_equal(i64_of(e[0].val, e[0].len, SBX_T_UID_OF), getuid());
	assert_int_equal(i64_of(e[0].val, e[0].len, SBX_T_GID_OF), getgid());
	assert_true(i64_of(e[0].val, e[0].len, SBX_T_MTIME_NS) ==
	            (int64_t)MTIME_SEC * 1000000000 + MTIME_NSEC);

	/* The missing one: its path, a nonzero errno and a message, and nothing else. */
	assert_string_equal(str_of(e[1].val, e[1].len, SBX_T_PATH, s, sizeof s), p[1]);
	assert_int_equal(i64_of(e[1].val, e[1].len, SBX_T_ERRNO), ENOENT);
	assert_non_null(strstr(str_of(e[1].val, e[1].len, SBX_T_MESSAGE, s, sizeof s), p[1]));
	assert_int_equal(has(e[1].val, e[1].len, SBX_T_TYPE), 0);

	expect_entry_type(&e[2], p[2], "symlink"); /* lstat: the link, not the dir */
	assert_string_equal(str_of(e[2].val, e[2].len, SBX_T_TARGET, s, sizeof s), "dir");
	expect_entry_type(&e[3], p[3], "fifo");
	assert_int_equal(i64_of(e[3].val, e[3].len, SBX_T_MODE), 0600);
	expect_entry_type(&e[4], p[4], "dir");
	expect_entry_type(&e[5], p[5], "symlink");
	assert_string_equal(str_of(e[5].val, e[5].len, SBX_T_TARGET, s, sizeof s), "nowhere");
	expect_entry_type(&e[6], p[6], "socket");
	expect_entry_type(&e[7], "/dev/null", "chardev");
}

static void stat_long_target_and_path(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	char s[PATH_MAX];
	char *lp = long_path(t->root, 5000);
	begin(t);
	add(t, SBX_T_PATH, at(t, "longlink", p));
	add(t, SBX_T_PATH, lp);
	add(t, SBX_T_PATH, at(t, "loop", p));
	run(t, sbx_probe_stat);
	struct sbx_field e[4];
	assert_int_equal(entries(t, e, 4), 3);

	/* A target of PATH_MAX - 1 bytes arrives whole. */
	expect_entry_type(&e[0], at(t, "longlink", p), "symlink");
	struct sbx_field f;
	assert_int_equal(sbx_msg_find(e[0].val, e[0].len, SBX_T_TARGET, &f), 1);
	assert_int_equal(f.len, PATH_MAX - 1);
	assert_int_equal(sbx_field_str(&f, s, sizeof s), 0);
	assert_string_equal(s, t->long_target);
	assert_int_equal(i64_of(e[0].val, e[0].len, SBX_T_SIZE), PATH_MAX - 1);

	/* A path too long to stat is echoed whole, with its errno. */
	assert_int_equal(sbx_msg_find(e[1].val, e[1].len, SBX_T_PATH, &f), 1);
	assert_int_equal(f.len, 5000);
	assert_memory_equal(f.val, lp, 5000);
	assert_int_equal(i64_of(e[1].val, e[1].len, SBX_T_ERRNO), ENAMETOOLONG);

	/* lstat of the loop itself works: it is a link like any other. */
	expect_entry_type(&e[2], at(t, "loop", p), "symlink");
	free(lp);
}

static void response_too_large(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	char msg[64];
	begin(t);
	add(t, SBX_T_PATH, at(t, "longlink", p));
	run_cap(t, sbx_probe_stat, 200);
	expect_error(t, SBX_EUSAGE, 0);
	assert_string_equal(str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg),
	                    "response too large");
	assert_int_equal(has(t->resp, t->resp_len, SBX_T_ENTRY), 0);
}

/* ---- RESOLVE ---------------------------------------------------------------------------- */

static void expect_physical(struct tree *t, const char *path, const char *want)
{
	char s[PATH_MAX];
	run1(t, sbx_probe_resolve, path);
	expect_ok(t);
	assert_string_equal(str_of(t->resp, t->resp_len, SBX_T_PHYSICAL, s, sizeof s), want);
}

static void resolve_paths(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	char q[PATH_MAX];
	expect_physical(t, "/", "/");
	expect_physical(t, at(t, "file", p), at(t, "file", q));
	expect_physical(t, at(t, "link_dir", p), at(t, "dir", q));
	expect_physical(t, at(t, "link_dir/", p), at(t, "dir", q));
	/* ".." after a link is physical: deep -> dir/sub, so deep/.. is dir, not the root. */
	expect_physical(t, at(t, "deep/..", p), at(t, "dir", q));
	/* A missing tail is appended and normalized lexically. */
	expect_physical(t, at(t, "link_dir/new/x", p), at(t, "dir/new/x", q));
	expect_physical(t, at(t, "link_dir//new/./y/../x/", p), at(t, "dir/new/x", q));
	expect_physical(t, at(t, "out/new", p), at(t, "keep/new", q));
	/* cd -P stops at a dangling link or a file and appends the rest as named. */
	expect_physical(t, at(t, "dangling/x", p), at(t, "dangling/x", q));
	expect_physical(t, at(t, "file/x", p), at(t, "file/x", q));
	expect_physical(t, "/sbx-no-such-dir/..", "/");

	run1(t, sbx_probe_resolve, at(t, "loop/x", p));
	expect_error(t, SBX_EPROBE, ELOOP);
	char *lp = long_path(t->root, 5000);
	run1(t, sbx_probe_resolve, lp);
	expect_error(t, SBX_EPROBE, ENAMETOOLONG);
	free(lp);
}

static void resolve_relative(void **state)
{
	struct tree *t = *state;
	char q[PATH_MAX];
	char old[PATH_MAX];
	assert_non_null(getcwd(old, sizeof old));
	assert_int_equal(chdir(t->root), 0);
	expect_physical(t, ".", t->root);
	expect_physical(t, "link_dir/new", at(t, "dir/new", q));
	expect_physical(t, "deep/../x", at(t, "dir/x", q));

	struct sbx_err err;
	char out[PATH_MAX];
	sbx_err_clear(&err);
	assert_int_equal(sbx_resolve_physical("out", out, sizeof out, &err), 0);
	assert_string_equal(out, at(t, "keep", q));
	/* A result that does not fit is an error, not a truncated path. */
	assert_int_equal(sbx_resolve_physical("out", out, 4, &err), -1);
	assert_int_equal(err.cls, SBX_EPROBE);
	assert_int_equal(err.errnum, ENAMETOOLONG);
	assert_int_equal(sbx_resolve_physical("loop", out, sizeof out, &err), -1);
	assert_int_equal(err.cls, SBX_EPROBE);
	assert_int_equal(err.errnum, ELOOP);
	assert_int_equal(chdir(old), 0);
}

/* ---- LANDS_CLEAR ------------------------------------------------------------------------ */

/* Runs LANDS_CLEAR for dir against keep_out (NULL-terminated); returns CLEAR, checks PHYSICAL
 * and, when not clear, that the message names both places. */
static int64_t lands(struct tree *t, const char *dir, const char *const *keep, const char *phys)
{
	char s[PATH_MAX];
	char msg[4 * PATH_MAX];
	begin(t);
	add(t, SBX_T_PATH, dir);
	for (size_t i = 0; keep[i] != NULL; i++)
		add(t, SBX_T_KEEP_OUT, keep[i]);
	run(t, sbx_probe_lands_clear);
	expect_ok(t);
	int64_t clear = i64_of(t->resp, t->resp_len, SBX_T_CLEAR);
	assert_true(clear == 0 || clear == 1);
	assert_string_equal(str_of(t->resp, t->resp_len, SBX_T_PHYSICAL, s, sizeof s), phys);
	assert_int_equal(has(t->resp, t->resp_len, SBX_T_MESSAGE), clear == 0);
	if (clear == 0) {
		str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg);
		assert_non_null(strstr(msg, dir));
		assert_non_null(strstr(msg, phys));
	}
	return clear;
}

static void lands_clear_cases(void **state)
{
	struct tree *t = *state;
	char d[PATH_MAX];
	char k[PATH_MAX];
	char k2[PATH_MAX];
	char ph[PATH_MAX];
	char msg[4 * PATH_MAX];
	const char *keep[] = {at(t, "keep", k), NULL};

	/* Where the name says, even inside keep_out: the caller judges that by the name. */
	assert_int_equal(lands(t, at(t, "keep/inner", d), keep, at(t, "keep/inner", ph)), 1);
	assert_int_equal(lands(t, at(t, "keep/new/deeper", d), keep, at(t, "keep/new/deeper", ph)),
	                 1);

	/* out -> keep: diverted into keep_out itself. */
	assert_int_equal(lands(t, at(t, "out", d), keep, at(t, "keep", ph)), 0);
	str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg);
	assert_non_null(strstr(msg, "inside keep_out"));
	assert_int_equal(lands(t, at(t, "out/", d), keep, at(t, "keep", ph)), 0);
	assert_int_equal(lands(t, at(t, "out/inner", d), keep, at(t, "keep/inner", ph)), 0);

	/* A missing tail under the symlinked parent lands inside keep_out too. */
	assert_int_equal(lands(t, at(t, "out/new/deeper", d), keep, at(t, "keep/new/deeper", ph)),
	                 0);

	/* top -> . : diverted above keep_out. */
	assert_int_equal(lands(t, at(t, "top", d), keep, t->root), 0);
	str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg);
	assert_non_null(strstr(msg, "above keep_out"));
	const char *deeper[] = {at(t, "keep/inner", k2), NULL};
	assert_int_equal(lands(t, at(t, "out", d), deeper, at(t, "keep", ph)), 0);
	/* keep_out need not exist: above a missing one is still above. */
	const char *missing[] = {at(t, "keep/not/yet", k2), NULL};
	assert_int_equal(lands(t, at(t, "out", d), missing, at(t, "keep", ph)), 0);

	/* Diverted, but elsewhere: clear. */
	assert_int_equal(lands(t, at(t, "elsewhere", d), keep, at(t, "dir", ph)), 1);
	assert_int_equal(lands(t, at(t, "link_dir/new/x", d), keep, at(t, "dir/new/x", ph)), 1);
	const char *none[] = {NULL};
	assert_int_equal(lands(t, at(t, "out", d), none, at(t, "keep", ph)), 1);
	/* A sibling that shares a prefix is not inside: keep vs keepsake. */
	const char *sib[] = {at(t, "kee", k2), NULL};
	assert_int_equal(lands(t, at(t, "out", d), sib, at(t, "keep", ph)), 1);

	/* keep_out named through a link (kl -> keep) is compared physically as well. */
	const char *via_link[] = {at(t, "dir", k2), at(t, "kl", k), NULL};
	assert_int_equal(lands(t, at(t, "out/x", d), via_link, at(t, "keep/x", ph)), 0);
	str_of(t->resp, t->resp_len, SBX_T_MESSAGE, msg, sizeof msg);
	assert_non_null(strstr(msg, "physically"));
}

static void lands_clear_relative_and_errors(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	char ph[PATH_MAX];
	char old[PATH_MAX];
	assert_non_null(getcwd(old, sizeof old));
	assert_int_equal(chdir(t->root), 0);
	const char *keep[] = {"keep", NULL};
	assert_int_equal(lands(t, "out/x", keep, at(t, "keep/x", ph)), 0);
	assert_int_equal(lands(t, "keep/x", keep, at(t, "keep/x", ph)), 1);
	assert_int_equal(lands(t, "./elsewhere", keep, at(t, "dir", ph)), 1);
	assert_int_equal(chdir(old), 0);

	/* A loop in the way is a probe that could not be answered, never "clear". */
	begin(t);
	add(t, SBX_T_PATH, at(t, "loop/x", p));
	add(t, SBX_T_KEEP_OUT, "/");
	run(t, sbx_probe_lands_clear);
	expect_error(t, SBX_EPROBE, ELOOP);
	/* So is a keep_out that cannot be resolved, once it matters. */
	begin(t);
	add(t, SBX_T_PATH, at(t, "out", p));
	add(t, SBX_T_KEEP_OUT, at(t, "loop", ph));
	run(t, sbx_probe_lands_clear);
	expect_error(t, SBX_EPROBE, ELOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(kind_answers),
	        cmocka_unit_test(kind_probe_errors_are_not_absent),
	        cmocka_unit_test(requests_are_checked),
	        cmocka_unit_test(stat_batch),
	        cmocka_unit_test(stat_long_target_and_path),
	        cmocka_unit_test(response_too_large),
	        cmocka_unit_test(resolve_paths),
	        cmocka_unit_test(resolve_relative),
	        cmocka_unit_test(lands_clear_cases),
	        cmocka_unit_test(lands_clear_relative_and_errors),
	};
	return cmocka_run_group_tests_name("probe", tests, make_tree, remove_tree);
}
