/* The `sbx` command: its table of commands (one row each, cli.h), the dispatch of argv and of
 * `sbx session`'s JSON lines through the same rows, the help built from them, and the few
 * commands without a family (session, help, version, arches, selftest). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "json.h"
#include "sbx.h"
#include "sbx_runner.h"
#include "utf8.h"

#include "cli.h"

static const struct cli_cmd cli_help, cli_session, cli_version, cli_arches, cli_selftest;

/* `sbx help` order. */
static const struct cli_cmd *const cmds[] = {&cli_hello,
                                             &cli_ping,
                                             &cli_kind,
                                             &cli_stat,
                                             &cli_resolve,
                                             &cli_lands_clear,
                                             &cli_exec,
                                             &cli_sh,
                                             &cli_session,
                                             &cli_upload_dir,
                                             &cli_download_dir,
                                             &cli_upload_path,
                                             &cli_download_path,
                                             &cli_upload_archive,
                                             &cli_run,
                                             &cli_stop,
                                             &cli_expire,
                                             &cli_attach,
                                             &cli_output,
                                             &cli_receipt,
                                             &cli_rearm,
                                             &cli_close,
                                             &cli_rollout,
                                             &cli_pty,
                                             &cli_pty_ls,
                                             &cli_forward,
                                             &cli_sandbox,
                                             &cli_image,
                                             &cli_version,
                                             &cli_arches,
                                             &cli_selftest,
                                             &cli_help,
                                             NULL};

static const struct cli_cmd *find(const struct cli_cmd *const *t, const char *name)
{
	for (; t != NULL && *t != NULL; t++)
		if (strcmp((*t)->name, name) == 0)
			return *t;
	return NULL;
}

int class_exit(enum sbx_err_class c)
{
	switch (c) {
	case SBX_EUNAVAILABLE:
		return EX_UNAVAILABLE;
	case SBX_EPROBE:
		return EX_PROBE;
	case SBX_ETRANSFER:
		return EX_TRANSFER;
	case SBX_EPROTOCOL:
		return EX_PROTOCOL;
	default:
		return EX_USAGE;
	}
}

/* ---- help, from the rows ---- */

#define HELP_WIDTH 92

/* text, words wrapped at HELP_WIDTH: the first line indented by ind, the others by more. */
static void wrap2(FILE *f, int ind, int more, const char *text)
{
	const char *p = text;
	for (; *p != '\0'; ind = more) {
		int col = ind;
		cli_fprintf(f, "%*s", ind, "");
		const char *line = p;
		for (;;) {
			const char *sp = strchr(p, ' ');
			size_t n = sp != NULL ? (size_t)(sp - p) : strlen(p);
			if (p != line && col + (int)n > HELP_WIDTH)
				break;
			if (p != line) {
				fputc(' ', f);
				col++;
			}
			fwrite(p, 1, n, f);
			col += (int)n;
			p += n;
			while (*p == ' ')
				p++;
			if (*p == '\0')
				break;
		}
		fputc('\n', f);
	}
}

static void wrap(FILE *f, int ind, const char *text)
{
	wrap2(f, ind, ind + 4, text);
}

/* Every runner kind of the table (sbx_runner.h), as a spec, and the kinds that create. */
static void help_runners(FILE *f)
{
	char line[1024] = "SPEC, one per runner kind:";
	size_t n = strlen(line);
	for (const struct sbx_runner_class *const *k = sbx_runner_classes; *k != NULL; k++)
		n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, " %s%s%s%s",
		                      (*k)->name, (*k)->arg ? ":" : "", (*k)->arg ? (*k)->arg : "",
		                      k[1] != NULL ? " |" : "");
	n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0,
	                      " (--via 'ARGV' is via:ARGV). Kinds that create sandboxes:");
	for (const struct sbx_runner_class *const *k = sbx_runner_classes; *k != NULL; k++)
		if ((*k)->create != NULL)
			n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0,
			                      " %s", (*k)->name);
	wrap(f, 0, line);
}

/* "  NAME SYNOPSIS  SUMMARY", the summary on a line of its own when the usage is long. */
static void help_line(FILE *f, const struct cli_cmd *parent, const struct cli_cmd *c)
{
	char use[1024];
	snprintf(use, sizeof use, "%s%s%s%s%s", parent ? parent->name : "", parent ? " " : "",
	         c->name, c->synopsis ? " " : "", c->synopsis ? c->synopsis : "");
	if (strlen(use) <= 30) {
		cli_fprintf(f, "  %-30s %s\n", use, c->summary);
		return;
	}
	wrap2(f, 2, 6, use);
	cli_fprintf(f, "%33s%s\n", "", c->summary);
}

