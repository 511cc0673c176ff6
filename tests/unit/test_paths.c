/* Lexical paths: normalize's canonical form and its refusals, and component-wise containment.
 * The fuzzer (fuzz/fuzz_paths.c) checks the invariants; these pin the exact answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "paths.h"
#include "proto.h"

static void expect_norm(const char *in, const char *want)
{
	char out[256];
	memset(out, 'x', sizeof out);
	assert_int_equal(sbx_path_normalize(in, out, sizeof out), 0);
	assert_string_equal(out, want);
}

static void normalize_collapses(void **state)
{
	(void)state;
	expect_norm("/", "/");
	expect_norm("//", "/");
	expect_norm("///", "/");
	expect_norm("/a", "/a");
	expect_norm("//a//b///c", "/a/b/c");
	expect_norm("/a/b/", "/a/b");
	expect_norm("/a/b//", "/a/b");
	expect_norm("/./", "/");
	expect_norm("/.", "/");
	expect_norm("/a/./b/.", "/a/b");
	expect_norm("/a/.b/..c/...", "/a/.b/..c/..."); /* only "." and ".." are special */
	expect_norm("/a b/\tc", "/a b/\tc");
}

static void normalize_dotdot(void **state)
{
	(void)state;
	expect_norm("/..", "/");
	expect_norm("/../..", "/");
	expect_norm("/a/..", "/");
	expect_norm("/a/../..", "/");
	expect_norm("/a/../../b", "/b");
	expect_norm("/a/b/../c", "/a/c");
	expect_norm("/a/b/c/../../d/", "/a/d");
	expect_norm("/a/./../b", "/b");
	expect_norm("/ab/../a", "/a");
	expect_norm("//a//..//b//", "/b");
}

static void normalize_refuses(void **state)
{
	(void)state;
	char out[16];
	out[0] = 'x';
	assert_int_equal(sbx_path_normalize("a/b", out, sizeof out), -1);
	assert_string_equal(out, "");
	assert_int_equal(sbx_path_normalize("", out, sizeof out), -1);
	assert_int_equal(sbx_path_normalize(".", out, sizeof out), -1);
	assert_int_equal(sbx_path_normalize("../a", out, sizeof out), -1);
	assert_int_equal(sbx_path_normalize(NULL, out, sizeof out), -1);
	assert_int_equal(sbx_path_normalize("/", out, 0), -1);
}

static void normalize_capacity(void **state)
{
	(void)state;
	char out[8];
	/* "/" needs 2 bytes, "/abc" 5: exactly enough fits, one less does not. */
	assert_int_equal(sbx_path_normalize("/", out, 1), -1);
	assert_int_equal(sbx_path_normalize("/", out, 2), 0);
	assert_string_equal(out, "/");
	assert_int_equal(sbx_path_normalize("/abc", out, 4), -1);
	assert_string_equal(out, "");
	assert_int_equal(sbx_path_normalize("/abc", out, 5), 0);
	assert_string_equal(out, "/abc");
	assert_int_equal(sbx_path_normalize("/ab/cd", out, 6), -1);
	assert_int_equal(sbx_path_normalize("/ab/cd", out, 7), 0);
	/* Only the result must fit, not the input. */
	assert_int_equal(sbx_path_normalize("//a/./b/../c//", out, 5), 0);
	assert_string_equal(out, "/a/c");
	assert_int_equal(sbx_path_normalize("/aaaaaaaaaaaaaaaa/..", out, 2), 0);
	assert_string_equal(out, "/");
	/* A component too long to hold is dropped by a later "..", and the rest is kept. */
	assert_int_equal(sbx_path_normalize("/a/bbbbbbbbbbbb/c/../../d", out, 5), 0);
	assert_string_equal(out, "/a/d");
	assert_int_equal(sbx_path_normalize("/a/bbbbbbbbbbbb/c/..", out, sizeof out), -1);
}

static void normalize_in_place(void **state)
{
	(void)state;
	char buf[64] = "//a/./b//../c/";
	assert_int_equal(sbx_path_normalize(buf, buf, sizeof buf), 0);
	assert_string_equal(buf, "/a/c");
	/* Idempotent: the canonical form is its own normal form. */
	char again[64];
	assert_int_equal(sbx_path_normalize(buf, again, sizeof again), 0);
	assert_string_equal(again, buf);
}

static void within_components(void **state)
{
	(void)state;
	assert_int_equal(sbx_path_within("/a/b", "/a/b"), 1);
	assert_int_equal(sbx_path_within("/a/b/c", "/a/b"), 1);
	assert_int_equal(sbx_path_within("/a/b/c/d", "/a/b"), 1);
	assert_int_equal(sbx_path_within("/a/bc", "/a/b"), 0);
	assert_int_equal(sbx_path_within("/a/b", "/a/bc"), 0);
	assert_int_equal(sbx_path_within("/a", "/a/b"), 0); /* above is not within */
	assert_int_equal(sbx_path_within("/b", "/a"), 0);
	assert_int_equal(sbx_path_within("/", "/"), 1);
	assert_int_equal(sbx_path_within("/anything/at/all", "/"), 1);
	assert_int_equal(sbx_path_within("/", "/a"), 0);
	assert_int_equal(sbx_path_within("a/b", "/"), 0);
	assert_int_equal(sbx_path_within("/a", "a"), 0);
	assert_int_equal(sbx_path_within("", "/"), 0);
	assert_int_equal(sbx_path_within(NULL, "/"), 0);
}

/* The folder lists of shared/proto.h, walked as the agent, the host and the runners do. */
static void dir_lists(void **state)
{
	(void)state;
	char out[64], all[256] = "";
	for (const char *at = SBX_SANDBOX_DIRS " /";
	     sbx_dir_next(&at, ".sbx-agent-x", out, sizeof out);)
		strcat(strcat(all, out), "|");
	assert_string_equal(all, "/tmp/.sbx-agent-x|/dev/shm/.sbx-agent-x|/var/tmp/.sbx-agent-x|"
	                         "/run/.sbx-agent-x|/.sbx-agent-x|");
	all[0] = '\0';
	for (const char *at = SBX_SOCKET_DIRS; sbx_dir_next(&at, "", out, sizeof out);)
		strcat(strcat(all, out), "|");
	assert_string_equal(all, "/|/run|/dev/shm|/tmp|");
	/* A folder whose result does not fit is skipped, never cut. */
	const char *at = "/tmp /a-much-longer-folder /run";
	assert_int_equal(sbx_dir_next(&at, "x", out, 8), 1);
	assert_string_equal(out, "/tmp/x");
	assert_int_equal(sbx_dir_next(&at, "x", out, 8), 1);
	assert_string_equal(out, "/run/x");
	assert_int_equal(sbx_dir_next(&at, "x", out, 8), 0);
	at = "";
	assert_int_equal(sbx_dir_next(&at, "x", out, sizeof out), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(normalize_collapses), cmocka_unit_test(normalize_dotdot),
	        cmocka_unit_test(normalize_refuses),   cmocka_unit_test(normalize_capacity),
	        cmocka_unit_test(normalize_in_place),  cmocka_unit_test(within_components),
	        cmocka_unit_test(dir_lists),
	};
	return cmocka_run_group_tests_name("paths", tests, NULL, NULL);
}
