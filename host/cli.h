/* Pieces the sbx CLI's files share: options, exit statuses, error and JSON printing. */
#ifndef SBX_HOST_CLI_H
#define SBX_HOST_CLI_H

#include "json.h"
#include "sbx.h"

/* Exit statuses of sbx's own failures (README). exec and sh use 125 for all of them so
 * the command's own statuses keep their meaning. */
enum {
	EX_FALSE = 1,
	EX_USAGE = 2,
	EX_UNAVAILABLE = 3,
	EX_PROBE = 4,
	EX_TRANSFER = 5,
	EX_PROTOCOL = 6,
	EX_EXEC_SBX = 125,
};

struct opts {
	const char *via, *runner, *agent, *agent_dir;
	int json;
	double timeout;
};

int class_exit(enum sbx_err_class c);
void print_json(struct sbx_jw *w);
void json_err(struct sbx_jw *w, const struct sbx_err *e);
/* Reports a failure (JSON or a line on stderr) and returns status. */
int fail(const struct opts *o, const struct sbx_err *e, int status);

/* A string member of a JSON request (NULL when missing, not a string, or holding a NUL). */
const char *jstr(const struct sbx_json *req, const char *key);
/* A JSON array of strings as a NULL-terminated vector (pointers into the tree); free() it. */
const char **jstrs(const struct sbx_json *arr, size_t *n, struct sbx_err *e);

/* Transfer commands (cli_xfer.c): upload-dir download-dir upload-path download-path
 * upload-archive, and the same as JSON-lines ops (upload_dir ...). */
int cli_xfer_known(const char *cmd);
int cli_xfer(const struct opts *o, struct sbx_session *s, const char *cmd, int argc, char **argv);
int cli_xfer_session(struct sbx_session *s, const char *op, const struct sbx_json *req,
                     struct sbx_jw *w, struct sbx_err *e, int *rc);

/* sbx rollout (cli_rollout.c): one episode on the ns runner; manages its own sessions. */
int cli_rollout(const struct opts *o, int argc, char **argv);

/* Supervision commands (cli_sup.c): run stop expire attach output receipt rearm close. */
int cli_sup_known(const char *cmd);
int cli_sup(const struct opts *o, struct sbx_session *s, const char *cmd, int argc, char **argv);
/* The same in the JSON-lines session mode: 1 when op was a supervision op (answered). */
int cli_sup_session(struct sbx_session *s, const char *op, const struct sbx_json *req,
                    struct sbx_jw *w, struct sbx_err *e, int *rc);

/* Namespace sandboxes (cli_sandbox.c): sandbox create|status|rm|ls; no session. */
int cli_sandbox_known(const char *cmd);
int cli_sandbox(const struct opts *o, int argc, char **argv);

#endif
