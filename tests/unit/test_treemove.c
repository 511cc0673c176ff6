/* shared/treemove.c: removal of trees deeper than the fd limit and than 4096 levels, wider than
 * the fd limit, with folders left 0000 or 0500, by an unprivileged owner; its failures name
 * what is left; the merge of a wide tree (src left empty), its refusal of folders other users
 * may write (nothing moved), of a staged name that is the stage itself; the verified move.
 * Runs as root, chrooted into a fresh tmpfs in a private mount namespace (with its own /proc),
 * so a removal that climbed too far could only reach the tmpfs.
 *
 * Shown able to fail: built against the previous treemove.c (with stubs for the new calls),
 * deep_chain fails ("remove: tree deeper than 4096 levels"), deep_chain_few_fds fails (EMFILE
 * after about 30 levels under RLIMIT_NOFILE 32), failure_names_what_is_left fails (the message
 * said "remove roots", not where), merge_wide fails (the staged folders were left), and so do
 * the checks of the new calls; wide_tree_few_fds passed there too (it guards the width). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "treemove.h"

static int g_ready;
static int g_serial;
static struct sbx_err E;

static int setup(void **state)
{
	(void)state;
	char base[] = "/tmp/sbx-treemove-XXXXXX";
	umask(022);
	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 || mkdtemp(base) == NULL ||
	    mount("tmpfs", base, "tmpfs", 0, "mode=0755") != 0) {
		print_message("  test_treemove: needs root and a mount namespace; skipping\n");
		return 0;
	}
	char proc[64];
	snprintf(proc, sizeof proc, "%s/proc", base);
	if (mkdir(proc, 0555) != 0 || mount("proc", proc, "proc", 0, NULL) != 0 ||
	    chroot(base) != 0 || chdir("/") != 0) {
		print_message("  test_treemove: no chroot with /proc; skipping\n");
		return 0;
	}
	g_ready = 1;
	return 0;
}

#define NEED_ROOT()                                                                                \
	do {                                                                                       \
		if (!g_ready)                                                                      \
			skip();                                                                    \
	} while (0)

/* A fresh folder /tN (0755, root's); its fd. */
static int fresh(char *name, size_t cap)
{
	snprintf(name, cap, "/t%d", ++g_serial);
	assert_int_equal(mkdir(name, 0755), 0);
	int fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void put_file(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
}

/* A chain top/d/d/... of depth levels, a file in every 7th, owned by uid; every 100th level
 * left 0000 and every 100th + 50 left 0500 once its contents exist. */
static void build_chain(int root, const char *top, int depth, uid_t uid)
{
	assert_int_equal(mkdirat(root, top, 0755), 0);
	int fd = openat(root, top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fchown(fd, uid, uid), 0);
	for (int i = 0; i < depth; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		if (i % 7 == 0)
			put_file(fd, "f");
		int n = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(n >= 0);
		assert_int_equal(fchown(n, uid, uid), 0);
		/* As root, a mode does not stop the next mkdirat: set it now. */
		if (i % 100 == 99)
			assert_int_equal(fchmod(n, 0), 0);
		else if (i % 100 == 49)
			assert_int_equal(fchmod(n, 0500), 0);
		close(fd);
		fd = n;
	}
	put_file(fd, "bottom");
	close(fd);
}

/* Runs sbx_rmtree_at(root, top) in a child as uid (0: root) under RLIMIT_NOFILE nofile;
 * returns its exit status: 0 removed, 1 failed (the message on stderr). */
static int rm_as(int root, const char *top, uid_t uid, rlim_t nofile)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (uid != 0 && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		                 setresuid(uid, uid, uid) != 0))
			_exit(3);
		struct rlimit rl = {nofile, nofile};
		if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(4);
		struct sbx_err e;
		if (sbx_rmtree_at(root, top, &e) != 0) {
			fprintf(stderr, "rmtree: %s\n", e.msg);
			_exit(1);
		}
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void gone(int root, const char *name)
{
	struct stat st;
	assert_int_not_equal(fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(errno, ENOENT);
}

static void deep_chain(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	build_chain(root, "top", 6000, 0);
	put_file(root, "beside");
	assert_int_equal(rm_as(root, "top", 0, 0), 0);
	gone(root, "top");
	struct stat st;
	assert_int_equal(fstatat(root, "beside", &st, 0), 0);
	close(root);
}

/* Deeper than the fd limit and than 4096 levels, by its unprivileged owner, through 0000 and
 * 0500 folders. */
static void deep_chain_few_fds(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(fchown(root, 65534, 65534), 0);
	build_chain(root, "top", 5000, 65534);
	assert_int_equal(rm_as(root, "top", 65534, 32), 0);
	gone(root, "top");
	close(root);
}

static void wide_tree_few_fds(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(mkdirat(root, "top", 0755), 0);
	int top = openat(root, "top", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 3000; i++) {
		char n[16];
		snprintf(n, sizeof n, "w%d", i);
		assert_int_equal(mkdirat(top, n, i % 3 == 0 ? 0 : 0755), 0);
		if (i % 3 != 0) {
			int s = openat(top, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			put_file(s, "f");
			assert_int_equal(symlinkat("/etc", s, "l"), 0);
			close(s);
		}
		snprintf(n, sizeof n, "f%d", i);
		put_file(top, n);
	}
	close(top);
	assert_int_equal(rm_as(root, "top", 0, 32), 0);
	gone(root, "top");
	close(root);
}

/* What cannot be removed is named, and the call fails. */
static void failure_names_what_is_left(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(fchown(root, 65534, 65534), 0);
	assert_int_equal(mkdirat(root, "top", 0755), 0);
	int top = openat(root, "top", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fchown(top, 65534, 65534), 0);
	assert_int_equal(mkdirat(top, "mine", 0755), 0);
	assert_int_equal(mkdirat(top, "roots", 0), 0); /* root's, 0000: not ours to open */
	int r = openat(top, "roots", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put_file(r, "inside");
	close(r);
	close(top);
	assert_int_equal(rm_as(root, "top", 65534, 0), 1);
	/* In this process: the message names the folder. */
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0)
			_exit(3);
		struct sbx_err e;
		_exit(sbx_rmtree_at(root, "top", &e) == -1 && e.cls == SBX_ETRANSFER &&
		                      strstr(e.msg, "top/roots") != NULL &&
		                      strstr(e.msg, "Permission denied") != NULL
		              ? 0
		              : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct stat sst;
	assert_int_equal(fstatat(root, "top/roots/inside", &sst, 0), 0);
	/* Root removes it. */
	assert_int_equal(rm_as(root, "top", 0, 0), 0);
	gone(root, "top");
	close(root);
}

static void absent_and_files(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(sbx_rmtree_at(root, "nothing", &E), 0);
	put_file(root, "f");
	assert_int_equal(symlinkat("/etc", root, "l"), 0);
	assert_int_equal(sbx_rmtree_at(root, "f", &E), 0);
	assert_int_equal(sbx_rmtree_at(root, "l", &E), 0);
	gone(root, "f");
	gone(root, "l");
	close(root);
}

/* ---- merge ---- */

static int count_entries(int dfd, const char *sub)
{
	int fd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	int n = 0;
	DIR *d = fdopendir(fd);
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void merge_wide(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(mkdirat(root, "src", 0700), 0);
	assert_int_equal(mkdirat(root, "dst", 0755), 0);
	int src = openat(root, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dst = openat(root, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 5000; i++) {
		char n[16];
		snprintf(n, sizeof n, "f%d", i);
		put_file(src, n);
		if (i % 2 == 0)
			put_file(dst, n); /* replaced */
		if (i % 10 == 0) {
			snprintf(n, sizeof n, "d%d", i);
			assert_int_equal(mkdirat(src, n, 0750), 0);
			assert_int_equal(mkdirat(dst, n, 0755), 0);
			int s = openat(src, n, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			put_file(s, "in");
			close(s);
		}
	}
	put_file(dst, "kept");
	assert_int_equal(sbx_tree_merge(src, dst, SBX_MERGE_PRIVATE, &E), 0);
	assert_int_equal(count_entries(root, "src"), 0);
	assert_int_equal(count_entries(root, "dst"), 5000 + 500 + 1);
	struct stat st;
	assert_int_equal(fstatat(dst, "d4990/in", &st, 0), 0);
	assert_int_equal(fstatat(dst, "d4990", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	close(src);
	close(dst);
	close(root);
}

/* A folder the merge would write into that another user may write: refused before anything
 * moves (the check pass), for the target itself and for a folder inside it. */
static void merge_refuses_shared_folders(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(mkdirat(root, "src", 0700), 0);
	assert_int_equal(mkdirat(root, "dst", 0755), 0);
	int src = openat(root, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dst = openat(root, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put_file(src, "a");
	assert_int_equal(mkdirat(src, "sub", 0755), 0);
	assert_int_equal(mkdirat(dst, "sub", 0755), 0);
	int s = openat(src, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put_file(s, "b");
	close(s);
	struct stat st;

	assert_int_equal(fchmod(dst, 0775), 0); /* group-writable */
	assert_int_equal(sbx_tree_merge(src, dst, SBX_MERGE_PRIVATE, &E), -1);
	assert_int_equal(E.cls, SBX_EUSAGE);
	assert_non_null(strstr(E.msg, "the target folder (mode 0775) is writable by other users"));
	assert_int_not_equal(fstatat(dst, "a", &st, 0), 0);

	assert_int_equal(fchmod(dst, 01777), 0); /* sticky: fine */
	int sub = openat(dst, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fchown(sub, 65534, 65534), 0); /* another user's */
	assert_int_equal(sbx_tree_merge(src, dst, SBX_MERGE_PRIVATE, &E), -1);
	assert_non_null(strstr(E.msg, "the folder sub is owned by uid 65534"));
	assert_int_not_equal(fstatat(dst, "a", &st, 0), 0);
	assert_int_not_equal(fstatat(dst, "sub/b", &st, 0), 0);

	assert_int_equal(fchown(sub, 0, 0), 0);
	assert_int_equal(fchmod(sub, 0757), 0); /* other-writable */
	assert_int_equal(sbx_tree_merge(src, dst, SBX_MERGE_PRIVATE, &E), -1);
	assert_non_null(strstr(E.msg, "the folder sub (mode 0757)"));

	/* Without the flag (the agent's merge in a sandbox), as before. */
	assert_int_equal(sbx_tree_merge(src, dst, 0, &E), 0);
	assert_int_equal(fstatat(dst, "sub/b", &st, 0), 0);
	close(sub);
	close(src);
	close(dst);
	close(root);
}

/* A stage inside its target: a staged folder named like the stage is a conflict, never a
 * merge of the stage into itself. */
static void merge_stage_name(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	char stage[64];
	int sfd = sbx_mkstage(root, ".sbx-stage", stage, sizeof stage, &E);
	assert_true(sfd >= 0);
	assert_int_equal(mkdirat(sfd, stage, 0755), 0);
	int in = openat(sfd, stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put_file(in, "x");
	close(in);
	assert_int_equal(sbx_tree_merge(sfd, root, 0, &E), -1);
	assert_non_null(strstr(E.msg, "the name of the staging folder"));
	assert_int_equal(sbx_rmtree_at(root, stage, &E), 0);
	close(sfd);
	close(root);
}

static void move_verified(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(mkdirat(root, "stage", 0700), 0);
	int sfd = openat(root, "stage", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(sbx_move_verified(root, "stage", root, "target", sfd, 1, "target", &E), 0);
	struct stat st;
	assert_int_equal(fstatat(root, "target", &st, 0), 0);
	/* Swapped: the name no longer holds what was staged; nothing moves. */
	assert_int_equal(renameat(root, "target", root, "elsewhere"), 0);
	assert_int_equal(mkdirat(root, "target", 0700), 0);
	assert_int_equal(sbx_move_verified(root, "target", root, "final", sfd, 1, "final", &E), -1);
	assert_non_null(strstr(E.msg, "replaced by another process; nothing was moved"));
	assert_int_not_equal(fstatat(root, "final", &st, 0), 0);
	/* noreplace: an existing name is not replaced. */
	assert_int_equal(sbx_move_verified(root, "elsewhere", root, "target", sfd, 1, "target", &E),
	                 -1);
	assert_int_equal(E.errnum, EEXIST);
	close(sfd);
	close(root);
}

static void dir_private(void **state)
{
	(void)state;
	NEED_ROOT();
	char dir[32];
	int root = fresh(dir, sizeof dir);
	assert_int_equal(sbx_dir_private(root, "x", &E), 0);
	assert_int_equal(fchmod(root, 0770), 0);
	assert_int_equal(sbx_dir_private(root, "x", &E), -1);
	assert_int_equal(fchmod(root, 01770), 0);
	assert_int_equal(sbx_dir_private(root, "x", &E), 0);
	assert_int_equal(fchmod(root, 0755), 0);
	assert_int_equal(fchown(root, 65534, 65534), 0);
	assert_int_equal(sbx_dir_private(root, "x", &E), -1);
	assert_non_null(strstr(E.msg, "owned by uid 65534"));
	close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(deep_chain),
	        cmocka_unit_test(deep_chain_few_fds),
	        cmocka_unit_test(wide_tree_few_fds),
	        cmocka_unit_test(failure_names_what_is_left),
	        cmocka_unit_test(absent_and_files),
	        cmocka_unit_test(merge_wide),
	        cmocka_unit_test(merge_refuses_shared_folders),
	        cmocka_unit_test(merge_stage_name),
	        cmocka_unit_test(move_verified),
	        cmocka_unit_test(dir_private),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
