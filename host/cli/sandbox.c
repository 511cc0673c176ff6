/* sbx sandbox create|status|rm|ls|pause|resume and sbx image ls|prune: sandboxes of every runner
 * kind that makes them, and the images sbx imported for them, through the runner table
 * (sbx_runner.h). A bare NAME is an ns sandbox ("ns:NAME"), as `sbx sandbox create` prints it;
 * any other kind is named by its spec ("podman:NAME"). No session is opened here. Two group
 * rows: `sbx sandbox SUB` and `sbx image SUB`, one row per SUB. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sbx_runner.h"

#include "cli.h"

/* 0 when Docker's daemon is local and its socket takes no connection (not running): then
 * there is nothing to list. A remote one ($DOCKER_HOST tcp:// or ssh://, a named context) is
 * taken as there: docker itself says if it is not. */
static int docker_daemon_up(void)
{
	const char *host = getenv("DOCKER_HOST"), *ctx = getenv("DOCKER_CONTEXT");
	if (ctx != NULL && ctx[0] != '\0' && strcmp(ctx, "default") != 0)
		return 1;
	const char *path = "/var/run/docker.sock";
	if (host != NULL && host[0] != '\0') {
		if (strncmp(host, "unix://", 7) != 0)
			return 1;
		path = host + 7;
	}
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path)
		return 1;
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 1;
	int up = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EAGAIN;
	close(fd);
	return up;
}

/* 1 when kind can have sandboxes here: ns always; an engine when its program is on $PATH (and
 * for Docker, its daemon is up). */
static int cli_kind_here(const char *kind)
{
	if (strcmp(kind, "ns") == 0)
		return 1;
	if (strcmp(kind, "docker") == 0 && !docker_daemon_up())
		return 0;
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
	sbx_jw_kobj_begin(w, "resources");
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

struct sb_call {
	struct cli_call c;
	struct sbx_create_opts co;
	const char *kind; /* create --runner; ls, rm, image: --runner (NULL: every kind) */
	const char *extra[64];
	int argc; /* status, rm, pause, resume: the names */
	char **argv;
	int all;      /* rm --all */
	double older; /* rm --older-than, seconds; -1 when not given */
	/* results */
	char spec[192];
	struct sbx_sandbox sb;
	struct sbx_sandbox *v; /* ls; rm --all / --older-than: what was listed */
	size_t n;
	const char **done; /* rm: what was removed */
	size_t ndone;
	struct sbx_image *im; /* image ls; image prune: what was removed */
	size_t nim;
};

static void sb_done(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	free(a->v);
	free(a->done);
	free(a->im);
}

/* ---- create ---- */

/* --cpu N (fractional), --memory-mib N, --pids N (whole), --disk-gib N: 1 when s is one of
 * them (its value taken), 0 when it is not, -1 and *e for a bad value. */
static int resource_arg(struct sbx_resources *r, const char *s, const char *val, struct sbx_err *e)
{
	int cpu = strcmp(s, "--cpu") == 0, mem = strcmp(s, "--memory-mib") == 0,
	    pids = strcmp(s, "--pids") == 0, disk = strcmp(s, "--disk-gib") == 0;
	if (!cpu && !mem && !pids && !disk)
		return 0;
	double v = positive(val);
	int whole = mem || pids;
	if (v < 0 || (whole && v != (double)(int64_t)v))
		return sbx_err_set(e, SBX_EUSAGE, 0, "create: %s needs a %snumber above 0", s,
		                   whole ? "whole " : "");
	if (cpu)
		r->cpu = v;
	else if (mem)
		r->memory_mib = (int64_t)v;
	else if (pids)
		r->pids = (int64_t)v;
	else
		r->disk_gib = v;
	return 1;
}

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
		int r = resource_arg(&a->co.resources, s, argv[i + 1], e);
		if (r < 0)
			return -1;
		if (r > 0)
			i++;
		else if (strcmp(s, "--image") == 0)
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
		      "with every capability, no seccomp filter and no user namespace\n",
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

/* ---- status, pause, resume: NAMEs ---- */

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

/* A failure of one of several (rm, pause, image prune): printed as it comes, the first's
 * status is the exit, and nothing else is printed. */
static void one_failed(struct cli_call *c, const struct sbx_err *e)
{
	int s = fail(c->o, e, class_exit(e->cls));
	if (c->status == 0)
		c->status = s;
	c->answered = 1;
}

/* Every NAME is tried (pause or resume). */
static int pause_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	int pause = strcmp(c->cmd->name, "pause") == 0;
	for (int i = 0; i < a->argc; i++) {
		char buf[192];
		const char *spec = spec_of(a->argv[i], buf, sizeof buf);
		if ((pause ? sbx_sandbox_pause(spec, e) : sbx_sandbox_resume(spec, e)) != 0)
			one_failed(c, e);
	}
	return 0;
}

