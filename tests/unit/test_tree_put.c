/* The placement engine against the "Archives" cases of shared/reference/adversarial.md, in
 * every mode and with both walks (openat2, and the forced O_NOFOLLOW component walk). Runs as
 * root in a private mount namespace on a fresh tmpfs; around every target a `victim` file and
 * an `outside/` folder must keep their bytes, mode and link count, and nothing may appear
 * beside the target. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "member.h"
#include "put_fixture.h"

static struct sbx_put *fx_put(struct fx *f)
{
	assert_null(f->p);
	if (sbx_put_open(&f->p, f->root, f->mode, f->walk, &E) != 0)
		fail_msg("sbx_put_open: %s", E.msg);
	return f->p;
}

static struct sbx_put_member mem(int type, const char *name, unsigned mode, const char *link)
{
	struct sbx_put_member m = {.name = name,
	                           .type = type,
	                           .mode = mode,
	                           .uid = 0,
	                           .gid = 0,
	                           .mtime_sec = MTIME,
	                           .mtime_nsec = 0,
	                           .link = link};
	return m;
}

/* Places m; a file gets "data:NAME" as its bytes. */
static int put_m(struct sbx_put *p, const struct sbx_put_member *m)
{
	int fd = 123456;
	if (sbx_put_begin(p, m, &fd, &E) != 0) {
		assert_int_equal(fd, -1);
		return -1;
	}
	if (m->type != 'f') {
		assert_int_equal(fd, -1);
		return 0;
	}
	assert_true(fd >= 0);
	char buf[512];
	snprintf(buf, sizeof buf, "data:%s", m->name);
	size_t n = strlen(buf);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	return sbx_put_end_file(p, fd, &E);
}

static int put(struct sbx_put *p, int type, const char *name, unsigned mode, const char *link)
{
	struct sbx_put_member m = mem(type, name, mode, link);
	return put_m(p, &m);
}

static void ok(struct sbx_put *p, int type, const char *name, unsigned mode, const char *link)
{
	if (put(p, type, name, mode, link) != 0)
		fail_msg("member %s refused: %s", name, E.msg);
}

