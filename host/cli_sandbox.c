/* sbx sandbox create|status|rm|ls: namespace sandboxes of the ns runner (runner/ns.h), which
 * `sbx --runner ns:NAME ...` then reaches, and podman/docker containers (runner/podman.h:
 * `create --runner podman`, then status/rm podman:NAME). No session is opened here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ns.h"
#include "podman.h"

#include "cli.h"

int cli_sandbox_known(const char *cmd)
{
	return strcmp(cmd, "sandbox") == 0;
}

static void json_status(struct sbx_jw *w, const char *name, const struct sbx_ns_status *st)
{
	sbx_jw_key(w, "name");
	sbx_jw_str(w, name);
	sbx_jw_key(w, "state");
	sbx_jw_str(w, sbx_ns_state_name(st->state));
	if (st->state == SBX_NS_ABSENT)
		return;
	sbx_jw_key(w, "pid");
	sbx_jw_int(w, st->pid);
	sbx_jw_key(w, "image");
	sbx_jw_str(w, st->image);
	sbx_jw_key(w, "arch");
	sbx_jw_str(w, st->arch);
	sbx_jw_key(w, "created");
	sbx_jw_double(w, (double)st->created_ns / 1e9);
	sbx_jw_key(w, "dir");
	sbx_jw_str(w, st->dir);
}

static void text_status(const char *name, const struct sbx_ns_status *st)
{
	if (st->state == SBX_NS_ABSENT) {
		cli_printf("%s absent\n", name);
		return;
	}
	char when[32] = "?";
	time_t t = (time_t)(st->created_ns / 1000000000);
	struct tm tm;
	if (st->created_ns > 0 && gmtime_r(&t, &tm) != NULL)
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	cli_printf("%s %s pid %lld arch %s image %s created %s\n", name,
	           sbx_ns_state_name(st->state), (long long)st->pid, st->arch[0] ? st->arch : "?",
	           st->image[0] ? st->image : "?", when);
}

/* "podman:NAME" / "docker:NAME": the engine (static string) and the name; NULL otherwise. */
static const char *engine_of(const char *spec, const char **name)
{
	if (strncmp(spec, "podman:", 7) == 0) {
		*name = spec + 7;
		return "podman";
	}
	if (strncmp(spec, "docker:", 7) == 0) {
		*name = spec + 7;
		return "docker";
	}
	return NULL;
}

static void json_container(struct sbx_jw *w, const char *engine, const char *name,
                           const struct sbx_podman_status *st)
{
	char spec[128];
	snprintf(spec, sizeof spec, "%s:%s", engine, name);
	sbx_jw_key(w, "name");
	sbx_jw_str(w, spec);
	sbx_jw_key(w, "state");
	sbx_jw_str(w, st->state);
	if (!st->exists)
		return;
	sbx_jw_key(w, "id");
	sbx_jw_str(w, st->id);
	sbx_jw_key(w, "image");
	sbx_jw_str(w, st->image);
	sbx_jw_key(w, "arch");
	sbx_jw_str(w, st->arch);
}

/* {"ok":true, and the sandbox's fields} on stdout: ns (container NULL) or a container. */
static void print_ok(const char *name, const struct sbx_ns_status *ns, const char *engine,
                     const struct sbx_podman_status *container)
{
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	sbx_jw_key(&w, "ok");
	sbx_jw_bool(&w, 1);
	if (container != NULL)
		json_container(&w, engine, name, container);
	else
		json_status(&w, name, ns);
	sbx_jw_obj_end(&w);
	print_json(&w);
	sbx_jw_free(&w);
}