static void help_all(FILE *f)
{
	fputs("usage: sbx [--via 'ARGV with {agent}' | --runner SPEC] [--agent PATH]\n"
	      "           [--agent-dir DIR] [--timeout S] [--json] COMMAND [ARGS]\n",
	      f);
	help_runners(f);
	fputs("commands:\n", f);
	for (const struct cli_cmd *const *t = cmds; *t != NULL; t++) {
		if ((*t)->sub == NULL) {
			help_line(f, NULL, *t);
			continue;
		}
		for (const struct cli_cmd *const *u = (*t)->sub; *u != NULL; u++)
			help_line(f, *t, *u);
	}
	fputs("sbx help COMMAND (or sbx COMMAND --help): its options and its JSON-lines form.\n"
	      "exit status: exec/sh/run: the command's (128+signal, 124 timed out, 126/127 not\n"
	      "started), 125 when sbx itself failed. Others: 0 ok, 1 false (lands-clear, ...),\n"
	      "2 usage, 3 unavailable, 4 probe, 5 transfer, 6 protocol.\n",
	      f);
}

/* The ops of `sbx session`: every row with a JSON form. */
static void help_ops(FILE *f)
{
	fputs("ops (each line: {\"op\": OP, \"id\": optional, echoed, \"sandbox\": optional, "
	      "FIELDS}):\n",
	      f);
	for (const struct cli_cmd *const *t = cmds; *t != NULL; t++) {
		if ((*t)->op == NULL)
			continue;
		char line[1024];
		snprintf(line, sizeof line, "%s%s%s: %s", (*t)->op, (*t)->alias ? " or " : "",
		         (*t)->alias ? (*t)->alias : "", (*t)->fields ? (*t)->fields : "no field");
		wrap(f, 2, line);
	}
}

static void help_one(FILE *f, const struct cli_cmd *c, const struct cli_cmd *parent)
{
	char line[2048];
	snprintf(line, sizeof line, "usage: sbx [OPTIONS] %s%s%s%s%s", parent ? parent->name : "",
	         parent ? " " : "", c->name, c->synopsis ? " " : "",
	         c->synopsis ? c->synopsis : "");
	wrap(f, 0, line);
	wrap2(f, 2, 2, c->summary);
	if (c->details != NULL)
		wrap2(f, 2, 2, c->details);
	if (c->sub != NULL)
		for (const struct cli_cmd *const *u = c->sub; *u != NULL; u++) {
			help_line(f, c, *u);
		}
	if (c->op != NULL) {
		snprintf(line, sizeof line, "JSON lines (sbx session): {\"op\":\"%s\"%s%s%s, %s}",
		         c->op, c->alias ? " (or \"" : "", c->alias ? c->alias : "",
		         c->alias ? "\")" : "", c->fields ? c->fields : "no field");
		wrap(f, 2, line);
	}
	if (c == &cli_session)
		help_ops(f);
	if (c->need != CLI_NONE)
		help_runners(f);
}

/* --help or -h among the leading options (before "--" or the first operand). */
static int wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

struct help_call {
	struct cli_call c;
	const struct cli_cmd *row, *parent; /* NULL: every command */
};

static int help_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct help_call *h = (struct help_call *)c;
	c->json = 0;
	if (argc > 2)
		return sbx_err_set(e, SBX_EUSAGE, 0, "help takes [COMMAND [SUBCOMMAND]]");
	if (argc == 0)
		return 0;
	if ((h->row = find(cmds, argv[0])) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown command '%s'", argv[0]);
	if (argc == 2) {
		h->parent = h->row;
		if ((h->row = find(h->parent->sub, argv[1])) == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown command '%s %s'", argv[0],
			                   argv[1]);
	}
	return 0;
}

static void help_print(struct cli_call *c)
{
	struct help_call *h = (struct help_call *)c;
	if (h->row == NULL)
		help_all(stdout);
	else
		help_one(stdout, h->row, h->parent);
}

static const struct cli_cmd cli_help = {
        .name = "help",
        .need = CLI_NONE,
        .size = sizeof(struct help_call),
        .parse_argv = help_argv,
        .print = help_print,
        .synopsis = "[COMMAND [SUBCOMMAND]]",
        .summary = "this list, or one command's usage (as COMMAND --help)",
};

/* ---- JSON request fields ---- */

