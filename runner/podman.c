/* podman:NAME and docker:NAME: container lifecycle (create, status, rm) and agent injection
 * through the engine's CLI. Every engine call is one short-lived process run with
 * sbx_proc_capture; nothing here talks to a daemon socket. */
#include "podman.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "boot.h"
#include "inspect.h"
#include "inject.h"
#include "procstat.h"
#include "channel.h"
#include "runner.h"

#define ENGINE_TIMEOUT 120.0
#define OUT_CAP (64 * 1024)
#define LIST_CAP (16 * 1024 * 1024) /* a listing: about 4 KiB a container */

static int check_engine(const char *engine, struct sbx_err *e)
{
	if (strcmp(engine, "podman") != 0 && strcmp(engine, "docker") != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown engine '%s' (podman or docker)",
		                   engine);
	return 0;
}

static int check_name(const char *name, struct sbx_err *e)
{
	size_t n = strlen(name);
	if (n == 0 || n > 63 || name[0] == '.' || name[0] == '-')
		return sbx_err_set(e, SBX_EUSAGE, 0, "bad container name '%s'", name);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return sbx_err_set(e, SBX_EUSAGE, 0, "bad container name '%s'", name);
	}
	return 0;
}

/* Runs ENGINE WORDS... in the folder cwd (NULL: ours); *ok is 1 when it exited 0. r must be
 * freed by the caller. */
static int run_engine_in(char *const argv[], const char *cwd, struct sbx_proc_result *r, int *ok,
                         struct sbx_err *e)
{
	if (sbx_proc_capture_in(argv, cwd, ENGINE_TIMEOUT, OUT_CAP, r, e) != 0)
		return -1;
	*ok = r->how == SBX_PROC_EXITED && r->code == 0;
	return 0;
}

static int run_engine(char *const argv[], struct sbx_proc_result *r, int *ok, struct sbx_err *e)
{
	return run_engine_in(argv, NULL, r, ok, e);
}

static int engine_fail(struct sbx_proc_result *r, const char *what, struct sbx_err *e)
{
	char line[200];
	sbx_last_line(r, line, sizeof line);
	sbx_err_set(e, SBX_EUNAVAILABLE, 0, "%s failed: %s", what,
	            line[0]                        ? line
	            : r->how == SBX_PROC_TIMED_OUT ? "timed out"
	                                           : "no output");
	sbx_proc_result_free(r);
	return -1;
}

/* Runs the engine for a step whose output is not needed: 0 when it succeeded, else -1 with the
 * engine's last line ("WHAT failed: ...") or why it could not be run. */
static int run_step_in(char *const argv[], const char *cwd, const char *what, struct sbx_err *e)
{
	struct sbx_proc_result r;
	int ok;
	if (run_engine_in(argv, cwd, &r, &ok, e) != 0)
		return -1;
	if (!ok)
		return engine_fail(&r, what, e);
	sbx_proc_result_free(&r);
	return 0;
}

static int run_step(char *const argv[], const char *what, struct sbx_err *e)
{
	return run_step_in(argv, NULL, what, e);
}

/* Maps an engine's (Go) architecture name or an sbx name to an sbx architecture. */
static const struct sbx_arch *arch_from_engine(const char *goarch)
{
	if (strcmp(goarch, "arm") == 0)
		return sbx_arch_by_name("armv7");
	if (strcmp(goarch, "386") == 0)
		return sbx_arch_by_name("i386");
	const struct sbx_arch *a = sbx_arch_by_name(goarch);
	return a != NULL ? a : sbx_arch_by_machine(goarch);
}

static const char *goarch_of(const char *sbx)
{
	static const char *const map[][2] = {
	        {"x86_64", "amd64"},    {"aarch64", "arm64"},   {"armv7", "arm"},  {"i386", "386"},
	        {"riscv64", "riscv64"}, {"ppc64le", "ppc64le"}, {"s390x", "s390x"}};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(map[i][0], sbx) == 0)
			return map[i][1];
	return NULL;
}

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = '\0';
}

/* The "arch=" line of build/images/NAME/.sbx-image for build/images/NAME.tar. */
static void sidecar_arch(const char *tar, char *out, size_t cap)
{
	out[0] = '\0';
	char path[PATH_MAX];
	size_t n = strlen(tar);
	if (n < 4 || n - 4 + sizeof "/.sbx-image" > sizeof path)
		return;
	memcpy(path, tar, n - 4);
	strcpy(path + n - 4, "/.sbx-image");
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	char line[256];
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "arch=", 5) == 0) {
			trim(line);
			snprintf(out, cap, "%.15s", line + 5);
			break;
		}
	fclose(f);
}

/* ---- create / status / remove ---- */

#define MAXW 96

struct words {
	char *w[MAXW + 1];
	char store[8192];
	size_t n, used;
};

static void w_add(struct words *v, const char *s)
{
	size_t len = strlen(s) + 1;
	if (v->n >= MAXW || v->used + len > sizeof v->store)
		return; /* w_full() reports it */
	memcpy(v->store + v->used, s, len);
	v->w[v->n++] = v->store + v->used;
	v->w[v->n] = NULL;
	v->used += len;
}

static int w_full(const struct words *v)
{
	return v->n >= MAXW;
}

/* podman as a client of a service ($CONTAINER_HOST, $CONTAINER_CONNECTION): the service runs
 * the containers with its own runtime, and the client refuses --runtime. */
static int podman_remote(void)
{
	const char *h = getenv("CONTAINER_HOST"), *c = getenv("CONTAINER_CONNECTION");
	return (h != NULL && h[0] != '\0') || (c != NULL && c[0] != '\0');
}

/* Global flags: podman here runs real containers only with runc and cgroupfs (crun fails on
 * hybrid cgroups); $SBX_PODMAN_FLAGS replaces them. A podman service takes none. */
static int w_engine(struct words *v, const char *engine, int globals, struct sbx_err *e)
{
	v->n = 0;
	v->used = 0;
	v->w[0] = NULL;
	w_add(v, engine);
	if (!globals || strcmp(engine, "podman") != 0)
		return 0;
	const char *env = getenv("SBX_PODMAN_FLAGS");
	if (env == NULL && podman_remote())
		return 0;
	if (env == NULL) {
		w_add(v, "--runtime");
		w_add(v, "runc");
		w_add(v, "--cgroup-manager");
		w_add(v, "cgroupfs");
		return 0;
	}
	char **split = NULL;
	if (env[0] != '\0' && sbx_split_words(env, &split, e) != 0)
		return -1;
	for (char **p = split; p != NULL && *p != NULL; p++) {
		w_add(v, *p);
		free(*p);
	}
	free(split);
	return 0;
}

/* --ulimit no higher than the caller's limits: the engine's defaults are higher than what
 * this machine's hard limits allow, and the container then fails to start. nproc is also
 * capped at 4096 (a sandbox needs no more; here runc refused 65536 while the caller's limit
 * was 96365), nofile at 65536. */
static void w_ulimits(struct words *v)
{
	static const struct {
		int res;
		const char *name;
		unsigned long long cap;
	} lim[] = {{RLIMIT_NOFILE, "nofile", 65536}, {RLIMIT_NPROC, "nproc", 4096}};
	for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
		struct rlimit rl;
		unsigned long long n = lim[i].cap;
		if (getrlimit(lim[i].res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    (unsigned long long)rl.rlim_cur < n)
			n = (unsigned long long)rl.rlim_cur;
		char buf[80];
		snprintf(buf, sizeof buf, "%s=%llu:%llu", lim[i].name, n, n);
		w_add(v, "--ulimit");
		w_add(v, buf);
	}
}

