/* sbx sandbox create|status|rm|ls: sandboxes of every runner kind that makes them, through the
 * runner table (sbx_runner.h). A bare NAME is an ns sandbox ("ns:NAME"), as `sbx sandbox create`
 * prints it; any other kind is named by its spec ("podman:NAME"). No session is opened here.
 * A group row: `sbx sandbox SUB`, one row per SUB. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx_runner.h"

#include "cli.h"

/* A NAME or a spec as given, as a spec. */
static const char *spec_of(const char *name, char *buf, size_t cap)
{
	if (strchr(name, ':') != NULL)
		return name;
	snprintf(buf, cap, "ns:%s", name);
	return buf;
}

/* How a sandbox is named in text: ns sandboxes by their bare name. */
static const char *shown(const struct sbx_sandbox *sb)
{
	return strcmp(sb->kind, "ns") == 0 ? sb->spec + 3 : sb->spec;
}

static void json_fields(struct sbx_jw *w, const struct sbx_sandbox *sb)
{
	sbx_jw_kstr(w, "name", shown(sb));
	sbx_jw_kstr(w, "spec", sb->spec);
	sbx_jw_kstr(w, "kind", sb->kind);
	sbx_jw_kstr(w, "state", sb->state);
	if (strcmp(sb->state, "absent") == 0)
		return;
	sbx_jw_kbool(w, "running", sb->running);
	if (sb->pid > 0)
		sbx_jw_kint(w, "pid", sb->pid);
	sbx_jw_kstr(w, "image", sb->image);
	sbx_jw_kstr(w, "arch", sb->arch);
	if (sb->created_ns > 0)
		sbx_jw_kdouble(w, "created", (double)sb->created_ns / 1e9);
	if (sb->id[0] != '\0')
		sbx_jw_kstr(w, "id", sb->id);
}

static void text_status(const struct sbx_sandbox *sb)
{
	if (strcmp(sb->state, "absent") == 0) {
		cli_printf("%s absent\n", shown(sb));
		return;
	}
	char when[32] = "?";
	time_t t = (time_t)(sb->created_ns / 1000000000);
	struct tm tm;
	if (sb->created_ns > 0 && gmtime_r(&t, &tm) != NULL)
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	cli_printf("%s %s", shown(sb), sb->state);
	if (sb->pid > 0)
		cli_printf(" pid %lld", (long long)sb->pid);
	cli_printf(" arch %s image %s", sb->arch[0] ? sb->arch : "?",
	           sb->image[0] ? sb->image : "?");
	if (sb->created_ns > 0)
		cli_printf(" created %s", when);
	if (sb->id[0] != '\0')
		cli_printf(" id %.12s", sb->id);
	cli_printf("\n");
}

struct sb_call {
	struct cli_call c;
	struct sbx_create_opts co;
	const char *kind; /* create --runner, ls --runner */
	const char *extra[64];
	int argc; /* status, rm: the names */
	char **argv;
	/* results */
	char spec[192];
	struct sbx_sandbox sb;
	struct sbx_sandbox *v; /* ls */
	size_t n;
};

static void sb_done(struct cli_call *c)
{
	free(((struct sb_call *)c)->v);
}

/* ---- create ---- */

static int create_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	int nextra = 0;
	a->co.agent_dir = c->o->agent_dir;
	a->co.agent = c->o->agent;
	a->kind = "ns";
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--privileged") == 0) {
			a->co.privileged = 1;
			continue;
		}
		if (i + 1 >= argc)
			return sbx_err_set(e, SBX_EUSAGE, 0, "create: %s needs a value", s);
		if (strcmp(s, "--image") == 0)
			a->co.image = argv[++i];
		else if (strcmp(s, "--name") == 0)
			a->co.name = argv[++i];
		else if (strcmp(s, "--arch") == 0)
			a->co.arch = argv[++i];
		else if (strcmp(s, "--runner") == 0)
			a->kind = argv[++i];
		else if (strcmp(s, "--engine-arg") == 0 && nextra < 63)
			a->extra[nextra++] = argv[++i];
		else
			return sbx_err_set(e, SBX_EUSAGE, 0, "create: unknown option %s", s);
	}
	a->extra[nextra] = NULL;
	a->co.engine_args = a->extra;
	if (a->co.image == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "create needs --image DIR (podman/docker: NAME or .tar)");
	if (a->co.privileged && strcmp(a->kind, "ns") != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--privileged is for the ns runner");
	if (a->co.privileged)
		fputs("sbx: warning: --privileged: root in this sandbox is root on the machine, "
		      "with every capability and no seccomp filter\n",
		      stderr);
	return 0;
}

static int create_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	if (sbx_sandbox_create(a->kind, &a->co, a->spec, sizeof a->spec, e) != 0)
		return -1;
	return c->json ? sbx_sandbox_status(a->spec, &a->sb, e) : 0;
}

