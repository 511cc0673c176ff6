/* sbx hello / ping / kind / stat / resolve / lands-clear: the probes, one row each, from argv
 * or from JSON lines (hello ping kind remote_kind stat resolve lands_clear). */
#include <stdlib.h>
#include <string.h>

#include "hex.h"

#include "cli.h"

struct probe {
	struct cli_call c;
	const char *path;
	const char *const *list; /* stat: paths; lands-clear: keep_out */
	size_t n;
	const char **jlist; /* the list, when it came from JSON */
	/* results */
	double rtt;
	enum sbx_kind kind;
	char *phys, *warn;
	int clear;
	struct sbx_stat *st;
};

static void probe_done(struct cli_call *c)
{
	struct probe *p = (struct probe *)c;
	free(p->jlist);
	free(p->phys);
	free(p->warn);
	if (p->st != NULL)
		sbx_stat_free(p->st, p->n);
}

int cli_no_operand(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	(void)argv;
	return argc == 0 ? 0 : sbx_err_set(e, SBX_EUSAGE, 0, "%s takes no operand", c->cmd->name);
}

/* ---- hello ---- */

static const char *const cap_names[] = {"openat2", "pidfd",    "subreaper", "inotify",
                                        "pty",     "signalfd", "timerfd"};

static void hello_print(struct cli_call *c)
{
	const struct sbx_hello *h = sbx_session_hello(c->s);
	struct sbx_jw *w = c->w;
	char hex[65];
	sbx_hex(h->sha256, 32, hex);
	if (!c->json) {
		cli_printf("agent %s (%s) protocol %d kernel %s\nuid %lld euid %lld gid %lld egid "
		           "%lld pid %lld cgroup v%d\ncaps:",
		           h->agent_version, h->arch, h->proto, h->kernel, (long long)h->uid,
		           (long long)h->euid, (long long)h->gid, (long long)h->egid,
		           (long long)h->pid, h->cgroup);
		for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
			if (h->caps & (1 << i))
				cli_printf(" %s", cap_names[i]);
		cli_printf("\nsha256 %s\nchannel %s\n", hex, sbx_session_channel(c->s));
		return;
	}
	sbx_jw_kint(w, "protocol", h->proto);
	sbx_jw_kstr(w, "agent_version", h->agent_version);
	sbx_jw_kstr(w, "arch", h->arch);
	sbx_jw_kint(w, "uid", h->uid);
	sbx_jw_kint(w, "euid", h->euid);
	sbx_jw_kint(w, "gid", h->gid);
	sbx_jw_kint(w, "egid", h->egid);
	sbx_jw_kint(w, "pid", h->pid);
	sbx_jw_kstr(w, "kernel", h->kernel);
	sbx_jw_karr_begin(w, "caps");
	for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
		if (h->caps & (1 << i))
			sbx_jw_str(w, cap_names[i]);
	sbx_jw_arr_end(w);
	sbx_jw_kint(w, "cgroup", h->cgroup);
	sbx_jw_kstr(w, "sha256", hex);
	sbx_jw_kstr(w, "channel", sbx_session_channel(c->s));
}

const struct cli_cmd cli_hello = {
        .name = "hello",
        .op = "hello",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = cli_no_operand,
        .print = hello_print,
        .done = probe_done,
        .summary = "the agent's HELLO (version, arch, uid, caps, digest)",
};

/* ---- ping ---- */

static int ping_run(struct cli_call *c, struct sbx_err *e)
{
	return sbx_ping(c->s, &((struct probe *)c)->rtt, e);
}

static struct sbx_op *ping_start(struct cli_call *c, struct sbx_err *e)
{
	return cli_op_deadline(c, sbx_ping_async(c->s, e), 0);
}

static int ping_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	return sbx_ping_result(op, &((struct probe *)c)->rtt, e);
}