/* A sandbox's limits as the engine's create flags. Memory is memory and swap together
 * (--memory-swap equal to --memory: no swap beyond it). */
static void w_resources(struct words *v, const struct sbx_resources *r)
{
	char buf[64];
	if (r->memory_mib > 0) {
		snprintf(buf, sizeof buf, "%lldm", (long long)r->memory_mib);
		w_add(v, "--memory");
		w_add(v, buf);
		w_add(v, "--memory-swap");
		w_add(v, buf);
	}
	if (r->cpu > 0) {
		snprintf(buf, sizeof buf, "%.3f", r->cpu);
		w_add(v, "--cpus");
		w_add(v, buf);
	}
	if (r->pids > 0) {
		snprintf(buf, sizeof buf, "%lld", (long long)r->pids);
		w_add(v, "--pids-limit");
		w_add(v, buf);
	}
	if (r->disk_gib > 0) {
		snprintf(buf, sizeof buf, "size=%lld",
		         (long long)(r->disk_gib * 1024 * 1024 * 1024 + 0.5));
		w_add(v, "--storage-opt");
		w_add(v, buf);
	}
}

/* The engines' words for a writable-layer size their storage cannot hold (overlay needs xfs
 * with pquota): docker "--storage-opt is supported only for overlay over xfs with 'pquota'
 * mount option", podman "storage option overlay.size ... only supported for backingFS XFS". */
static int storage_refused(const char *line)
{
	return strstr(line, "storage-opt") != NULL || strstr(line, "storage option") != NULL ||
	       strstr(line, "overlay.size") != NULL || strstr(line, "quota") != NULL;
}

/* A limit out of the engine's range ("Range of CPUs is from 0.01 to 2.00", "Minimum memory
 * limit allowed is 6MB"): the caller's to change. */
static int resource_refused(const char *line)
{
	return strstr(line, "Range of CPUs") != NULL || strstr(line, "emory limit") != NULL ||
	       strstr(line, "pids") != NULL || strstr(line, "PidsLimit") != NULL;
}

/* What the engine recorded is what was asked: an engine drops a limit its kernel cannot hold
 * with only a warning (docker: "Memory limited without swap", "CPU CFS quota ... discarded");
 * sbx refuses such a sandbox rather than hand it out unlimited. */
static int resources_held(const char *engine, const char *name, const struct sbx_resources *r,
                          struct sbx_err *e)
{
	if (r->memory_mib <= 0 && r->cpu <= 0 && r->pids <= 0 && r->disk_gib <= 0)
		return 0;
	struct sbx_podman_status st;
	if (sbx_podman_status(engine, name, &st, e) != 0)
		return -1;
	const char *what = NULL;
	if (r->memory_mib > 0 && st.res.memory_mib != r->memory_mib)
		what = "memory_mib";
	else if (r->memory_mib > 0 && st.swap_mib != r->memory_mib)
		what = "memory_mib (swap not limited with it)";
	else if (r->cpu > 0 && (st.res.cpu < r->cpu - 0.0015 || st.res.cpu > r->cpu + 0.0015))
		what = "cpu";
	else if (r->pids > 0 && st.res.pids != r->pids)
		what = "pids";
	else if (r->disk_gib > 0 &&
	         (st.res.disk_gib < r->disk_gib * 0.999 || st.res.disk_gib > r->disk_gib * 1.001))
		what = "disk_gib";
	if (what == NULL)
		return 0;
	return sbx_err_set(e, SBX_EUSAGE, 0, "create %s: %s did not apply %s here", name, engine,
	                   what);
}

/* `ENGINE image inspect --format {{.Architecture}} IMAGE`: 1 with the engine's answer in line,
 * 0 when the engine refused (its result in *r, for the caller to report or free), -1 when it
 * could not be run. */
static int inspect_arch(const char *engine, const char *image, char *line, size_t cap,
                        struct sbx_proc_result *r, struct sbx_err *e)
{
	struct words v;
	int ok;
	if (w_engine(&v, engine, 0, e) != 0)
		return -1;
	w_add(&v, "image");
	w_add(&v, "inspect");
	w_add(&v, "--format");
	w_add(&v, "{{.Architecture}}");
	w_add(&v, image);
	if (run_engine(v.w, r, &ok, e) != 0)
		return -1;
	if (!ok)
		return 0;
	snprintf(line, cap, "%s", r->output);
	sbx_proc_result_free(r);
	trim(line);
	return 1;
}

static int image_arch(const char *engine, const char *image, char *out, size_t cap,
                      struct sbx_err *e)
{
	char line[64];
	struct sbx_proc_result r;
	int found = inspect_arch(engine, image, line, sizeof line, &r, e);
	if (found < 0)
		return -1;
	if (found == 0)
		return engine_fail(&r, "image inspect", e);
	const struct sbx_arch *a = arch_from_engine(line);
	if (a == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "image %s: no agent for architecture '%s'",
		                   image, line);
	snprintf(out, cap, "%s", a->name);
	return 0;
}

static void remove_quiet(const char *engine, const char *name)
{
	struct sbx_err e;
	sbx_podman_remove(engine, name, &e);
}

static int is_absent(const char *line)
{
	return strstr(line, "no such container") != NULL || strstr(line, "No such container") ||
	       strstr(line, "no such object") != NULL || strstr(line, "No such object") != NULL;
}

/* Each line of out that is one container's SBX_INSPECT_CTR_FORMAT line, to fn (the engine's
 * warnings and errors share the output: they are not such lines). */
static void each_ctr(char *out, void (*fn)(void *, const struct sbx_podman_status *), void *ctx)
{
	for (char *line = out, *end; line != NULL && *line != '\0'; line = end) {
		end = strchr(line, '\n');
		if (end != NULL)
			*end++ = '\0';
		struct sbx_podman_status st;
		struct sbx_err e;
		if (sbx_inspect_ctr(line, strlen(line), &st, &e) == 0)
			fn(ctx, &st);
	}
}

struct one_ctr {
	const char *name;
	struct sbx_podman_status *st;
};

static void take_one(void *ctx, const struct sbx_podman_status *st)
{
	struct one_ctr *o = ctx;
	if (strcmp(st->name, o->name) == 0)
		*o->st = *st;
}

int sbx_podman_status(const char *engine, const char *name, struct sbx_podman_status *st,
                      struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (check_engine(engine, e) != 0 || check_name(name, e) != 0)
		return -1;
	struct words v;
	w_engine(&v, engine, 0, e);
	w_add(&v, "inspect");
	w_add(&v, "--type");
	w_add(&v, "container");
	w_add(&v, "--format");
	w_add(&v, SBX_INSPECT_CTR_FORMAT);
	w_add(&v, name);
	struct sbx_proc_result r;
	int ok;
	if (run_engine(v.w, &r, &ok, e) != 0)
		return -1;
	char line[512];
	sbx_last_line(&r, line, sizeof line);
	if (!ok) {
		if (is_absent(line)) {
			sbx_proc_result_free(&r);
			snprintf(st->state, sizeof st->state, "absent");
			return 0;
		}
		return engine_fail(&r, "inspect", e);
	}
	struct one_ctr o = {name, st};
	each_ctr(r.output, take_one, &o);
	sbx_proc_result_free(&r);
	if (!st->exists)
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "%s inspect %s: no description of it in the "
		                   "engine's answer",
		                   engine, name);
	return 0;
}