/* ---- listing: every kind that lists and is installed here, or one ---- */

/* The sandboxes of a->kind, or of every kind that lists (a kind whose engine is not installed
 * or, for Docker, whose daemon is not running, is left out; one that fails is reported on stderr,
 * the exit EX_UNAVAILABLE, and the others still listed). -1 and *e only when a->kind was named and
 * could not be listed. */
static int list_kinds(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	if (a->kind != NULL)
		return sbx_sandbox_list(a->kind, &a->v, &a->n, e);
	for (const struct sbx_runner_class *const *k = sbx_runner_classes; *k != NULL; k++) {
		if ((*k)->list == NULL || !cli_kind_here((*k)->name))
			continue;
		struct sbx_sandbox *v;
		size_t nv;
		if (sbx_sandbox_list((*k)->name, &v, &nv, e) != 0) {
			cli_fprintf(stderr, "sbx: %s: %s\n", (*k)->name, e->msg);
			c->status = EX_UNAVAILABLE;
			continue;
		}
		struct sbx_sandbox *all = realloc(a->v, (a->n + nv + 1) * sizeof *all);
		if (all == NULL) {
			free(v);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "ls");
		}
		if (nv > 0)
			memcpy(all + a->n, v, nv * sizeof *v);
		free(v);
		a->v = all;
		a->n += nv;
	}
	return 0;
}

/* ---- rm NAME... | rm --all | --older-than DURATION [--runner KIND] ---- */

/* The last two remove what `ls` lists (of every kind, or KIND): all of it, or what was made
 * longer ago than DURATION (a sandbox whose age is unknown is kept). */
static int rm_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	a->older = -1;
	if (argc >= 1 && strcmp(argv[0], "--all") != 0 && strcmp(argv[0], "--older-than") != 0) {
		a->argc = argc;
		a->argv = argv;
		return 0;
	}
	int bad = 0;
	for (int i = 0; i < argc && !bad; i++) {
		if (strcmp(argv[i], "--all") == 0)
			a->all = 1;
		else if (strcmp(argv[i], "--older-than") == 0 && i + 1 < argc &&
		         (a->older = duration_s(argv[i + 1])) >= 0)
			i++;
		else if (strcmp(argv[i], "--runner") == 0 && i + 1 < argc)
			a->kind = argv[++i];
		else
			bad = 1;
	}
	if (bad || (!a->all && a->older < 0))
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "rm takes NAME..., or --all or --older-than DURATION (90s, "
		                   "10m, 2h, 3d) with [--runner KIND]");
	return 0;
}

/* Every one is tried. */
static int rm_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	if ((a->all || a->older >= 0) && list_kinds(c, e) != 0)
		return -1;
	if ((a->done = calloc((size_t)a->argc + a->n + 1, sizeof *a->done)) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "rm");
	for (int i = 0; i < a->argc; i++) {
		char buf[192];
		if (sbx_sandbox_remove(spec_of(a->argv[i], buf, sizeof buf), e) != 0)
			one_failed(c, e);
		else
			a->done[a->ndone++] = a->argv[i];
	}
	for (size_t i = 0; i < a->n; i++) {
		double age = age_s(&a->v[i]);
		if (!a->all && (age < 0 || age < a->older))
			continue;
		if (sbx_sandbox_remove(a->v[i].spec, e) != 0)
			one_failed(c, e);
		else
			a->done[a->ndone++] = a->v[i].spec;
	}
	return 0;
}

/* JSON: every one removed; text: those of --all / --older-than, which the caller did not
 * name. */
static void rm_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (c->json)
		sbx_jw_karr_begin(c->w, "removed");
	for (size_t i = 0; i < a->ndone; i++) {
		if (c->json)
			sbx_jw_str(c->w, a->done[i]);
		else if (a->argc == 0)
			cli_printf("%s\n", strncmp(a->done[i], "ns:", 3) == 0 ? a->done[i] + 3
			                                                      : a->done[i]);
	}
	if (c->json)
		sbx_jw_arr_end(c->w);
}

