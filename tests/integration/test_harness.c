/* The reference's SandboxSession in C (sbx_harness_*), over a real agent (local runner): execute
 * with stage and collect, artifacts collected after confirmed cleanup even when the harness
 * failed, expire before launch, stop, begin_activation, and an idempotent close that fences
 * later activations. */
#include <limits.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "sbx.h"

static char base[PATH_MAX];

/* A local session (sbx_open starts its trust: a fresh secret for this session). */
static struct sbx_session *open_local(void)
{
	return fixture_session("local");
}

struct ctx {
	char *argv[8];
	double timeout;
	int staged, collected;
	int collect_saw_confirmed;
	struct sbx_harness *hs;
};

static int stage(void *p, struct sbx_run_opts *o, struct sbx_err *e)
{
	(void)e;
	struct ctx *c = p;
	c->staged++;
	o->argv = c->argv;
	o->timeout_s = c->timeout;
	o->grace_s = 0.2;
	return 0;
}

static int collect(void *p, struct sbx_harness *hs, struct sbx_err *e)
{
	(void)e;
	struct ctx *c = p;
	struct sbx_harness_state st;
	sbx_harness_state(hs, &st);
	c->collect_saw_confirmed = st.cleanup_confirmed;
	c->collected++;
	return 0;
}

static int setup(void **state)
{
	(void)state;
	return fixture_tmpdir(base, sizeof base, "hs");
}

static int teardown(void **state)
{
	(void)state;
	return fixture_rmtree(base) == 0 ? 0 : -1;
}

static void execute_collect_rearm_close(void **state)
{
	(void)state;
	struct sbx_session *s = open_local();
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/a", base);
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, dir, &e), 0);
	struct ctx c = {.argv = {"sh", "-c", "echo working; exit 3", NULL}, .timeout = 10};
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 10, 5, &e), 0);
	const struct sbx_receipt *r = sbx_harness_receipt(hs);
	assert_non_null(r);
	assert_true(r->verified);
	assert_int_equal(r->status, 3);
	assert_int_equal(c.collected, 1);
	assert_true(c.collect_saw_confirmed);
	char *log;
	size_t len;
	assert_int_equal(sbx_harness_read_output_log(hs, &log, &len, &e), 0);
	assert_non_null(strstr(log, "working\n"));
	free(log);
	/* Only one launch per activation; begin_activation rearms. */
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 10, 5, &e), -1);
	assert_int_equal(sbx_harness_begin_activation(hs, 5, &e), 0);
	c.argv[2] = "exit 0";
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 10, 5, &e), 0);
	assert_int_equal(sbx_harness_receipt(hs)->status, 0);
	assert_int_equal(sbx_harness_receipt(hs)->activation, 2);
	/* Close is idempotent and fences later activations. */
	assert_int_equal(sbx_harness_close(hs, 5, &e), 0);
	assert_int_equal(sbx_harness_close(hs, 5, &e), 0);
	assert_int_equal(sbx_harness_begin_activation(hs, 5, &e), -1);
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 10, 5, &e), -1);
	sbx_harness_free(hs);
	sbx_session_close(s);
}

static void deadline_then_collect(void **state)
{
	(void)state;
	struct sbx_session *s = open_local();
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/b", base);
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, dir, &e), 0);
	struct ctx c = {.argv = {"sh", "-c", "setsid sleep 100 & sleep 100", NULL}, .timeout = 0.3};
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 0.3, 5, &e), 0);
	const struct sbx_receipt *r = sbx_harness_receipt(hs);
	assert_string_equal(r->trigger, "deadline");
	assert_true(r->timed_out);
	assert_true(r->termination_witnessed);
	/* The harness failed (timed out), artifacts are still collected after cleanup. */
	assert_int_equal(c.collected, 1);
	assert_int_equal(sbx_harness_close(hs, 5, &e), 0);
	sbx_harness_free(hs);
	sbx_session_close(s);
}

static void expire_before_launch(void **state)
{
	(void)state;
	struct sbx_session *s = open_local();
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/c", base);
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, dir, &e), 0);
	int accepted;
	assert_int_equal(sbx_harness_expire(hs, 5, "budget", &accepted, &e), 0);
	assert_true(accepted);
	assert_int_equal(sbx_harness_expire(hs, 5, "again", &accepted, &e), 0);
	assert_false(accepted); /* already requested */
	char marker[PATH_MAX + 32];
	snprintf(marker, sizeof marker, "%s/c/never", base);
	char script[PATH_MAX + 64];
	snprintf(script, sizeof script, "touch %s", marker);
	struct ctx c = {.argv = {"sh", "-c", script, NULL}, .timeout = 10};
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 10, 5, &e), 0);
	struct sbx_harness_state st;
	sbx_harness_state(hs, &st);
	assert_true(st.expired_before_launch);
	assert_true(st.cleanup_confirmed);
	assert_int_equal(access(marker, F_OK), -1); /* nothing started */
	assert_int_equal(sbx_harness_receipt(hs)->status, 124);
	assert_int_equal(sbx_harness_close(hs, 5, &e), 0);
	sbx_harness_free(hs);
	sbx_session_close(s);
}