/* ---- injection hints: $SBX_PODMAN_DIR/ENGINE-NAME holds "ID PATH" ---- */

/* sbx's own folder for the engines: $SBX_PODMAN_DIR, by default /run/sbx/podman. */
static const char *state_dir(void)
{
	const char *dir = getenv("SBX_PODMAN_DIR");
	return dir != NULL && dir[0] != '\0' ? dir : "/run/sbx/podman";
}

static int hint_path(const char *engine, const char *name, char *out, size_t cap)
{
	const char *dir = state_dir();
	return (size_t)snprintf(out, cap, "%s/%s-%s", dir, engine, name) >= cap ? -1 : 0;
}

static void hint_read(const char *engine, const char *name, const char *id, char *out, size_t cap)
{
	out[0] = '\0';
	char p[PATH_MAX], line[512];
	if (hint_path(engine, name, p, sizeof p) != 0)
		return;
	FILE *f = fopen(p, "r");
	if (f == NULL)
		return;
	if (fgets(line, sizeof line, f) != NULL) {
		trim(line);
		char *sp = strchr(line, ' ');
		if (sp != NULL) {
			*sp = '\0';
			if (strcmp(line, id) == 0 && sp[1] == '/')
				snprintf(out, cap, "%s", sp + 1);
		}
	}
	fclose(f);
}

static void mkdirs(char *p)
{
	for (char *s = p + 1; *s != '\0'; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0700);
			*s = '/';
		}
}

/* `ENGINE start`, run in a folder of sbx's own ($SBX_PODMAN_DIR/conmon): podman's conmon, which
 * stays with the container, inherits the folder and creates an empty file "oom" in it each
 * time the container meets its memory limit (conmon 2.1, podman 4.3); in the caller's
 * folder that file would land in the user's work. Without that folder, the caller's. */
static int start_step(char *const argv[], struct sbx_err *e)
{
	char dir[PATH_MAX];
	const char *cwd = NULL;
	if ((size_t)snprintf(dir, sizeof dir, "%s/conmon/", state_dir()) < sizeof dir) {
		mkdirs(dir);
		struct stat st;
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			cwd = dir;
	}
	return run_step_in(argv, cwd, "start", e);
}

/* path's whole content becomes line, atomically (a temporary renamed); best effort: a hint
 * only saves engine calls next time. */
static void hint_file(char *path, const char *line)
{
	char tmp[PATH_MAX + 16];
	mkdirs(path);
	snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	int ok = fputs(line, f) >= 0;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
}

static void hint_write(const char *engine, const char *name, const char *id, const char *path)
{
	char p[PATH_MAX], line[512];
	if (hint_path(engine, name, p, sizeof p) != 0 ||
	    (size_t)snprintf(line, sizeof line, "%s %s\n", id, path) >= sizeof line)
		return;
	hint_file(p, line);
}

int sbx_podman_remove(const char *engine, const char *name, struct sbx_err *e)
{
	if (check_engine(engine, e) != 0 || check_name(name, e) != 0)
		return -1;
	char p[PATH_MAX];
	if (hint_path(engine, name, p, sizeof p) == 0)
		unlink(p);
	struct words v;
	w_engine(&v, engine, 0, e);
	w_add(&v, "rm");
	w_add(&v, "-f");
	if (strcmp(engine, "podman") == 0) {
		w_add(&v, "-t");
		w_add(&v, "0");
	}
	w_add(&v, name);
	struct sbx_proc_result r;
	int ok;
	if (run_engine(v.w, &r, &ok, e) != 0)
		return -1;
	char line[256];
	sbx_last_line(&r, line, sizeof line);
	if (!ok && !is_absent(line))
		return engine_fail(&r, "rm", e);
	sbx_proc_result_free(&r);
	return 0;
}

/* ---- injection ---- */

int sbx_podman_argv(const char *engine, const char *name, char ***argv_template, struct sbx_err *e)
{
	if (check_engine(engine, e) != 0 || check_name(name, e) != 0)
		return -1;
	const char *w[] = {engine, "exec", "-i", "-u", "0", name, "{agent}", "serve", NULL};
	size_t n = sizeof w / sizeof w[0];
	char **out = calloc(n, sizeof *out);
	int ok = out != NULL;
	for (size_t i = 0; ok && w[i] != NULL; i++)
		ok = (out[i] = strdup(w[i])) != NULL;
	if (!ok) {
		for (size_t i = 0; out != NULL && out[i] != NULL; i++)
			free(out[i]);
		free(out);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "runner");
	}
	*argv_template = out;
	return 0;
}

_Static_assert((int)SBX_PODMAN_REUSED == (int)SBX_INJECT_REUSED &&
                       (int)SBX_PODMAN_COPIED == (int)SBX_INJECT_COPIED &&
                       (int)SBX_PODMAN_STREAMED == (int)SBX_INJECT_STREAMED,
               "podman.h's sbx_podman_how mirrors inject.h's sbx_inject_how");

struct copy_ctx {
	const char *engine, *name;
};

/* ENGINE cp: no shell or tar needed in the image. */
static int native_copy(void *ctx, const char *local, const char *dst)
{
	const struct copy_ctx *c = ctx;
	char target[512];
	snprintf(target, sizeof target, "%s:%s", c->name, dst);
	char *argv[] = {(char *)c->engine, "cp", (char *)local, target, NULL};
	struct sbx_proc_result r;
	struct sbx_err e;
	int ok;
	if (run_engine(argv, &r, &ok, &e) != 0)
		return -1;
	sbx_proc_result_free(&r);
	return ok ? 0 : -1;
}

/* ---- the direct socket ---- */

/* The start time of pid (clock ticks since boot); 0 when it is gone. */
static unsigned long long start_time(pid_t pid)
{
	uint64_t t;
	return sbx_proc_stat(pid, &t, NULL, NULL) == 0 ? (unsigned long long)t : 0;
}

static int pid_hint_path(const char *engine, const char *name, char *out, size_t cap)
{
	char p[PATH_MAX];
	if (hint_path(engine, name, p, sizeof p) != 0)
		return -1;
	return (size_t)snprintf(out, cap, "%s.pid", p) >= cap ? -1 : 0;
}

/* The container's PID 1 as remembered, when that process still is the one remembered. */
static pid_t pid_hint_read(const char *engine, const char *name)
{
	char p[PATH_MAX];
	if (pid_hint_path(engine, name, p, sizeof p) != 0)
		return 0;
	FILE *f = fopen(p, "r");
	long pid = 0;
	unsigned long long t = 0;
	int ok = f != NULL && fscanf(f, "%ld %llu", &pid, &t) == 2;
	if (f != NULL)
		fclose(f);
	return ok && pid > 0 && t != 0 && start_time((pid_t)pid) == t ? (pid_t)pid : 0;
}

static void pid_hint_write(const char *engine, const char *name, pid_t pid)
{
	char p[PATH_MAX], line[64];
	unsigned long long t = start_time(pid);
	if (t == 0 || pid_hint_path(engine, name, p, sizeof p) != 0)
		return;
	snprintf(line, sizeof line, "%ld %llu\n", (long)pid, t);
	hint_file(p, line);
}