/* Refused as a transfer error whose message names the rule. */
static void no(struct sbx_put *p, int type, const char *name, const char *link, const char *rule)
{
	if (put(p, type, name, 0644, link) == 0)
		fail_msg("member %s (type %c, link %s) accepted", name, type, link ? link : "-");
	assert_int_equal(E.cls, SBX_ETRANSFER);
	if (rule != NULL && strstr(E.msg, rule) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", E.msg, rule);
	assert_non_null(strstr(E.msg, "member "));
}

static void finish_ok(struct sbx_put *p)
{
	if (sbx_put_finish(p, &E) != 0)
		fail_msg("finish: %s", E.msg);
}

/* ---- the cases --------------------------------------------------------------------------- */

static const int kinds[] = {'f', 'd', 'l', 'h'};

/* 1: absolute names. */
static void c01(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	for (size_t i = 0; i < 4; i++) {
		no(p, kinds[i], f->outside, "x", "absolute name");
		no(p, kinds[i], "/tmp/x", "x", "absolute name");
		no(p, kinds[i], "//tmp/x", "x", "absolute name");
	}
	assert_int_equal(count_entries(f->root, "."), 0);
}

/* 2 and 3: any ".." (3 is the same name arriving in a PAX path or GNU longname record:
 * libarchive hands placement the long name, which is judged here). */
static void c02(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	const char *names[] = {"../x", "a/../../x", "a/../b", "..",
	                       "a/..", "../../x",   "./../x", "../outside/keep"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		for (size_t k = 0; k < 4; k++)
			no(p, kinds[k], names[i], "x", "'..' is not allowed");
	assert_int_equal(count_entries(f->root, "."), 0);
}

/* 4: empty, ".", "./" as a file or link; "./" as a directory never touches the root. */
static void c04(struct fx *f)
{
	assert_int_equal(fchmod(f->root, 0751), 0);
	struct sbx_put *p = fx_put(f);
	const char *names[] = {"", ".", "./", ".//./"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		no(p, 'f', names[i], NULL, "empty name");
		no(p, 'l', names[i], "x", "empty name");
		no(p, 'h', names[i], "x", "empty name");
	}
	no(p, 'd', "", NULL, "empty name");
	/* Refusals poison finish; the directory part runs on a fresh placement. */
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	for (size_t i = 1; i < sizeof names / sizeof names[0]; i++) {
		struct sbx_put_member m = mem('d', names[i], 0777, NULL);
		m.uid = 1001;
		m.gid = 2002;
		m.mtime_sec = 1;
		assert_int_equal(put_m(p, &m), 0);
	}
	finish_ok(p);
	struct stat st;
	assert_int_equal(fstat(f->root, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0751);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, 0);
	assert_true(st.st_mtime != 1);
	assert_int_equal(fchmod(f->root, 0755), 0);
}

/* 5: "tmp" -> an absolute folder outside, then "tmp/x". */
static void c05(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	if (f->mode == SBX_PUT_DATA) {
		no(p, 'l', "tmp", f->outside, "leaves the root");
		no(p, 'l', "tmp2", "/tmp", "leaves the root");
		assert_false(exists(f->root, "tmp"));
		return;
	}
	ok(p, 'l', "tmp", 0777, f->outside);
	assert_string_equal(link_at(f->root, "tmp"), f->outside);
	no(p, 'f', "tmp/x", NULL, "path component tmp is a symlink");
	no(p, 'f', "tmp/sub/x", NULL, "is a symlink");
	no(p, 'd', "tmp/d", NULL, "is a symlink");
	no(p, 'l', "tmp/l", "x", "is a symlink");
	no(p, 'h', "tmp/h", "tmp", "is a symlink");
	assert_string_equal(link_at(f->root, "tmp"), f->outside);
}

/* 6: cur -> ".", par -> "cur/..", then par/x: never through a link. */
static void c06(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'l', "cur", 0777, ".");
	if (f->mode == SBX_PUT_DATA) {
		no(p, 'l', "par", "cur/..", "leaves the root");
		no(p, 'l', "par2", "..", "leaves the root");
	} else {
		ok(p, 'l', "par", 0777, "cur/..");
		no(p, 'f', "par/x", NULL, "path component par is a symlink");
		no(p, 'f', "par/outside/x", NULL, "is a symlink");
	}
	no(p, 'f', "cur/x", NULL, "path component cur is a symlink");
	assert_false(exists(f->root, "x"));
}

/* 7: a file member over an existing symlink to a file outside: the link is replaced. */
static void c07(struct fx *f)
{
	assert_int_equal(symlinkat(f->victim, f->root, "pw"), 0);
	assert_int_equal(symlinkat("../victim", f->root, "pw2"), 0);
	assert_int_equal(symlinkat("../victim", f->root, "pw3"), 0);
	assert_int_equal(symlinkat("../victim", f->root, "pw4"), 0);
	struct sbx_put *p = fx_put(f);
	ok(p, 'f', "pw", 0644, NULL);
	ok(p, 'f', "pw2", 0600, NULL);
	ok(p, 'l', "pw3", 0777, "pw");
	ok(p, 'h', "pw4", 0, "pw");
	struct stat st;
	assert_int_equal(lstat_at(f->root, "pw", &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_nlink, 2);
	assert_string_equal(read_at(f->root, "pw"), "data:pw");
	assert_string_equal(read_at(f->root, "pw2"), "data:pw2");
	assert_string_equal(link_at(f->root, "pw3"), "pw");
	finish_ok(p);
}

/* 8: chained symlinks whose resolution exceeds PATH_MAX: created (inside), never walked. */
static void c08(struct fx *f)
{
	static char t1[1301 * 3], t2[1301 * 3];
	t1[0] = t2[0] = '\0';
	for (int i = 0; i < 1300; i++) {
		strcat(t1, "c0/");
		strcat(t2, "c1/");
	}
	struct sbx_put *p = fx_put(f);
	ok(p, 'l', "c0", 0777, ".");
	ok(p, 'l', "c1", 0777, t1);
	ok(p, 'l', "c2", 0777, t2);
	no(p, 'f', "c2/x", NULL, "is a symlink");
	no(p, 'f', "c1/c1/x", NULL, "is a symlink");
	no(p, 'h', "c1/h", "c0", "is a symlink");
	if (f->mode == SBX_PUT_DATA)
		no(p, 'l', "c3", "c2/..", "leaves the root");
	assert_false(exists(f->root, "x"));
}

/* 9: sym -> ../outside, then a directory sym 0777: the link goes, ../outside keeps its mode. */
static void c09(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	if (f->mode == SBX_PUT_DATA) {
		no(p, 'l', "sym", "../outside", "leaves the root");
		assert_int_equal(symlinkat("../outside", f->root, "sym"), 0);
		sbx_put_free(f->p);
		f->p = NULL;
		p = fx_put(f);
	} else {
		ok(p, 'l', "sym", 0777, "../outside");
	}
	ok(p, 'd', "sym", 0777, NULL);
	ok(p, 'f', "sym/f", 0644, NULL);
	finish_ok(p);
	struct stat st;
	assert_int_equal(lstat_at(f->root, "sym", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, f->mode == SBX_PUT_SANDBOX ? 0777 : 0755);
}

/* 10a: the archive tries to turn a deferred directory into a link: refused. */
static void c10a(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "dir1", 0555, NULL);
	ok(p, 'f', "dir1/f", 0644, NULL);
	no(p, 'l', "dir1", f->outside,
	   f->mode == SBX_PUT_DATA ? "leaves the root" : "cannot replace a directory");
	no(p, 'l', "dir1", "x", "cannot replace a directory");
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_int_equal(E.cls, SBX_ETRANSFER);
	assert_int_equal(mode_at(f->root, "dir1"), 0700); /* deferred, never applied */
}

/* 10b: the directory is swapped for a link to outside/ between placement and finish (the
 * CVE-2024-12718 shape): the mode lands on the real directory, through its fd. */
static void c10b(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "dir1", 0555, NULL);
	ok(p, 'f', "dir1/f", 0644, NULL);
	ok(p, 'd', "dir1/sub", 0500, NULL);
	assert_int_equal(renameat(f->root, "dir1", f->root, "moved"), 0);
	assert_int_equal(symlinkat(f->outside, f->root, "dir1"), 0);
	finish_ok(p);
	assert_int_equal(mode_at(f->root, "moved"), f->mode == SBX_PUT_SANDBOX ? 0555 : 0755);
	assert_int_equal(mode_at(f->root, "moved/sub"), f->mode == SBX_PUT_SANDBOX ? 0500 : 0700);
}

/* 10c: past the fd budget (RLIMIT_NOFILE lowered to 64) directories are re-walked at finish
 * and must be the same inode; a swapped one is refused, the rest still apply. */
static void c10c(struct fx *f)
{
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 64;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct sbx_put *p = fx_put(f);
	char name[32];
	for (int i = 0; i < 48; i++) {
		snprintf(name, sizeof name, "d%02d", i);
		ok(p, 'd', name, 0555, NULL);
		snprintf(name, sizeof name, "d%02d/f", i);
		ok(p, 'f', name, 0644, NULL);
	}
	finish_ok(p);
	assert_int_equal(mode_at(f->root, "d00"), f->mode == SBX_PUT_SANDBOX ? 0555 : 0755);
	assert_int_equal(mode_at(f->root, "d47"), f->mode == SBX_PUT_SANDBOX ? 0555 : 0755);
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	for (int i = 0; i < 48; i++) {
		snprintf(name, sizeof name, "e%02d", i);
		ok(p, 'd', name, 0500, NULL);
	}
	assert_int_equal(renameat(f->root, "e47", f->root, "e47.moved"), 0);
	assert_int_equal(symlinkat(f->outside, f->root, "e47"), 0);
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_non_null(strstr(E.msg, "e47"));
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* 11: hard links that leave, pass a link, name a directory, themselves or nothing. */
static void c11(struct fx *f)
{
	assert_int_equal(symlinkat(f->outside, f->root, "symlink"), 0);
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "d", 0755, NULL);
	ok(p, 'f', "a", 0644, NULL);
	no(p, 'h', "h1", "/etc/passwd", "absolute name");
	no(p, 'h', "h1", f->victim, "absolute name");
	no(p, 'h', "h2", "../outside/keep", "'..' is not allowed");
	no(p, 'h', "h2", "a/../a", "'..' is not allowed");
	no(p, 'h', "h3", "symlink/keep", "hard-link target path component symlink is a symlink");
	no(p, 'h', "h4", "d", "not a regular file");
	no(p, 'h', "h5", "h5", "hard link to itself");
	no(p, 'h', "h5", "./h5", "hard link to itself");
	no(p, 'h', "h7", NULL, "without a target");
	assert_false(exists(f->root, "h1") || exists(f->root, "h2") || exists(f->root, "h3"));
	assert_false(exists(f->root, "h4") || exists(f->root, "h5"));
	/* A target that never comes: accepted as a forward reference, refused at finish, and
	 * nothing is created for it (no "nodir"). */
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	ok(p, 'h', "h6", 0, "missing");
	ok(p, 'h', "h8", 0, "nodir/missing");
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_int_equal(E.cls, SBX_ETRANSFER);
	assert_non_null(strstr(E.msg, "member h6: hard-link target missing does not exist"));
	assert_false(exists(f->root, "h6") || exists(f->root, "h8") || exists(f->root, "nodir"));
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	ok(p, 'h', "h8", 0, "nodir/missing");
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_non_null(strstr(E.msg, "path component nodir does not exist"));
	assert_false(exists(f->root, "nodir"));
}

/* 11, forward: a hard link to a later member is made at finish by the same rules: a target
 * that turns out to be a directory, or to lie behind a symlink, is refused then. */
static void c11_forward(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'h', "hd", 0, "later_dir");
	ok(p, 'd', "later_dir", 0755, NULL);
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_non_null(
	        strstr(E.msg, "member hd: hard-link target later_dir is not a regular file"));
	assert_false(exists(f->root, "hd"));
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	ok(p, 'h', "hs", 0, "sl/x");
	ok(p, 'd', "sub", 0755, NULL);
	ok(p, 'f', "sub/x", 0644, NULL);
	ok(p, 'l', "sl", 0777, "sub");
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_non_null(strstr(E.msg, "hard-link target path component sl is a symlink"));
	assert_false(exists(f->root, "hs"));
	if (f->mode != SBX_PUT_DATA) {
		sbx_put_free(f->p);
		f->p = NULL;
		p = fx_put(f);
		ok(p, 'h', "hk", 0, "so/keep");
		ok(p, 'l', "so", 0777, f->outside);
		assert_int_equal(sbx_put_finish(p, &E), -1);
		assert_non_null(strstr(E.msg, "path component so is a symlink"));
		assert_false(exists(f->root, "hk"));
	}
	/* Two pending links naming each other: neither target ever exists as a file. */
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	ok(p, 'h', "ca", 0, "cb");
	ok(p, 'h', "cb", 0, "ca");
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_non_null(strstr(E.msg, "does not exist"));
	/* A pending link to itself through another spelling is still "itself". */
	no(p, 'h', "self", "./self", "hard link to itself");
}

