/* The command fields EXEC and SUP_RUN share (shared/cmd.h): what the host writes the agent
 * reads back whole; malformed fields are refused the same way for both requests. Before this
 * module SUP_RUN's reader (agent/supctl.c) took an ENV entry without '=' and any TIMEOUT_MS
 * (one past 2^63 ns overflowed the supervisor's deadline) while EXEC's refused both. Shown
 * able to fail: with sbx_cmd_take's K=V and bound checks removed (SUP_RUN's old rules),
 * env_not_assignment and timeout_bound fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmd.h"
#include "proto.h"

static int decode(const uint8_t *p, size_t len, struct sbx_cmd *c, int *others)
{
	memset(c, 0, sizeof *c);
	*others = 0;
	struct sbx_msgr r;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		int t = sbx_cmd_take(c, &f);
		if (t < 0)
			return -1;
		*others += t == 0;
	}
	return rc;
}

static void round_trip(void **state)
{
	(void)state;
	char *argv[] = {"ls", "-l", "a b", NULL}, *env[] = {"A=1", "B=", NULL};
	struct sbx_cmd c = {.argv = argv,
	                    .env = env,
	                    .env_clear = 1,
	                    .cwd = "/work",
	                    .user = "1000",
	                    .timeout_ms = 2500};
	uint8_t buf[512];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_EXEC); /* a request's own field stays the caller's */
	sbx_cmd_write(&w, &c);
	assert_false(w.overflow);
	assert_true(w.len - 14 <= sbx_cmd_size(&c));
	struct sbx_cmd d;
	int others;
	assert_int_equal(decode(buf, w.len, &d, &others), 0);
	assert_int_equal(others, 1);
	assert_int_equal(d.argc, 3);
	assert_string_equal(d.argv[2], "a b");
	assert_null(d.argv[3]);
	assert_int_equal(d.envc, 2);
	assert_string_equal(d.env[1], "B=");
	assert_int_equal(d.env_clear, 1);
	assert_string_equal(d.cwd, "/work");
	assert_string_equal(d.user, "1000");
	assert_int_equal(d.timeout_ms, 2500);
	sbx_cmd_free(&d);
	/* Nothing optional written when absent. */
	struct sbx_cmd e = {.argv = argv};
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_cmd_write(&w, &e);
	assert_int_equal(decode(buf, w.len, &d, &others), 0);
	assert_null(d.env);
	assert_null(d.cwd);
	assert_null(d.user);
	assert_int_equal(d.timeout_ms, 0);
	sbx_cmd_free(&d);
}

static int one_field(uint16_t tag, const char *s, int64_t v)
{
	uint8_t buf[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	if (s != NULL)
		sbx_msgw_bytes(&w, tag, s, strlen(s) + (s[0] == 'N')); /* "N...": with its NUL */
	else
		sbx_msgw_i64(&w, tag, v);
	struct sbx_cmd d;
	int others;
	int rc = decode(buf, w.len, &d, &others);
	sbx_cmd_free(&d);
	return rc;
}

static void env_not_assignment(void **state)
{
	(void)state;
	assert_int_equal(one_field(SBX_T_ENV, "A=1", 0), 0);
	assert_int_equal(one_field(SBX_T_ENV, "A", 0), -1);
	assert_int_equal(one_field(SBX_T_ENV, "=1", 0), -1);
	assert_int_equal(one_field(SBX_T_ARGV, "N", 0), -1); /* a NUL inside */
	char *env[] = {"OK=1", "BAD", NULL};
	struct sbx_cmd c = {.env = env};
	struct sbx_err e;
	assert_int_equal(sbx_cmd_check(&c, &e), -1);
	assert_non_null(strstr(e.msg, "'BAD' is not K=V"));
}

static void timeout_bound(void **state)
{
	(void)state;
	assert_int_equal(one_field(SBX_T_TIMEOUT_MS, NULL, SBX_CMD_TIMEOUT_MAX_MS), 0);
	assert_int_equal(one_field(SBX_T_TIMEOUT_MS, NULL, SBX_CMD_TIMEOUT_MAX_MS + 1), -1);
	assert_int_equal(one_field(SBX_T_TIMEOUT_MS, NULL, INT64_MAX), -1);
	assert_int_equal(one_field(SBX_T_TIMEOUT_MS, NULL, -1), -1);
	assert_int_equal(one_field(SBX_T_ENV_CLEAR, NULL, -1), -1);
	assert_int_equal(sbx_cmd_of(NULL, NULL, 0, NULL, NULL, 0).timeout_ms, 0);
	assert_int_equal(sbx_cmd_of(NULL, NULL, 0, NULL, NULL, -3).timeout_ms, 0);
	assert_int_equal(sbx_cmd_of(NULL, NULL, 0, NULL, NULL, 1.0005).timeout_ms, 1001);
	struct sbx_cmd c = sbx_cmd_of(NULL, NULL, 0, NULL, NULL, 1e300);
	assert_true(c.timeout_ms > SBX_CMD_TIMEOUT_MAX_MS);
	struct sbx_err e;
	assert_int_equal(sbx_cmd_check(&c, &e), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(round_trip),
	        cmocka_unit_test(env_not_assignment),
	        cmocka_unit_test(timeout_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
