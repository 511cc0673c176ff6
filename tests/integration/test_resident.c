/* The resident agent (agent/resident.c, agent/init.c --serve, host/direct.c): a real
 * `sbx-agent init --serve` as PID 1 of a pid namespace of its own, chrooted into a tmpfs of a
 * private mount namespace (nothing it makes can land on this machine's /). Sessions are
 * taken from outside; a peer inside the box (or in a namespace below it) is closed unanswered;
 * a listener the box put at the socket's name is refused by the host; a planted symlink or an
 * old folder does not lead init astray; a non-root init offers nothing. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "inject.h"
#include "session.h"

enum plant { PLANT_NONE, PLANT_SYMLINK, PLANT_OLD_FOLDER };

struct box {
	pid_t outer; /* our child: made the namespaces, waits for init */
	pid_t init;  /* the box's PID 1, as this machine sees it */
	char root[64];
};

static struct box g_box;

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		_exit(90);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	char buf[65536];
	ssize_t n;
	if (in < 0 || out < 0)
		_exit(91);
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			_exit(92);
	close(in);
	close(out);
}

/* The outer child: private mounts, a tmpfs root holding the agent, then init in a new pid
 * namespace (uid: who init runs as). */
__attribute__((noreturn)) static void outer(const char *agent, const char *root, enum plant plant,
                                            uid_t uid, int report)
{
	char p[PATH_MAX];
	if (unshare(CLONE_NEWNS | CLONE_NEWPID) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", root, "tmpfs", 0, "mode=0755") != 0)
		_exit(80);
	snprintf(p, sizeof p, "%s/agent", root);
	copy_file(agent, p);
	snprintf(p, sizeof p, "%s/proc", root);
	mkdir(p, 0555);
	snprintf(p, sizeof p, "%s/tmp", root);
	mkdir(p, 01777);
	chmod(p, 01777);
	if (plant == PLANT_SYMLINK) {
		snprintf(p, sizeof p, "%s/tmp/elsewhere", root);
		mkdir(p, 0755);
		snprintf(p, sizeof p, "%s/tmp/elsewhere/s", root);
		write_file(p, "keep", 4, 0644);
		snprintf(p, sizeof p, "%s/.sbx-serve", root);
		if (symlink("tmp/elsewhere", p) != 0)
			_exit(81);
	} else if (plant == PLANT_OLD_FOLDER) {
		snprintf(p, sizeof p, "%s/.sbx-serve", root);
		mkdir(p, 0755);
		chmod(p, 0755);
		snprintf(p, sizeof p, "%s/.sbx-serve/s", root);
		write_file(p, "old", 3, 0644);
	}
	if (chroot(root) != 0 || chdir("/") != 0)
		_exit(82);
	pid_t init = fork();
	if (init == 0) {
		if (mount("proc", "/proc", "proc", 0, NULL) != 0)
			_exit(83);
		if (uid != 0 && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		                 setresuid(uid, uid, uid) != 0))
			_exit(84);
		char *argv[] = {"sbx-agent", "init", "--serve", NULL};
		char *envp[] = {NULL};
		execve("/agent", argv, envp);
		_exit(85);
	}
	if (write(report, &init, sizeof init) != (ssize_t)sizeof init)
		_exit(86);
	close(report);
	int st;
	while (waitpid(init, &st, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* The path of name inside the box, from here. */
static void in_box(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "/proc/%d/root%s", (int)g_box.init, name);
}

/* Starts a box and waits until init runs the agent and, when where is not NULL, its socket
 * is at where. */
static void box_start(enum plant plant, uid_t uid, const char *where)
{
	char agent[PATH_MAX];
	fixture_agent_path(agent, sizeof agent);
	assert_int_equal(fixture_tmpdir(g_box.root, sizeof g_box.root, "resident"), 0);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	g_box.outer = fork();
	assert_true(g_box.outer >= 0);
	if (g_box.outer == 0) {
		close(p[0]);
		outer(agent, g_box.root, plant, uid, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &g_box.init, sizeof g_box.init), (ssize_t)sizeof g_box.init);
	close(p[0]);
	char exe[64], link[PATH_MAX] = "", sock[PATH_MAX];
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)g_box.init);
	in_box(where != NULL ? where : "/", sock, sizeof sock);
	for (int i = 0; i < 500; i++) {
		ssize_t n = readlink(exe, link, sizeof link - 1);
		link[n > 0 ? n : 0] = '\0';
		struct stat st;
		if (strstr(link, "/agent") != NULL &&
		    (where == NULL || (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))))
			return;
		fixture_pause_ms(10);
	}
	fail_msg("init never listened at %s (exe %s)", where != NULL ? where : "-", link);
}

