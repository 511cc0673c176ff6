/* The ns runner's id-range claims (runner/userns.c): a link per slot in STATE/.ids; a process's
 * claims start at its hint (after its last claim, or the lowest slot it released), so its
 * thousandth create tries one slot, not a thousand; when every slot is taken, the stale ones
 * are given back (sbx_userns_reclaim) and only those. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* held for sbx_userns_reclaim: the sandbox named "held" holds its slot, no other does. */
static int held_by_name(const char *b, const char *name, int slot)
{
	(void)slot;
	assert_string_equal(b, base);
	return strcmp(name, "held") == 0;
}

static void set_old(int slot)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.ids/%d", base, slot);
	struct timespec t[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

static int slot_there(int slot)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof path, "%s/.ids/%d", base, slot);
	return lstat(path, &st) == 0;
}

static void stale_claims_reclaimed(void **state)
{
	(void)state;
	if (root_range("/etc/subuid") || root_range("/etc/subgid"))
		skip(); /* the slot count would be root's ranges' */
	if (geteuid() != 0)
		skip(); /* a process with a range's uid needs root */
	/* Every slot taken (from wherever this process's hint is), 5 by the sandbox "held". */
	for (int k = 0; k < (int)SBX_USERNS_SLOTS; k++)
		assert_true(claim("gone") >= 0);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.ids/5", base);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("held", path), 0);
	struct sbx_userns u;
	struct sbx_err e = {0};
	assert_int_equal(sbx_userns_claim(base, "x", &u, &e), -1);
	assert_int_equal(e.errnum, ENOSPC);
	/* 3 and 4: old, their sandbox gone: stale. 5: old, held by its sandbox. 6: old, a process
	 * runs with a gid of its range (a sandbox whose state went but whose processes did not).
	 * 7 and the rest: young (a create may be under way). */
	for (int k = 3; k <= 6; k++)
		set_old(k);
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		gid_t g = SBX_USERNS_BASE + 6 * SBX_USERNS_IDS + 1000;
		if (setresgid(g, g, g) != 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	assert_int_equal(sbx_userns_reclaim(base, held_by_name, 600), 2);
	assert_false(slot_there(3));
	assert_false(slot_there(4));
	assert_true(slot_there(5));
	assert_true(slot_there(6));
	assert_true(slot_there(7));
	/* The next claims take the freed slots, lowest first; then none is left again. */
	assert_int_equal(claim("y"), 3);
	assert_int_equal(claim("z"), 4);
	assert_int_equal(sbx_userns_claim(base, "x", &u, &e), -1);
	assert_int_equal(e.errnum, ENOSPC);
	/* With its process dead (a zombie not reaped yet runs nothing), 6 is stale too. */
	kill(p, SIGKILL);
	assert_int_equal(waitid(P_PID, (id_t)p, &(siginfo_t){0}, WEXITED | WNOWAIT), 0);
	assert_int_equal(sbx_userns_reclaim(base, held_by_name, 600), 1);
	assert_false(slot_there(6));
	waitpid(p, NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(claims_follow_the_hint, setup, teardown),
	        cmocka_unit_test_setup_teardown(stale_claims_reclaimed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
