/* Integration: a fleet of ns sandboxes (BusyBox) driven from one thread. Each is created, gets
 * a session held by one sbx_loop, an upload, a supervised harness that leaves an escaping child
 * behind (setsid), a download of what the harness wrote, and is removed; the uploads and the
 * runs of all of them are in flight at once. 0 failures, every receipt verified with its
 * termination witnessed, and no process of any of them left. $SBX_FLEET sets the count (256). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "sbx.h"
#include "sbx_runner.h"

static char tmpdir[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (fixture_tmpdir(tmpdir, sizeof tmpdir, "fleet") != 0)
		return -1;
	char p[PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/task", tmpdir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/task/input", tmpdir);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, "41\n", 3) != 3)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fixture_rmtree(tmpdir) == 0 ? 0 : -1;
}

/* How many processes of this machine live in one of the pid namespaces given. */
static int left_in(char (*nss)[64], int n)
{
	int count = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		pid_t p = (pid_t)atoi(de->d_name);
		char ns[64];
		if (p <= 0 || fixture_pidns(p, ns, sizeof ns) != 0)
			continue;
		for (int i = 0; i < n; i++)
			if (strcmp(ns, nss[i]) == 0) {
				count++;
				break;
			}
	}
	closedir(d);
	return count;
}

/* Steps the loop until every op of ops[0..n) is done (within limit seconds). */
static void all_done(struct sbx_loop *l, struct sbx_op **ops, int n, double limit)
{
	double end = fixture_now() + limit;
	for (;;) {
		int left = 0;
		for (int i = 0; i < n; i++)
			left += ops[i] != NULL && !sbx_op_done(ops[i]);
		if (left == 0)
			return;
		if (fixture_now() > end)
			fail_msg("%d of %d operations not done in %.0f s", left, n, limit);
		assert_true(sbx_loop_run_once(l, 100) >= 0);
		while (sbx_loop_next_done(l) != NULL)
			;
	}
}

