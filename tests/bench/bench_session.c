/* make bench-session: probe latency over one retained session against the machine's floor
 * (a bare 64-byte pipe ping-pong) and against a process spawn per probe, for both CPU
 * placements, over local and qemu:aarch64; and ping latency while 1 GiB of command output
 * streams (head-of-line blocking). Every figure is measured in this run. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "sbx_runner.h"
#include "sbx.h"

struct pct {
	double p50, p99;
};

static struct pct pcts(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, fixture_cmp_doubles);
	struct pct p = {v[n / 2] * 1e6, v[(int)(n * 0.99)] * 1e6};
	return p;
}

static void pin(pid_t pid, int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(pid, sizeof set, &set) != 0)
		perror("sched_setaffinity");
}

/* The floor: 64 bytes there and back between two processes over pipes. */
static struct pct floor_pingpong(int other_cpu, int n)
{
	int a[2], b[2];
	if (pipe(a) != 0 || pipe(b) != 0)
		exit(1);
	pid_t pid = fork();
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		pin(0, other_cpu);
		char buf[64];
		for (;;) {
			ssize_t r = read(a[0], buf, sizeof buf);
			if (r <= 0)
				_exit(0);
			if (write(b[1], buf, (size_t)r) != r)
				_exit(1);
		}
	}
	pin(pid, other_cpu);
	double *t = malloc(sizeof *t * (size_t)n);
	char buf[64] = {0};
	for (int i = 0; i < n + 100; i++) {
		double t0 = fixture_now();
		if (write(a[1], buf, sizeof buf) != (ssize_t)sizeof buf)
			exit(1);
		size_t got = 0;
		while (got < sizeof buf) {
			ssize_t r = read(b[0], buf + got, sizeof buf - got);
			if (r <= 0)
				exit(1);
			got += (size_t)r;
		}
		if (i >= 100)
			t[i - 100] = fixture_now() - t0;
	}
	close(a[1]);
	waitpid(pid, NULL, 0);
	close(a[0]), close(b[0]), close(b[1]);
	struct pct p = pcts(t, n);
	free(t);
	return p;
}

static struct sbx_session *open_spec(const char *spec)
{
	struct sbx_err e;
	struct sbx_session *s;
	if (fixture_open(&s, spec, 30, &e) != 0) {
		fprintf(stderr, "bench: %s: %s\n", spec, e.msg);
		exit(1);
	}
	return s;
}

static struct pct probes(struct sbx_session *s, int n)
{
	double *t = malloc(sizeof *t * (size_t)n);
	struct sbx_err e;
	enum sbx_kind k;
	for (int i = 0; i < n + 200; i++) {
		double t0 = fixture_now();
		if (sbx_kind(s, "/tmp", &k, &e) != 0 || k != SBX_KIND_DIR) {
			fprintf(stderr, "bench: kind: %s\n", e.msg);
			exit(1);
		}
		if (i >= 200)
			t[i - 200] = fixture_now() - t0;
	}
	struct pct p = pcts(t, n);
	free(t);
	return p;
}

static struct pct spawns(struct sbx_session *s, int n)
{
	double *t = malloc(sizeof *t * (size_t)n);
	struct sbx_err e;
	struct sbx_exec_opts o;
	sbx_exec_opts_init(&o);
	o.shell = "[ -d /tmp ]";
	o.linger_ms = -1;
	for (int i = 0; i < n + 5; i++) {
		struct sbx_exec_result r;
		double t0 = fixture_now();
		if (sbx_exec(s, &o, &r, &e) != 0 || r.code != 0) {
			fprintf(stderr, "bench: spawn probe failed: %s\n", e.msg);
			exit(1);
		}
		if (i >= 5)
			t[i - 5] = fixture_now() - t0;
	}
	struct pct p = pcts(t, n);
	free(t);
	return p;
}

static int discard(void *ctx, int chan, const void *p, size_t n)
{
	(void)chan, (void)p;
	*(unsigned long long *)ctx += n;
	return 0;
}

