/* sbx sandbox create|status|rm|ls|pause|resume and sbx image ls|prune: sandboxes of every runner
 * kind that makes them, and the images sbx imported for them, through the runner table
 * (sbx_runner.h). A bare NAME is an ns sandbox ("ns:NAME"), as `sbx sandbox create` prints it;
 * any other kind is named by its spec ("podman:NAME"). No session is opened here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx_runner.h"

#include "cli.h"

int cli_sandbox_known(const char *cmd)
{
	return strcmp(cmd, "sandbox") == 0;
}

/* 1 when kind can have sandboxes here: ns always; an engine when its program is on $PATH. */
static int cli_kind_here(const char *kind)
{
	if (strcmp(kind, "ns") == 0)
		return 1;
	const char *path = getenv("PATH");
	char p[4096];
	for (const char *d = path != NULL ? path : ""; *d != '\0';) {
		size_t len = strcspn(d, ":");
		if (len > 0 &&
		    (size_t)snprintf(p, sizeof p, "%.*s/%s", (int)len, d, kind) < sizeof p &&
		    access(p, X_OK) == 0)
			return 1;
		d += len + (d[len] == ':');
	}
	return 0;
}

/* "90", "90s", "10m", "2h", "3d": seconds; -1 when it is not one. */
static double duration_s(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno != 0 || !(v >= 0) || v > 1e12)
		return -1;
	static const struct {
		char unit;
		double s;
	} units[] = {{'\0', 1}, {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (end[0] == units[i].unit && (end[0] == '\0' || end[1] == '\0'))
			return v * units[i].s;
	return -1;
}

static double age_s(const struct sbx_sandbox *sb)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return sb->created_ns > 0 ? (double)ts.tv_sec + ts.tv_nsec / 1e9 - sb->created_ns / 1e9
	                          : -1;
}

/* A number of a resource option: -1 when it is not one (finite, > 0). */
static double positive(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	return end != s && *end == '\0' && errno == 0 && v > 0 && v < 1e15 ? v : -1;
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
	sbx_jw_kbool(w, "paused", sb->paused);
	if (sb->created_ns > 0)
		sbx_jw_kdouble(w, "age_s", age_s(sb));
	const struct sbx_resources *r = &sb->resources;
	sbx_jw_key(w, "resources");
	sbx_jw_obj_begin(w);
	if (r->cpu > 0)
		sbx_jw_kdouble(w, "cpu", r->cpu);
	if (r->memory_mib > 0)
		sbx_jw_kint(w, "memory_mib", r->memory_mib);
	if (r->pids > 0)
		sbx_jw_kint(w, "pids", r->pids);
	if (r->disk_gib > 0)
		sbx_jw_kdouble(w, "disk_gib", r->disk_gib);
	sbx_jw_obj_end(w);
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
	double age = age_s(sb);
	if (age >= 0)
		cli_printf(" age %.0fs", age);
	const struct sbx_resources *r = &sb->resources;
	if (r->cpu > 0)
		cli_printf(" cpu %g", r->cpu);
	if (r->memory_mib > 0)
		cli_printf(" memory %lldMiB", (long long)r->memory_mib);
	if (r->pids > 0)
		cli_printf(" pids %lld", (long long)r->pids);
	if (r->disk_gib > 0)
		cli_printf(" disk %gGiB", r->disk_gib);
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
		else if (strcmp(a, "--cpu") == 0 || strcmp(a, "--memory-mib") == 0 ||
		         strcmp(a, "--pids") == 0 || strcmp(a, "--disk-gib") == 0) {
			double v = positive(argv[++i]);
			int whole = a[2] == 'm' || a[2] == 'p';
			if (v < 0 || (whole && v != (double)(int64_t)v)) {
				sbx_err_set(&e, SBX_EUSAGE, 0,
				            "create: %s needs a %s number above 0", a,
				            whole ? "whole" : "");
				return fail(o, &e, EX_USAGE);
			}
			if (a[2] == 'c')
				co.resources.cpu = v;
			else if (a[2] == 'm')
				co.resources.memory_mib = (int64_t)v;
			else if (a[2] == 'p')
				co.resources.pids = (int64_t)v;
			else
				co.resources.disk_gib = v;
		} else {
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

/* rm NAME... | rm --all [--runner KIND] | rm --older-than DURATION [--runner KIND]: the last
 * two remove what `ls` lists (of every kind, or KIND), all of it or what was made longer ago
 * than DURATION (a sandbox whose age is unknown is kept). */
static int list_kinds(const struct opts *o, const char *kind, struct sbx_sandbox **v, size_t *n,
                      int *status);

static int cmd_rm(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	int all = 0;
	double older = -1;
	const char *kind = NULL;
	char **names = argv;
	int nnames = argc;
	if (argc >= 1 && (strcmp(argv[0], "--all") == 0 || strcmp(argv[0], "--older-than") == 0)) {
		for (int i = 0; i < argc; i++) {
			if (strcmp(argv[i], "--all") == 0) {
				all = 1;
			} else if (strcmp(argv[i], "--older-than") == 0 && i + 1 < argc &&
			           (older = duration_s(argv[i + 1])) >= 0) {
				i++;
			} else if (strcmp(argv[i], "--runner") == 0 && i + 1 < argc) {
				kind = argv[++i];
			} else {
				sbx_err_set(&e, SBX_EUSAGE, 0,
				            "rm takes NAME..., or --all or --older-than DURATION "
				            "(90s, 10m, 2h, 3d) with [--runner KIND]");
				return fail(o, &e, EX_USAGE);
			}
		}
		nnames = 0;
	}
	int status = 0;
	struct sbx_sandbox *v = NULL;
	size_t n = 0;
	if (all || older >= 0) {
		if (list_kinds(o, kind, &v, &n, &status) != 0)
			return status;
	} else if (argc < 1) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "rm takes NAME..., --all or --older-than DURATION");
		return fail(o, &e, EX_USAGE);
	}
	char **done = calloc((size_t)nnames + n + 1, sizeof *done);
	size_t ndone = 0;
	if (done == NULL) {
		free(v);
		sbx_err_set(&e, SBX_EUSAGE, ENOMEM, "rm");
		return fail(o, &e, EX_UNAVAILABLE);
	}
	for (int i = 0; i < nnames; i++) {
		char buf[192];
		if (sbx_sandbox_remove(spec_of(names[i], buf, sizeof buf), &e) != 0) {
			int s = fail(o, &e, class_exit(e.cls));
			if (status == 0)
				status = s;
		} else {
			done[ndone++] = names[i];
		}
	}
	for (size_t i = 0; i < n; i++) {
		double age = age_s(&v[i]);
		if (!all && (age < 0 || age < older))
			continue;
		if (sbx_sandbox_remove(v[i].spec, &e) != 0) {
			int s = fail(o, &e, class_exit(e.cls));
			if (status == 0)
				status = s;
		} else {
			done[ndone++] = v[i].spec;
			if (!o->json)
				cli_printf("%s\n", shown(&v[i]));
		}
	}
	if (status == 0 && o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		json_ok(&w);
		sbx_jw_key(&w, "removed");
		sbx_jw_arr_begin(&w);
		for (size_t i = 0; i < ndone; i++)
			sbx_jw_str(&w, done[i]);
		sbx_jw_arr_end(&w);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	}
	free(done);
	free(v);
	return status;
}