static void fleet(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int n = getenv("SBX_FLEET") != NULL ? atoi(getenv("SBX_FLEET")) : 256;
	assert_true(n > 0 && n <= 4096);
	/* A few fds a session: more than the usual soft limit of 1024 for a fleet. */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	char agents[PATH_MAX], img[PATH_MAX + 32], task[PATH_MAX + 16];
	struct sbx_err e;
	assert_int_equal(fixture_agent_dir(agents, sizeof agents, &e), 0);
	snprintf(img, sizeof img, "%s/../images/busybox-x86_64", agents);
	snprintf(task, sizeof task, "%s/task", tmpdir);
	char(*spec)[192] = calloc((size_t)n, sizeof *spec);
	char(*nss)[64] = calloc((size_t)n, sizeof *nss);
	struct sbx_session **ss = calloc((size_t)n, sizeof *ss);
	struct sbx_op **ops = calloc((size_t)n, sizeof *ops);
	uint8_t(*keys)[SBX_RUN_KEY_LEN] = calloc((size_t)n, sizeof *keys);
	struct sbx_loop *l = sbx_loop_new(&e);
	assert_non_null(l);
	struct sbx_create_opts co = {.image = img, .agent_dir = agents};
	struct sbx_open_opts oo = {.agent_dir = agents};
	double t0 = fixture_now();
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "fleet%d-%d", (int)getpid() % 10000, i);
		co.name = name;
		if (sbx_sandbox_create("ns", &co, spec[i], sizeof spec[i], &e) != 0)
			fail_msg("create %d: %s", i, e.msg);
		struct sbx_sandbox sb;
		assert_int_equal(sbx_sandbox_status(spec[i], &sb, &e), 0);
		assert_int_equal(fixture_pidns((pid_t)sb.pid, nss[i], sizeof nss[i]), 0);
		if (sbx_open(spec[i], &oo, &ss[i], &e) != 0)
			fail_msg("open %d: %s", i, e.msg);
		assert_int_equal(sbx_loop_add(l, ss[i], &e), 0);
	}
	double made = fixture_now() - t0;

	/* Every upload at once. */
	for (int i = 0; i < n; i++)
		if ((ops[i] = sbx_upload_dir_async(ss[i], task, "/task", NULL, &e)) == NULL)
			fail_msg("upload %d: %s", i, e.msg);
	all_done(l, ops, n, 120);
	for (int i = 0; i < n; i++) {
		struct sbx_xfer_stats xs;
		if (sbx_upload_result(ops[i], &xs, &e) != 0)
			fail_msg("upload %d: %s", i, e.msg);
		assert_true(xs.files == 1);
		sbx_op_free(ops[i]);
	}

	/* Every run at once: the harness answers, leaves a child in a session of its own and
	 * exits; the supervisor kills the child too. */
	char *harness[] = {"sh", "-c",
	                   "echo $(($(cat /task/input) + 1)) > /task/answer; "
	                   "setsid sleep 300 & exit 0",
	                   NULL};
	struct sbx_run_opts ro;
	sbx_run_opts_init(&ro);
	ro.run_dir = "/run/fleet";
	ro.argv = harness;
	ro.timeout_s = 60;
	ro.grace_s = 0.2;
	for (int i = 0; i < n; i++)
		if ((ops[i] = sbx_run_start_async(ss[i], &ro, &e)) == NULL)
			fail_msg("run %d: %s", i, e.msg);
	all_done(l, ops, n, 120);
	for (int i = 0; i < n; i++) {
		if (sbx_run_start_result(ops[i], NULL, keys[i], &e) != 0)
			fail_msg("run %d: %s", i, e.msg);
		sbx_op_free(ops[i]);
	}
	/* Their receipts: statuses polled together until every supervisor is done. */
	int *finished = calloc((size_t)n, sizeof *finished), left = n;
	double end = fixture_now() + 120;
	while (left > 0) {
		if (fixture_now() > end)
			fail_msg("%d runs without a receipt", left);
		for (int i = 0; i < n; i++)
			ops[i] = finished[i] ? NULL : sbx_run_status_async(ss[i], "/run/fleet", &e);
		all_done(l, ops, n, 60);
		for (int i = 0; i < n; i++) {
			if (ops[i] == NULL)
				continue;
			struct sbx_run_status st;
			if (sbx_run_status_result(ops[i], &st, &e) != 0)
				fail_msg("status %d: %s", i, e.msg);
			sbx_op_free(ops[i]);
			if (st.has_receipt && !st.alive) {
				finished[i] = 1;
				left--;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		struct sbx_receipt r;
		if (sbx_run_receipt(ss[i], "/run/fleet", keys[i], SBX_RUN_KEY_LEN, &r, &e) != 0)
			fail_msg("receipt %d: %s", i, e.msg);
		assert_true(r.verified);
		assert_true(r.termination_witnessed);
		assert_int_equal(r.exit_code, 0);
		sbx_receipt_free(&r);
	}

	/* What each harness wrote, back on the host. */
	for (int i = 0; i < n; i++) {
		char back[PATH_MAX + 32], p[PATH_MAX + 48], buf[8] = "";
		snprintf(back, sizeof back, "%s/back%d", tmpdir, i);
		struct sbx_xfer_stats xs;
		if (sbx_download_dir(ss[i], "/task", back, NULL, &xs, &e) != 0)
			fail_msg("download %d: %s", i, e.msg);
		snprintf(p, sizeof p, "%s/answer", back);
		int fd = open(p, O_RDONLY);
		assert_true(fd >= 0);
		assert_true(read(fd, buf, sizeof buf - 1) == 3);
		close(fd);
		assert_string_equal(buf, "42\n");
	}
	for (int i = 0; i < n; i++) {
		sbx_loop_remove(l, ss[i]);
		sbx_session_close(ss[i]);
		if (sbx_sandbox_remove(spec[i], &e) != 0)
			fail_msg("remove %d: %s", i, e.msg);
	}
	sbx_loop_free(l);
	/* Nothing of any of them is left (the kernel may take a moment to reap). */
	end = fixture_now() + 10;
	int procs;
	while ((procs = left_in(nss, n)) > 0 && fixture_now() < end)
		fixture_pause_ms(50);
	assert_int_equal(procs, 0);
	fprintf(stderr, "fleet: %d ns sandboxes made and opened in %.2f s, all done in %.2f s\n", n,
	        made, fixture_now() - t0);
	free(finished);
	free(spec);
	free(nss);
	free(ss);
	free(ops);
	free(keys);
}

/* Creates from several threads at once (as a Python program's executor does): a child a create
 * forks holds copies of the other creates' pipes until it execs, so no create may wait for the
 * end of a pipe a concurrent one could hold (regression: sbx_userns_make waited for done[1]'s
 * end, and two concurrent creates held each other's: both hung). */
#define PAR_THREADS 8
#define PAR_EACH 4
struct par {
	const char *img, *agents;
	int t, made;
	char err[400];
};

static void *par_create(void *arg)
{
	struct par *p = arg;
	for (int i = 0; i < PAR_EACH; i++) {
		char name[48], spec[192];
		snprintf(name, sizeof name, "par%d-%d-%d", (int)getpid() % 10000, p->t, i);
		struct sbx_create_opts co = {.image = p->img, .agent_dir = p->agents, .name = name};
		struct sbx_err e;
		if (sbx_sandbox_create("ns", &co, spec, sizeof spec, &e) != 0) {
			snprintf(p->err, sizeof p->err, "create %s: %s", name, e.msg);
			return NULL;
		}
		p->made++;
		if (sbx_sandbox_remove(spec, &e) != 0) {
			snprintf(p->err, sizeof p->err, "rm %s: %s", name, e.msg);
			return NULL;
		}
	}
	return NULL;
}

static void creates_from_threads(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char agents[PATH_MAX], img[PATH_MAX + 32];
	struct sbx_err e;
	assert_int_equal(fixture_agent_dir(agents, sizeof agents, &e), 0);
	snprintf(img, sizeof img, "%s/../images/busybox-x86_64", agents);
	struct par ps[PAR_THREADS];
	pthread_t th[PAR_THREADS];
	double t0 = fixture_now();
	for (int t = 0; t < PAR_THREADS; t++) {
		ps[t] = (struct par){.img = img, .agents = agents, .t = t};
		assert_int_equal(pthread_create(&th[t], NULL, par_create, &ps[t]), 0);
	}
	/* A hang is the failure: the joins are given a minute, then the test fails. */
	for (int t = 0; t < PAR_THREADS; t++) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 60;
		if (pthread_timedjoin_np(th[t], NULL, &until) != 0)
			fail_msg("thread %d: no end in 60 s (%d made): creates wait for each other",
			         t, ps[t].made);
		if (ps[t].err[0] != '\0')
			fail_msg("thread %d: %s", t, ps[t].err);
		assert_int_equal(ps[t].made, PAR_EACH);
	}
	fprintf(stderr, "fleet: %d creates from %d threads in %.2f s\n", PAR_THREADS * PAR_EACH,
	        PAR_THREADS, fixture_now() - t0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(creates_from_threads),
	        cmocka_unit_test(fleet),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
