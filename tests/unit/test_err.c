/* Error values: class names round-trip, messages carry errno text and truncate safely. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"

static void class_names_round_trip(void **state)
{
	(void)state;
	const char *names[] = {"ok", "transfer", "probe", "unavailable", "protocol", "usage"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		enum sbx_err_class c;
		assert_int_equal(sbx_err_class_parse(names[i], &c), 0);
		assert_int_equal((int)c, (int)i);
		assert_string_equal(sbx_err_class_name(c), names[i]);
	}
	enum sbx_err_class c;
	assert_int_equal(sbx_err_class_parse("absent", &c), -1);
	assert_string_equal(sbx_err_class_name((enum sbx_err_class)99), "unknown");
}

static void set_formats_and_appends_errno(void **state)
{
	(void)state;
	struct sbx_err e;
	sbx_err_clear(&e);
	assert_int_equal(sbx_err_set(&e, SBX_EPROBE, ENOENT, "lstat %s", "/x"), -1);
	assert_int_equal(e.cls, SBX_EPROBE);
	assert_int_equal(e.errnum, ENOENT);
	char want[256];
	snprintf(want, sizeof want, "lstat /x: %s", strerror(ENOENT));
	assert_string_equal(e.msg, want);

	assert_int_equal(sbx_err_set(&e, SBX_EUSAGE, 0, "plain"), -1);
	assert_string_equal(e.msg, "plain");
	assert_int_equal(e.errnum, 0);
}

static void long_message_truncates(void **state)
{
	(void)state;
	struct sbx_err e;
	char big[1000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	sbx_err_set(&e, SBX_ETRANSFER, EIO, "%s", big);
	assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
	assert_int_equal(e.cls, SBX_ETRANSFER);
}

static void null_err_is_allowed(void **state)
{
	(void)state;
	assert_int_equal(sbx_err_set(NULL, SBX_EPROBE, 0, "nobody listens"), -1);
}

/* A prefix keeps class and errno and never overruns: walk.c's refusals get their member's name
 * this way (tree_put.c). */
static void prefix_keeps_class_and_fits(void **state)
{
	(void)state;
	struct sbx_err e;
	sbx_err_set(&e, SBX_ETRANSFER, EACCES, "cannot create directory %s", "d");
	assert_int_equal(sbx_err_prefix(&e, "member %s", "a/d/x"), -1);
	char want[256];
	snprintf(want, sizeof want, "member a/d/x: cannot create directory d: %s",
	         strerror(EACCES));
	assert_string_equal(e.msg, want);
	assert_int_equal(e.cls, SBX_ETRANSFER);
	assert_int_equal(e.errnum, EACCES);
	char big[600];
	memset(big, 'p', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	sbx_err_prefix(&e, "%s", big);
	assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
	sbx_err_set(&e, SBX_EUSAGE, 0, "%s", big);
	sbx_err_prefix(&e, "x");
	assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
	assert_memory_equal(e.msg, "x: ppp", 6);
	char shown[16];
	assert_string_equal(sbx_err_show("a\nb\x7f", shown, sizeof shown), "a?b?");
	assert_string_equal(sbx_err_show("0123456789abcdefgh", shown, sizeof shown),
	                    "0123456789ab...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(class_names_round_trip),
	        cmocka_unit_test(set_formats_and_appends_errno),
	        cmocka_unit_test(long_message_truncates),
	        cmocka_unit_test(null_err_is_allowed),
	        cmocka_unit_test(prefix_keeps_class_and_fits),
	};
	return cmocka_run_group_tests_name("err", tests, NULL, NULL);
}
