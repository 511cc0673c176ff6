/* `sbx forward`'s --out and --in arguments (host/fwdspec.c). Shown able to fail: with the
 * range check of port_of removed, refusals fails on 65536 and on --out 0; with host_of
 * taking any byte, on the escape and the unbracketed IPv6 address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fwdspec.h"

static void accepted(void **state)
{
	(void)state;
	struct sbx_fwd_spec s;
	struct sbx_err e;
	assert_int_equal(sbx_fwdspec_parse("8080", SBX_FWD_OUT, "127.0.0.1", &s, &e), 0);
	assert_int_equal(s.inside, 8080);
	assert_int_equal(s.outside, 8080);
	assert_string_equal(s.host, "127.0.0.1");
	assert_int_equal(sbx_fwdspec_parse("80:example.org:8000", SBX_FWD_OUT, "x", &s, &e), 0);
	assert_int_equal(s.inside, 80);
	assert_int_equal(s.outside, 8000);
	assert_string_equal(s.host, "example.org");
	assert_int_equal(sbx_fwdspec_parse("0:127.0.0.1:80", SBX_FWD_IN, "x", &s, &e), 0);
	assert_int_equal(s.dir, SBX_FWD_IN);
	assert_int_equal(s.outside, 0);
	assert_int_equal(s.inside, 80);
	assert_int_equal(sbx_fwdspec_parse("9000:[::1]:65535", SBX_FWD_IN, "x", &s, &e), 0);
	assert_string_equal(s.host, "::1");
	assert_int_equal(s.outside, 9000);
	assert_int_equal(s.inside, 65535);
}

static void refusals(void **state)
{
	(void)state;
	struct sbx_fwd_spec s;
	struct sbx_err e;
	const char *out_bad[] = {"",           "0",         "65536",  "-1",
	                         "+80",        "80:",       "80:h",   "80::81",
	                         ":h:80",      "80:h:0",    "80:h:x", "1:a\x1b:2",
	                         "80:[::1:81", "80:::1:81", "123456", "80:h h:81"};
	for (size_t i = 0; i < sizeof out_bad / sizeof out_bad[0]; i++) {
		assert_int_equal(sbx_fwdspec_parse(out_bad[i], SBX_FWD_OUT, "127.0.0.1", &s, &e),
		                 -1);
		assert_int_equal(e.cls, SBX_EUSAGE);
		assert_non_null(strstr(e.msg, "--out"));
	}
	const char *in_bad[] = {"80", "0:h", "0:h:0", "65536:h:80", "0::80", "0:a/b:80"};
	for (size_t i = 0; i < sizeof in_bad / sizeof in_bad[0]; i++)
		assert_int_equal(sbx_fwdspec_parse(in_bad[i], SBX_FWD_IN, "x", &s, &e), -1);
	/* a bad default host for a bare port */
	assert_int_equal(sbx_fwdspec_parse("80", SBX_FWD_OUT, "a;b", &s, &e), -1);
	/* the message never carries the escape */
	assert_int_equal(sbx_fwdspec_parse("1:a\x1b:2", SBX_FWD_OUT, "h", &s, &e), -1);
	assert_null(strchr(e.msg, '\x1b'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(accepted),
	        cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