static int box_down(void **state)
{
	(void)state;
	if (g_box.init > 0)
		kill(g_box.init, SIGKILL); /* PID 1: its whole namespace goes with it */
	if (g_box.outer > 0)
		while (waitpid(g_box.outer, NULL, 0) < 0 && errno == EINTR)
			;
	if (g_box.root[0] != '\0')
		rmdir(g_box.root);
	memset(&g_box, 0, sizeof g_box);
	return 0;
}

static struct sbx_session *take(void)
{
	struct sbx_session *s;
	struct sbx_err e;
	if (sbx_session_resident(&s, g_box.init, 5, &e) != 0)
		fail_msg("resident: %s", e.msg);
	assert_string_equal(sbx_session_channel(s), "resident");
	return s;
}

static void probe(struct sbx_session *s, const char *path, enum sbx_kind want)
{
	enum sbx_kind k;
	struct sbx_err e;
	if (sbx_kind(s, path, &k, &e) != 0)
		fail_msg("kind %s: %s", path, e.msg);
	assert_int_equal(k, want);
}

/* One session taken, a probe answered, closed. */
static void one_session(void)
{
	struct sbx_session *s = take();
	probe(s, "/agent", SBX_KIND_FILE);
	sbx_session_close(s);
}

/* The permission bits of name in the box (the test fails when it is not there). */
static unsigned mode_in_box(const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	in_box(name, p, sizeof p);
	assert_int_equal(stat(p, &st), 0);
	return st.st_mode & 07777;
}

/* The pids of init's children, as a count. */
static int children(void)
{
	char p[96], buf[256] = "";
	snprintf(p, sizeof p, "/proc/%d/task/%d/children", (int)g_box.init, (int)g_box.init);
	FILE *f = fopen(p, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	int c = 0;
	for (char *t = strtok(buf, " \n"); t != NULL; t = strtok(NULL, " \n"))
		c++;
	return c;
}

static void sessions_taken(void **state)
{
	(void)state;
	box_start(PLANT_NONE, 0, "/.sbx-serve/s");
	char agent[PATH_MAX];
	fixture_agent_path(agent, sizeof agent);
	uint8_t sha[SBX_SHA256_LEN];
	struct sbx_err e;
	if (sbx_inject_sha256_file(agent, sha, &e) != 0)
		fail_msg("%s", e.msg);
	struct sbx_session *a = take(), *b = take();
	const struct sbx_hello *h = sbx_session_hello(a);
	assert_memory_equal(h->sha256, sha, sizeof sha);
	assert_int_equal(h->euid, 0);
	/* A serve process of its own for each, children of init (PID 1 there). */
	assert_true(h->pid > 1);
	assert_true(sbx_session_hello(b)->pid > 1);
	assert_int_not_equal(h->pid, sbx_session_hello(b)->pid);
	assert_int_equal(children(), 2);
	probe(a, "/agent", SBX_KIND_FILE);
	probe(b, "/tmp", SBX_KIND_DIR);
	sbx_session_close(a);
	probe(b, "/nothing", SBX_KIND_ABSENT);
	sbx_session_close(b);
	/* Each serve process ends with its connection; init reaps it. */
	int left = -1;
	for (int i = 0; i < 200 && (left = children()) != 0; i++)
		fixture_pause_ms(10);
	assert_int_equal(left, 0);
	assert_int_equal(mode_in_box("/.sbx-serve"), 0700);
}

/* Connects to the box's socket; exit 0: closed unanswered, 1: it said something or nothing
 * at all, 2: no connection. */
__attribute__((noreturn)) static void knock(int unused)
{
	(void)unused;
	struct sockaddr_un a = {.sun_family = AF_UNIX, .sun_path = "/.sbx-serve/s"};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
		_exit(2);
	struct pollfd pf = {fd, POLLIN, 0};
	char b;
	if (poll(&pf, 1, 3000) != 1)
		_exit(1); /* neither EOF nor a byte: not closed */
	_exit(read(fd, &b, 1) == 0 ? 0 : 1);
}

/* Runs fn in a child, returns its exit status (-1: killed). */
static int in_child(void (*fn)(int), int arg)
{
	pid_t c = fork();
	if (c == 0) {
		fn(arg);
		_exit(5);
	}
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void knock_nested(int unused)
{
	(void)unused;
	if (unshare(CLONE_NEWPID) != 0)
		_exit(3);
	_exit(in_child(knock, 0));
}

/* This process moves into the box: its pid namespace for the children it makes, its root.
 * Exits 3 when it cannot. */
static void enter_box(void)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)g_box.init);
	int ns = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof p, "/proc/%d/root", (int)g_box.init);
	if (ns < 0 || setns(ns, CLONE_NEWPID) != 0 || chroot(p) != 0 || chdir("/") != 0)
		_exit(3);
	close(ns);
}