const char *jstr(const struct sbx_json *req, const char *key)
{
	const struct sbx_json *v = sbx_json_get(req, key);
	size_t len;
	const char *s = v ? sbx_json_str(v, &len) : NULL;
	return s != NULL && strlen(s) == len ? s : NULL;
}

const char **jstrs(const struct sbx_json *arr, size_t *n, struct sbx_err *e)
{
	*n = 0;
	if (arr == NULL || arr->type != SBX_JSON_ARRAY) {
		sbx_err_set(e, SBX_EUSAGE, 0, "expected an array of strings");
		return NULL;
	}
	size_t len = sbx_json_len(arr);
	const char **v = calloc(len + 1, sizeof *v);
	if (v == NULL) {
		sbx_err_set(e, SBX_EUSAGE, ENOMEM, "array");
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		size_t l;
		v[i] = sbx_json_str(sbx_json_at(arr, i), &l);
		if (v[i] == NULL || strlen(v[i]) != l) {
			free(v);
			sbx_err_set(e, SBX_EUSAGE, 0, "expected strings without NUL bytes");
			return NULL;
		}
	}
	*n = len;
	return v;
}

int jlist(const struct sbx_json *req, const char *key, const char ***out, size_t *n,
          struct sbx_err *e)
{
	const struct sbx_json *x = sbx_json_get(req, key);
	*out = NULL;
	*n = 0;
	if (x == NULL || x->type == SBX_JSON_NULL)
		return 0;
	*out = jstrs(x, n, e);
	return *out == NULL ? -1 : 0;
}

