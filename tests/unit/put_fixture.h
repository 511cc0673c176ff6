/* The fixture shared by the placement tests (test_tree_put.c, test_unpack.c): confinement in
 * a private mount namespace on a fresh tmpfs (put_fixture_setup/teardown, g_base, g_ready),
 * the *_at helpers, and the target: a fresh folder per case holding root/ (where members go),
 * a `victim` file and an `outside/` folder that must keep their bytes, mode and link count,
 * with nothing new beside root/ (fx_open, fx_check, fx_close); run() and CASE() run a case in
 * every mode and with both walks. Header only: each test is its own program, so every
 * function here is static and each includer must use them all. */
#ifndef PUT_FIXTURE_H
#define PUT_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tree_put.h"

#define MS (1u << SBX_PUT_SANDBOX)
#define MD (1u << SBX_PUT_DATA)
#define MK (1u << SBX_PUT_KEEP)
#define MALL (MS | MD | MK)
#define MTIME 1500000000LL

static char g_base[64]; /* the tmpfs, in a private mount namespace */
static int g_ready;     /* 0: not root or no namespace: every test skips */
static int g_serial;
static struct sbx_err E;

struct fx {
	char dir[128];
	char outside[160]; /* absolute paths, for absolute symlinks planted or archived */
	char victim[160];
	int dfd, root;
	enum sbx_put_mode mode;
	int walk;
	struct sbx_put *p; /* a placement on root, when the test opens one; fx_close frees it */
	struct stat victim_st, outside_st, keep_st;
};

/* ---- confinement ------------------------------------------------------------------------- */

/* The group setup: a private mount namespace with a tmpfs at a fresh tmpl ("...XXXXXX"). On
 * failure (not root, no namespace, no tmpfs) it says why, naming who, and every test skips. */
static int put_fixture_setup(const char *who, const char *tmpl)
{
	umask(077); /* placement must not depend on the umask */
	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		print_message("  %s: needs root and a mount namespace; skipping\n", who);
		return 0;
	}
	if ((size_t)snprintf(g_base, sizeof g_base, "%s", tmpl) >= sizeof g_base ||
	    mkdtemp(g_base) == NULL || mount("tmpfs", g_base, "tmpfs", 0, "mode=0755") != 0) {
		print_message("  %s: no tmpfs; skipping\n", who);
		return 0;
	}
	g_ready = 1;
	return 0;
}

static int put_fixture_teardown(void **state)
{
	(void)state;
	if (g_ready) {
		umount2(g_base, MNT_DETACH);
		rmdir(g_base);
	}
	return 0;
}

/* ---- the *_at helpers -------------------------------------------------------------------- */

