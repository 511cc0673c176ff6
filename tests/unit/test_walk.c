/* The safe walk (shared/walk.h) by itself, both ways (openat2 and the component walk): a
 * symlink anywhere on the way is refused and named, created folders are 0755 whatever the
 * umask, a missing component is an error or, soft, a flag. Placement's own cases are in
 * test_tree_put.c; an upload's target goes through here too (agent/xfer.c). Shown able to
 * fail: with -DSBX_WEAK_PLACEMENT (a walk that follows symlinks) symlink_refused fails. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "walk.h"

static char root[64];
static int rfd = -1;

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/sbx-walk-XXXXXX");
	if (mkdtemp(root) == NULL)
		return -1;
	rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || mkdirat(rfd, "real", 0755) != 0 || mkdirat(rfd, "real/inner", 0755) != 0 ||
	    symlinkat("real", rfd, "link") != 0)
		return -1;
	int fd = openat(rfd, "file", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(rfd);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	return system(cmd);
}

static int walk(int force, const char *path, int create, struct sbx_err *e)
{
	struct sbx_walk w;
	sbx_walk_init(&w, force);
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	int fd = sbx_walk_dir(&w, rfd, buf, create, O_RDONLY, "", e);
	assert_string_equal(buf, path); /* restored */
	return fd;
}

static void symlink_refused(void **state)
{
	(void)state;
	for (int force = 0; force < 2; force++) {
		struct sbx_err e;
		int fd = walk(force, "real/inner", 0, &e);
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(walk(force, "link/inner", 0, &e), -1);
		assert_non_null(strstr(e.msg, "path component link is a symlink (never followed)"));
		assert_int_equal(walk(force, "link", 1, &e), -1);
		assert_non_null(strstr(e.msg, "is a symlink"));
		assert_int_equal(walk(force, "file/x", 1, &e), -1);
		assert_non_null(strstr(e.msg, "path component file is not a directory"));
	}
}

static void creates_0755_whatever_the_umask(void **state)
{
	(void)state;
	mode_t old = umask(077);
	for (int force = 0; force < 2; force++) {
		struct sbx_err e;
		char path[32];
		snprintf(path, sizeof path, "new%d/a/b", force);
		int fd = walk(force, path, 1, &e);
		assert_true(fd >= 0);
		struct stat st;
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0755);
		close(fd);
	}
	umask(old);
}

static void missing_soft_or_refused(void **state)
{
	(void)state;
	for (int force = 0; force < 2; force++) {
		struct sbx_err e;
		assert_int_equal(walk(force, "real/none/x", 0, &e), -1);
		assert_non_null(strstr(e.msg, "path component none does not exist"));
		struct sbx_walk w;
		sbx_walk_init(&w, force);
		w.soft = 1;
		char buf[] = "real/none/x";
		sbx_err_set(&e, SBX_OK, 0, "untouched");
		assert_int_equal(sbx_walk_dir(&w, rfd, buf, 0, O_PATH, "", &e), -1);
		assert_true(w.missing);
		assert_string_equal(e.msg, "untouched");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(symlink_refused),
	        cmocka_unit_test(creates_0755_whatever_the_umask),
	        cmocka_unit_test(missing_soft_or_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