int jbool(const struct sbx_json *req, const char *key, int *out, struct sbx_err *e)
{
	const struct sbx_json *x = sbx_json_get(req, key);
	*out = 0;
	if (x != NULL && sbx_json_bool(x, out) != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is true or false", key);
	return 0;
}

int jdouble(const struct sbx_json *req, const char *key, double *out, struct sbx_err *e)
{
	const struct sbx_json *x = sbx_json_get(req, key);
	if (x != NULL && sbx_json_double(x, out) != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is a number", key);
	return 0;
}

/* ---- dispatch ---- */

/* The spec of the session the options name: --via, --runner, else local. */
static int opts_spec(const struct opts *o, char *spec, size_t cap, struct sbx_err *e)
{
	if ((size_t)snprintf(spec, cap, "%s%s", o->via ? "via:" : "",
	                     o->via      ? o->via
	                     : o->runner ? o->runner
	                                 : "local") >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "--via or --runner too long");
	return 0;
}

/* brief: one probe and done (a podman container's PID is then not asked for the direct socket). */
static int open_spec(const struct opts *o, const char *spec, int brief, struct sbx_session **s,
                     struct sbx_err *e)
{
	struct sbx_open_opts oo = {.agent_dir = o->agent_dir,
	                           .agent = o->agent,
	                           .timeout_s = o->timeout,
	                           .brief = brief};
	return sbx_open(spec, &oo, s, e);
}

static int open_session(const struct opts *o, int brief, struct sbx_session **s, struct sbx_err *e)
{
	char spec[4200];
	if (opts_spec(o, spec, sizeof spec, e) != 0)
		return -1;
	return open_spec(o, spec, brief, s, e);
}

static struct cli_call *call_new(const struct cli_cmd *row, const struct opts *o, struct sbx_jw *w)
{
	struct cli_call *c = calloc(1, row->size > sizeof *c ? row->size : sizeof *c);
	if (c != NULL) {
		c->cmd = row;
		c->o = o;
		c->w = w;
		c->json = o->json;
	}
	return c;
}

static void call_free(struct cli_call *c)
{
	if (c->cmd->done != NULL)
		c->cmd->done(c);
	free(c);
}

/* The result after "ok" (the writer holds the object already begun). */
static void call_print(struct cli_call *c)
{
	json_ok(c->w);
	if (c->cmd->print != NULL)
		c->cmd->print(c);
}

/* One command from argv: parse, session, run, print. Returns the exit status. */
static int run_argv(const struct opts *o, const struct cli_cmd *row, const struct cli_cmd *parent,
                    int argc, char **argv)
{
	struct sbx_err e;
	if (wants_help(argc, argv)) {
		help_one(stdout, row, parent);
		return 0;
	}
	if (row->sub != NULL) {
		/* A group: --json is taken anywhere after its name (`sbx sandbox status --json N`).
		 */
		struct opts go = *o;
		char **rest = calloc((size_t)argc + 1, sizeof *rest);
		int n = 0, status;
		if (rest == NULL) {
			sbx_err_set(&e, SBX_EUSAGE, ENOMEM, "arguments");
			return fail(o, &e, EX_USAGE);
		}
		for (int i = 0; i < argc; i++) {
			if (strcmp(argv[i], "--json") == 0)
				go.json = 1;
			else
				rest[n++] = argv[i];
		}
		const struct cli_cmd *sub = n > 0 ? find(row->sub, rest[0]) : NULL;
		if (n > 0 && wants_help(n, rest)) {
			help_one(stdout, row, parent);
			status = 0;
		} else if (sub == NULL) {
			char names[256] = "";
			for (const struct cli_cmd *const *u = row->sub; *u != NULL; u++)
				snprintf(names + strlen(names), sizeof names - strlen(names), " %s",
				         (*u)->name);
			sbx_err_set(&e, SBX_EUSAGE, 0, "%s needs one of:%s", row->name, names);
			status = fail(&go, &e, EX_USAGE);
		} else {
			status = run_argv(&go, sub, row, n - 1, rest + 1);
		}
		free(rest);
		return status;
	}
	struct sbx_jw w;
	sbx_jw_init(&w);
	struct cli_call *c = call_new(row, o, &w);
	int own = row->own_status ? EX_EXEC_SBX : 0, status;
	if (c == NULL) {
		sbx_err_set(&e, SBX_EUSAGE, ENOMEM, "a command");
		return fail(o, &e, own ? own : EX_USAGE);
	}
	if ((row->parse_argv ? row->parse_argv : cli_no_operand)(c, argc, argv, &e) != 0) {
		status = fail(o, &e, own ? own : EX_USAGE);
	} else if (row->need != CLI_NONE &&
	           open_session(o, row->need == CLI_BRIEF, &c->s, &e) != 0) {
		status = fail(o, &e, own ? own : class_exit(e.cls));
	} else if (row->run != NULL && row->run(c, &e) != 0) {
		status = fail(o, &e,
		              c->fail_status ? c->fail_status
		              : own          ? own
		                             : class_exit(e.cls));
	} else {
		status = c->status;
		if (c->answered) {
		} else if (c->json) {
			sbx_jw_obj_begin(&w);
			call_print(c);
			sbx_jw_obj_end(&w);
			print_json(&w);
		} else if (row->print != NULL) {
			row->print(c);
		}
	}
	if (c->s != NULL)
		sbx_session_close(c->s);
	call_free(c);
	sbx_jw_free(&w);
	return status;
}

/* ---- session: JSON lines, through the same rows, many in flight ----
 *
 * stdin is polled together with the fds of every session that has operations in flight. A
 * request whose row has start and finish goes in flight and is answered when its op ends; the
 * others run (blocking, which also moves every op in flight on that session) when their line
 * arrives. Answers come in the order operations end, each with its request's "id". Sessions
 * are kept per runner spec ("sandbox"), opened (blocking) on first use. Each answer and event
 * is one whole line, written and flushed at once. */

struct sess {
	char *spec;
	struct sbx_session *s;
};

/* A request in flight: its call, the request it points into, its op. */
struct pending {
	struct cli_call *c;
	struct sbx_json *req;
	struct sbx_op *op;
	struct pending *next;
};

struct lines {
	const struct cli_call *sc;
	struct sbx_jw *w;
	struct sess *sess;
	size_t nsess;
	struct pending *flight;
	char defspec[4200]; /* a request without "sandbox": --via, --runner, else local */
};

static const struct cli_cmd *find_op(const char *op)
{
	for (const struct cli_cmd *const *t = cmds; *t != NULL; t++)
		if ((*t)->op != NULL &&
		    (strcmp((*t)->op, op) == 0 || ((*t)->alias && strcmp((*t)->alias, op) == 0)))
			return *t;
	return NULL;
}

/* A request's "id", echoed first in its answers (an integer or a string). */
static void json_id(struct sbx_jw *w, const struct sbx_json *id)
{
	int64_t iv;
	size_t il;
	const char *is;
	if (id != NULL && sbx_json_int(id, &iv) == 0)
		sbx_jw_kint(w, "id", iv);
	else if (id != NULL && (is = sbx_json_str(id, &il)) != NULL)
		sbx_jw_kstrn(w, "id", is, il);
}

static int same_id(const struct sbx_json *a, const struct sbx_json *b)
{
	int64_t ai, bi;
	size_t al, bl;
	const char *as, *bs;
	if (a == NULL || b == NULL)
		return 0;
	if (sbx_json_int(a, &ai) == 0)
		return sbx_json_int(b, &bi) == 0 && ai == bi;
	return (as = sbx_json_str(a, &al)) != NULL && (bs = sbx_json_str(b, &bl)) != NULL &&
	       al == bl && memcmp(as, bs, al) == 0;
}

/* The line's end: written out whole, at once. */
static void line_out(struct sbx_jw *w)
{
	sbx_jw_obj_end(w);
	print_json(w);
	fflush(stdout);
}

/* One answer line: the call's result (e NULL), or the error. */
static void answer(struct sbx_jw *w, const struct sbx_json *id, struct cli_call *c,
                   const struct sbx_err *e)
{
	sbx_jw_obj_begin(w);
	json_id(w, id);
	if (e == NULL)
		call_print(c);
	else
		json_err(w, e);
	line_out(w);
}

void cli_event(const struct cli_call *c, const char *name, const void *data, size_t n)
{
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_id(&w, c->id);
	sbx_jw_kstr(&w, "event", name);
	sbx_jw_kb64(&w, "data_b64", data, n);
	line_out(&w);
	sbx_jw_free(&w);
}

struct sbx_op *cli_op_deadline(const struct cli_call *c, struct sbx_op *op, double extra_s)
{
	if (op != NULL && extra_s >= 0)
		sbx_op_set_deadline(op, sbx_session_timeout(c->s) + extra_s);
	return op;
}

/* The session of spec, opened (and kept) on first use. */
static int session_get(struct lines *L, const char *spec, struct sbx_session **s, struct sbx_err *e)
{
	for (size_t i = 0; i < L->nsess; i++)
		if (strcmp(L->sess[i].spec, spec) == 0) {
			*s = L->sess[i].s;
			return 0;
		}
	struct sess *t = realloc(L->sess, (L->nsess + 1) * sizeof *t);
	if (t == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "sessions");
	L->sess = t;
	char *dup = strdup(spec);
	if (dup == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "sessions");
	if (open_spec(L->sc->o, spec, 0, s, e) != 0) {
		free(dup);
		return -1;
	}
	L->sess[L->nsess++] = (struct sess){dup, *s};
	return 0;
}

/* {"op":"cancel","id":X}: X's op ends now (its answer: unavailable, ECANCELED). */
static int cancel(struct lines *L, struct sbx_json *req, struct sbx_err *e)
{
	const struct sbx_json *id = sbx_json_get(req, "id");
	struct pending *p = L->flight;
	while (p != NULL && !same_id(p->c->id, id))
		p = p->next;
	if (p == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ESRCH,
		                   "cancel: no operation in flight with this id");
	sbx_op_cancel(p->op);
	sbx_jw_obj_begin(L->w);
	json_id(L->w, id);
	json_ok(L->w);
	sbx_jw_kstr(L->w, "op", "cancel");
	line_out(L->w);
	sbx_json_free(req);
	return 0;
}

/* One request: 0 when it was answered or is in flight (req is then taken), -1 with *e. */
static int request(struct lines *L, struct sbx_json *req, struct sbx_err *e)
{
	const char *op = jstr(req, "op");
	if (op == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "request without \"op\"");
	if (strcmp(op, "cancel") == 0)
		return cancel(L, req, e);
	const struct cli_cmd *row = find_op(op);
	if (row == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown op \"%s\"", op);
	const struct sbx_json *sb = sbx_json_get(req, "sandbox");
	const char *spec = sb != NULL ? jstr(req, "sandbox") : L->defspec;
	if (spec == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "\"sandbox\" is a runner spec");
	struct sbx_session *s = NULL;
	if (row->need != CLI_NONE && session_get(L, spec, &s, e) != 0)
		return -1;
	struct cli_call *c = call_new(row, L->sc->o, L->w);
	if (c == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "a request");
	c->op = op;
	c->s = s;
	c->json = 1;
	c->lines = 1;
	c->id = sbx_json_get(req, "id");
	if (row->parse_json != NULL && row->parse_json(c, req, e) != 0)
		goto fail;
	if (row->start != NULL) {
		struct pending *p = malloc(sizeof *p);
		struct sbx_op *o = NULL;
		if (p == NULL)
			sbx_err_set(e, SBX_EUSAGE, ENOMEM, "a request");
		else if ((o = row->start(c, e)) == NULL)
			free(p);
		if (o == NULL)
			goto fail;
		*p = (struct pending){c, req, o, L->flight};
		L->flight = p;
		sbx_op_set_tag(o, (uintptr_t)p);
		return 0;
	}
	if (row->run != NULL && row->run(c, e) != 0)
		goto fail;
	answer(L->w, c->id, c, NULL);
	call_free(c);
	sbx_json_free(req);
	return 0;
fail:
	call_free(c);
	return -1;
}

static void one_line(struct lines *L, const char *text, size_t n)
{
	struct sbx_json *req = NULL;
	struct sbx_err e;
	if (sbx_json_parse(text, n, &req, &e) != 0) {
		answer(L->w, NULL, NULL, &e);
		return;
	}
	if (req->type != SBX_JSON_OBJECT)
		sbx_err_set(&e, SBX_EUSAGE, 0, "a request is a JSON object");
	else if (request(L, req, &e) == 0)
		return;
	answer(L->w, sbx_json_get(req, "id"), NULL, &e);
	sbx_json_free(req);
}

/* Answers every op that ended, on every session. */
static void drain(struct lines *L)
{
	for (size_t i = 0; i < L->nsess; i++) {
		struct sbx_op *op;
		while ((op = sbx_session_next_done(L->sess[i].s)) != NULL) {
			struct pending *p = (struct pending *)sbx_op_tag(op);
			if (p == NULL)
				continue; /* not a request's */
			struct sbx_err e;
			int rc = p->c->cmd->finish(p->c, op, &e);
			answer(L->w, p->c->id, p->c, rc == 0 ? NULL : &e);
			struct pending **pp = &L->flight;
			while (*pp != p)
				pp = &(*pp)->next;
			*pp = p->next;
			sbx_op_free(op);
			call_free(p->c);
			sbx_json_free(p->req);
			free(p);
		}
	}
}

/* Every complete line of buf (and at eof the last, unterminated one); what remains is moved
 * to the front. */
static size_t lines_of(struct lines *L, char *buf, size_t len, int eof)
{
	size_t start = 0;
	for (;;) {
		char *nl = memchr(buf + start, '\n', len - start);
		if (nl == NULL && !(eof && start < len))
			break;
		size_t end = nl != NULL ? (size_t)(nl - buf) : len, n = end - start;
		while (n > 0 && buf[start + n - 1] == '\r')
			n--;
		if (n > 0) {
			one_line(L, buf + start, n);
			drain(L); /* what ended while a blocking row ran */
		}
		start = nl != NULL ? end + 1 : len;
	}
	memmove(buf, buf + start, len - start);
	return len - start;
}

/* The poll set: stdin (until its end), then each session with ops in flight; *deadline the
 * earliest. Its count, or -1 without memory. */
static int poll_set(struct lines *L, int eof, struct pollfd **fds, size_t *cap, int64_t *deadline)
{
	size_t n = 0, room = 8;
	*deadline = INT64_MAX;
	for (size_t i = 0; i <= L->nsess;) {
		if (*cap - n < room) {
			struct pollfd *t = realloc(*fds, (n + 2 * room) * sizeof *t);
			if (t == NULL)
				return -1;
			*fds = t;
			*cap = n + 2 * room;
		}
		if (i == 0) {
			if (!eof)
				(*fds)[n++] = (struct pollfd){0, POLLIN, 0};
			i++;
			continue;
		}
		struct sbx_session *s = L->sess[i - 1].s;
		int64_t d;
		int k = 0;
		if (sbx_session_ops(s) > 0) {
			k = sbx_session_fds(s, *fds + n, (int)(*cap - n), &d);
			if ((size_t)k == *cap - n) {
				room = 2 * (*cap -
				            n); /* full: perhaps more, asked again with more room */
				continue;
			}
			if (d < *deadline)
				*deadline = d;
		}
		n += (size_t)k;
		room = 8;
		i++;
	}
	return (int)n;
}

static int session_run(struct cli_call *sc, struct sbx_err *e)
{
	struct lines L = {.sc = sc, .w = sc->w};
	struct sbx_session *s;
	char *buf = NULL;
	size_t len = 0, cap = 0, fcap = 0;
	struct pollfd *fds = NULL;
	int eof = 0, rc = 0;
	sc->answered = 1;
	/* An explicit runner is opened first, so a sandbox that is not there fails the command. */
	if (opts_spec(sc->o, L.defspec, sizeof L.defspec, e) != 0 ||
	    ((sc->o->via != NULL || sc->o->runner != NULL) &&
	     session_get(&L, L.defspec, &s, e) != 0))
		rc = -1;
	while (rc == 0 && (!eof || L.flight != NULL)) {
		int64_t deadline;
		int n = poll_set(&L, eof, &fds, &fcap, &deadline);
		if (n < 0) {
			rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "poll set");
			break;
		}
		int ms = -1;
		if (deadline != INT64_MAX) {
			int64_t left = deadline - sbx_now_ns();
			ms = left <= 0                      ? 0
			     : left / 1000000 + 1 > INT_MAX ? INT_MAX
			                                    : (int)(left / 1000000 + 1);
		}
		if (poll(fds, (nfds_t)n, ms) < 0 && errno != EINTR) {
			rc = sbx_err_set(e, SBX_EUSAGE, errno, "poll");
			break;
		}
		if (!eof && fds[0].revents != 0) {
			if (cap - len < 65536) {
				char *t = realloc(buf, cap * 2 + 65536);
				if (t == NULL) {
					rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "a request line");
					break;
				}
				buf = t;
				cap = cap * 2 + 65536;
			}
			ssize_t r = read(0, buf + len, cap - len);
			if (r > 0)
				len += (size_t)r;
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				eof = 1;
			len = lines_of(&L, buf, len, eof);
		}
		for (size_t i = 0; i < L.nsess; i++)
			if (sbx_session_ops(L.sess[i].s) > 0)
				sbx_session_step(L.sess[i].s);
		drain(&L);
	}
	while (L.flight != NULL) { /* only after a failure */
		struct pending *p = L.flight;
		L.flight = p->next;
		sbx_op_free(p->op);
		call_free(p->c);
		sbx_json_free(p->req);
		free(p);
	}
	for (size_t i = 0; i < L.nsess; i++) {
		sbx_session_close(L.sess[i].s);
		free(L.sess[i].spec);
	}
	free(L.sess);
	free(buf);
	free(fds);
	return rc;
}

