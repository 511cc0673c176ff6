/* What the C tests and benches share (tests/README.md): where the built agents are, a session
 * on a runner spec or a --via line, a scratch folder under /tmp and its removal without a
 * shell, a monotonic clock. Header only, static inline. fixture_session, fixture_open_via and
 * fixture_agent_path fail the running cmocka test: include <cmocka.h> before this. */
#ifndef SBX_TEST_FIXTURE_H
#define SBX_TEST_FIXTURE_H

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx_runner.h"
#include "sbx.h"

static inline double fixture_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps ms milliseconds, the whole of them: a signal (a child's SIGCHLD) does not cut it. */
static inline void fixture_pause_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

/* The pid namespace of a process ("pid:[INODE]") into out; 0, or -1 when it is gone. */
static inline int fixture_pidns(pid_t pid, char *out, size_t cap)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)pid);
	ssize_t n = readlink(p, out, cap - 1);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	return 0;
}

/* Ascending order of doubles, for qsort (medians and percentiles). */
static inline int fixture_cmp_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The folder of ARCH/sbx-agent: $SBX_AGENT_DIR (tests/run.sh sets it) as it is; else the first
 * that holds an x86_64 agent of sbx_agent_dir's (build/agent beside build/bench) and build/agent
 * beside build/host/tests, whatever the cwd. */
static inline int fixture_agent_dir(char *out, size_t cap, struct sbx_err *e)
{
	char agent[PATH_MAX + 32];
	const char *env = getenv("SBX_AGENT_DIR");
	if (env != NULL && env[0] != '\0')
		return sbx_agent_dir(out, cap, e);
	if (sbx_agent_dir(out, cap, e) == 0 &&
	    sbx_agent_path(out, "x86_64", agent, sizeof agent, e) == 0)
		return 0;
	ssize_t n = readlink("/proc/self/exe", agent, sizeof agent - 1);
	if (n <= 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "readlink /proc/self/exe");
	agent[n] = '\0';
	char *slash = strrchr(agent, '/');
	if (slash == NULL ||
	    (size_t)snprintf(out, cap, "%.*s/../../agent", (int)(slash - agent), agent) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "no agent folder beside %s", agent);
	return 0;
}

/* The agent for arch, checked executable. */
static inline int fixture_find_agent(const char *arch, char *out, size_t cap, struct sbx_err *e)
{
	char dir[PATH_MAX];
	if (fixture_agent_dir(dir, sizeof dir, e) != 0)
		return -1;
	return sbx_agent_path(dir, arch, out, cap, e);
}

/* A session on the runner spec ("local", "qemu:ARCH", "podman:NAME", ...) with the agents of
 * fixture_agent_dir, through the runner table (sbx_open: its trust started too). */
static inline int fixture_open(struct sbx_session **s, const char *spec, double timeout,
                               struct sbx_err *e)
{
	char dir[PATH_MAX];
	if (fixture_agent_dir(dir, sizeof dir, e) != 0)
		return -1;
	struct sbx_open_opts o = {.agent_dir = dir, .timeout_s = timeout};
	return sbx_open(spec, &o, s, e);
}

/* A fresh folder /tmp/sbx-NAME-XXXXXX (0700) into out; 0, or -1 with errno. */
static inline int fixture_tmpdir(char *out, size_t cap, const char *name)
{
	if ((size_t)snprintf(out, cap, "/tmp/sbx-%s-XXXXXX", name) >= cap)
		return -1;
	return mkdtemp(out) != NULL ? 0 : -1;
}

static inline int fixture_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Removes path and everything under it, symlinks not followed; 0 when all went. */
static inline int fixture_rmtree(const char *path)
{
	return nftw(path, fixture_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#ifdef fail_msg /* cmocka.h */
/* The x86_64 agent's path, or the test fails. */
static inline void fixture_agent_path(char *out, size_t cap)
{
	struct sbx_err e;
	sbx_err_clear(&e);
	if (fixture_find_agent("x86_64", out, cap, &e) != 0)
		fail_msg("agent: %s", e.msg);
}

/* A session through a shell command line holding {agent} (the x86_64 agent), as --via: the
 * open's result. Not finding the agent fails the test, so a refusal is the channel's. */
static inline int fixture_open_via(const char *via, double timeout, struct sbx_session **s,
                                   struct sbx_err *e)
{
	char agent[PATH_MAX], spec[PATH_MAX + 8];
	struct sbx_err e2;
	sbx_err_clear(&e2);
	if (fixture_find_agent("x86_64", agent, sizeof agent, &e2) != 0)
		fail_msg("--via %s: %s", via, e2.msg);
	snprintf(spec, sizeof spec, "via:%s", via);
	struct sbx_open_opts o = {.agent = agent, .timeout_s = timeout};
	return sbx_open(spec, &o, s, e);
}

/* fixture_open with a 30 s timeout, or the test fails. */
static inline struct sbx_session *fixture_session(const char *spec)
{
	struct sbx_session *s;
	struct sbx_err e;
	sbx_err_clear(&e);
	if (fixture_open(&s, spec, 30, &e) != 0)
		fail_msg("session on %s: %s", spec, e.msg);
	return s;
}
#endif

#endif
