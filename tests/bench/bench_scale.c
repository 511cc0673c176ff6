/* make bench-scale: many ns sandboxes from one host thread, against the ways without it, in
 * one run, side by side (issue "libsbx drives a thousand sandboxes"). N sandboxes (default
 * 1000, $N) of the BusyBox image: created one after another; a session opened to each and held
 * by this one thread (host memory per session: this process's PSS growth; memory per sandbox:
 * the PSS of all its processes, its init and its serve inside and the channel's outside);
 * one kind probe on every session at once, driven by sbx_loop (median of $ROUNDS rounds), against
 * the same round with a thread per session on the blocking API and with an `sbx session`
 * process per sandbox (each reading one JSON line); then on one session a kind probe every
 * millisecond during a 1 GiB upload (p50/p99). Every target is printed with met or not met. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "sbx.h"
#include "sbx_runner.h"

static void die(const char *what, const struct sbx_err *e)
{
	fprintf(stderr, "bench_scale: %s: %s\n", what, e != NULL ? e->msg : strerror(errno));
	exit(1);
}

/* PSS of a process in KiB (smaps_rollup), 0 when it is gone. */
static long pss_kib(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof p, "/proc/%d/smaps_rollup", (int)pid);
	FILE *f = fopen(p, "r");
	long v = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "Pss: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static pid_t ppid_of(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *r = strrchr(buf, ')');
	int pp = 0;
	if (r == NULL || sscanf(r + 2, "%*c %d", &pp) != 1)
		return 0;
	return pp;
}

/* The PSS (KiB) of every process of the sandboxes whose inits are given (their pid
 * namespaces) and of this process's children and their descendants outside (the channels). */
static long sandboxes_pss(const pid_t *inits, int n)
{
	char(*nss)[64] = calloc((size_t)n, sizeof *nss);
	for (int i = 0; i < n; i++)
		fixture_pidns(inits[i], nss[i], sizeof nss[i]);
	char self_ns[64] = "";
	fixture_pidns(getpid(), self_ns, sizeof self_ns);
	long total = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t me = getpid();
	while ((de = readdir(d)) != NULL) {
		pid_t p = (pid_t)atoi(de->d_name);
		if (p <= 0 || p == me)
			continue;
		char ns[64];
		if (fixture_pidns(p, ns, sizeof ns) != 0)
			continue;
		int mine = 0;
		if (strcmp(ns, self_ns) == 0) {
			/* Outside: a descendant of this process (a channel, its nsenter). */
			for (pid_t q = ppid_of(p); q > 1 && !mine; q = ppid_of(q))
				mine = q == me;
		} else {
			for (int i = 0; i < n && !mine; i++)
				mine = strcmp(ns, nss[i]) == 0;
		}
		if (mine)
			total += pss_kib(p);
	}
	closedir(d);
	free(nss);
	return total;
}

static int cmp_d(const void *a, const void *b)
{
	return fixture_cmp_doubles(a, b);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return v[n / 2];
}

