/* The one way the agent starts a command: the exec operation's (agent/exec.c) and the
 * harness's (agent/supervise.c). In the child: default signal dispositions and an empty mask
 * (both survive execve), a new session and process group, the given stdio, every other
 * descriptor close-on-exec, the user switch (agent/runas.h), chdir, and the PATH search
 * (agent/pathexec.h); a status pipe tells the parent "could not start" (which step, errno)
 * from a running program. The callers differ only by what they pass: the stdio, the user
 * fallback flag, and the marker variable of sbx_launch_env. */
#ifndef SBX_AGENT_LAUNCH_H
#define SBX_AGENT_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "runas.h"

/* The environment a command gets: the inherited one (none with env_clear) without the names
 * env sets, then env; with marker ("NAME=VALUE"), also without any NAME= entry, inherited or
 * given, and marker last. A vector of pointers into environ, env and marker (free the vector
 * alone), or NULL when memory runs out. */
char **sbx_launch_env(char *const *env, int env_clear, const char *marker);

/* A switch the kernel refuses (EPERM: no CAP_SETUID in the sandbox) runs the command as the
 * agent's own user instead of failing; the result says so (the reference's exec_as_root). */
#define SBX_LAUNCH_USER_FALLBACK 1
/* The child's stdin is a pty slave: it becomes the new session's controlling terminal. */
#define SBX_LAUNCH_CTTY 2

struct sbx_launch {
	char *const *argv;          /* argv[0] searched in env's PATH unless it holds a '/' */
	char *const *env;           /* the whole environment (sbx_launch_env) */
	const char *cwd;            /* NULL: stay */
	const struct sbx_runas *as; /* NULL: stay this user (sbx_runas_needed said 0) */
	int fd[3];                  /* the child's stdin, stdout and stderr (may repeat) */
	int flags;
};

struct sbx_launch_result {
	pid_t pid;     /* the child; the caller reaps it, started or not */
	int fell_back; /* errno of a refused switch the command runs past (USER_FALLBACK) */
	int failed;    /* 1: it never reached exec; then: */
	char stage;    /* 'u' user switch, 'c' chdir, 'x' exec */
	int err;       /* errno */
	int code;      /* 127 when the program was found nowhere, else 126 */
};

/* Forks and starts the command; waits for the status pipe only (it closes at exec). 0 when a
 * child was created (r->failed tells whether it started), -1 with *e (SBX_ETRANSFER) when the
 * status pipe or the fork failed. */
int sbx_launch(const struct sbx_launch *sp, struct sbx_launch_result *r, struct sbx_err *e);

/* Why a failed start failed, into buf: "cannot chdir to CWD: ...", "cannot switch to user
 * USER: ...", "cannot execute ARGV0: ...". */
void sbx_launch_why(const struct sbx_launch_result *r, const char *user, const char *cwd,
                    const char *argv0, char *buf, size_t cap);

#endif