/* Behaviour 14: the channel dies mid-run; the supervisor keeps running and keeps its deadline;
 * a new connection attaches, reads the log from an offset, stops the run and collects a
 * receipt that verifies. */
static void channel_dies_mid_run(void **state)
{
	(void)state;
	char dir[PATH_MAX + 16], dir2[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/d", base);
	snprintf(dir2, sizeof dir2, "%s/e", base);
	uint8_t key[SBX_RUN_KEY_LEN], key2[SBX_RUN_KEY_LEN];
	struct sbx_err e;
	struct sbx_session *a = open_local();
	char *ticker[] = {"sh", "-c", "i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.02; done",
	                  NULL};
	char *sleeper[] = {"sleep", "100", NULL};
	struct sbx_run_opts o;
	sbx_run_opts_init(&o);
	o.run_dir = dir;
	o.argv = ticker;
	o.timeout_s = 60;
	assert_int_equal(sbx_run_start(a, &o, NULL, key, &e), 0);
	o.run_dir = dir2;
	o.argv = sleeper;
	o.timeout_s = 0.5;
	assert_int_equal(sbx_run_start(a, &o, NULL, key2, &e), 0);
	/* Each run has a key of its own, derived from the secret and its nonce. */
	assert_memory_not_equal(key, key2, sizeof key);
	/* The channel dies: the agent is killed outright. */
	kill((pid_t)sbx_session_hello(a)->pid, SIGKILL);
	sbx_session_close(a);
	usleep(1500 * 1000);

	struct sbx_session *b = open_local();
	struct sbx_run_status st;
	assert_int_equal(sbx_run_status(b, dir, &st, &e), 0);
	assert_true(st.alive);
	assert_false(st.has_receipt);
	assert_string_equal(st.state, "running");
	/* Read the log from an offset: the next read starts where the first ended. */
	char *d1, *d2;
	size_t l1, l2;
	int64_t size;
	assert_int_equal(sbx_run_read(b, dir, "output.log", 0, 1 << 20, &d1, &l1, &size, &e), 0);
	assert_non_null(strstr(d1, "tick 0\n"));
	usleep(200 * 1000);
	assert_int_equal(
	        sbx_run_read(b, dir, "output.log", (int64_t)l1, 1 << 20, &d2, &l2, &size, &e), 0);
	assert_true(l2 > 0);
	assert_null(strstr(d2, "tick 0\n"));
	assert_non_null(strstr(d2, "tick "));
	free(d1);
	free(d2);
	/* Stop it from the new connection and collect its receipt. */
	struct sbx_receipt r;
	assert_int_equal(sbx_run_stop(b, dir, &e), 0);
	assert_int_equal(sbx_run_wait(b, dir, key, sizeof key, 10, &r, &e), 0);
	assert_true(r.verified);
	assert_string_equal(r.trigger, "stop");
	assert_true(r.termination_witnessed);
	sbx_receipt_free(&r);
	/* The other run kept its deadline with no connection at all. */
	assert_int_equal(sbx_run_wait(b, dir2, key2, sizeof key2, 10, &r, &e), 0);
	assert_true(r.verified);
	assert_string_equal(r.trigger, "deadline");
	assert_true(r.timed_out);
	assert_int_equal(r.status, 124);
	sbx_receipt_free(&r);
	/* A wrong key, the other run's, does not verify. */
	assert_int_equal(sbx_run_receipt(b, dir2, key, sizeof key, &r, &e), 0);
	assert_false(r.verified);
	sbx_receipt_free(&r);
	sbx_session_close(b);
}

/* A harness that kills its supervisor (it can: same uid) leaves no receipt; the wait says so
 * instead of waiting forever or trusting anything, and cleanup is not confirmed. */
static void supervisor_killed_by_harness(void **state)
{
	(void)state;
	struct sbx_session *s = open_local();
	char dir[PATH_MAX + 16], script[PATH_MAX + 128];
	snprintf(dir, sizeof dir, "%s/f", base);
	snprintf(script, sizeof script, "kill -9 $(cut -d' ' -f1 %s/supervisor.pid)", dir);
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, dir, &e), 0);
	struct ctx c = {.argv = {"sh", "-c", script, NULL}, .timeout = 20};
	assert_int_equal(sbx_harness_execute(hs, stage, collect, &c, 20, 2, &e), -1);
	assert_int_equal(e.cls, SBX_ETRANSFER);
	assert_non_null(strstr(e.msg, "without a receipt"));
	struct sbx_harness_state st;
	sbx_harness_state(hs, &st);
	assert_false(st.cleanup_confirmed);
	assert_int_equal(c.collected, 0); /* nothing collected from an unconfirmed run */
	sbx_harness_free(hs);
	sbx_session_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(execute_collect_rearm_close),
	        cmocka_unit_test(deadline_then_collect),
	        cmocka_unit_test(expire_before_launch),
	        cmocka_unit_test(channel_dies_mid_run),
	        cmocka_unit_test(supervisor_killed_by_harness),
	};
	return cmocka_run_group_tests_name("harness session", tests, setup, teardown);
}