static const struct cli_cmd cli_session = {
        .name = "session",
        .need = CLI_NONE,
        .size = sizeof(struct cli_call),
        .parse_argv = cli_no_operand,
        .run = session_run,
        .summary = "JSON lines: requests run concurrently, one answer line each as it ends",
        .details = "Every command with a JSON form, over one connection per sandbox. An answer "
                   "is {\"ok\":true, ...} with the fields of that command's --json result, or "
                   "{\"ok\":false,\"error\":{\"class\",\"errno\",\"message\"}}, and carries "
                   "the request's \"id\". Answers come as operations end, not in request "
                   "order (a client that wants order waits for each answer). "
                   "{\"op\":\"cancel\",\"id\":X} ends X (its answer: unavailable, ECANCELED). "
                   "\"sandbox\": SPEC sends a request to that runner spec's session, opened "
                   "(blocking) at first use and kept; without it, --via/--runner's, else "
                   "local. exec and sh with \"stream\": true send the output as it comes in "
                   "{\"id\",\"event\":\"stdout\"|\"stderr\",\"data_b64\"} lines instead of in "
                   "the answer.",
};

/* ---- commands without a session ---- */

static void version_print(struct cli_call *c)
{
	if (c->json)
		sbx_jw_kstr(c->w, "version", sbx_version());
	else
		cli_printf("sbx %s\n", sbx_version());
}