static void ping_print(struct cli_call *c)
{
	double us = ((struct probe *)c)->rtt * 1e6;
	if (c->json)
		sbx_jw_kdouble(c->w, "rtt_us", us);
	else
		cli_printf("pong in %.1f us\n", us);
}

const struct cli_cmd cli_ping = {
        .name = "ping",
        .op = "ping",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = cli_no_operand,
        .run = ping_run,
        .start = ping_start,
        .finish = ping_finish,
        .print = ping_print,
        .done = probe_done,
        .summary = "one round trip",
};

/* ---- kind, resolve: one PATH ---- */

static int path_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	if (argc != 1)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s takes one PATH", c->cmd->name);
	((struct probe *)c)->path = argv[0];
	return 0;
}

static int path_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	if ((((struct probe *)c)->path = jstr(req, "path")) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"path\"", c->op);
	return 0;
}

static int kind_run(struct cli_call *c, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	return sbx_kind(c->s, p->path, &p->kind, e);
}

static struct sbx_op *kind_start(struct cli_call *c, struct sbx_err *e)
{
	return cli_op_deadline(c, sbx_kind_async(c->s, ((struct probe *)c)->path, e), 0);
}

static int kind_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	return sbx_kind_result(op, &((struct probe *)c)->kind, e);
}

static void kind_print(struct cli_call *c)
{
	enum sbx_kind k = ((struct probe *)c)->kind;
	/* remote_kind is the reference's: absent is null there. */
	int null = k == SBX_KIND_ABSENT && c->op != NULL && strcmp(c->op, "remote_kind") == 0;
	if (c->json)
		sbx_jw_kstr(c->w, "kind", null ? NULL : sbx_kind_name(k));
	else
		cli_printf("%s\n", sbx_kind_name(k));
}

const struct cli_cmd cli_kind = {
        .name = "kind",
        .op = "kind",
        .alias = "remote_kind",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = path_argv,
        .parse_json = path_json,
        .run = kind_run,
        .start = kind_start,
        .finish = kind_finish,
        .print = kind_print,
        .done = probe_done,
        .synopsis = "PATH",
        .summary = "dir, file or absent",
        .fields = "\"path\" (as remote_kind: \"kind\" is null when absent)",
};

static int resolve_run(struct cli_call *c, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	return sbx_resolve(c->s, p->path, &p->phys, e);
}

static void resolve_print(struct cli_call *c)
{
	const char *phys = ((struct probe *)c)->phys;
	if (c->json)
		sbx_jw_kstr(c->w, "physical", phys);
	else
		cli_printf("%s\n", phys);
}

const struct cli_cmd cli_resolve = {
        .name = "resolve",
        .op = "resolve",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = path_argv,
        .parse_json = path_json,
        .run = resolve_run,
        .print = resolve_print,
        .done = probe_done,
        .synopsis = "PATH",
        .summary = "physical path (cd -P; a missing tail is kept)",
        .fields = "\"path\"",
};

/* ---- stat ---- */

static int stat_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	if (argc < 1)
		return sbx_err_set(e, SBX_EUSAGE, 0, "stat takes PATH...");
	p->list = (const char *const *)argv;
	p->n = (size_t)argc;
	return 0;
}

static int stat_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	p->list = p->jlist = jstrs(sbx_json_get(req, "paths"), &p->n, e);
	return p->list != NULL ? 0 : -1;
}

static int stat_run(struct cli_call *c, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	return sbx_stat(c->s, p->list, p->n, &p->st, e);
}