/* 1 when pid is a process of the container whose id this is: the path of its cgroup (as
 * /proc/PID/cgroup shows it, any controller) names that id, as both engines name their
 * containers' cgroups (cgroupfs ".../docker/ID", ".../libpod-ID"; systemd "docker-ID.scope").
 * A PID an engine elsewhere gave is another machine's: it fails this. */
static int pid_is_container(pid_t pid, const char *id)
{
	char p[64], buf[8192];
	if (strlen(id) != 64)
		return 0;
	snprintf(p, sizeof p, "/proc/%ld/cgroup", (long)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t n = 0;
	ssize_t r;
	while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return strstr(buf, id) != NULL;
}

#define PID_FORMAT "{{.State.Pid}} {{.Id}}"

/* `ENGINE inspect --format PID_FORMAT NAME` started in the background (it runs while the
 * session's exec does); pid_collect reads its answer. */
struct pid_query {
	pid_t proc;
	int fd;
};

static void pid_ask(const char *engine, const char *name, struct pid_query *q)
{
	q->proc = -1;
	q->fd = -1;
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return;
	char *argv[] = {(char *)engine, "inspect",  "--type",     "container",
	                "--format",     PID_FORMAT, (char *)name, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_t at; /* its own process group: a hung engine is killed whole */
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	if (posix_spawnp(&q->proc, engine, &fa, &at, argv, environ) != 0)
		q->proc = -1;
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (q->proc > 0)
		q->fd = p[0];
	else
		close(p[0]);
}

/* Its answer, waiting at most 20 s ($SBX_PODMAN_PID_WAIT, seconds, for tests): the engine
 * may hang; it is then killed (its whole process group) and the session stays on the exec
 * channel. */
static int64_t pid_wait_ns(void)
{
	const char *v = getenv("SBX_PODMAN_PID_WAIT");
	double s = v != NULL ? atof(v) : 0;
	return (int64_t)((s > 0 && s < 3600 ? s : 20.0) * 1e9);
}

/* The PID, only when it is the container's process here (pid_is_container); else 0. */
static pid_t pid_collect(struct pid_query *q)
{
	if (q->proc <= 0)
		return 0;
	char buf[128];
	size_t n = 0;
	int64_t deadline = sbx_now_ns() + pid_wait_ns();
	struct sbx_err e;
	while (n < sizeof buf - 1 && sbx_fd_wait(q->fd, POLLIN, deadline, "inspect", &e) == 0) {
		ssize_t r = read(q->fd, buf + n, sizeof buf - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	close(q->fd);
	int st = 0;
	pid_t w;
	while ((w = waitpid(q->proc, &st, WNOHANG)) == 0 && sbx_now_ns() < deadline) {
		struct timespec t = {0, 2000000};
		nanosleep(&t, NULL);
	}
	if (w == 0) { /* past the deadline */
		kill(-q->proc, SIGKILL);
		while (waitpid(q->proc, &st, 0) < 0 && errno == EINTR)
			;
		return 0;
	}
	char id[80] = "";
	long v = 0;
	if (w != q->proc || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(buf, "%ld %79s", &v, id) != 2 || v <= 1)
		return 0;
	return pid_is_container((pid_t)v, id) ? (pid_t)v : 0;
}

/* A unix:// URL naming a socket of this machine. */
static int local_socket(const char *url)
{
	struct stat st;
	return strncmp(url, "unix://", 7) == 0 && stat(url + 7, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The direct and resident sockets need the engine on this machine: its default socket, or a
 * $DOCKER_HOST / $CONTAINER_HOST that is a unix socket here. Not a remote one (tcp://, ssh://, a
 * named $DOCKER_CONTEXT or $CONTAINER_CONNECTION: sbx does not resolve those), nor with
 * $SBX_DIRECT=0. The PID such an engine gives is still checked to be the container's
 * (pid_is_container): a socket here may forward to an engine elsewhere. */
static int engine_local(const char *engine)
{
	const char *v = getenv("SBX_DIRECT");
	if (v != NULL && strcmp(v, "0") == 0)
		return 0;
	int podman = strcmp(engine, "podman") == 0;
	const char *host = getenv(podman ? "CONTAINER_HOST" : "DOCKER_HOST");
	const char *named = getenv(podman ? "CONTAINER_CONNECTION" : "DOCKER_CONTEXT");
	if (named != NULL && named[0] != '\0' && (podman || strcmp(named, "default") != 0))
		return 0;
	return host == NULL || host[0] == '\0' || local_socket(host);
}

/* A fresh secret for the container, handed to its init's keeper (docs/supervision.md,
 * "Trust"); init binds the keeper socket as it starts, so a moment is allowed for that. */
static int give_secret(const char *engine, const char *name, pid_t pid, struct sbx_err *e)
{
	char id[160];
	uint8_t secret[SBX_SECRET_LEN];
	snprintf(id, sizeof id, "%s:%s", engine, name);
	if (sbx_secret_new(id, secret, e) != 0)
		return -1;
	int64_t end = sbx_now_ns() + 5000000000LL;
	int rc;
	while ((rc = sbx_keeper_setup_at(pid, secret, e)) != 0 && e->cls == SBX_EUNAVAILABLE &&
	       sbx_now_ns() < end) {
		struct timespec t = {0, 2000000};
		nanosleep(&t, NULL);
	}
	memset(secret, 0, sizeof secret);
	if (rc != 0)
		sbx_secret_forget(id, NULL);
	return rc;
}

/* The image of a root filesystem tarball, imported once per content: its reference is
 * sbx-BASENAME:HEX (the first 16 hex digits of the tarball's SHA-256), so a second create
 * from the same bytes finds it with one inspect instead of importing again; an import also
 * points sbx-BASENAME (latest) at it and labels it sbx.tarball=SHA256. arch: filled from the
 * image (found) or the build folder's .sbx-image (imported) when empty. */
static int import_once(const char *engine, const char *tarball, char *arch, size_t acap, char *ref,
                       size_t rcap, struct sbx_err *e)
{
	if (access(tarball, R_OK) != 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "image tarball %s", tarball);
	uint8_t sha[SBX_SHA256_LEN];
	if (sbx_inject_sha256_file(tarball, sha, e) != 0)
		return -1;
	char hex[SBX_SHA256_HEX_LEN], repo[128], label[160];
	sbx_hex(sha, SBX_SHA256_LEN, hex);
	const char *base = strrchr(tarball, '/');
	base = base != NULL ? base + 1 : tarball;
	if (snprintf(repo, sizeof repo, "sbx-%.*s", (int)(strlen(base) - 4), base) >=
	            (int)sizeof repo ||
	    snprintf(ref, rcap, "%s:%.16s", repo, hex) >= (int)rcap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "image name too long");
	struct words v;
	struct sbx_proc_result r;
	char line[64];
	int found = inspect_arch(engine, ref, line, sizeof line, &r, e);
	if (found < 0)
		return -1;
	if (found) {
		const struct sbx_arch *a = arch_from_engine(line);
		if (arch[0] == '\0' && a != NULL)
			snprintf(arch, acap, "%s", a->name);
		return 0;
	}
	sbx_proc_result_free(&r);
	if (arch[0] == '\0')
		sidecar_arch(tarball, arch, acap);
	if (w_engine(&v, engine, 0, e) != 0)
		return -1;
	w_add(&v, "import");
	const char *ga = arch[0] ? goarch_of(arch) : NULL;
	char plat[48];
	if (ga != NULL && strcmp(engine, "podman") == 0) {
		w_add(&v, "--arch");
		w_add(&v, ga);
	} else if (ga != NULL) {
		snprintf(plat, sizeof plat, "linux/%s", ga);
		w_add(&v, "--platform");
		w_add(&v, plat);
	}
	snprintf(label, sizeof label, "LABEL sbx.tarball=%s", hex);
	w_add(&v, "--change");
	w_add(&v, label);
	w_add(&v, tarball);
	w_add(&v, ref);
	if (run_step(v.w, "import", e) != 0)
		return -1;
	w_engine(&v, engine, 0, e);
	w_add(&v, "tag");
	w_add(&v, ref);
	w_add(&v, repo);
	return run_step(v.w, "tag", e);
}

int sbx_podman_create(const char *engine, const char *image, const char *name,
                      const struct sbx_podman_create_opts *o, char *name_out, size_t cap,
                      struct sbx_err *e)
{
	struct sbx_podman_create_opts none = {0};
	if (o == NULL)
		o = &none;
	if (check_engine(engine, e) != 0)
		return -1;
	char gen[32];
	if (name == NULL) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		unsigned x = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 12);
		snprintf(gen, sizeof gen, "sbx-%06x", x & 0xffffff);
		name = gen;
	}
	if (check_name(name, e) != 0)
		return -1;
	char arch[16] = "", tag[128];
	size_t ilen = strlen(image);
	struct words v;
	struct sbx_proc_result r;
	int ok;
	if (o->arch != NULL) {
		const struct sbx_arch *a = arch_from_engine(o->arch);
		if (a == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture '%s'", o->arch);
		snprintf(arch, sizeof arch, "%s", a->name);
	}
	if (ilen > 4 && strcmp(image + ilen - 4, ".tar") == 0) {
		if (import_once(engine, image, arch, sizeof arch, tag, sizeof tag, e) != 0)
			return -1;
		image = tag;
	}
	if (arch[0] == '\0' && image_arch(engine, image, arch, sizeof arch, e) != 0)
		return -1;
	char agent[PATH_MAX];
	if (o->agent != NULL)
		snprintf(agent, sizeof agent, "%s", o->agent);
	else if (sbx_agent_path(o->agent_dir, arch, agent, sizeof agent, e) != 0)
		return -1;

	/* Init is the agent under the name injection looks for: the first session finds it. */
	uint8_t sha[SBX_SHA256_LEN];
	if (sbx_inject_sha256_file(agent, sha, e) != 0)
		return -1;
	char init[1 + SBX_AGENT_NAME_LEN], label[64], label2[64], target[160];
	init[0] = '/';
	sbx_agent_name(sha, init + 1);
	snprintf(label, sizeof label, "sbx.arch=%s", arch);
	snprintf(label2, sizeof label2, "sbx.agent=%s", init);
	if (w_engine(&v, engine, 1, e) != 0)
		return -1;
	w_add(&v, "create");
	w_add(&v, "--name");
	w_add(&v, name);
	w_add(&v, "--network");
	w_add(&v, "none");
	w_add(&v, "--label");
	w_add(&v, label);
	w_add(&v, "--label");
	w_add(&v, label2);
	w_ulimits(&v);
	w_resources(&v, &o->res);
	w_add(&v, "--entrypoint");
	w_add(&v, init);
	for (const char *const *x = o->extra; x != NULL && *x != NULL; x++)
		w_add(&v, *x);
	w_add(&v, image);
	w_add(&v, "init");
	w_add(&v, "--serve");
	if (w_full(&v))
		return sbx_err_set(e, SBX_EUSAGE, 0, "create: too many engine arguments");
	if (run_engine(v.w, &r, &ok, e) != 0)
		return -1;
	if (!ok) {
		char line[200];
		sbx_last_line(&r, line, sizeof line);
		int taken = strstr(line, "already in use") != NULL;
		sbx_proc_result_free(&r);
		if (o->res.disk_gib > 0 && storage_refused(line))
			return sbx_err_set(
			        e, SBX_EUSAGE, 0,
			        "create %s: disk_gib: %s cannot bound the writable layer "
			        "on this machine's storage (%s)",
			        name, engine, line);
		return sbx_err_set(e,
		                   taken || resource_refused(line) ? SBX_EUSAGE : SBX_EUNAVAILABLE,
		                   0, "create %s failed: %s", name, line);
	}
	sbx_proc_result_free(&r);
	if (resources_held(engine, name, &o->res, e) != 0) {
		remove_quiet(engine, name);
		return -1;
	}

	snprintf(target, sizeof target, "%s:%s", name, init);
	w_engine(&v, engine, 0, e);
	w_add(&v, "cp");
	w_add(&v, agent);
	w_add(&v, target);
	if (run_step(v.w, "cp (init)", e) != 0) {
		remove_quiet(engine, name);
		return -1;
	}
	w_engine(&v, engine, 1, e);
	w_add(&v, "start");
	w_add(&v, name);
	if (start_step(v.w, e) != 0) {
		remove_quiet(engine, name);
		return -1;
	}
	/* Its PID remembered now: the first session already goes to the resident agent. And the
	 * sandbox's secret goes to init's keeper before anything else runs there (a remote
	 * engine's container gets it at its first session instead: trust on first use). */
	if (engine_local(engine)) {
		struct pid_query q;
		pid_ask(engine, name, &q);
		pid_t pid = pid_collect(&q);
		if (pid > 0)
			pid_hint_write(engine, name, pid);
		if (pid > 0 && give_secret(engine, name, pid, e) != 0) {
			remove_quiet(engine, name);
			return -1;
		}
	}
	if (name_out != NULL && cap > 0)
		snprintf(name_out, cap, "%s", name);
	return 0;
}

static int open_exec(const char *engine, const char *name, const char *agent_dir, double timeout_s,
                     struct sbx_session **s, struct sbx_podman_inject *info, struct sbx_err *e);

/* The first line of a small file, or "" */
static void first_line(const char *path, char *out, size_t cap)
{
	out[0] = '\0';
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	if (fgets(out, (int)cap, f) == NULL)
		out[0] = '\0';
	fclose(f);
	trim(out);
}

/* 1 when pid's cgroup is frozen or freezing (a paused container): cgroup v1's freezer.state,
 * or v2's cgroup.freeze where the v2 hierarchy is mounted (/sys/fs/cgroup, or
 * /sys/fs/cgroup/unified beside v1). */
static int frozen(pid_t pid)
{
	char p[64], line[1024], file[PATH_MAX], v[64];
	snprintf(p, sizeof p, "/proc/%ld/cgroup", (long)pid);
	FILE *f = fopen(p, "re");
	if (f == NULL)
		return 0;
	int yes = 0;
	while (!yes && fgets(line, sizeof line, f) != NULL) {
		trim(line);
		char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL || strstr(c2 + 1, "..") != NULL)
			continue;
		*c2 = '\0';
		if (strcmp(c1 + 1, "freezer") == 0) {
			snprintf(file, sizeof file, "/sys/fs/cgroup/freezer%s/freezer.state",
			         c2 + 1);
			first_line(file, v, sizeof v);
			yes = strcmp(v, "FROZEN") == 0 || strcmp(v, "FREEZING") == 0;
		} else if (c1 == line + 1 && line[0] == '0' && c1 + 1 == c2) {
			for (int i = 0; i < 2 && !yes; i++) {
				snprintf(file, sizeof file, "/sys/fs/cgroup%s%s/cgroup.freeze",
				         i ? "/unified" : "", c2 + 1);
				first_line(file, v, sizeof v);
				yes = strcmp(v, "1") == 0;
			}
		}
	}
	fclose(f);
	return yes;
}

int sbx_podman_open(const char *engine, const char *name, const char *agent_dir, double timeout_s,
                    int ask_pid, struct sbx_session **s, struct sbx_podman_inject *info,
                    struct sbx_err *e)
{
	struct sbx_podman_inject dummy;
	if (info == NULL)
		info = &dummy;
	memset(info, 0, sizeof *info);
	*s = NULL;
	if (check_engine(engine, e) != 0 || check_name(name, e) != 0)
		return -1;
	int want = engine_local(engine);
	pid_t pid = want ? pid_hint_read(engine, name) : 0;
	/* A paused container's init would take the connection and never answer: said at once. */
	if (pid > 0 && frozen(pid))
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "%s container %s is paused", engine,
		                   name);
	if (pid > 0 && sbx_runner_resident(pid, agent_dir, timeout_s, s) == 0) {
		info->resident = 1;
		snprintf(info->path, sizeof info->path, "(init)");
		return 0;
	}
	struct pid_query q = {-1, -1};
	if (want && pid == 0 && ask_pid)
		pid_ask(engine, name, &q);
	int rc = open_exec(engine, name, agent_dir, timeout_s, s, info, e);
	if (q.proc > 0) {
		pid = pid_collect(&q);
		if (pid > 0 && rc == 0)
			pid_hint_write(engine, name, pid);
	}
	if (rc != 0 || pid <= 0)
		return rc;
	struct sbx_err le;
	if (sbx_session_direct(*s, pid, &le) == 0) {
		info->direct = 1;
		return 0;
	}
	snprintf(info->direct_error, sizeof info->direct_error, "%s", le.msg);
	if (!sbx_session_broken(*s))
		return 0;
	/* Rare: the agent went silent on the direct socket. A new session, on the
	 * exec channel. */
	sbx_session_close(*s);
	*s = NULL;
	return open_exec(engine, name, agent_dir, timeout_s, s, info, e);
}

static int open_exec(const char *engine, const char *name, const char *agent_dir, double timeout_s,
                     struct sbx_session **s, struct sbx_podman_inject *info, struct sbx_err *e)
{
	char *run[] = {(char *)engine, "exec", "-i", "-u", "0", (char *)name, NULL};
	char what[128];
	snprintf(what, sizeof what, "%s container %s", engine, name);
	const char *mode = getenv("SBX_PODMAN_COPY");
	const char *nb = getenv("SBX_NO_BOOT");
	if ((mode == NULL || mode[0] == '\0') && (nb == NULL || strcmp(nb, "1") != 0)) {
		/* One exec: the agent found or delivered and started by the sandbox's
		 * shell. */
		struct sbx_inject_target bt = {.run = run, .what = what};
		struct sbx_inject_result res;
		struct sbx_err be;
		if (sbx_boot_open(&bt, agent_dir, timeout_s, s, &res, &be) == 0) {
			snprintf(info->path, sizeof info->path, "%s", res.path);
			info->how = (enum sbx_podman_how)res.how;
			info->tries = res.tries;
			return 0;
		}
		if (be.cls == SBX_EUSAGE) /* e.g. a machine sbx has no agent for */
			return sbx_err_set(e, be.cls, be.errnum, "%s: %s", what, be.msg);
	}
	struct sbx_podman_status st;
	if (sbx_podman_status(engine, name, &st, e) != 0)
		return -1;
	if (!st.exists)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "%s container %s is absent", engine,
		                   name);
	if (strcmp(st.state, "running") != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "%s container %s is %s", engine, name,
		                   st.state);
	char arch[16];
	if (st.arch[0] != '\0') {
		const struct sbx_arch *a = arch_from_engine(st.arch);
		if (a == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "container %s: unknown arch label '%s'", name, st.arch);
		snprintf(arch, sizeof arch, "%s", a->name);
	} else if (image_arch(engine, st.image, arch, sizeof arch, e) != 0) {
		return -1;
	}
	char local[PATH_MAX];
	if (sbx_agent_path(agent_dir, arch, local, sizeof local, e) != 0)
		return -1;
	char **tmpl;
	if (sbx_podman_argv(engine, name, &tmpl, e) != 0)
		return -1;
	char hint[256];
	hint_read(engine, name, st.id, hint, sizeof hint);
	if (hint[0] == '\0')
		snprintf(hint, sizeof hint, "%s", st.agent);
	struct copy_ctx cc = {engine, name};
	struct sbx_inject_target t = {
	        .tmpl = tmpl,
	        .run = run,
	        .copy = mode != NULL && strcmp(mode, "stream") == 0 ? NULL : native_copy,
	        .copy_ctx = &cc,
	        .first = hint,
	        .no_guess = hint[0] == '\0',
	        .what = what,
	};
	struct sbx_inject_result res;
	int rc = sbx_inject_open(&t, local, timeout_s, s, &res, e);
	if (rc == 0) {
		snprintf(info->path, sizeof info->path, "%s", res.path);
		info->how = (enum sbx_podman_how)res.how;
		info->tries = res.tries;
		if (res.how != SBX_INJECT_REUSED)
			hint_write(engine, name, st.id, res.path);
	}
	for (char **p = tmpl; *p != NULL; p++)
		free(*p);
	free(tmpl);
	return rc;
}

int sbx_podman_pause(const char *engine, const char *name, int pause, struct sbx_err *e)
{
	if (check_engine(engine, e) != 0 || check_name(name, e) != 0)
		return -1;
	struct words v;
	w_engine(&v, engine, 0, e);
	w_add(&v, pause ? "pause" : "unpause");
	w_add(&v, name);
	struct sbx_proc_result r;
	int ok;
	/* cgroup v1's freezer can fail a freeze while a task is mid-fork or in the kernel ("unable
	 * to freeze" from runc, which has thawed it again): a later try usually freezes. Three
	 * tries, 0.1 s and 0.3 s apart; any other failure is reported at once. */
	for (int attempt = 0;; attempt++) {
		if (run_engine(v.w, &r, &ok, e) != 0)
			return -1;
		if (ok || !pause || attempt == 2 || r.output == NULL ||
		    strstr(r.output, "unable to freeze") == NULL)
			break;
		sbx_proc_result_free(&r);
		struct timespec t = {0, attempt == 0 ? 100000000L : 300000000L};
		nanosleep(&t, NULL);
	}
	if (ok) {
		sbx_proc_result_free(&r);
		return 0;
	}
	/* Already so, absent, stopped: the container's state says which. */
	struct sbx_podman_status st;
	struct sbx_err se;
	if (sbx_podman_status(engine, name, &st, &se) == 0) {
		if (st.exists && (pause ? st.paused : strcmp(st.state, "running") == 0)) {
			sbx_proc_result_free(&r);
			return 0;
		}
		if (!st.exists || (strcmp(st.state, "running") != 0 && !st.paused)) {
			sbx_proc_result_free(&r);
			return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "%s container %s is %s", engine,
			                   name, st.exists ? st.state : "absent");
		}
	}
	return engine_fail(&r, pause ? "pause" : "unpause", e);
}

/* ---- the podman and docker rows of the runner table (sbx_runner.h): one set of methods,
 * the engine being the row's name ---- */

static int engine_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	return arg == NULL ? sbx_err_set(e, SBX_EUSAGE, 0, "%s: needs a container name", self->name)
	                   : check_name(arg, e);
}