static const struct cli_cmd cli_version = {
        .name = "version",
        .need = CLI_NONE,
        .size = sizeof(struct cli_call),
        .print = version_print,
        .summary = "sbx's version",
};

/* The agents' folder: --agent-dir, or beside the sbx binary. */
struct agents_call {
	struct cli_call c;
	char dir[PATH_MAX];
	int force_qemu;
	int argc;
	char **argv;
};

static int agents_dir(struct cli_call *c, struct sbx_err *e)
{
	struct agents_call *a = (struct agents_call *)c;
	c->fail_status = EX_UNAVAILABLE;
	if (c->o->agent_dir != NULL) {
		snprintf(a->dir, sizeof a->dir, "%s", c->o->agent_dir);
		return 0;
	}
	return sbx_agent_dir(a->dir, sizeof a->dir, e);
}

static void arches_print(struct cli_call *c)
{
	const char *dir = ((struct agents_call *)c)->dir;
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	if (c->json)
		sbx_jw_karr_begin(c->w, "arches");
	for (unsigned i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct sbx_err e;
		int have = sbx_agent_path(dir, t[i].name, path, sizeof path, &e) == 0;
		if (!c->json) {
			cli_printf("%-8s %-20s %s\n", t[i].name, t[i].qemu,
			           have ? path : "(not built)");
			continue;
		}
		sbx_jw_obj_begin(c->w);
		sbx_jw_kstr(c->w, "name", t[i].name);
		sbx_jw_kstr(c->w, "qemu", t[i].qemu);
		sbx_jw_kstr(c->w, "agent", have ? path : NULL);
		sbx_jw_obj_end(c->w);
	}
	if (c->json)
		sbx_jw_arr_end(c->w);
}