/* This thread's CPU seconds so far (user and system). */
static double thread_cpu(void)
{
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* One kind probe on every session at once through one loop: the round's seconds, and in *cpu
 * the CPU seconds this thread spent on it. */
static double loop_round(struct sbx_loop *l, struct sbx_session **ss, int n, double *cpu)
{
	if (n < 1)
		return 0;
	struct sbx_err e;
	double c0 = thread_cpu();
	double t0 = fixture_now();
	struct sbx_op **ops = calloc((size_t)n, sizeof *ops);
	for (int i = 0; i < n; i++)
		if ((ops[i] = sbx_kind_async(ss[i], "/tmp", &e)) == NULL)
			die("kind", &e);
	int done = 0;
	while (done < n) {
		if (sbx_loop_run_once(l, 1000) < 0)
			die("loop", NULL);
		while (sbx_loop_next_done(l) != NULL)
			done++;
	}
	double t = fixture_now() - t0;
	*cpu = thread_cpu() - c0;
	for (int i = 0; i < n; i++) {
		enum sbx_kind k;
		if (sbx_kind_result(ops[i], &k, &e) != 0 || k != SBX_KIND_DIR)
			die("kind result", &e);
		sbx_op_free(ops[i]);
	}
	free(ops);
	return t;
}

struct th {
	struct sbx_session *s;
	pthread_barrier_t *go;
	double end;
	int rc;
};

static void *thread_probe(void *arg)
{
	struct th *t = arg;
	struct sbx_err e;
	enum sbx_kind k;
	pthread_barrier_wait(t->go);
	t->rc = sbx_kind(t->s, "/tmp", &k, &e);
	t->end = fixture_now();
	return NULL;
}

/* The same round with a thread per session on the blocking calls. */
static double thread_round(struct sbx_session **ss, int n)
{
	if (n < 1)
		return 0;
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, (unsigned)n + 1);
	struct th *t = calloc((size_t)n, sizeof *t);
	pthread_t *id = calloc((size_t)n, sizeof *id);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 * 1024);
	for (int i = 0; i < n; i++) {
		t[i].s = ss[i];
		t[i].go = &go;
		if (pthread_create(&id[i], &at, thread_probe, &t[i]) != 0)
			die("pthread_create", NULL);
	}
	double t0 = fixture_now();
	pthread_barrier_wait(&go);
	double last = t0;
	for (int i = 0; i < n; i++) {
		pthread_join(id[i], NULL);
		if (t[i].rc != 0)
			die("threaded kind", NULL);
		if (t[i].end > last)
			last = t[i].end;
	}
	pthread_barrier_destroy(&go);
	free(t);
	free(id);
	return last - t0;
}

/* The same round with an `sbx session` process per sandbox: a JSON line to each, its reply
 * read from each. */
static double process_round(int *in, int *out, int n)
{
	if (n < 1)
		return 0;
	const char line[] = "{\"op\":\"kind\",\"path\":\"/tmp\"}\n";
	double t0 = fixture_now();
	for (int i = 0; i < n; i++)
		if (write(in[i], line, sizeof line - 1) != (ssize_t)sizeof line - 1)
			die("write to sbx session", NULL);
	struct pollfd *p = calloc((size_t)n, sizeof *p);
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){out[i], POLLIN, 0};
	int left = n;
	while (left > 0) {
		if (poll(p, (nfds_t)n, 10000) <= 0)
			die("no answer from the sbx session processes", NULL);
		for (int i = 0; i < n; i++)
			if (p[i].fd >= 0 && p[i].revents != 0) {
				char buf[512];
				ssize_t r = read(p[i].fd, buf, sizeof buf);
				if (r <= 0 || memchr(buf, '\n', (size_t)r) == NULL)
					die("sbx session reply", NULL);
				if (strstr(buf, "\"dir\"") == NULL)
					die("sbx session reply is not dir", NULL);
				p[i].fd = -1;
				left--;
			}
	}
	free(p);
	return fixture_now() - t0;
}

static const char *verdict(int met)
{
	return met ? "met" : "not met";
}