static int engine_open(const struct sbx_runner_class *self, const char *arg,
                       const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	if (o->agent == NULL)
		return sbx_podman_open(self->name, arg, o->agent_dir,
		                       o->timeout_s > 0 ? o->timeout_s : 30, !o->brief, s, NULL, e);
	/* --agent: that path inside the container, as it is. */
	char **tmpl;
	if (sbx_podman_argv(self->name, arg, &tmpl, e) != 0)
		return -1;
	int rc = sbx_runner_open_template((const char *const *)tmpl, o->agent, o, s, e);
	sbx_words_free(tmpl);
	return rc;
}

static int engine_create(const struct sbx_runner_class *self, const struct sbx_create_opts *o,
                         char *arg_out, size_t cap, struct sbx_err *e)
{
	if (o->image == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s: create needs an image or a .tar",
		                   self->name);
	struct sbx_podman_create_opts po = {.arch = o->arch,
	                                    .agent_dir = o->agent_dir,
	                                    .agent = o->agent,
	                                    .extra = o->engine_args,
	                                    .res = o->resources};
	return sbx_podman_create(self->name, o->image, o->name, &po, arg_out, cap, e);
}

/* A container's description as the runner table's. */
static void to_sandbox(const struct sbx_runner_class *self, const char *name,
                       const struct sbx_podman_status *st, struct sbx_sandbox *sb)
{
	memset(sb, 0, sizeof *sb);
	snprintf(sb->spec, sizeof sb->spec, "%s:%s", self->name, name);
	sb->kind = self->name;
	snprintf(sb->state, sizeof sb->state, "%s", st->exists ? st->state : "absent");
	sb->running = st->exists && strcmp(st->state, "running") == 0;
	sb->paused = st->paused;
	sb->pid = sb->running ? pid_hint_read(self->name, name) : 0;
	sb->created_ns = st->created_ns;
	snprintf(sb->image, sizeof sb->image, "%s", st->image);
	const struct sbx_arch *a = st->arch[0] != '\0' ? arch_from_engine(st->arch) : NULL;
	snprintf(sb->arch, sizeof sb->arch, "%s", a != NULL ? a->name : st->arch);
	snprintf(sb->id, sizeof sb->id, "%s", st->id);
	sb->resources = st->res;
}