static const struct cli_cmd cli_arches = {
        .name = "arches",
        .need = CLI_NONE,
        .size = sizeof(struct agents_call),
        .run = agents_dir,
        .print = arches_print,
        .summary = "the architectures, their qemu and their agent (or not built)",
};

static int selftest_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct agents_call *a = (struct agents_call *)c;
	(void)e;
	c->json = 0; /* text only */
	if (argc > 0 && strcmp(argv[0], "--qemu") == 0) {
		a->force_qemu = 1;
		argc--;
		argv++;
	}
	a->argc = argc;
	a->argv = argv;
	return 0;
}

static int selftest_run(struct cli_call *c, struct sbx_err *e)
{
	struct agents_call *a = (struct agents_call *)c;
	if (agents_dir(c, e) != 0)
		return -1;
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	const char *names[16];
	unsigned count = 0;
	if (a->argc == 0 || (a->argc == 1 && strcmp(a->argv[0], "all") == 0)) {
		for (unsigned i = 0; i < n; i++)
			names[count++] = t[i].name;
	} else {
		for (int i = 0; i < a->argc && count < 16; i++)
			names[count++] = a->argv[i];
	}
	int failed = 0, broken = 0;
	for (unsigned i = 0; i < count; i++) {
		struct sbx_selftest_result r;
		struct sbx_err se;
		if (sbx_agent_selftest(a->dir, names[i], a->force_qemu, &r, &se) != 0) {
			cli_printf("FAIL %-8s %s: %s\n", names[i], sbx_err_class_name(se.cls),
			           se.msg);
			broken++;
			continue;
		}
		cli_printf("%s %-8s %-6s %6.2f s\n", r.passed ? "ok  " : "FAIL", names[i],
		           r.via_qemu ? "qemu" : "native", r.proc.seconds);
		if (!r.passed) {
			cli_write_esc(stdout, r.proc.output, strlen(r.proc.output), SBX_ESC_LINES);
			failed++;
		}
		sbx_proc_result_free(&r.proc);
	}
	cli_printf("%u passed, %d failed\n", count - (unsigned)(failed + broken), failed + broken);
	c->status = broken ? EX_UNAVAILABLE : failed ? EX_FALSE : 0;
	return 0;
}