static void write_at(int dfd, const char *name, const char *data, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* The file's bytes ("" when missing). */
static const char *read_at(int dfd, const char *name)
{
	static char buf[4096];
	buf[0] = '\0';
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static int lstat_at(int dfd, const char *name, struct stat *st)
{
	return fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW);
}

static int exists(int dfd, const char *name)
{
	struct stat st;
	return lstat_at(dfd, name, &st) == 0;
}

/* The link's target ("" when not a link). */
static const char *link_at(int dfd, const char *name)
{
	static char buf[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static mode_t mode_at(int dfd, const char *name)
{
	struct stat st;
	assert_int_equal(lstat_at(dfd, name, &st), 0);
	return st.st_mode & 07777;
}

/* Entries of the folder, "." and ".." aside. */
static size_t count_entries(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	assert_true(fd >= 0);
	DIR *d = fdopendir(fd);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* ---- the target -------------------------------------------------------------------------- */

static void fx_open(struct fx *f, enum sbx_put_mode mode, int walk)
{
	memset(f, 0, sizeof *f);
	f->mode = mode;
	f->walk = walk;
	snprintf(f->dir, sizeof f->dir, "%s/t%d", g_base, g_serial++);
	snprintf(f->outside, sizeof f->outside, "%s/outside", f->dir);
	snprintf(f->victim, sizeof f->victim, "%s/victim", f->dir);
	assert_int_equal(mkdir(f->dir, 0755), 0);
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dfd >= 0);
	write_at(f->dfd, "victim", "victim bytes\n", 0644);
	assert_int_equal(mkdirat(f->dfd, "outside", 0755), 0);
	assert_int_equal(fchmodat(f->dfd, "outside", 0755, 0), 0);
	write_at(f->dfd, "outside/keep", "keep bytes\n", 0640);
	assert_int_equal(mkdirat(f->dfd, "root", 0755), 0);
	assert_int_equal(fchmodat(f->dfd, "root", 0755, 0), 0);
	f->root = openat(f->dfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->root >= 0);
	assert_int_equal(lstat_at(f->dfd, "victim", &f->victim_st), 0);
	assert_int_equal(lstat_at(f->dfd, "outside", &f->outside_st), 0);
	assert_int_equal(lstat_at(f->dfd, "outside/keep", &f->keep_st), 0);
}

/* For a test outside run(): skips unless confined, else a fresh target (sandbox, openat2). */
static void fx_open_alone(struct fx *f)
{
	if (!g_ready)
		skip();
	fx_open(f, SBX_PUT_SANDBOX, 0);
}

static void same(const struct stat *a, const struct stat *b)
{
	assert_int_equal(a->st_ino, b->st_ino);
	assert_int_equal(a->st_mode, b->st_mode);
	assert_int_equal(a->st_nlink, b->st_nlink);
	assert_int_equal(a->st_size, b->st_size);
	assert_int_equal(a->st_uid, b->st_uid);
	assert_int_equal(a->st_gid, b->st_gid);
}

/* Nothing outside the target changed: victim and outside/ as they were, nothing new beside
 * root/ or in outside/. */
static void fx_check(struct fx *f)
{
	struct stat st;
	assert_int_equal(lstat_at(f->dfd, "victim", &st), 0);
	same(&st, &f->victim_st);
	assert_string_equal(read_at(f->dfd, "victim"), "victim bytes\n");
	assert_int_equal(lstat_at(f->dfd, "outside", &st), 0);
	same(&st, &f->outside_st);
	assert_int_equal(lstat_at(f->dfd, "outside/keep", &st), 0);
	same(&st, &f->keep_st);
	assert_string_equal(read_at(f->dfd, "outside/keep"), "keep bytes\n");
	assert_int_equal(count_entries(f->dfd, "outside"), 1);
	assert_int_equal(count_entries(f->dfd, "."), 3);
}

static void fx_close(struct fx *f)
{
	sbx_put_free(f->p);
	f->p = NULL;
	close(f->root);
	close(f->dfd);
}

typedef void (*case_fn)(struct fx *f);

/* Runs fn in each mode of mask, with openat2 and with the forced walk, on fresh trees. */
static void run(case_fn fn, unsigned mask)
{
	if (!g_ready)
		skip();
	for (int walk = 0; walk < 2; walk++) {
		for (int mode = SBX_PUT_SANDBOX; mode <= SBX_PUT_KEEP; mode++) {
			if (!(mask & (1u << mode)))
				continue;
			struct fx f;
			fx_open(&f, (enum sbx_put_mode)mode, walk);
			fn(&f);
			fx_check(&f);
			fx_close(&f);
		}
	}
}

/* t_fn: the cmocka test that runs case fn in the modes of mask. */
#define CASE(fn, mask)                                                                             \
	static void t_##fn(void **state)                                                           \
	{                                                                                          \
		(void)state;                                                                       \
		run(fn, mask);                                                                     \
	}

/* ---- cases 14 and 15: modes and owners --------------------------------------------------- */

struct mode_case {
	const char *name;
	int type;
	unsigned mode, want_sandbox, want_host;
};

/* Each of the n members placed as 1001:2002 with mtime MTIME + i (.123456789): its mode as
 * the mode of f wants, owners kept in the sandbox only, the mtime kept. */
static void mode_cases_check(const struct fx *f, const struct mode_case *mc, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		assert_int_equal(lstat_at(f->root, mc[i].name, &st), 0);
		unsigned want = f->mode == SBX_PUT_SANDBOX ? mc[i].want_sandbox : mc[i].want_host;
		if ((st.st_mode & 07777) != want)
			fail_msg("%s: mode %04o, want %04o", mc[i].name, st.st_mode & 07777, want);
		assert_int_equal(st.st_uid, f->mode == SBX_PUT_SANDBOX ? 1001 : 0);
		assert_int_equal(st.st_gid, f->mode == SBX_PUT_SANDBOX ? 2002 : 0);
		assert_int_equal(st.st_mtim.tv_sec, MTIME + (long long)i);
		assert_int_equal(st.st_mtim.tv_nsec, 123456789);
	}
}

#endif