static void stat_one(struct cli_call *c, const struct sbx_stat *st)
{
	struct sbx_jw *w = c->w;
	char mode[8];
	snprintf(mode, sizeof mode, "%04o", (unsigned)st->mode);
	const char *msg = st->err == 0 ? NULL : st->message ? st->message : strerror(st->err);
	if (!c->json) {
		if (msg != NULL)
			cli_printf("%s: %s\n", st->path, msg);
		else
			cli_printf("%s %s %s %lld %lld %lld %lld%s%s\n", st->path, st->type, mode,
			           (long long)st->uid, (long long)st->gid, (long long)st->size,
			           (long long)(st->mtime_ns / 1000000000), st->target ? " -> " : "",
			           st->target ? st->target : "");
		return;
	}
	sbx_jw_obj_begin(w);
	sbx_jw_kstr(w, "path", st->path);
	if (msg != NULL) {
		sbx_jw_kint(w, "errno", st->err);
		sbx_jw_kstr(w, "message", msg);
	} else {
		sbx_jw_kstr(w, "type", st->type);
		sbx_jw_kstr(w, "mode", mode);
		sbx_jw_kint(w, "uid", st->uid);
		sbx_jw_kint(w, "gid", st->gid);
		sbx_jw_kint(w, "size", st->size);
		sbx_jw_kint(w, "mtime_ns", st->mtime_ns);
		if (st->target != NULL)
			sbx_jw_kstr(w, "target", st->target);
	}
	sbx_jw_obj_end(w);
}

static void stat_print(struct cli_call *c)
{
	struct probe *p = (struct probe *)c;
	if (c->json)
		sbx_jw_karr_begin(c->w, "entries");
	for (size_t i = 0; i < p->n; i++)
		stat_one(c, &p->st[i]);
	if (c->json)
		sbx_jw_arr_end(c->w);
}

const struct cli_cmd cli_stat = {
        .name = "stat",
        .op = "stat",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = stat_argv,
        .parse_json = stat_json,
        .run = stat_run,
        .print = stat_print,
        .done = probe_done,
        .synopsis = "PATH...",
        .summary = "lstat: type mode uid gid size mtime [-> target]",
        .details = "One round trip for all the paths; a path that fails has its errno and "
                   "message.",
        .fields = "\"paths\"",
};

/* ---- lands-clear ---- */

static int lands_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	if (argc < 1)
		return sbx_err_set(e, SBX_EUSAGE, 0, "lands-clear takes DIR KEEP_OUT...");
	p->path = argv[0];
	p->list = (const char *const *)argv + 1;
	p->n = (size_t)argc - 1;
	return 0;
}

static int lands_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	if ((p->path = jstr(req, "dir")) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"dir\"", c->op);
	if (jlist(req, "keep_out", &p->jlist, &p->n, e) != 0)
		return -1;
	static const char *const none[] = {NULL};
	p->list = p->jlist != NULL ? p->jlist : none;
	return 0;
}

static int lands_run(struct cli_call *c, struct sbx_err *e)
{
	struct probe *p = (struct probe *)c;
	if (sbx_lands_clear(c->s, p->path, p->list, p->n, &p->clear, &p->phys, &p->warn, e) != 0)
		return -1;
	c->status = p->clear ? 0 : EX_FALSE;
	return 0;
}

static void lands_print(struct cli_call *c)
{
	struct probe *p = (struct probe *)c;
	if (!c->json) {
		cli_printf("%s%s%s\n", p->clear ? "clear" : "not clear", p->warn ? ": " : "",
		           p->warn ? p->warn : "");
		return;
	}
	sbx_jw_kbool(c->w, "clear", p->clear);
	sbx_jw_kstr(c->w, "physical", p->phys ? p->phys : "");
	if (p->warn != NULL)
		sbx_jw_kstr(c->w, "warning", p->warn);
}

const struct cli_cmd cli_lands_clear = {
        .name = "lands-clear",
        .op = "lands_clear",
        .need = CLI_BRIEF,
        .size = sizeof(struct probe),
        .parse_argv = lands_argv,
        .parse_json = lands_json,
        .run = lands_run,
        .print = lands_print,
        .done = probe_done,
        .synopsis = "DIR KEEP_OUT...",
        .summary = "exit 0 when extracting into DIR stays clear (1 when not)",
        .details = "Clear when no link diverts DIR; diverted, it is not clear when its physical "
                   "path is inside, at or above a KEEP_OUT.",
        .fields = "\"dir\", \"keep_out\"",
};