/* 12: hard links inside the root, to earlier members up and down the tree and to symlinks. */
static void c12(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'f', "a", 0644, NULL);
	ok(p, 'h', "back", 0, "a");
	ok(p, 'f', "z/deep/t", 0600, NULL);
	ok(p, 'h', "up", 0, "z/deep/t");
	ok(p, 'h', "z/deep/down", 0, "a");
	ok(p, 'h', "z/side", 0, "./z//deep/t");
	ok(p, 'l', "s", 0777, "a");
	ok(p, 'h', "hs", 0, "s");
	ok(p, 'l', "sd", 0777, "dangling");
	ok(p, 'h', "hsd", 0, "sd");
	/* Forward references: made at finish, once their targets exist: to a later file (also
	 * from deeper down and into a directory that gets mode 0555), to a later symlink, a
	 * chain through another pending link, and a pending link redefined by later members
	 * (the last definition wins). */
	ok(p, 'h', "fw", 0, "later");
	ok(p, 'h', "q/r/fw2", 0, "./later");
	ok(p, 'h', "ro/in", 0, "later");
	ok(p, 'h', "chain", 0, "fw");
	ok(p, 'h', "fws", 0, "lsym");
	ok(p, 'h', "redef", 0, "later");
	ok(p, 'f', "redef", 0640, NULL);
	ok(p, 'h', "twice", 0, "later");
	ok(p, 'h', "twice", 0, "later2");
	ok(p, 'd', "ro", 0555, NULL);
	ok(p, 'f', "later", 0604, NULL);
	ok(p, 'f', "later2", 0600, NULL);
	ok(p, 'l', "lsym", 0777, "a");
	assert_false(exists(f->root, "fw"));
	finish_ok(p);
	struct stat a, b;
	assert_int_equal(lstat_at(f->root, "later", &a), 0);
	const char *same_as_later[] = {"fw", "q/r/fw2", "ro/in", "chain"};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(lstat_at(f->root, same_as_later[i], &b), 0);
		assert_int_equal(a.st_ino, b.st_ino);
	}
	assert_int_equal(a.st_nlink, 5);
	assert_string_equal(read_at(f->root, "fw"), "data:later");
	assert_int_equal(mode_at(f->root, "ro"), f->mode == SBX_PUT_SANDBOX ? 0555 : 0755);
	assert_int_equal(lstat_at(f->root, "lsym", &a), 0);
	assert_int_equal(lstat_at(f->root, "fws", &b), 0);
	assert_true(S_ISLNK(b.st_mode));
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(lstat_at(f->root, "redef", &b), 0);
	assert_int_equal(b.st_nlink, 1);
	assert_string_equal(read_at(f->root, "redef"), "data:redef");
	assert_int_equal(lstat_at(f->root, "later2", &a), 0);
	assert_int_equal(lstat_at(f->root, "twice", &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(lstat_at(f->root, "a", &a), 0);
	assert_int_equal(lstat_at(f->root, "back", &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_nlink, 3);
	assert_int_equal(lstat_at(f->root, "z/deep/t", &a), 0);
	assert_int_equal(lstat_at(f->root, "up", &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_nlink, 3);
	assert_int_equal(lstat_at(f->root, "s", &a), 0);
	assert_int_equal(lstat_at(f->root, "hs", &b), 0);
	assert_true(S_ISLNK(b.st_mode));
	assert_int_equal(a.st_ino, b.st_ino);
	assert_string_equal(link_at(f->root, "hsd"), "dangling");
}

/* 13: FIFOs, devices, sockets, unknown types. */
static void c13(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	const int types[] = {'p', 'c', 'b', 's', '3', '4', '6', '7', 'x', 'F', 0, -1, 200, 0x1f};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		no(p, types[i], "node", "x", "is not allowed");
	assert_int_equal(count_entries(f->root, "."), 0);
}

/* 14 and 15: exact modes and numeric owners in the sandbox, stripped modes and no chown on the
 * host; a 0555 or 0000 directory holding files; mtimes. */
static void c14(struct fx *f)
{
	const struct mode_case mc[] = {
	        {"m7777", 'f', 07777, 07777, 01755}, {"m0777", 'f', 0777, 0777, 0755},
	        {"m0040", 'f', 0040, 0040, 0040},    {"m0000", 'f', 0, 0, 0},
	        {"m4755", 'f', 04755, 04755, 0755},  {"m2755", 'f', 02755, 02755, 0755},
	        {"m6711", 'f', 06711, 06711, 0711},  {"d1777", 'd', 01777, 01777, 01755},
	        {"d0555", 'd', 0555, 0555, 0755},    {"d0000", 'd', 0, 0, 0700},
	        {"d2775", 'd', 02775, 02775, 0755},
	};
	struct sbx_put *p = fx_put(f);
	for (size_t i = 0; i < sizeof mc / sizeof mc[0]; i++) {
		struct sbx_put_member m = mem(mc[i].type, mc[i].name, mc[i].mode, NULL);
		m.uid = 1001;
		m.gid = 2002;
		m.mtime_sec = MTIME + (long long)i;
		m.mtime_nsec = 123456789;
		if (put_m(p, &m) != 0)
			fail_msg("%s: %s", mc[i].name, E.msg);
	}
	ok(p, 'f', "d0555/f", 0644, NULL);
	ok(p, 'f', "d0555/sub/g", 0644, NULL);
	ok(p, 'f', "d0000/f", 0644, NULL);
	struct sbx_put_member l = mem('l', "link", 0777, "m0777");
	l.uid = 1001;
	l.gid = 2002;
	assert_int_equal(put_m(p, &l), 0);
	finish_ok(p);
	mode_cases_check(f, mc, sizeof mc / sizeof mc[0]);
	struct stat st;
	assert_int_equal(lstat_at(f->root, "link", &st), 0);
	assert_int_equal(st.st_uid, f->mode == SBX_PUT_SANDBOX ? 1001 : 0);
	assert_int_equal(st.st_mtim.tv_sec, MTIME);
	assert_string_equal(read_at(f->root, "d0555/sub/g"), "data:d0555/sub/g");
	assert_int_equal(mode_at(f->root, "d0555/sub"), 0755); /* never named: 0755 */
	if (f->mode == SBX_PUT_SANDBOX) {
		struct sbx_put_member m = mem('f', "bad", 0644, NULL);
		m.uid = -1;
		assert_int_equal(put_m(p, &m), -1);
		assert_non_null(strstr(E.msg, "out of range"));
		m.uid = 0;
		m.gid = 1LL << 40;
		assert_int_equal(put_m(p, &m), -1);
	}
	assert_int_equal(fchmodat(f->root, "d0000", 0755, 0), 0);
	assert_int_equal(fchmodat(f->root, "d0555", 0755, 0), 0);
}

/* 16: a pre-existing symlink in the target path pointing outside. */
static void c16(struct fx *f)
{
	assert_int_equal(symlinkat("../outside", f->root, "pre"), 0);
	struct sbx_put *p = fx_put(f);
	no(p, 'f', "pre/f", NULL, "path component pre is a symlink");
	no(p, 'f', "pre/sub/f", NULL, "is a symlink");
	no(p, 'd', "pre/d", NULL, "is a symlink");
	no(p, 'l', "pre/l", "x", "is a symlink");
	no(p, 'h', "pre/h", "x", "is a symlink");
	no(p, 'f', "pre/keep", NULL, "is a symlink");
}

/* 17: a pre-existing dangling directory symlink. */
static void c17(struct fx *f)
{
	assert_int_equal(symlinkat("nowhere", f->root, "subdir"), 0);
	assert_int_equal(symlinkat(f->outside, f->root, "abs"), 0);
	struct sbx_put *p = fx_put(f);
	no(p, 'f', "subdir/a", NULL, "path component subdir is a symlink");
	no(p, 'd', "subdir/a", NULL, "is a symlink");
	no(p, 'f', "abs/a", NULL, "is a symlink");
	assert_false(exists(f->root, "nowhere"));
}

/* 18: the same name redefined: the last wins, and no stale check lets a later member through.
 */
static void c18(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'f', "a", 0644, NULL);
	ok(p, 'l', "a", 0777, "x");
	assert_string_equal(link_at(f->root, "a"), "x");
	ok(p, 'l', "l", 0777, "a");
	ok(p, 'l', "l", 0777, "b");
	assert_string_equal(link_at(f->root, "l"), "b");
	ok(p, 'f', "dup", 0600, NULL);
	ok(p, 'f', "dup", 0644, NULL);
	assert_int_equal(mode_at(f->root, "dup"), 0644);
	ok(p, 'd', "q", 0700, NULL);
	ok(p, 'd', "q", 0711, NULL);
	ok(p, 'f', "q/f1", 0644, NULL);
	if (f->mode != SBX_PUT_DATA) {
		ok(p, 'f', "p", 0644, NULL);
		ok(p, 'l', "p", 0777, f->outside);
		no(p, 'f', "p/f", NULL, "is a symlink");
	}
	/* The checked parent q becomes a link (as a racer would make it). The sandbox's mode
	 * re-walks every member from the root: refused. The host modes keep the folder of a run
	 * of files open (their staging folder is private, 0700, the caller's own): f2 lands in
	 * the folder that was q, never through the link. */
	ok(p, 'f', "q/f1b", 0644, NULL);
	assert_int_equal(renameat(f->root, "q", f->root, "q.moved"), 0);
	assert_int_equal(symlinkat(f->outside, f->root, "q"), 0);
	if (f->mode == SBX_PUT_SANDBOX) {
		no(p, 'f', "q/f2", NULL, "path component q is a symlink");
	} else {
		ok(p, 'f', "q/f2", 0644, NULL);
		assert_true(exists(f->root, "q.moved/f2"));
		assert_false(exists(f->root, "q/f2"));
		/* A member of another kind ends the run: the next file walks again, refused. */
		ok(p, 'd', "r", 0755, NULL);
		no(p, 'f', "q/f3", NULL, "path component q is a symlink");
	}
	assert_int_equal(unlinkat(f->root, "q", 0), 0);
	assert_int_equal(renameat(f->root, "q.moved", f->root, "q"), 0);
	sbx_put_free(f->p);
	f->p = NULL;
	p = fx_put(f);
	ok(p, 'd', "r", 0700, NULL);
	ok(p, 'd', "r", 0750, NULL);
	finish_ok(p);
	assert_int_equal(mode_at(f->root, "r"), f->mode == SBX_PUT_SANDBOX ? 0750 : 0750);
}

/* 19: file over a directory, directory over a file: clean refusals, nothing deleted. */
static void c19(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'f', "f", 0644, NULL);
	no(p, 'd', "f", NULL, "a directory cannot replace a file");
	no(p, 'f', "f/x", NULL, "path component f is not a directory");
	ok(p, 'd', "d", 0755, NULL);
	ok(p, 'f', "d/x", 0644, NULL);
	no(p, 'f', "d", NULL, "a file cannot replace a directory");
	no(p, 'l', "d", "f", "a symlink cannot replace a directory");
	no(p, 'h', "d", "f", "a hard link cannot replace a directory");
	assert_string_equal(read_at(f->root, "f"), "data:f");
	assert_string_equal(read_at(f->root, "d/x"), "data:d/x");
	/* A directory over a pre-existing directory link to outside replaces the link only. */
	assert_int_equal(symlinkat(f->outside, f->root, "lnk"), 0);
	ok(p, 'd', "lnk", 0700, NULL);
	assert_int_equal(count_entries(f->root, "lnk"), 0);
}

static int renameat2_exchange(int dfd, const char *a, const char *b)
{
	return (int)syscall(SYS_renameat2, dfd, a, dfd, b, 2 /* RENAME_EXCHANGE */);
}

/* 20: a live racer swaps d between the directory and a link to outside/ while 2000 members
 * are placed under it. */
static void c20(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "d", 0755, NULL);
	assert_int_equal(symlinkat(f->outside, f->root, "l"), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			renameat2_exchange(f->root, "d", "l");
	}
	int placed = 0, refused = 0;
	char name[64];
	for (int i = 0; i < 2000; i++) {
		if (i % 4 == 1)
			snprintf(name, sizeof name, "d/s%d/g", i);
		else
			snprintf(name, sizeof name, "d/f%d", i);
		int type = i % 8 == 3 ? 'd' : i % 8 == 5 ? 'l' : 'f';
		if (put(p, type, name, 0644, "x") == 0)
			placed++;
		else
			refused++;
		if (count_entries(f->dfd, "outside") != 1)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(placed + refused, 2000);
	print_message("  racer (mode %d, walk %d): %d placed, %d refused, 0 outside\n", f->mode,
	              f->walk, placed, refused);
	assert_true(placed > 0);
	assert_true(refused > 0);
}

/* The negative control for 20: a naive by-path writer under the same racer does escape, so
 * the racer test can fail. */
static void racer_control(void **state)
{
	(void)state;
	struct fx f;
	fx_open_alone(&f);
	assert_int_equal(mkdirat(f.root, "d", 0755), 0);
	assert_int_equal(symlinkat(f.outside, f.root, "l"), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			renameat2_exchange(f.root, "d", "l");
	}
	int escaped = 0;
	char name[64];
	for (int i = 0; i < 20000 && escaped == 0; i++) {
		snprintf(name, sizeof name, "d/naive%d", i);
		int fd = openat(f.root, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
		escaped = count_entries(f.dfd, "outside") > 1;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_true(escaped);
	fx_close(&f);
}

/* ---- round trips ------------------------------------------------------------------------- */

static void rt_links(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "a/b", 0755, NULL);
	ok(p, 'l', "rel", 0777, "a/b");
	ok(p, 'l', "a/b/up", 0777, "../../rel");
	ok(p, 'l', "dang", 0777, "nope/nothing");
	if (f->mode == SBX_PUT_DATA) {
		no(p, 'l', "abs", "/nonexistent/x", "leaves the root");
		no(p, 'l', "a/b/esc", "../../../x", "leaves the root");
	} else {
		ok(p, 'l', "abs", 0777, "/nonexistent/x");
		ok(p, 'l', "a/b/esc", 0777, "../../../x");
		assert_string_equal(link_at(f->root, "abs"), "/nonexistent/x");
	}
	assert_string_equal(link_at(f->root, "rel"), "a/b");
	assert_string_equal(link_at(f->root, "a/b/up"), "../../rel");
	assert_string_equal(link_at(f->root, "dang"), "nope/nothing");
	no(p, 'l', "empty", "", "empty symlink target");
}

static void rt_names(struct fx *f)
{
	char long255[256], long256[257];
	memset(long255, 'n', 255);
	long255[255] = '\0';
	memset(long256, 'n', 256);
	long256[256] = '\0';
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "empty", 0755, NULL);
	ok(p, 'd', "e2/e3", 0700, NULL);
	ok(p, 'f', "sp ace/with space", 0644, NULL);
	ok(p, 'f', "new\nline/f\nx", 0644, NULL);
	ok(p, 'f',
	   "\xff\xfe/\x80\x81"
	   "bin",
	   0644, NULL);
	ok(p, 'f', long255, 0644, NULL);
	ok(p, 'l', "./weird//./name/", 0777, "x");
	finish_ok(p);
	assert_int_equal(count_entries(f->root, "empty"), 0);
	assert_int_equal(count_entries(f->root, "e2/e3"), 0);
	assert_string_equal(read_at(f->root, "sp ace/with space"), "data:sp ace/with space");
	assert_string_equal(read_at(f->root, "new\nline/f\nx"), "data:new\nline/f\nx");
	assert_string_equal(read_at(f->root, "\xff\xfe/\x80\x81"
	                                     "bin"),
	                    "data:\xff\xfe/\x80\x81"
	                    "bin");
	assert_true(exists(f->root, long255));
	assert_string_equal(link_at(f->root, "weird/name"), "x");
	no(p, 'f', long256, NULL, "longer than 255 bytes");
}

/* A path longer than PATH_MAX: 40 components of 200 bytes, placed and checked fd by fd. */
static void rt_deep(struct fx *f)
{
	size_t cap = 40 * 201 + 64;
	char *path = malloc(cap);
	assert_non_null(path);
	path[0] = '\0';
	for (int i = 0; i < 40; i++) {
		size_t n = strlen(path);
		memset(path + n, 'a' + i % 26, 200);
		path[n + 200] = '/';
		path[n + 201] = '\0';
	}
	size_t dirlen = strlen(path);
	assert_true(dirlen > 4096);
	struct sbx_put *p = fx_put(f);
	strcpy(path + dirlen, "file");
	ok(p, 'f', path, 0640, NULL);
	strcpy(path + dirlen, "dir");
	ok(p, 'd', path, 0750, NULL);
	strcpy(path + dirlen, "sym");
	ok(p, 'l', path, 0777, "file");
	strcpy(path + dirlen, "hard");
	struct sbx_put_member m = mem('h', path, 0, NULL);
	char *target = strdup(path);
	strcpy(target + dirlen, "file");
	m.link = target;
	assert_int_equal(put_m(p, &m), 0);
	ok(p, 'h', "top", 0, target);
	finish_ok(p);
	int fd = dup(f->root);
	char comp[201];
	for (int i = 0; i < 40; i++) {
		memset(comp, 'a' + i % 26, 200);
		comp[200] = '\0';
		int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	assert_memory_equal(read_at(fd, "file"), "data:aaaa", 9);
	struct stat st;
	assert_int_equal(lstat_at(fd, "file", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_nlink, 3);
	assert_int_equal(mode_at(fd, "dir"), 0750);
	assert_string_equal(link_at(fd, "sym"), "file");
	close(fd);
	free(target);
	free(path);
}

/* What a placement holds between members is bounded (SBX_PUT_STATE_MAX): folders whose names
 * are 60 KiB long (their deferred metadata keeps the name), then hard links to members that
 * never come (each waits with its names), are refused naming the limit once the held state
 * would pass it; nothing outside changes. Shown able to fail: without the bound (the previous
 * tree_put) every member is accepted and the test's "refused before" check fails. */
static void state_bound(struct fx *f)
{
	size_t len = 60 * 1024;
	char *name = malloc(len + 32), *target = malloc(len + 32);
	assert_non_null(name);
	assert_non_null(target);
	for (size_t i = 0; i < len; i++)
		name[i] = (i % 201 == 200) ? '/' : 'p';
	name[len] = '\0';
	memcpy(target, name, len + 1);
	struct sbx_put *p = fx_put(f);
	size_t limit = SBX_PUT_STATE_MAX / len + 1, i;
	for (i = 0; i < limit; i++) {
		snprintf(name + len, 32, "/d%zu", i);
		if (put(p, 'd', name, 0755, NULL) != 0)
			break;
	}
	if (i == limit)
		fail_msg("%zu folders of 60 KiB names accepted", i);
	assert_true(i > SBX_PUT_STATE_MAX / (len + 1024) - 1);
	assert_non_null(strstr(E.msg, "MiB of directory metadata and pending hard links"));
	assert_non_null(strstr(E.msg, "(the limit)"));
	sbx_put_free(p);
	f->p = NULL;
	/* Pending hard links, in a fresh placement. */
	p = fx_put(f);
	for (i = 0; i < limit; i++) {
		snprintf(name + len, 32, "/h%zu", i);
		snprintf(target + len, 32, "/later%zu", i);
		if (put(p, 'h', name, 0644, target) != 0)
			break;
	}
	if (i == limit)
		fail_msg("%zu pending links accepted", i);
	assert_true(i > SBX_PUT_STATE_MAX / (4 * len + 1024) - 1); /* name, target: twice each */
	assert_non_null(strstr(E.msg, "(the limit)"));
	free(name);
	free(target);
}

/* Usage errors are not refusals of a member. */
static void rt_usage(struct fx *f)
{
	struct sbx_put *p = fx_put(f);
	struct sbx_put_member m = mem('f', "one", 0644, NULL);
	int fd;
	assert_int_equal(sbx_put_begin(p, &m, &fd, &E), 0);
	struct sbx_put_member m2 = mem('f', "two", 0644, NULL);
	int fd2;
	assert_int_equal(sbx_put_begin(p, &m2, &fd2, &E), -1);
	assert_int_equal(E.cls, SBX_EUSAGE);
	assert_int_equal(sbx_put_finish(p, &E), -1);
	assert_int_equal(E.cls, SBX_EUSAGE);
	assert_int_equal(sbx_put_end_file(p, fd, &E), 0);
	finish_ok(p);
	struct sbx_put *q;
	int nd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(sbx_put_open(&q, nd, f->mode, 0, &E), -1);
	assert_int_equal(E.cls, SBX_EUSAGE);
	close(nd);
	sbx_put_free(NULL);
}

/* openat2 filtered by seccomp (EPERM) or missing (ENOSYS): placement switches to the
 * component walk and keeps refusing links. Runs in a child, which installs the filter. */
static int filtered_child(int root, const char *outside, int errnum)
{
	struct sock_filter code[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 437, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)errnum),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 10;
	if (syscall(437, root, ".", &(uint64_t[3]){0, 0, 0}, 24) != -1 || errno != errnum)
		return 11;
	if (symlinkat(outside, root, "pre") != 0)
		return 12;
	struct sbx_put *p;
	struct sbx_err e;
	if (sbx_put_open(&p, root, SBX_PUT_SANDBOX, 0, &e) != 0)
		return 13;
	struct sbx_put_member m = mem('d', "a/b", 0750, NULL);
	int fd;
	int rc = 0;
	if (sbx_put_begin(p, &m, &fd, &e) != 0)
		rc = 14;
	m = mem('f', "a/b/f", 0640, NULL);
	if (rc == 0 && (sbx_put_begin(p, &m, &fd, &e) != 0 || sbx_put_end_file(p, fd, &e) != 0))
		rc = 15;
	if (rc == 0 && sbx_put_finish(p, &e) != 0)
		rc = 16;
	m = mem('f', "pre/f", 0640, NULL);
	if (rc == 0 &&
	    (sbx_put_begin(p, &m, &fd, &e) == 0 || strstr(e.msg, "is a symlink") == NULL))
		rc = 17;
	sbx_put_free(p);
	if (rc == 0 && mode_at(root, "a/b") != 0750)
		rc = 18;
	return rc;
}

static void openat2_filtered(void **state)
{
	(void)state;
	if (!g_ready)
		skip();
	const int errs[] = {EPERM, ENOSYS};
	for (size_t i = 0; i < 2; i++) {
		struct fx f;
		fx_open(&f, SBX_PUT_SANDBOX, 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(filtered_child(f.root, f.outside, errs[i]));
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_true(exists(f.root, "a/b/f"));
		fx_check(&f);
		fx_close(&f);
	}
}

/* ---- member.c ---------------------------------------------------------------------------- */

static void member_names(void **state)
{
	(void)state;
	struct {
		const char *in, *out;
	} good[] = {{"a", "a"},          {"./a", "a"},    {"././a", "a"},
	            {".//./a/", "a"},    {"a//b", "a/b"}, {"a/./b/.", "a/b"},
	            {"a/b/", "a/b"},     {"...", "..."},  {"..a/b..", "..a/b.."},
	            {"a b/\n", "a b/\n"}};
	char out[64];
	const char *why;
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		assert_int_equal(sbx_member_name(good[i].in, out, sizeof out, &why), 0);
		assert_string_equal(out, good[i].out);
	}
	const char *bad[] = {"", ".", "./", "/", "/a", "//a", "..", "../a", "a/..", "a/../b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(out, 'x', sizeof out);
		assert_int_equal(sbx_member_name(bad[i], out, sizeof out, &why), -1);
		assert_string_equal(out, "");
		assert_non_null(why);
	}
	assert_int_equal(sbx_member_name(NULL, out, sizeof out, &why), -1);
	assert_int_equal(sbx_member_name("abcd", out, 4, &why), -1);
	assert_string_equal(why, "name too long");
	assert_int_equal(sbx_member_name("abcd", out, 5, NULL), 0);
	assert_int_equal(sbx_member_is_root("./"), 1);
	assert_int_equal(sbx_member_is_root("."), 1);
	assert_int_equal(sbx_member_is_root(".//./"), 1);
	assert_int_equal(sbx_member_is_root(""), 0);
	assert_int_equal(sbx_member_is_root("/"), 0);
	assert_int_equal(sbx_member_is_root("./a"), 0);
	assert_int_equal(sbx_member_is_root(".."), 0);
}

static void member_links(void **state)
{
	(void)state;
	assert_int_equal(sbx_member_link_inside("a", "b"), 1);
	assert_int_equal(sbx_member_link_inside("a", "."), 1);
	assert_int_equal(sbx_member_link_inside("a/b/l", "../x"), 1);
	assert_int_equal(sbx_member_link_inside("a/b/l", "../.."), 1);
	assert_int_equal(sbx_member_link_inside("./a/b//l", "../../x/./y"), 1);
	assert_int_equal(sbx_member_link_inside("a/b/l", "../../.."), 0);
	assert_int_equal(sbx_member_link_inside("l", ".."), 0);
	assert_int_equal(sbx_member_link_inside("l", "../x"), 0);
	assert_int_equal(sbx_member_link_inside("l", "/etc"), 0);
	assert_int_equal(sbx_member_link_inside("l", ""), 0);
	assert_int_equal(sbx_member_link_inside("par", "cur/.."), 0); /* case 6 */
	assert_int_equal(sbx_member_link_inside("a/l", "x/../y"), 0);
	assert_int_equal(sbx_member_link_inside("../l", "x"), 0);
	assert_int_equal(sbx_member_link_inside("/l", "x"), 0);
	assert_int_equal(sbx_member_link_inside(".", "x"), 0);
	assert_int_equal(sbx_member_link_inside(NULL, "x"), 0);
}

/* Modes under a umask that strips bits: a host mode creates with the final mode only when the
 * umask keeps it whole, else sets it after; the sandbox's mode always sets it after. Also a
 * run of files in one folder (the host modes keep it open) then in another. */
static void modes_umask(struct fx *f)
{
	mode_t old = umask(077);
	struct sbx_put *p = fx_put(f);
	ok(p, 'd', "m", 0755, NULL);
	ok(p, 'f', "m/a", 0644, NULL);
	ok(p, 'f', "m/b", 0755, NULL);
	ok(p, 'f', "m/c", 0600, NULL);
	ok(p, 'd', "n", 0755, NULL);
	ok(p, 'f', "n/a", 0640, NULL);
	ok(p, 'f', "m/d", 0604, NULL);
	finish_ok(p);
	umask(old);
	assert_int_equal(mode_at(f->root, "m/a"), 0644);
	assert_int_equal(mode_at(f->root, "m/b"), 0755);
	assert_int_equal(mode_at(f->root, "m/c"), 0600);
	assert_int_equal(mode_at(f->root, "n/a"), 0640);
	assert_int_equal(mode_at(f->root, "m/d"), 0604);
}

CASE(modes_umask, MALL)
CASE(c01, MALL)
CASE(c02, MALL)
CASE(c04, MALL)
CASE(c05, MALL)
CASE(c06, MALL)
CASE(c07, MALL)
CASE(c08, MALL)
CASE(c09, MALL)
CASE(c10a, MALL)
CASE(c10b, MALL)
CASE(c10c, MALL)
CASE(c11, MALL)
CASE(c11_forward, MALL)
CASE(c12, MALL)
CASE(c13, MALL)
CASE(c14, MALL)
CASE(c16, MALL)
CASE(c17, MALL)
CASE(c18, MALL)
CASE(c19, MALL)
CASE(c20, MALL)
CASE(rt_links, MALL)
CASE(rt_names, MALL)
CASE(rt_deep, MALL)
CASE(rt_usage, MALL)
CASE(state_bound, MS | MD)

static int group_setup(void **state)
{
	(void)state;
	return put_fixture_setup("tree_put", "/tmp/sbx-tree-put.XXXXXX");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(member_names),
	        cmocka_unit_test(member_links),
	        cmocka_unit_test(t_modes_umask),
	        cmocka_unit_test(t_c01),
	        cmocka_unit_test(t_c02),
	        cmocka_unit_test(t_c04),
	        cmocka_unit_test(t_c05),
	        cmocka_unit_test(t_c06),
	        cmocka_unit_test(t_c07),
	        cmocka_unit_test(t_c08),
	        cmocka_unit_test(t_c09),
	        cmocka_unit_test(t_c10a),
	        cmocka_unit_test(t_c10b),
	        cmocka_unit_test(t_c10c),
	        cmocka_unit_test(t_c11),
	        cmocka_unit_test(t_c11_forward),
	        cmocka_unit_test(t_c12),
	        cmocka_unit_test(t_c13),
	        cmocka_unit_test(t_c14),
	        cmocka_unit_test(t_c16),
	        cmocka_unit_test(t_c17),
	        cmocka_unit_test(t_c18),
	        cmocka_unit_test(t_c19),
	        cmocka_unit_test(t_c20),
	        cmocka_unit_test(racer_control),
	        cmocka_unit_test(t_rt_links),
	        cmocka_unit_test(t_rt_names),
	        cmocka_unit_test(t_rt_deep),
	        cmocka_unit_test(t_rt_usage),
	        cmocka_unit_test(t_state_bound),
	        cmocka_unit_test(openat2_filtered),
	};
	return cmocka_run_group_tests(tests, group_setup, put_fixture_teardown);
}
