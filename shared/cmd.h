/* A command to run, as the EXEC and SUP_RUN requests carry it: argv, the environment's
 * changes, cwd, user and deadline. Written once for the host (host/ops.c, host/supervision.c)
 * and read once for the agent (agent/exec.c, agent/supctl.c); each request adds its own fields
 * around these (docs/protocol.md). */
#ifndef SBX_CMD_H
#define SBX_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "msg.h"

struct sbx_cmd {
	char **argv;        /* NULL-terminated; argv[0] searched in PATH when it has no '/' */
	char **env;         /* NULL or "K=V" entries applied over the inherited environment */
	int env_clear;      /* 1: start from an empty environment instead */
	char *cwd;          /* NULL: the agent's */
	char *user;         /* a name or a decimal uid; NULL: the request's default */
	int64_t timeout_ms; /* 0: none */
	size_t argc, envc;  /* entries, counted by sbx_cmd_take */
};

/* A TIMEOUT_MS above a year is malformed: every deadline computed from it fits in an int64 of
 * nanoseconds. */
#define SBX_CMD_TIMEOUT_MAX_MS (365LL * 86400 * 1000)

/* The host's side. A command of the API's fields (argv, env, cwd and user are only read, never
 * freed), the timeout in seconds as TIMEOUT_MS: 0 (none) for seconds <= 0, else rounded, past
 * SBX_CMD_TIMEOUT_MAX_MS whenever the seconds are (never overflowing). */
struct sbx_cmd sbx_cmd_of(char *const *argv, char *const *env, int env_clear, const char *cwd,
                          const char *user, double timeout_s);

/* 0 when every env entry is K=V with a name and the timeout is at most
 * SBX_CMD_TIMEOUT_MAX_MS; -1 with *e (SBX_EUSAGE) naming what is not. */
int sbx_cmd_check(const struct sbx_cmd *c, struct sbx_err *e);

/* The bytes sbx_cmd_write takes at most. */
size_t sbx_cmd_size(const struct sbx_cmd *c);

/* ARGV and ENV (a field each), ENV_CLEAR when set, CWD and USER when given, TIMEOUT_MS when
 * above 0. */
void sbx_cmd_write(struct sbx_msgw *w, const struct sbx_cmd *c);

/* The agent's side, one field at a time (c zeroed first): 1 when f was a command field and is
 * now in c (strings copied; the last CWD, USER, ENV_CLEAR or TIMEOUT_MS wins), 0 when it is
 * not one (the request's own, or unknown), -1 when it is malformed (a NUL in a string, an env
 * entry that is not K=V, a negative or over-long timeout) or memory ran out. */
int sbx_cmd_take(struct sbx_cmd *c, const struct sbx_field *f);

/* Frees what sbx_cmd_take copied and zeroes c. */
void sbx_cmd_free(struct sbx_cmd *c);

#endif