int main(void)
{
	int n = getenv("N") != NULL ? atoi(getenv("N")) : 1000;
	int rounds = getenv("ROUNDS") != NULL ? atoi(getenv("ROUNDS")) : 5;
	if (n < 1 || n > 100000 || rounds < 1 || rounds > 1000) {
		fprintf(stderr, "bench_scale: N in 1..100000, ROUNDS in 1..1000\n");
		return 2;
	}
	const char *sbx = getenv("SBX");
	char img[PATH_MAX + 32], agents[PATH_MAX];
	struct sbx_err e;
	if (fixture_agent_dir(agents, sizeof agents, &e) != 0)
		die("agents", &e);
	snprintf(img, sizeof img, "%s/../images/busybox-x86_64", agents);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);

	/* Create. */
	char(*spec)[192] = calloc((size_t)n, sizeof *spec);
	pid_t *inits = calloc((size_t)n, sizeof *inits);
	struct sbx_create_opts co = {.image = img, .agent_dir = agents};
	double t0 = fixture_now();
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "scale%d-%d", (int)getpid() % 10000, i);
		co.name = name;
		if (sbx_sandbox_create("ns", &co, spec[i], sizeof spec[i], &e) != 0)
			die("create", &e);
	}
	double create_s = fixture_now() - t0;
	for (int i = 0; i < n; i++) {
		struct sbx_sandbox sb;
		if (sbx_sandbox_status(spec[i], &sb, &e) != 0 || sb.pid <= 0)
			die("status", &e);
		inits[i] = (pid_t)sb.pid;
	}
	long pss_made = sandboxes_pss(inits, n);

	/* Open and hold. */
	long self0 = pss_kib(getpid());
	struct sbx_session **ss = calloc((size_t)n, sizeof *ss);
	struct sbx_open_opts oo = {.agent_dir = agents};
	struct sbx_loop *l = sbx_loop_new(&e);
	t0 = fixture_now();
	for (int i = 0; i < n; i++) {
		if (sbx_open(spec[i], &oo, &ss[i], &e) != 0)
			die("open", &e);
		if (sbx_loop_add(l, ss[i], &e) != 0)
			die("loop", &e);
	}
	double open_s = fixture_now() - t0;
	double cpu;
	(void)loop_round(l, ss, n, &cpu); /* warm: each session's first request */
	long self1 = pss_kib(getpid());
	long pss_open = sandboxes_pss(inits, n);

	double *r = calloc((size_t)rounds, sizeof *r), *rc = calloc((size_t)rounds, sizeof *rc);
	for (int k = 0; k < rounds; k++)
		r[k] = loop_round(l, ss, n, &rc[k]);
	double loop_ms = median(r, rounds) * 1000, loop_cpu_ms = median(rc, rounds) * 1000;
	free(rc);
	for (int k = 0; k < rounds; k++)
		r[k] = thread_round(ss, n);
	double thread_ms = median(r, rounds) * 1000;

	/* A probe every millisecond during a 1 GiB upload, on session 0. */
	char src[64];
	snprintf(src, sizeof src, "/dev/shm/sbx-scale-%d", (int)getpid());
	mkdir(src, 0755);
	for (int i = 0; i < 8; i++) {
		char cmd[160];
		snprintf(cmd, sizeof cmd, "head -c 134217728 /dev/zero > %s/f%d", src, i);
		if (system(cmd) != 0)
			die("data", NULL);
	}
	struct sbx_op *up = sbx_upload_dir_async(ss[0], src, "/tmp/up", NULL, &e);
	if (up == NULL)
		die("upload", &e);
	double lat[20000];
	int nl = 0;
	while (!sbx_op_done(up) && nl < 20000) {
		double a = fixture_now();
		struct sbx_op *k = sbx_kind_async(ss[0], "/tmp", &e);
		if (k == NULL)
			die("kind during upload", &e);
		while (!sbx_op_done(k))
			sbx_loop_run_once(l, 100);
		lat[nl++] = (fixture_now() - a) * 1000;
		sbx_op_free(k);
		while (sbx_loop_next_done(l) != NULL)
			;
		double until = a + 0.001;
		while (fixture_now() < until)
			sbx_loop_run_once(l, 1);
	}
	struct sbx_xfer_stats xs;
	if (sbx_op_wait(up, &e) != 0 || sbx_upload_result(up, &xs, &e) != 0)
		die("upload", &e);
	sbx_op_free(up);
	qsort(lat, (size_t)nl, sizeof *lat, cmp_d);
	double p50 = nl ? lat[nl / 2] : 0, p99 = nl ? lat[(nl * 99) / 100] : 0;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", src);
	if (system(cmd) != 0)
		die("rm", NULL);

	/* Today's way: an `sbx session` process per sandbox. */
	double proc_ms = -1;
	long pss_proc = 0;
	if (sbx != NULL) {
		int *in = calloc((size_t)n, sizeof *in), *out = calloc((size_t)n, sizeof *out);
		pid_t *pids = calloc((size_t)n, sizeof *pids);
		for (int i = 0; i < n; i++) {
			int a[2], b[2];
			if (pipe2(a, O_CLOEXEC) != 0 || pipe2(b, O_CLOEXEC) != 0)
				die("pipe", NULL);
			pids[i] = fork();
			if (pids[i] == 0) {
				dup2(a[0], 0);
				dup2(b[1], 1);
				execl(sbx, sbx, "--runner", spec[i], "session", (char *)NULL);
				_exit(127);
			}
			close(a[0]);
			close(b[1]);
			in[i] = a[1];
			out[i] = b[0];
		}
		(void)process_round(in, out, n); /* warm: each process opens its session */
		pss_proc = sandboxes_pss(inits, n);
		for (int k = 0; k < rounds; k++)
			r[k] = process_round(in, out, n);
		proc_ms = median(r, rounds) * 1000;
		for (int i = 0; i < n; i++) {
			close(in[i]);
			close(out[i]);
		}
		for (int i = 0; i < n; i++)
			waitpid(pids[i], NULL, 0);
		free(in);
		free(out);
		free(pids);
	}

	for (int i = 0; i < n; i++) {
		sbx_loop_remove(l, ss[i]);
		sbx_session_close(ss[i]);
	}
	sbx_loop_free(l);
	for (int i = 0; i < n; i++)
		if (sbx_sandbox_remove(spec[i], &e) != 0)
			die("remove", &e);

	double per_sbx_kib = (double)pss_open / n;
	double host_kib = (double)(self1 - self0) / n;
	printf("%d ns sandboxes (BusyBox), one host thread, %d rounds (median)\n\n", n, rounds);
	printf("| what | figure | target |\n|---|---:|---|\n");
	printf("| create, one after another | %.0f /s (%.2f ms each) | >= 500/s: %s |\n",
	       n / create_s, create_s * 1000 / n, verdict(n / create_s >= 500));
	printf("| open a session to each | %.2f ms each | |\n", open_s * 1000 / n);
	printf("| one kind probe on every session at once (sbx_loop) | %.1f ms | <= 15 ms: %s |\n",
	       loop_ms, verdict(loop_ms <= 15));
	printf("| the loop thread's CPU in that round (user and system) | %.1f ms | |\n",
	       loop_cpu_ms);
	printf("| the same, a thread per session (blocking calls) | %.1f ms (x%.2f of the loop) | "
	       "|\n",
	       thread_ms, thread_ms / loop_ms);
	if (proc_ms >= 0)
		printf("| the same, an `sbx session` process per sandbox | %.1f ms (x%.2f of the "
		       "loop) "
		       "| |\n",
		       proc_ms, proc_ms / loop_ms);
	printf("| memory per sandbox, made (PSS of its processes) | %.0f KiB | |\n",
	       (double)pss_made / n);
	printf("| memory per sandbox with its session open (init, serve, channel) | %.0f KiB | "
	       "<= 256 KiB: %s |\n",
	       per_sbx_kib, verdict(per_sbx_kib <= 256));
	if (proc_ms >= 0)
		printf("| the same with an `sbx session` process per sandbox (its PSS too) | %.0f "
		       "KiB "
		       "| |\n",
		       (double)pss_proc / n);
	printf("| host memory per session (this process's PSS growth) | %.1f KiB | <= 64 KiB: %s "
	       "|\n",
	       host_kib, verdict(host_kib <= 64));
	printf("| kind probe every ms during a 1 GiB upload (%d probes) | p50 %.2f ms, p99 %.2f ms "
	       "| p99 <= 10 ms: %s |\n",
	       nl, p50, p99, verdict(p99 <= 10));
	printf("\n0 failures (any failure stops the run)\n");
	return 0;
}