/* The sandboxes of kind, or of every kind that lists (a kind whose engine is not installed is
 * left out; one that fails is reported on stderr, *status EX_UNAVAILABLE, and the others still
 * listed). -1 only when nothing could be listed because of the caller (an unknown kind). */
static int list_kinds(const struct opts *o, const char *kind, struct sbx_sandbox **v, size_t *n,
                      int *status)
{
	struct sbx_err e;
	*v = NULL;
	*n = 0;
	if (kind != NULL) {
		if (sbx_sandbox_list(kind, v, n, &e) != 0) {
			*status = fail(o, &e, class_exit(e.cls));
			return -1;
		}
		return 0;
	}
	for (const struct sbx_runner_class *const *c = sbx_runner_classes; *c != NULL; c++) {
		if ((*c)->list == NULL || !cli_kind_here((*c)->name))
			continue;
		struct sbx_sandbox *k;
		size_t nk;
		if (sbx_sandbox_list((*c)->name, &k, &nk, &e) != 0) {
			cli_fprintf(stderr, "sbx: %s: %s\n", (*c)->name, e.msg);
			*status = EX_UNAVAILABLE;
			continue;
		}
		struct sbx_sandbox *all = realloc(*v, (*n + nk + 1) * sizeof *all);
		if (all == NULL) {
			free(k);
			continue;
		}
		if (nk > 0)
			memcpy(all + *n, k, nk * sizeof *k);
		free(k);
		*v = all;
		*n += nk;
	}
	return 0;
}

/* ls [--runner KIND]: the sandboxes sbx made, of every kind (or KIND). */
static int cmd_ls(const struct opts *o, int argc, char **argv)
{
	struct sbx_err e;
	const char *kind = NULL;
	if (argc == 2 && strcmp(argv[0], "--runner") == 0) {
		kind = argv[1];
	} else if (argc != 0) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "ls takes [--runner KIND]");
		return fail(o, &e, EX_USAGE);
	}
	struct sbx_sandbox *v;
	size_t n;
	int status = 0;
	if (list_kinds(o, kind, &v, &n, &status) != 0)
		return status;
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
	return status;
}

