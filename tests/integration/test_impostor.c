/* libsbx against an impersonated agent (tests/fake/agent.py): the calls that read "until the
 * agent stops sending" end, bounded, and answers that do not match their questions are refused.
 * The fake agent's path is $SBX_FAKE_AGENT, else tests/fake/agent.py from the current folder
 * (make check runs from the top of the tree). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include "fixture.h"
#include "sbx.h"

static struct sbx_session *open_fake(const char *modes)
{
	const char *fake = getenv("SBX_FAKE_AGENT");
	char *argv[] = {"python3", (char *)(fake != NULL ? fake : "tests/fake/agent.py"),
	                (char *)modes, NULL};
	struct sbx_session *s;
	struct sbx_err e;
	if (sbx_session_open(&s, argv, "", 10, &e) != 0)
		fail_msg("session with the fake agent (%s): %s", modes, e.msg);
	return s;
}

/* Shown able to fail: before the bound, sbx_harness_read_output_log kept reading while the agent
 * kept reporting a larger size (the test ran out of memory). */
static void output_log_read_ends_at_first_size(void **state)
{
	(void)state;
	struct sbx_session *s = open_fake("log_grows");
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, "/s", &e), 0);
	char *text;
	size_t len;
	double t0 = fixture_now();
	assert_int_equal(sbx_harness_read_output_log(hs, &text, &len, &e), 0);
	/* The first answer said 512 KiB x 2 + 1 bytes: exactly that much is read. */
	assert_int_equal(len, 2 * 512 * 1024 + 1);
	assert_true(fixture_now() - t0 < 5);
	free(text);
	sbx_harness_free(hs);
	sbx_session_close(s);
}

static void output_log_larger_than_bound_refused(void **state)
{
	(void)state;
	struct sbx_session *s = open_fake("log_huge");
	struct sbx_harness *hs;
	struct sbx_err e;
	assert_int_equal(sbx_harness_open(&hs, s, "/s", &e), 0);
	char *text = (char *)1;
	size_t len;
	assert_int_equal(sbx_harness_read_output_log(hs, &text, &len, &e), -1);
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	assert_null(text);
	sbx_harness_free(hs);
	sbx_session_close(s);
}

static void read_more_than_asked_refused(void **state)
{
	(void)state;
	struct sbx_session *s = open_fake("read_oversize");
	char *data;
	size_t len;
	int64_t size;
	struct sbx_err e;
	assert_int_equal(sbx_run_read(s, "/s", "output.log", 0, 1000, &data, &len, &size, &e), -1);
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	/* The session stays usable: one bad answer is that call's error. */
	double rtt;
	assert_int_equal(sbx_ping(s, &rtt, &e), 0);
	sbx_session_close(s);
}

/* A channel whose stderr never stops: each call still completes, and the tail kept stays
 * bounded. (Reading stderr is bounded per loop round for fairness; the old unbounded loop
 * also returned here whenever the pipe ran dry, so this is a liveness check.) */
static void stderr_flood_does_not_stall(void **state)
{
	(void)state;
	struct sbx_session *s = open_fake("stderr_flood");
	enum sbx_kind k;
	struct sbx_err e;
	double t0 = fixture_now();
	for (int i = 0; i < 100; i++) {
		assert_int_equal(sbx_kind(s, "/x", &k, &e), 0);
		assert_int_equal(k, SBX_KIND_DIR);
	}
	assert_true(fixture_now() - t0 < 10);
	assert_true(strlen(sbx_session_stderr(s)) <= 4096);
	sbx_session_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(output_log_read_ends_at_first_size),
	        cmocka_unit_test(output_log_larger_than_bound_refused),
	        cmocka_unit_test(read_more_than_asked_refused),
	        cmocka_unit_test(stderr_flood_does_not_stall),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