/* ---- ls [--runner KIND]: the sandboxes sbx made, of every kind (or KIND) ---- */

static int ls_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	if (argc == 2 && strcmp(argv[0], "--runner") == 0)
		a->kind = argv[1];
	else if (argc != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "ls takes [--runner KIND]");
	return 0;
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
        .synopsis = "[--runner KIND] --image DIR|IMAGE|FILE.tar|busybox|debian|noshell "
                    "[--name NAME] [--arch ARCH] [--engine-arg WORD]... [--cpu N] "
                    "[--memory-mib N] [--pids N] [--disk-gib N] [--privileged]",
        .summary = "a new sandbox; prints its name (KIND:NAME but for ns)",
        .details = "ns (the default): a namespace sandbox from an image folder (root; state in "
                   "$SBX_NS_DIR, default /run/sbx/ns). podman, docker: a container from an "
                   "image name or an image archive; --engine-arg goes to the engine. "
                   "--image busybox, debian or noshell is the bundled image "
                   "build/images/NAME-ARCH of the sandbox's architecture, on every kind. "
                   "Limits, on every kind that makes sandboxes: --cpu (a quota in CPUs, "
                   "fractional), --memory-mib, --pids (the process limit), --disk-gib (the "
                   "writable layer; refused where the runner cannot bound it). "
                   "--privileged (ns only): no boundary, root in it is root on the machine "
                   "with every capability (docs/runners.md, \"The boundary\").",
};

static const struct cli_cmd sb_status = {
        SB_ROW("status"),
        .parse_argv = names_argv,
        .run = status_run,
        .print = status_print,
        .synopsis = "NAME",
        .summary = "state, pid, arch, image, age, resources; exit 0 running, 1 stopped or "
                   "absent",
        .details = "NAME is an ns sandbox's name, or a spec (podman:NAME, docker:NAME).",
};

static const struct cli_cmd sb_rm = {
        SB_ROW("rm"),
        .parse_argv = rm_argv,
        .run = rm_run,
        .print = rm_print,
        .synopsis = "NAME... | --all | --older-than DURATION [--runner KIND]",
        .summary = "remove sandboxes (an absent one is no error)",
        .details = "--all removes every sandbox `ls` lists (of KIND with --runner), "
                   "--older-than those made longer ago than DURATION (90s, 10m, 2h, 3d; one "
                   "whose age is unknown is kept); both print what they removed.",
};

static const struct cli_cmd sb_ls = {
        SB_ROW("ls"),
        .parse_argv = ls_argv,
        .run = list_kinds,
        .print = ls_print,
        .synopsis = "[--runner KIND]",
        .summary = "the sandboxes sbx made, of every kind (or KIND)",
        .details = "Every kind that makes sandboxes and is installed here (an engine whose "
                   "program is on $PATH; Docker only when its local daemon takes a "
                   "connection); one that cannot be listed is named on stderr, the others "
                   "are listed, and the exit is 3.",
};

static const struct cli_cmd sb_pause = {
        SB_ROW("pause"),
        .parse_argv = names_argv,
        .run = pause_run,
        .synopsis = "NAME...",
        .summary = "freeze every process of the sandboxes (a session is refused meanwhile)",
};

static const struct cli_cmd sb_resume = {
        SB_ROW("resume"),      .parse_argv = names_argv,           .run = pause_run,
        .synopsis = "NAME...", .summary = "thaw paused sandboxes",
};

static const struct cli_cmd *const sb_cmds[] = {&sb_create, &sb_status, &sb_rm, &sb_ls,
                                                &sb_pause,  &sb_resume, NULL};

const struct cli_cmd cli_sandbox = {
        .name = "sandbox",
        .need = CLI_NONE,
        .sub = sb_cmds,
        .synopsis = "create|status|rm|ls|pause|resume ...",
        .summary = "make, inspect, list, pause and remove sandboxes (no session)",
        .details = "--json may come anywhere after sandbox.",
};

/* ---- sbx image ls | prune [--runner KIND] ---- */

static int image_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	if (argc == 2 && strcmp(argv[0], "--runner") == 0)
		a->kind = argv[1];
	else if (argc != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "image %s takes [--runner KIND]",
		                   c->cmd->name);
	return 0;
}

