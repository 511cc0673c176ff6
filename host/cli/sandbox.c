/* sbx sandbox create|status|rm|ls: sandboxes of every runner kind that makes them, through the
 * runner table (sbx_runner.h). A bare NAME is an ns sandbox ("ns:NAME"), as `sbx sandbox create`
 * prints it; any other kind is named by its spec ("podman:NAME"). No session is opened here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx_runner.h"

#include "cli.h"

int cli_sandbox_known(const char *cmd)
{
	return strcmp(cmd, "sandbox") == 0;
}

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

static void print_ok(const struct sbx_sandbox *sb)
{
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_ok(&w);
	json_fields(&w, sb);
	sbx_jw_obj_end(&w);
	print_json(&w);
	sbx_jw_free(&w);
}

static int cmd_create(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	struct sbx_create_opts co = {.agent_dir = o->agent_dir, .agent = o->agent};
	const char *kind = "ns";
	const char *extra[64];
	int nextra = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--privileged") == 0) {
			co.privileged = 1;
			continue;
		}
		if (i + 1 >= argc) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "create: %s needs a value", a);
			return fail(o, &e, EX_USAGE);
		}
		if (strcmp(a, "--image") == 0)
			co.image = argv[++i];
		else if (strcmp(a, "--name") == 0)
			co.name = argv[++i];
		else if (strcmp(a, "--arch") == 0)
			co.arch = argv[++i];
		else if (strcmp(a, "--runner") == 0)
			kind = argv[++i];
		else if (strcmp(a, "--engine-arg") == 0 && nextra < 63)
			extra[nextra++] = argv[++i];
		else {
			sbx_err_set(&e, SBX_EUSAGE, 0, "create: unknown option %s", a);
			return fail(o, &e, EX_USAGE);
		}
	}
	extra[nextra] = NULL;
	co.engine_args = extra;
	if (co.image == NULL) {
		sbx_err_set(&e, SBX_EUSAGE, 0,
		            "create needs --image DIR (podman/docker: NAME or .tar)");
		return fail(o, &e, EX_USAGE);
	}
	if (co.privileged && strcmp(kind, "ns") != 0) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "--privileged is for the ns runner");
		return fail(o, &e, EX_USAGE);
	}
	if (co.privileged)
		fputs("sbx: warning: --privileged: root in this sandbox is root on the machine, "
		      "with every capability and no seccomp filter\n",
		      stderr);
	char spec[192];
	if (sbx_sandbox_create(kind, &co, spec, sizeof spec, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	struct sbx_sandbox sb;
	if (!o->json) {
		cli_printf("%s\n", strncmp(spec, "ns:", 3) == 0 ? spec + 3 : spec);
		return 0;
	}
	if (sbx_sandbox_status(spec, &sb, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	print_ok(&sb);
	return 0;
}

/* Exit 0 when running, 1 (a false answer) when stopped or absent. */
static int cmd_status(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	if (argc != 1) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "status takes one NAME");
		return fail(o, &e, EX_USAGE);
	}
	char buf[192];
	struct sbx_sandbox sb;
	if (sbx_sandbox_status(spec_of(argv[0], buf, sizeof buf), &sb, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	if (o->json)
		print_ok(&sb);
	else
		text_status(&sb);
	return sb.running ? 0 : EX_FALSE;
}

static int cmd_rm(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	if (argc < 1) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "rm takes NAME...");
		return fail(o, &e, EX_USAGE);
	}
	int status = 0;
	for (int i = 0; i < argc; i++) {
		char buf[192];
		if (sbx_sandbox_remove(spec_of(argv[i], buf, sizeof buf), &e) != 0) {
			int s = fail(o, &e, class_exit(e.cls));
			if (status == 0)
				status = s;
		}
	}
	if (status == 0 && o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		json_ok(&w);
		sbx_jw_key(&w, "removed");
		sbx_jw_arr_begin(&w);
		for (int i = 0; i < argc; i++)
			sbx_jw_str(&w, argv[i]);
		sbx_jw_arr_end(&w);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	}
	return status;
}

/* ls [--runner KIND]: the sandboxes sbx made, of one kind (default ns). */
static int cmd_ls(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	const char *kind = "ns";
	if (argc == 2 && strcmp(argv[0], "--runner") == 0) {
		kind = argv[1];
	} else if (argc != 0) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "ls takes [--runner KIND]");
		return fail(o, &e, EX_USAGE);
	}
	struct sbx_sandbox *v;
	size_t n;
	if (sbx_sandbox_list(kind, &v, &n, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_ok(&w);
	sbx_jw_key(&w, "sandboxes");
	sbx_jw_arr_begin(&w);
	for (size_t i = 0; i < n; i++) {
		if (o->json) {
			sbx_jw_obj_begin(&w);
			json_fields(&w, &v[i]);
			sbx_jw_obj_end(&w);
		} else {
			text_status(&v[i]);
		}
	}
	sbx_jw_arr_end(&w);
	sbx_jw_obj_end(&w);
	if (o->json)
		print_json(&w);
	sbx_jw_free(&w);
	free(v);
	return 0;
}

int cli_sandbox(const struct opts *o0, int argc, char **argv)
{
	struct opts o = *o0;
	struct sbx_err e;
	int i = 0;
	/* --json is taken here too: `sbx sandbox status --json NAME`. */
	while (i < argc && strcmp(argv[i], "--json") == 0) {
		o.json = 1;
		i++;
	}
	if (i >= argc) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "sandbox needs create, status, rm or ls");
		return fail(&o, &e, EX_USAGE);
	}
	const char *sub = argv[i++];
	char *rest[256];
	int n = 0;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			o.json = 1;
			continue;
		}
		if (n >= 255) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "too many arguments");
			return fail(&o, &e, EX_USAGE);
		}
		rest[n++] = argv[i];
	}
	rest[n] = NULL;
	if (strcmp(sub, "create") == 0)
		return cmd_create(&o, n, rest);
	if (strcmp(sub, "status") == 0)
		return cmd_status(&o, n, rest);
	if (strcmp(sub, "rm") == 0)
		return cmd_rm(&o, n, rest);
	if (strcmp(sub, "ls") == 0)
		return cmd_ls(&o, n, rest);
	sbx_err_set(&e, SBX_EUSAGE, 0, "unknown sandbox command '%s' (create, status, rm, ls)",
	            sub);
	return fail(&o, &e, EX_USAGE);
}