static int engine_status(const struct sbx_runner_class *self, const char *arg,
                         struct sbx_sandbox *sb, struct sbx_err *e)
{
	struct sbx_podman_status st;
	if (sbx_podman_status(self->name, arg, &st, e) != 0)
		return -1;
	to_sandbox(self, arg, &st, sb);
	return 0;
}

static int engine_remove(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	return sbx_podman_remove(self->name, arg, e);
}

static int engine_pause(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	return sbx_podman_pause(self->name, arg, 1, e);
}

static int engine_resume(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	return sbx_podman_pause(self->name, arg, 0, e);
}

/* Runs ENGINE WORDS... for a listing: the output's cap is larger, an engine that cannot be
 * run or does not answer is SBX_EUNAVAILABLE. *r is the caller's to free on success. */
static int run_listing(char *const argv[], const char *what, struct sbx_proc_result *r,
                       struct sbx_err *e)
{
	if (sbx_proc_capture(argv, ENGINE_TIMEOUT, LIST_CAP, r, e) != 0)
		return -1;
	if (r->how != SBX_PROC_EXITED || r->code != 0)
		return engine_fail(r, what, e);
	return 0;
}

/* The names of the lines of out that are container names (warnings are not). */
static int names_of(char *out, char ***names, size_t *k, struct sbx_err *e)
{
	*names = NULL;
	*k = 0;
	for (char *line = out, *end; line != NULL && *line != '\0'; line = end) {
		end = strchr(line, '\n');
		if (end != NULL)
			*end++ = '\0';
		if (check_name(line, NULL) != 0)
			continue;
		char **g = realloc(*names, (*k + 1) * sizeof *g);
		if (g == NULL || (g[*k] = strdup(line)) == NULL) {
			free(g != NULL ? g : *names);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "list");
		}
		*names = g;
		(*k)++;
	}
	return 0;
}