static void head_of_line(const char *spec)
{
	struct sbx_session *s = open_spec(spec);
	struct sbx_exec_opts o;
	sbx_exec_opts_init(&o);
	unsigned long long bytes = 0;
	o.shell = "head -c 1073741824 /dev/zero";
	o.on_output = discard;
	o.ctx = &bytes;
	struct sbx_op *x;
	struct sbx_err e;
	double t0 = fixture_now();
	if ((x = sbx_exec_async(s, &o, &e)) == NULL) {
		fprintf(stderr, "bench: %s\n", e.msg);
		exit(1);
	}
	int cap = 100000, n = 0;
	double *t = malloc(sizeof *t * (size_t)cap);
	while (!sbx_op_done(x) && n < cap) {
		double rtt;
		if (sbx_ping(s, &rtt, &e) != 0) {
			fprintf(stderr, "bench: ping: %s\n", e.msg);
			exit(1);
		}
		/* Only pings that overlapped the stream count. */
		if (!sbx_op_done(x))
			t[n++] = rtt;
	}
	struct sbx_exec_result r;
	if (sbx_op_wait(x, &e) != 0 || sbx_exec_result(x, &r, &e) != 0 || r.code != 0 ||
	    bytes != 1073741824ull) {
		fprintf(stderr, "bench: streaming failed: %s (%llu bytes)\n", e.msg, bytes);
		exit(1);
	}
	sbx_op_free(x);
	double secs = fixture_now() - t0;
	struct pct p = pcts(t, n);
	printf("| %s | %d | %.0f | %.0f | %.0f | %.2f s (%.0f MiB/s) | %s |\n", spec, n, p.p50,
	       p.p99, t[n - 1] * 1e6, secs, 1024.0 / secs, p.p99 <= 10000 ? "met" : "MISSED");
	free(t);
	sbx_session_close(s);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	int nspawn = argc > 2 ? atoi(argv[2]) : 300;
	signal(SIGPIPE, SIG_IGN);
	printf("# bench-session: %d kind probes per row, %d spawn probes, p50/p99 in "
	       "microseconds\n\n",
	       n, nspawn);
	printf("| runner | placement | floor p50 | floor p99 | kind p50 | kind p99 | kind/floor "
	       "(p50) | spawn p50 | spawn/kind (p50) | targets |\n");
	printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
	const char *specs[] = {"local", "qemu:aarch64"};
	for (int si = 0; si < 2; si++) {
		for (int place = 0; place < 2; place++) {
			int other = place == 0 ? 0 : 1;
			pin(0, 0);
			struct pct fl = floor_pingpong(other, n);
			struct sbx_session *s = open_spec(specs[si]);
			pin((pid_t)sbx_session_hello(s)->pid, other);
			struct pct pk = probes(s, n);
			struct pct ps = spawns(s, nspawn);
			sbx_session_close(s);
			char targets[96] = "";
			if (si == 0)
				snprintf(targets, sizeof targets, "p50 <= 2x floor: %s%s",
				         pk.p50 <= 2 * fl.p50 ? "met" : "MISSED",
				         place == 0 ? (pk.p50 <= 20 ? "; <= 20 us: met"
				                                    : "; <= 20 us: MISSED")
				                    : "");
			printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.0f | %.0fx | %s "
			       "|\n",
			       specs[si], place == 0 ? "one CPU" : "two CPUs", fl.p50, fl.p99,
			       pk.p50, pk.p99, pk.p50 / fl.p50, ps.p50, ps.p50 / pk.p50, targets);
			fflush(stdout);
		}
	}
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof all, &all);
	printf("\nHead-of-line: ping round trips while one exec streams 1 GiB of output to the "
	       "host (no pinning; target p99 <= 10 ms)\n\n");
	printf("| runner | pings | p50 us | p99 us | max us | stream | target |\n");
	printf("|---|---:|---:|---:|---:|---|---|\n");
	head_of_line("local");
	head_of_line("qemu:aarch64");
	return 0;
}
