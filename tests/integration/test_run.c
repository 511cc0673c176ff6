/* sbx_proc_capture: exit codes, signals, timeouts that kill the whole group, bounded output,
 * and a program that cannot start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sbx.h"

static void exit_codes_pass_through(void **state)
{
	(void)state;
	int codes[] = {0, 1, 7, 126, 127, 255};
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		char script[64];
		snprintf(script, sizeof script, "echo out; echo err >&2; exit %d", codes[i]);
		char *argv[] = {"sh", "-c", script, NULL};
		struct sbx_proc_result r;
		struct sbx_err e;
		assert_int_equal(sbx_proc_capture(argv, 10, 1024, &r, &e), 0);
		assert_int_equal(r.how, SBX_PROC_EXITED);
		assert_int_equal(r.code, codes[i]);
		assert_string_equal(r.output, "out\nerr\n");
		assert_false(r.truncated);
		sbx_proc_result_free(&r);
	}
}

static void signal_is_not_a_code(void **state)
{
	(void)state;
	char *argv[] = {"sh", "-c", "kill -TERM $$", NULL};
	struct sbx_proc_result r;
	struct sbx_err e;
	assert_int_equal(sbx_proc_capture(argv, 10, 1024, &r, &e), 0);
	assert_int_equal(r.how, SBX_PROC_SIGNALED);
	assert_int_equal(r.code, 15);
	sbx_proc_result_free(&r);
}

static void timeout_kills_the_group(void **state)
{
	(void)state;
	/* A background child holds the pipe open too; the group kill must reach it. */
	char *argv[] = {"sh", "-c", "sleep 30 & sleep 30", NULL};
	struct sbx_proc_result r;
	struct sbx_err e;
	assert_int_equal(sbx_proc_capture(argv, 0.3, 1024, &r, &e), 0);
	assert_int_equal(r.how, SBX_PROC_TIMED_OUT);
	assert_true(r.seconds < 5.0);
	sbx_proc_result_free(&r);
}

static void output_is_bounded(void **state)
{
	(void)state;
	char *argv[] = {"sh", "-c",
	                "i=0; while [ $i -lt 200 ]; do echo 0123456789; i=$((i+1)); done", NULL};
	struct sbx_proc_result r;
	struct sbx_err e;
	assert_int_equal(sbx_proc_capture(argv, 10, 100, &r, &e), 0);
	assert_int_equal(r.how, SBX_PROC_EXITED);
	assert_int_equal(r.len, 100);
	assert_true(r.truncated);
	assert_int_equal(strlen(r.output), 100);
	sbx_proc_result_free(&r);
}

static void missing_program_is_unavailable(void **state)
{
	(void)state;
	char *argv[] = {"/nonexistent/sbx-no-such-program", NULL};
	struct sbx_proc_result r;
	struct sbx_err e;
	/* glibc's posix_spawn reports a failed exec to the parent instead of a child exit 127. */
	assert_int_equal(sbx_proc_capture(argv, 10, 100, &r, &e), -1);
	assert_int_equal(e.cls, SBX_EUNAVAILABLE);
	assert_non_null(strstr(e.msg, "sbx-no-such-program"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(exit_codes_pass_through),
	        cmocka_unit_test(signal_is_not_a_code),
	        cmocka_unit_test(timeout_kills_the_group),
	        cmocka_unit_test(output_is_bounded),
	        cmocka_unit_test(missing_program_is_unavailable),
	};
	return cmocka_run_group_tests_name("run", tests, NULL, NULL);
}