struct many {
	const struct sbx_runner_class *self;
	struct sbx_sandbox *out;
	size_t n, cap;
};

static void take_many(void *ctx, const struct sbx_podman_status *st)
{
	struct many *m = ctx;
	if (m->n < m->cap && st->made)
		to_sandbox(m->self, st->name, st, &m->out[m->n++]);
}

/* The containers sbx made: those with its sbx.agent label, described by one inspect of many
 * names at a time (the engine refuses the whole call when one of them went away meanwhile:
 * then one at a time). */
static int engine_list(const struct sbx_runner_class *self, struct sbx_sandbox **out, size_t *n,
                       struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	struct words v;
	w_engine(&v, self->name, 0, e);
	w_add(&v, "ps");
	w_add(&v, "-a");
	w_add(&v, "--filter");
	w_add(&v, "label=sbx.agent");
	w_add(&v, "--format");
	w_add(&v, "{{.Names}}");
	struct sbx_proc_result r;
	if (run_listing(v.w, "ps", &r, e) != 0)
		return -1;
	char **names;
	size_t k;
	int rc = names_of(r.output, &names, &k, e);
	sbx_proc_result_free(&r);
	if (rc != 0)
		return -1;
	struct many m = {self, calloc(k ? k : 1, sizeof *m.out), 0, k};
	if (m.out == NULL)
		rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "list");
	for (size_t i = 0; rc == 0 && i < k;) {
		w_engine(&v, self->name, 0, e);
		w_add(&v, "inspect");
		w_add(&v, "--type");
		w_add(&v, "container");
		w_add(&v, "--format");
		w_add(&v, SBX_INSPECT_CTR_FORMAT);
		size_t first = i;
		for (; i < k && v.n < MAXW - 1 && v.used + strlen(names[i]) + 1 < sizeof v.store;
		     i++)
			w_add(&v, names[i]);
		int ok;
		if (sbx_proc_capture(v.w, ENGINE_TIMEOUT, LIST_CAP, &r, e) != 0) {
			rc = -1;
			break;
		}
		ok = r.how == SBX_PROC_EXITED && r.code == 0;
		if (ok) {
			each_ctr(r.output, take_many, &m);
		} else {
			for (size_t j = first; j < i; j++) {
				struct sbx_podman_status st;
				struct sbx_err ignored; /* gone while listed: left out */
				if (sbx_podman_status(self->name, names[j], &st, &ignored) == 0 &&
				    st.exists)
					take_many(&m, &st);
			}
		}
		sbx_proc_result_free(&r);
	}
	for (size_t i = 0; i < k; i++)
		free(names[i]);
	free(names);
	if (rc != 0) {
		free(m.out);
		return -1;
	}
	*out = m.out;
	*n = m.n;
	return 0;
}

