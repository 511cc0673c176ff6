/* Pieces the sbx CLI's files share: options, exit statuses, error and JSON printing. */
#ifndef SBX_HOST_CLI_H
#define SBX_HOST_CLI_H

#include <stdarg.h>
#include <stdio.h>

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

/* ---- output (cli_out.c) ----
 * Text: printf with every %s argument escaped for the terminal (utf8.h: C0, DEL, C1 and
 * invalid UTF-8 become \xHH / \u00HH; a precision counts input bytes). Every text line of the
 * CLI goes through these; only the raw streams of exec, sh and output do not. */
void cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_fprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_vfprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Bytes (any, NUL included) escaped the same way; flags as sbx_esc's. */
void cli_write_esc(FILE *f, const void *bytes, size_t n, unsigned flags);

/* JSON: the finished document and a newline on stdout, then the writer is reset. */
void print_json(struct sbx_jw *w);
/* What the writer holds so far, written to stdout (a document that goes out in pieces). */
void cli_json_out(struct sbx_jw *w);
/* "ok":true, and "ok":false with the error object. */
void json_ok(struct sbx_jw *w);
void json_err(struct sbx_jw *w, const struct sbx_err *e);
/* Reports a failure (JSON, or `sbx: CLASS: message` escaped on stderr); returns status. */
int fail(const struct opts *o, const struct sbx_err *e, int status);

/* A string member of a JSON request (NULL when missing, not a string, or holding a NUL). */
const char *jstr(const struct sbx_json *req, const char *key);
/* A JSON array of strings as a NULL-terminated vector (pointers into the tree); free() it. */
const char **jstrs(const struct sbx_json *arr, size_t *n, struct sbx_err *e);

/* The options of a command to run, shared by exec/sh and run (cli_cmd.c). argv: --user/-u U,
 * --cwd/-w D, --env/-e K=V (repeatable), --env-clear, --timeout S. JSON: "user" (a name or a
 * numeric uid), "cwd", "env" (an object, or an array of "K=V"), "env_clear", "timeout". */
struct cmd_opts {
	const char *user, *cwd;
	char **env; /* "K=V", NULL-terminated (NULL when none); owned */
	size_t nenv;
	int env_clear;
	double timeout;
	char uid[24]; /* a numeric JSON user, as text */
};
/* 1 when argv[*i] is one of these (its value taken, *i advanced), 0 when it is not, -1 and *e
 * for a bad value. */
int cmd_opt_arg(struct cmd_opts *c, int argc, char **argv, int *i, struct sbx_err *e);
/* Reads them from a JSON request (pointers into it); -1 and *e for a bad member. */
int cmd_opts_json(struct cmd_opts *c, const struct sbx_json *req, struct sbx_err *e);
void cmd_opts_free(struct cmd_opts *c);

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

/* Sandboxes (sandbox.c): sandbox create|status|rm|ls|pause|resume, and image ls|prune; no
 * session. */
int cli_sandbox_known(const char *cmd);
int cli_sandbox(const struct opts *o, int argc, char **argv);
int cli_image(const struct opts *o, int argc, char **argv);

#endif