/* The images of a->kind, or of every kind that keeps them and is installed here (one that
 * fails: as list_kinds). Then prune removes those no container was made from, and keeps in
 * a->im only what it removed. */
static int image_run(struct cli_call *c, struct sbx_err *e)
{
	struct sb_call *a = (struct sb_call *)c;
	for (const struct sbx_runner_class *const *k = sbx_runner_classes; *k != NULL; k++) {
		if ((*k)->images == NULL || (a->kind != NULL && strcmp(a->kind, (*k)->name) != 0) ||
		    (a->kind == NULL && !cli_kind_here((*k)->name)))
			continue;
		struct sbx_image *v;
		size_t nv;
		if (sbx_image_list((*k)->name, &v, &nv, e) != 0) {
			if (a->kind != NULL)
				return -1;
			cli_fprintf(stderr, "sbx: %s: %s\n", (*k)->name, e->msg);
			c->status = EX_UNAVAILABLE;
			continue;
		}
		struct sbx_image *all = realloc(a->im, (a->nim + nv + 1) * sizeof *all);
		if (all == NULL) {
			free(v);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "images");
		}
		if (nv > 0)
			memcpy(all + a->nim, v, nv * sizeof *v);
		free(v);
		a->im = all;
		a->nim += nv;
	}
	if (a->kind != NULL && a->im == NULL) {
		const char *arg;
		if (sbx_runner_class_of(a->kind, &arg, e) == NULL)
			return -1;
	}
	if (strcmp(c->cmd->name, "prune") != 0)
		return 0;
	size_t kept = 0;
	for (size_t i = 0; i < a->nim; i++) {
		if (a->im[i].containers > 0)
			continue;
		if (sbx_image_remove(&a->im[i], e) != 0)
			one_failed(c, e);
		else
			a->im[kept++] = a->im[i];
	}
	a->nim = kept;
	return 0;
}

static void image_print(struct cli_call *c)
{
	struct sb_call *a = (struct sb_call *)c;
	if (c->json)
		sbx_jw_karr_begin(c->w, strcmp(c->cmd->name, "prune") == 0 ? "removed" : "images");
	for (size_t i = 0; i < a->nim; i++) {
		const struct sbx_image *im = &a->im[i];
		if (!c->json) {
			cli_printf("%s:%s id %.12s size %lld containers %d\n", im->kind, im->ref,
			           im->id, (long long)im->size, im->containers);
			continue;
		}
		sbx_jw_obj_begin(c->w);
		sbx_jw_kstr(c->w, "kind", im->kind);
		sbx_jw_kstr(c->w, "ref", im->ref);
		sbx_jw_karr_begin(c->w, "tags");
		for (int t = 0; t < im->ntags; t++)
			sbx_jw_str(c->w, im->tags[t]);
		sbx_jw_arr_end(c->w);
		sbx_jw_kstr(c->w, "id", im->id);
		sbx_jw_kstr(c->w, "tarball_sha256", im->tarball);
		if (im->created_ns > 0)
			sbx_jw_kdouble(c->w, "created", (double)im->created_ns / 1e9);
		sbx_jw_kint(c->w, "size", im->size);
		sbx_jw_kint(c->w, "containers", im->containers);
		sbx_jw_obj_end(c->w);
	}
	if (c->json)
		sbx_jw_arr_end(c->w);
}

static const struct cli_cmd im_ls = {
        SB_ROW("ls"),
        .parse_argv = image_argv,
        .run = image_run,
        .print = image_print,
        .synopsis = "[--runner KIND]",
        .summary = "the sbx-BASE:SHA images sbx imported, of every engine (or KIND)",
};

static const struct cli_cmd im_prune = {
        SB_ROW("prune"),
        .parse_argv = image_argv,
        .run = image_run,
        .print = image_print,
        .synopsis = "[--runner KIND]",
        .summary = "remove those no container was made from; prints them",
        .details = "Never forced: the engine refuses an image a container still uses.",
};

static const struct cli_cmd *const im_cmds[] = {&im_ls, &im_prune, NULL};

const struct cli_cmd cli_image = {
        .name = "image",
        .need = CLI_NONE,
        .sub = im_cmds,
        .synopsis = "ls|prune ...",
        .summary = "the images sbx imported for podman and docker (no session)",
        .details = "--json may come anywhere after image.",
};