/* From inside the box's pid namespace (nested: from a pid namespace below it). */
__attribute__((noreturn)) static void inside_peer(int nested)
{
	enter_box();
	_exit(in_child(nested ? knock_nested : knock, 0));
}

static int run_inside(int nested)
{
	return in_child(inside_peer, nested);
}

static void inside_peers_refused(void **state)
{
	(void)state;
	box_start(PLANT_NONE, 0, "/.sbx-serve/s");
	assert_int_equal(run_inside(0), 0);
	assert_int_equal(run_inside(1), 0);
	assert_int_equal(children(), 0); /* no serve process was made for them */
	one_session();                   /* init still takes the host */
}

static void decoy_refused(void **state)
{
	(void)state;
	box_start(PLANT_NONE, 0, "/.sbx-serve/s");
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t c = fork();
	if (c == 0) {
		/* A root process of the box replaces the socket with its own listener. */
		close(ready[0]);
		enter_box();
		pid_t d = fork();
		if (d == 0) {
			struct sockaddr_un a = {.sun_family = AF_UNIX, .sun_path = "/.sbx-serve/s"};
			int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			unlink(a.sun_path);
			if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
			    listen(fd, 4) != 0)
				_exit(3);
			if (write(ready[1], "r", 1) != 1)
				_exit(3);
			for (;;) {
				int x = accept(fd, NULL, NULL);
				if (x >= 0 && write(x, "garbage", 7) < 0)
					_exit(3);
			}
		}
		int st;
		waitpid(d, &st, 0);
		_exit(3);
	}
	close(ready[1]);
	char r;
	assert_int_equal(read(ready[0], &r, 1), 1);
	close(ready[0]);
	struct sbx_session *s = NULL;
	struct sbx_err e;
	sbx_err_clear(&e);
	assert_int_equal(sbx_session_resident(&s, g_box.init, 5, &e), -1);
	assert_null(s);
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	assert_non_null(strstr(e.msg, "not the sandbox's init"));
	kill(c, SIGKILL); /* its listener goes with the box */
	waitpid(c, NULL, 0);
}

static void planted_symlink(void **state)
{
	(void)state;
	/* Before init, /.sbx-serve is a symlink to /tmp/elsewhere (holding a file "s"). */
	box_start(PLANT_SYMLINK, 0, "/tmp/.sbx-serve/s");
	one_session();
	char p[PATH_MAX], buf[8] = "";
	in_box("/tmp/elsewhere/s", p, sizeof p);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof buf), 4);
	close(fd);
	assert_string_equal(buf, "keep");
	assert_int_equal(mode_in_box("/tmp/elsewhere"), 0755); /* never chmodded through the link */
}

static void old_folder(void **state)
{
	(void)state;
	/* A restarted container: the folder is there (0755 here) with an old "s". */
	box_start(PLANT_OLD_FOLDER, 0, "/.sbx-serve/s");
	one_session();
	assert_int_equal(mode_in_box("/.sbx-serve"), 0700);
}

static void not_root_offers_nothing(void **state)
{
	(void)state;
	/* Waits for the exec only: there is no socket to wait for. */
	box_start(PLANT_NONE, 65534, NULL);
	fixture_pause_ms(300);
	struct sbx_session *s = NULL;
	struct sbx_err e;
	assert_int_equal(sbx_session_resident(&s, g_box.init, 5, &e), -1);
	assert_int_equal(e.cls, SBX_EUNAVAILABLE);
	char q[PATH_MAX];
	struct stat st;
	in_box("/.sbx-serve", q, sizeof q);
	assert_int_not_equal(lstat(q, &st), 0);
	in_box("/tmp/.sbx-serve", q, sizeof q);
	assert_int_not_equal(lstat(q, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_teardown(sessions_taken, box_down),
	        cmocka_unit_test_teardown(inside_peers_refused, box_down),
	        cmocka_unit_test_teardown(decoy_refused, box_down),
	        cmocka_unit_test_teardown(planted_symlink, box_down),
	        cmocka_unit_test_teardown(old_folder, box_down),
	        cmocka_unit_test_teardown(not_root_offers_nothing, box_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