static void create_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (c->json)
		json_fields(c->w, &a->sb);
	else
		cli_printf("%s\n", strncmp(a->spec, "ns:", 3) == 0 ? a->spec + 3 : a->spec);
}

/* ---- status, rm: NAMEs ---- */

static int names_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	int one = strcmp(c->cmd->name, "status") == 0;
	if (one ? argc != 1 : argc < 1)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s takes %s", c->cmd->name,
		                   one ? "one NAME" : "NAME...");
	a->argc = argc;
	a->argv = argv;
	return 0;
}

/* Exit 0 when running, 1 (a false answer) when stopped or absent. */
static int status_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	char buf[192];
	if (sbx_sandbox_status(spec_of(a->argv[0], buf, sizeof buf), &a->sb, e) != 0)
		return -1;
	c->status = a->sb.running ? 0 : EX_FALSE;
	return 0;
}

static void status_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (c->json)
		json_fields(c->w, &a->sb);
	else
		text_status(&a->sb);
}

/* Every NAME is tried; each failure is printed as it comes, the first's status is the exit. */
static int rm_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	for (int i = 0; i < a->argc; i++) {
		char buf[192];
		if (sbx_sandbox_remove(spec_of(a->argv[i], buf, sizeof buf), e) != 0) {
			int s = fail(c->o, e, class_exit(e->cls));
			if (c->status == 0)
				c->status = s;
			c->answered = 1;
		}
	}
	return 0;
}

static void rm_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (!c->json)
		return;
	sbx_jw_karr_begin(c->w, "removed");
	for (int i = 0; i < a->argc; i++)
		sbx_jw_str(c->w, a->argv[i]);
	sbx_jw_arr_end(c->w);
}

/* ---- ls [--runner KIND]: the sandboxes sbx made, of one kind (default ns) ---- */

static int ls_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	a->kind = "ns";
	if (argc == 2 && strcmp(argv[0], "--runner") == 0)
		a->kind = argv[1];
	else if (argc != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "ls takes [--runner KIND]");
	return 0;
}

static int ls_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	return sbx_sandbox_list(a->kind, &a->v, &a->n, e);
}

static void ls_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (c->json)
		sbx_jw_karr_begin(c->w, "sandboxes");
	for (size_t i = 0; i < a->n; i++) {
		if (c->json) {
			sbx_jw_obj_begin(c->w);
			json_fields(c->w, &a->v[i]);
			sbx_jw_obj_end(c->w);
		} else {
			text_status(&a->v[i]);
		}
	}
	if (c->json)
		sbx_jw_arr_end(c->w);
}

/* ---- the rows ---- */

#define SB_ROW(NAME) .name = NAME, .need = CLI_NONE, .size = sizeof(struct sb_call), .done = sb_done

static const struct cli_cmd sb_create = {
        SB_ROW("create"),
        .parse_argv = create_argv,
        .run = create_run,
        .print = create_print,
        .synopsis = "[--runner KIND] --image DIR|IMAGE|FILE.tar [--name NAME] [--arch ARCH] "
                    "[--engine-arg WORD]... [--privileged]",
        .summary = "a new sandbox; prints its name (KIND:NAME but for ns)",
        .details = "ns (the default): a namespace sandbox from an image folder (root; state in "
                   "$SBX_NS_DIR, default /run/sbx/ns). podman, docker: a container from an "
                   "image name or an image archive; --engine-arg goes to the engine. "
                   "--privileged (ns only): no boundary, root in it is root on the machine "
                   "with every capability (docs/runners.md, \"The boundary\").",
};

static const struct cli_cmd sb_status = {
        SB_ROW("status"),
        .parse_argv = names_argv,
        .run = status_run,
        .print = status_print,
        .synopsis = "NAME",
        .summary = "state, pid, arch, image; exit 0 running, 1 stopped or absent",
        .details = "NAME is an ns sandbox's name, or a spec (podman:NAME, docker:NAME).",
};

static const struct cli_cmd sb_rm = {
        SB_ROW("rm"),          .parse_argv = names_argv,
        .run = rm_run,         .print = rm_print,
        .synopsis = "NAME...", .summary = "remove sandboxes (an absent one is no error)",
};

static const struct cli_cmd sb_ls = {
        SB_ROW("ls"),
        .parse_argv = ls_argv,
        .run = ls_run,
        .print = ls_print,
        .synopsis = "[--runner KIND]",
        .summary = "the sandboxes sbx made, of one kind (default ns)",
};

static const struct cli_cmd *const sb_cmds[] = {&sb_create, &sb_status, &sb_rm, &sb_ls, NULL};

const struct cli_cmd cli_sandbox = {
        .name = "sandbox",
        .need = CLI_NONE,
        .sub = sb_cmds,
        .synopsis = "create|status|rm|ls ...",
        .summary = "make, inspect, list and remove sandboxes (no session)",
        .details = "--json may come anywhere after sandbox.",
};