/* ---- images sbx imported (import_once: the sbx.tarball label) ---- */

struct img_list {
	struct sbx_image *out;
	size_t n, cap;
	const char *kind;
};

/* The images with the sbx.tarball label, and how many containers (any state, made by
 * anyone) were made from each. */
static int engine_images(const struct sbx_runner_class *self, struct sbx_image **out, size_t *n,
                         struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	struct words v;
	struct sbx_proc_result r;
	w_engine(&v, self->name, 0, e);
	w_add(&v, "images");
	w_add(&v, "-q");
	w_add(&v, "--no-trunc");
	w_add(&v, "--filter");
	w_add(&v, "label=sbx.tarball");
	if (run_listing(v.w, "images", &r, e) != 0)
		return -1;
	/* One inspect of them all: the ids, deduplicated (an image with two tags is listed
	 * twice).
	 */
	w_engine(&v, self->name, 0, e);
	w_add(&v, "image");
	w_add(&v, "inspect");
	w_add(&v, "--format");
	w_add(&v, SBX_INSPECT_IMG_FORMAT);
	size_t fixed = v.n;
	char seen[MAXW][72];
	size_t nseen = 0;
	for (char *line = r.output, *end; line != NULL && *line != '\0'; line = end) {
		end = strchr(line, '\n');
		if (end != NULL)
			*end++ = '\0';
		trim(line);
		char id[72];
		size_t len = strlen(line);
		const char *hex = len == 71 && strncmp(line, "sha256:", 7) == 0 ? line + 7 : line;
		if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
			continue;
		memcpy(id, hex, 65);
		int dup = 0;
		for (size_t i = 0; i < nseen && !dup; i++)
			dup = strcmp(seen[i], id) == 0;
		if (dup || nseen >= MAXW - fixed - 1)
			continue;
		memcpy(seen[nseen++], id, 65);
		w_add(&v, id);
	}
	sbx_proc_result_free(&r);
	if (nseen == 0) {
		*out = calloc(1, sizeof **out);
		return *out != NULL ? 0 : sbx_err_set(e, SBX_EUSAGE, ENOMEM, "images");
	}
	if (run_listing(v.w, "image inspect", &r, e) != 0)
		return -1;
	struct sbx_image *im = calloc(nseen, sizeof *im);
	if (im == NULL) {
		sbx_proc_result_free(&r);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "images");
	}
	size_t k = 0;
	for (char *line = r.output, *end; line != NULL && *line != '\0' && k < nseen; line = end) {
		end = strchr(line, '\n');
		if (end != NULL)
			*end++ = '\0';
		struct sbx_podman_image pi;
		struct sbx_err pe;
		if (sbx_inspect_img(line, strlen(line), &pi, &pe) != 0 || pi.tarball[0] == '\0')
			continue;
		struct sbx_image *x = &im[k++];
		x->kind = self->name;
		snprintf(x->id, sizeof x->id, "%s", pi.id);
		x->created_ns = pi.created_ns;
		x->size = pi.size;
		snprintf(x->tarball, sizeof x->tarball, "%s", pi.tarball);
		/* The reference a create uses (sbx-BASE:SHA16) first, then the others. */
		for (int t = 0; t < pi.ntags; t++) {
			const char *colon = strrchr(pi.tags[t], ':');
			int own = colon != NULL && strncmp(colon + 1, pi.tarball, 16) == 0 &&
			          colon[17] == '\0';
			if (own || x->ref[0] == '\0')
				snprintf(x->ref, sizeof x->ref, "%s", pi.tags[t]);
			if (!own && x->ntags < 4)
				snprintf(x->tags[x->ntags++], sizeof x->tags[0], "%s", pi.tags[t]);
		}
	}
	sbx_proc_result_free(&r);
	/* Containers made from each: every container's image id, one inspect. */
	w_engine(&v, self->name, 0, e);
	w_add(&v, "ps");
	w_add(&v, "-a");
	w_add(&v, "-q");
	w_add(&v, "--no-trunc");
	int rc = run_listing(v.w, "ps", &r, e);
	char **ids = NULL;
	size_t nids = 0;
	if (rc == 0) {
		for (char *line = r.output, *end; line != NULL && *line != '\0'; line = end) {
			end = strchr(line, '\n');
			if (end != NULL)
				*end++ = '\0';
			if (strlen(line) != 64 || strspn(line, "0123456789abcdef") != 64)
				continue;
			char **g = realloc(ids, (nids + 1) * sizeof *g);
			if (g == NULL || (g[nids] = strdup(line)) == NULL) {
				free(g != NULL ? g : ids);
				ids = NULL;
				rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "images");
				break;
			}
			ids = g;
			nids++;
		}
		sbx_proc_result_free(&r);
	}
	for (size_t i = 0; rc == 0 && i < nids;) {
		w_engine(&v, self->name, 0, e);
		w_add(&v, "inspect");
		w_add(&v, "--type");
		w_add(&v, "container");
		w_add(&v, "--format");
		w_add(&v, "{{.Image}}");
		for (; i < nids && v.n < MAXW - 1; i++)
			w_add(&v, ids[i]);
		if (sbx_proc_capture(v.w, ENGINE_TIMEOUT, LIST_CAP, &r, e) != 0) {
			rc = -1;
			break;
		}
		for (char *line = r.output, *end; line != NULL && *line != '\0'; line = end) {
			end = strchr(line, '\n');
			if (end != NULL)
				*end++ = '\0';
			trim(line);
			const char *hex = strncmp(line, "sha256:", 7) == 0 ? line + 7 : line;
			for (size_t j = 0; j < k; j++)
				if (strcmp(im[j].id, hex) == 0)
					im[j].containers++;
		}
		sbx_proc_result_free(&r);
	}
	for (size_t i = 0; i < nids; i++)
		free(ids[i]);
	free(ids);
	if (rc != 0) {
		free(im);
		return -1;
	}
	*out = im;
	*n = k;
	return 0;
}

/* `ENGINE rmi` of the image's tags, never forced: an engine refuses to remove an image a
 * container uses (podman's -f would remove those containers too). */
static int engine_image_remove(const struct sbx_runner_class *self, const struct sbx_image *im,
                               struct sbx_err *e)
{
	struct words v;
	w_engine(&v, self->name, 0, e);
	w_add(&v, "rmi");
	w_add(&v, im->ref[0] != '\0' ? im->ref : im->id);
	for (int t = 0; t < im->ntags; t++)
		w_add(&v, im->tags[t]);
	return run_step(v.w, "rmi", e);
}

#define ENGINE_ROW(NAME)                                                                           \
	{                                                                                          \
		.name = NAME, .arg = "NAME", .boundary = 1, .parse = engine_parse,                 \
		.open = engine_open, .create = engine_create, .status = engine_status,             \
		.remove = engine_remove, .list = engine_list, .pause = engine_pause,               \
		.resume = engine_resume, .images = engine_images,                                  \
		.image_remove = engine_image_remove,                                               \
	}

const struct sbx_runner_class sbx_runner_podman = ENGINE_ROW("podman");
const struct sbx_runner_class sbx_runner_docker = ENGINE_ROW("docker");
