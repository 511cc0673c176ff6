/* The ns runner's id-range claims (runner/userns.c): a link per slot in STATE/.ids; a process's
 * claims start at its hint (after its last claim, or the lowest slot it released), so its
 * thousandth create tries one slot, not a thousand. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "userns.h"

static char base[64];

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof base, "/tmp/sbx-claim-XXXXXX");
	return mkdtemp(base) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", base);
	return system(cmd) == 0 ? 0 : -1;
}

/* 1 when path names a range of root's (as runner/userns.c reads it): then the ranges are
 * there, maybe fewer than this test needs. */
static int root_range(const char *path)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	char line[256];
	int found = 0;
	while (!found && fgets(line, sizeof line, f) != NULL)
		found = strncmp(line, "root:", 5) == 0 || strncmp(line, "0:", 2) == 0;
	fclose(f);
	return found;
}

static int claim(const char *name)
{
	struct sbx_userns u;
	struct sbx_err e = {0};
	if (sbx_userns_claim(base, name, &u, &e) != 0) {
		print_error("claim %s: %s\n", name, e.msg);
		return -1;
	}
	/* Without /etc/subuid (the test skips otherwise): the ranges from SBX_USERNS_BASE. */
	assert_int_equal(u.uid, SBX_USERNS_BASE + (uint32_t)u.slot * SBX_USERNS_IDS);
	assert_int_equal(u.gid, u.uid);
	return u.slot;
}

static void link_to(int slot, char *out, size_t cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.ids/%d", base, slot);
	ssize_t n = readlink(path, out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
}

static void claims_follow_the_hint(void **state)
{
	(void)state;
	if (root_range("/etc/subuid") || root_range("/etc/subgid"))
		skip(); /* root's ranges there may be fewer than the seven this needs */
	/* The first claims of a process: the lowest slots, in order. */
	assert_int_equal(claim("a"), 0);
	assert_int_equal(claim("b"), 1);
	assert_int_equal(claim("c"), 2);
	char who[64];
	link_to(1, who, sizeof who);
	assert_string_equal(who, "b");
	/* Another process gives slot 1 back (not through this process): this one goes on from
	 * its hint and does not scan from 0 again (it did before, trying every taken slot). */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.ids/1", base);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(claim("d"), 3);
	/* A slot this process releases is where its next claim looks first. */
	sbx_userns_release(base, 0);
	assert_int_equal(claim("e"), 0);
	/* From there the taken slots are passed over: 1 is free again. */
	assert_int_equal(claim("f"), 1);
	assert_int_equal(claim("g"), 4);
	/* A slot taken meanwhile by someone else is skipped (EEXIST), never shared. */
	snprintf(path, sizeof path, "%s/.ids/5", base);
	assert_int_equal(symlink("other", path), 0);
	assert_int_equal(claim("h"), 6);
	link_to(5, who, sizeof who);
	assert_string_equal(who, "other");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(claims_follow_the_hint, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