static int create_container(const struct opts *o, const char *engine, const char *image,
                            const char *name, const char *arch, const char *const *extra)
{
	struct sbx_err e;
	struct sbx_podman_create_opts po = {
	        .arch = arch, .agent_dir = o->agent_dir, .agent = o->agent, .extra = extra};
	char made[64];
	if (sbx_podman_create(engine, image, name, &po, made, sizeof made, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	if (!o->json) {
		cli_printf("%s:%s\n", engine, made);
		return 0;
	}
	struct sbx_podman_status st;
	if (sbx_podman_status(engine, made, &st, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	print_ok(made, NULL, engine, &st);
	return 0;
}

static int status_container(const struct opts *o, const char *engine, const char *name)
{
	struct sbx_err e;
	struct sbx_podman_status st;
	if (sbx_podman_status(engine, name, &st, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	if (o->json)
		print_ok(name, NULL, engine, &st);
	else if (!st.exists)
		cli_printf("%s:%s absent\n", engine, name);
	else
		cli_printf("%s:%s %s arch %s image %s id %.12s\n", engine, name, st.state,
		           st.arch[0] ? st.arch : "?", st.image, st.id);
	return st.exists && strcmp(st.state, "running") == 0 ? 0 : EX_FALSE;
}

static int cmd_create(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	const char *image = NULL, *name = NULL, *arch = NULL, *runner = "ns";
	const char *extra[64];
	int nextra = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 >= argc) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "create: %s needs a value", a);
			return fail(o, &e, EX_USAGE);
		}
		if (strcmp(a, "--image") == 0)
			image = argv[++i];
		else if (strcmp(a, "--name") == 0)
			name = argv[++i];
		else if (strcmp(a, "--arch") == 0)
			arch = argv[++i];
		else if (strcmp(a, "--runner") == 0)
			runner = argv[++i];
		else if (strcmp(a, "--engine-arg") == 0 && nextra < 63)
			extra[nextra++] = argv[++i];
		else {
			sbx_err_set(&e, SBX_EUSAGE, 0, "create: unknown option %s", a);
			return fail(o, &e, EX_USAGE);
		}
	}
	extra[nextra] = NULL;
	if (image == NULL) {
		sbx_err_set(&e, SBX_EUSAGE, 0,
		            "create needs --image DIR (podman/docker: NAME or .tar)");
		return fail(o, &e, EX_USAGE);
	}
	if (strcmp(runner, "podman") == 0 || strcmp(runner, "docker") == 0)
		return create_container(o, runner, image, name, arch, extra);
	if (strcmp(runner, "ns") != 0 || nextra > 0) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "create: --runner ns, podman or docker%s",
		            nextra > 0 ? " (--engine-arg is for podman/docker)" : "");
		return fail(o, &e, EX_USAGE);
	}
	struct sbx_ns_opts no = {.arch = arch, .agent_dir = o->agent_dir, .agent = o->agent};
	char made[64];
	if (sbx_ns_create(image, name, &no, made, sizeof made, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	if (!o->json) {
		cli_printf("%s\n", made);
		return 0;
	}
	struct sbx_ns_status st;
	if (sbx_ns_status(made, &st, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	print_ok(made, &st, NULL, NULL);
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
	const char *cname;
	const char *engine = engine_of(argv[0], &cname);
	if (engine != NULL)
		return status_container(o, engine, cname);
	struct sbx_ns_status st;
	if (sbx_ns_status(argv[0], &st, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	if (o->json)
		print_ok(argv[0], &st, NULL, NULL);
	else
		text_status(argv[0], &st);
	return st.state == SBX_NS_RUNNING ? 0 : EX_FALSE;
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
		const char *cname;
		const char *engine = engine_of(argv[i], &cname);
		int rc = engine != NULL ? sbx_podman_remove(engine, cname, &e)
		                        : sbx_ns_remove(argv[i], &e);
		if (rc != 0) {
			int s = fail(o, &e, class_exit(e.cls));
			if (status == 0)
				status = s;
		}
	}
	if (status == 0 && o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		sbx_jw_key(&w, "ok");
		sbx_jw_bool(&w, 1);
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

static int cmd_ls(const struct opts *o, int argc, char **argv)
{
	(void)argv;
	struct sbx_err e;
	if (argc != 0) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "ls takes no arguments");
		return fail(o, &e, EX_USAGE);
	}
	char **names;
	size_t n;
	if (sbx_ns_list(&names, &n, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	sbx_jw_key(&w, "ok");
	sbx_jw_bool(&w, 1);
	sbx_jw_key(&w, "sandboxes");
	sbx_jw_arr_begin(&w);
	for (size_t i = 0; i < n; i++) {
		struct sbx_ns_status st;
		if (sbx_ns_status(names[i], &st, &e) != 0)
			continue; /* removed while listed */
		if (o->json) {
			sbx_jw_obj_begin(&w);
			json_status(&w, names[i], &st);
			sbx_jw_obj_end(&w);
		} else if (st.state != SBX_NS_ABSENT) {
			text_status(names[i], &st);
		}
	}
	sbx_jw_arr_end(&w);
	sbx_jw_obj_end(&w);
	if (o->json)
		print_json(&w);
	sbx_jw_free(&w);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
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