static const struct cli_cmd cli_selftest = {
        .name = "selftest",
        .need = CLI_NONE,
        .size = sizeof(struct agents_call),
        .parse_argv = selftest_argv,
        .run = selftest_run,
        .synopsis = "[--qemu] [ARCH...|all]",
        .summary = "each agent's own tests, natively or under qemu-ARCH-static",
};

int main(int argc, char **argv)
{
	/* A vanished channel or reader is an error value, never a silent death. */
	signal(SIGPIPE, SIG_IGN);
	struct opts o = {0};
	int i = 1;
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];
		if (strcmp(a, "--json") == 0) {
			o.json = 1;
			i++;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			help_all(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			cli_fprintf(stderr, "sbx: %s needs a value\n", a);
			return EX_USAGE;
		}
		const char *v = argv[i + 1];
		if (strcmp(a, "--via") == 0) {
			o.via = v;
		} else if (strcmp(a, "--runner") == 0) {
			o.runner = v;
		} else if (strcmp(a, "--agent") == 0) {
			o.agent = v;
		} else if (strcmp(a, "--agent-dir") == 0) {
			o.agent_dir = v;
		} else if (strcmp(a, "--timeout") == 0) {
			o.timeout = strtod(v, NULL);
			if (o.timeout <= 0) {
				cli_fprintf(stderr, "sbx: bad --timeout %s\n", v);
				return EX_USAGE;
			}
		} else {
			cli_fprintf(stderr, "sbx: unknown option %s\n", a);
			help_all(stderr);
			return EX_USAGE;
		}
		i += 2;
	}
	if (i >= argc) {
		help_all(stderr);
		return EX_USAGE;
	}
	if (o.via != NULL && o.runner != NULL) {
		cli_fprintf(stderr, "sbx: --via and --runner exclude each other\n");
		return EX_USAGE;
	}
	const struct cli_cmd *row = find(cmds, argv[i]);
	if (row == NULL) {
		cli_fprintf(stderr, "sbx: unknown command '%s'\n", argv[i]);
		help_all(stderr);
		return EX_USAGE;
	}
	return run_argv(&o, row, NULL, argc - i - 1, argv + i + 1);
}
