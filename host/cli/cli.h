/* Pieces the sbx CLI's files share: the command table's row and call, options, exit statuses,
 * printing (out.c), and the options of a command to run (cmd.c). */
#ifndef SBX_HOST_CLI_H
#define SBX_HOST_CLI_H

#include <stdarg.h>
#include <stdio.h>

#include "json.h"
#include "sbx.h"

/* Exit statuses of sbx's own failures (README). exec, sh and run use 125 for all of them so
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

/* ---- the command table ----
 * cli.c lists the rows (one per command, `sbx help` order); each row is defined in its
 * family's file. A command is parsed from argv or from a JSON-lines request into one call
 * (the family's struct, which begins with struct cli_call), run, and printed as text or JSON:
 * both forms share everything after the parse, so they cannot drift. */
enum cli_need {
	CLI_NONE,  /* no session (the command opens its own, or needs none) */
	CLI_BRIEF, /* one probe and done (sbx_open_opts.brief) */
	CLI_FULL,
};

struct cli_cmd;

struct cli_call {
	const struct cli_cmd *cmd;
	const char *op; /* the JSON op asked (the row's op or alias); NULL from argv */
	const struct opts *o;
	struct sbx_session *s; /* open when the row needs one */
	struct sbx_jw *w;      /* print (JSON): the answer, its "ok" (and "id") already in */
	int json;              /* print into w, else text; parse and run may change it */
	int lines;             /* a request of `sbx session`: no stdin, terminal or stderr note */
	const struct sbx_json *id; /* the request's "id" (sbx session), NULL: none */
	int stream;                /* the request asked for events ("stream": true) */
	/* set by run */
	int status;      /* the exit status of the argv form */
	int fail_status; /* the status of run's failure, when not the row's */
	int answered;    /* run printed everything itself (rm's errors, rollout) */
};

struct cli_cmd {
	const char *name;  /* in argv */
	const char *op;    /* in JSON lines; NULL: argv only */
	const char *alias; /* a second op name */
	enum cli_need need;
	int own_status; /* sbx's failures exit 125 (exec, sh, run); else 2 usage, class_exit */
	size_t size;    /* of the family's call */
	/* Fill the call's arguments; 0, or -1 with *e. NULL: parse_argv takes no operand,
	 * parse_json reads no field. */
	int (*parse_argv)(struct cli_call *c, int argc, char **argv, struct sbx_err *e);
	int (*parse_json)(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e);
	/* Does it: 0 with the result in the call (and c->status), or -1 with *e. NULL: the
	 * session or the program knows the answer (hello, version). */
	int (*run)(struct cli_call *c, struct sbx_err *e);
	/* The same work without blocking, for `sbx session`, which keeps many in flight: start
	 * begins it with an _async call (the op, or NULL with *e); finish, once the op ended,
	 * reads its result into the call as run would have (0, or -1 with *e), then print runs
	 * as after run. NULL: the request runs (blocking) when its line arrives. */
	struct sbx_op *(*start)(struct cli_call *c, struct sbx_err *e);
	int (*finish)(struct cli_call *c, struct sbx_op *op, struct sbx_err *e);
	/* The result: its fields into c->w after "ok" when c->json, else text. */
	void (*print)(struct cli_call *c);
	void (*done)(struct cli_call *c); /* frees what parse and run kept */
	/* `sbx help`: operands and options, one line, the details, the JSON request's fields. */
	const char *synopsis, *summary, *details, *fields;
	const struct cli_cmd *const *sub; /* a group's commands (sandbox), NULL-terminated */
};

extern const struct cli_cmd cli_hello, cli_ping, cli_kind, cli_stat, cli_resolve,
        cli_lands_clear;                                                       /* probe.c */
extern const struct cli_cmd cli_exec, cli_sh;                                  /* exec.c */
extern const struct cli_cmd cli_upload_dir, cli_download_dir, cli_upload_path, /* xfer.c */
        cli_download_path, cli_upload_archive;
extern const struct cli_cmd cli_run, cli_stop, cli_expire, cli_attach, cli_output, /* sup.c */
        cli_receipt, cli_rearm, cli_close;
extern const struct cli_cmd cli_rollout;            /* rollout.c */
extern const struct cli_cmd cli_pty;                /* pty.c */
extern const struct cli_cmd cli_pty_ls;             /* pty.c */
extern const struct cli_cmd cli_forward;            /* fwd.c */
extern const struct cli_cmd cli_sandbox, cli_image; /* sandbox.c: groups */

/* parse_argv of a command without operands (hello, ping). */
int cli_no_operand(struct cli_call *c, int argc, char **argv, struct sbx_err *e);

/* ---- output (out.c) ----
 * Text: printf with every %s argument escaped for the terminal (utf8.h: C0, DEL, C1 and
 * invalid UTF-8 become \xHH / \u00HH; a precision counts input bytes). Every text line of the
 * CLI goes through these; only the raw streams of exec, sh and output do not. */
void cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_fprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_vfprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Bytes (any, NUL included) escaped the same way; flags as sbx_esc's. */
void cli_write_esc(FILE *f, const void *bytes, size_t n, unsigned flags);

/* An event of a request of `sbx session` ("stream": true), a line of its own at once:
 * {"id":…,"event":NAME,"data_b64":…}. */
void cli_event(const struct cli_call *c, const char *name, const void *data, size_t n);
/* op (NULL passes), given its deadline: the session's timeout plus extra_s (< 0: none). */
struct sbx_op *cli_op_deadline(const struct cli_call *c, struct sbx_op *op, double extra_s);

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
/* An optional array of strings: *out NULL when the member is missing or null; -1 and *e when
 * it is not an array of strings. */
int jlist(const struct sbx_json *req, const char *key, const char ***out, size_t *n,
          struct sbx_err *e);
/* An optional boolean (0 when missing); -1 and *e when it is not true or false. */
int jbool(const struct sbx_json *req, const char *key, int *out, struct sbx_err *e);
/* An optional number (*out kept when missing); -1 and *e when it is not a number. */
int jdouble(const struct sbx_json *req, const char *key, double *out, struct sbx_err *e);

/* The options of a command to run, shared by exec/sh and run (cmd.c). argv: --user/-u U,
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

#endif
