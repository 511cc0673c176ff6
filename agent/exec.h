/* exec requests: parsing the REQUEST fields and starting the process. The running job's
 * pipes, deadline and result are driven by the serve loop. */
#ifndef SBX_AGENT_EXEC_H
#define SBX_AGENT_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cmd.h"
#include "err.h"

struct sbx_exec_req {
	struct sbx_cmd cmd; /* for a shell string, argv is sh -c STRING; user NULL: root */
	int64_t linger_ms;  /* how long to wait for the pipes after the process exits */
	int stdin_stream;   /* 1: stdin comes from DATA frames; 0: /dev/null */
	int is_shell;
};

/* Parses an EXEC request; -1 with *e set (SBX_EUSAGE) when it is malformed. */
int sbx_exec_parse(const uint8_t *p, size_t len, struct sbx_exec_req *r, struct sbx_err *e);
void sbx_exec_req_free(struct sbx_exec_req *r);

struct sbx_spawned {
	pid_t pid;
	int fd_in, fd_out, fd_err; /* -1 when not used */
	int user_fallback;         /* ran as the agent's own user: the switch was not possible */
	char note[200];
	/* When it could not start: */
	int not_started;
	int code; /* 126 or 127 */
	int err;  /* errno */
	char msg[256];
};

/* Starts the process in its own session and process group. Returns 0 when the process was
 * created (s->not_started tells whether it also reached exec), -1 when the agent itself
 * failed (no pipes, no fork) with *e set. */
int sbx_exec_spawn(const struct sbx_exec_req *r, struct sbx_spawned *s, struct sbx_err *e);

#endif
