/* Finding the built agent from a unit test that runs it (test_direct.c, test_resident.c):
 * $SBX_AGENT_DIR (tests/run.sh sets it), else where sbx_agent_dir says, else build/agent
 * beside this build/host/tests, whatever the cwd. Header only, static inline. */
#ifndef AGENT_FIXTURE_H
#define AGENT_FIXTURE_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static inline void pause_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

static inline int find_agent(char *out, size_t cap, struct sbx_err *e)
{
	char dir[PATH_MAX];
	const char *d = getenv("SBX_AGENT_DIR");
	if (d != NULL && d[0] != '\0')
		return sbx_agent_path(d, "x86_64", out, cap, e);
	if (sbx_agent_dir(dir, sizeof dir, e) == 0 &&
	    sbx_agent_path(dir, "x86_64", out, cap, e) == 0)
		return 0;
	ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 16);
	if (n <= 0)
		return -1;
	dir[n] = '\0';
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		return -1;
	strcpy(slash, "/../../agent");
	return sbx_agent_path(dir, "x86_64", out, cap, e);
}

/* The agent's path, or the test fails (call inside a cmocka test). */
static inline void agent_path(char *out, size_t cap)
{
	struct sbx_err e;
	sbx_err_clear(&e);
	if (find_agent(out, cap, &e) != 0)
		fail_msg("agent: %s", e.msg);
}

#endif