/* pause NAME... / resume NAME... */
static int cmd_pause(const struct opts *o, int pause, int argc, char **argv)
{
	struct sbx_err e;
	if (argc < 1) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "%s takes NAME...", pause ? "pause" : "resume");
		return fail(o, &e, EX_USAGE);
	}
	int status = 0;
	for (int i = 0; i < argc; i++) {
		char buf[192];
		const char *spec = spec_of(argv[i], buf, sizeof buf);
		int rc = pause ? sbx_sandbox_pause(spec, &e) : sbx_sandbox_resume(spec, &e);
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
		json_ok(&w);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	}
	return status;
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
		sbx_err_set(&e, SBX_EUSAGE, 0,
		            "sandbox needs create, status, rm, ls, pause or resume");
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
	if (strcmp(sub, "pause") == 0 || strcmp(sub, "resume") == 0)
		return cmd_pause(&o, sub[0] == 'p', n, rest);
	sbx_err_set(&e, SBX_EUSAGE, 0,
	            "unknown sandbox command '%s' (create, status, rm, ls, pause, resume)", sub);
	return fail(&o, &e, EX_USAGE);
}

/* ---- sbx image ls | prune [--runner KIND] ---- */

static void image_json(struct sbx_jw *w, const struct sbx_image *im)
{
	sbx_jw_kstr(w, "kind", im->kind);
	sbx_jw_kstr(w, "ref", im->ref);
	sbx_jw_key(w, "tags");
	sbx_jw_arr_begin(w);
	for (int t = 0; t < im->ntags; t++)
		sbx_jw_str(w, im->tags[t]);
	sbx_jw_arr_end(w);
	sbx_jw_kstr(w, "id", im->id);
	sbx_jw_kstr(w, "tarball_sha256", im->tarball);
	if (im->created_ns > 0)
		sbx_jw_kdouble(w, "created", (double)im->created_ns / 1e9);
	sbx_jw_kint(w, "size", im->size);
	sbx_jw_kint(w, "containers", im->containers);
}

/* The images of kind, or of every kind that keeps them and is installed here. */
static int images_of(const struct opts *o, const char *kind, struct sbx_image **v, size_t *n,
                     int *status)
{
	struct sbx_err e;
	*v = NULL;
	*n = 0;
	for (const struct sbx_runner_class *const *c = sbx_runner_classes; *c != NULL; c++) {
		if ((*c)->images == NULL || (kind != NULL && strcmp(kind, (*c)->name) != 0) ||
		    (kind == NULL && !cli_kind_here((*c)->name)))
			continue;
		struct sbx_image *k;
		size_t nk;
		if (sbx_image_list((*c)->name, &k, &nk, &e) != 0) {
			if (kind != NULL) {
				*status = fail(o, &e, class_exit(e.cls));
				return -1;
			}
			cli_fprintf(stderr, "sbx: %s: %s\n", (*c)->name, e.msg);
			*status = EX_UNAVAILABLE;
			continue;
		}
		struct sbx_image *all = realloc(*v, (*n + nk + 1) * sizeof *all);
		if (all == NULL) {
			free(k);
			continue;
		}
		if (nk > 0)
			memcpy(all + *n, k, nk * sizeof *k);
		free(k);
		*v = all;
		*n += nk;
	}
	if (kind != NULL && *v == NULL) {
		const char *arg;
		if (sbx_runner_class_of(kind, &arg, &e) == NULL) {
			*status = fail(o, &e, EX_USAGE);
			return -1;
		}
	}
	return 0;
}

/* ls lists them; prune removes those no container was made from (the engine refuses one in
 * use: never forced). */
int cli_image(const struct opts *o0, int argc, char **argv)
{
	struct opts o = *o0;
	struct sbx_err e;
	const char *sub = NULL, *kind = NULL;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			o.json = 1;
		else if (strcmp(argv[i], "--runner") == 0 && i + 1 < argc)
			kind = argv[++i];
		else if (sub == NULL &&
		         (strcmp(argv[i], "ls") == 0 || strcmp(argv[i], "prune") == 0))
			sub = argv[i];
		else
			sub = "";
	}
	if (sub == NULL || sub[0] == '\0') {
		sbx_err_set(&e, SBX_EUSAGE, 0, "image takes ls or prune, and [--runner KIND]");
		return fail(&o, &e, EX_USAGE);
	}
	int prune = sub[0] == 'p', status = 0;
	struct sbx_image *v;
	size_t n;
	if (images_of(&o, kind, &v, &n, &status) != 0)
		return status;
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_ok(&w);
	sbx_jw_key(&w, prune ? "removed" : "images");
	sbx_jw_arr_begin(&w);
	for (size_t i = 0; i < n; i++) {
		const struct sbx_image *im = &v[i];
		if (prune && im->containers > 0)
			continue;
		if (prune && sbx_image_remove(im, &e) != 0) {
			int s = fail(&o, &e, class_exit(e.cls));
			if (status == 0)
				status = s;
			continue;
		}
		if (o.json) {
			sbx_jw_obj_begin(&w);
			image_json(&w, im);
			sbx_jw_obj_end(&w);
		} else {
			cli_printf("%s:%s id %.12s size %lld containers %d\n", im->kind, im->ref,
			           im->id, (long long)im->size, im->containers);
		}
	}
	sbx_jw_arr_end(&w);
	sbx_jw_obj_end(&w);
	if (o.json)
		print_json(&w);
	sbx_jw_free(&w);
	free(v);
	return status;
}
