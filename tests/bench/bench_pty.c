/* bench_pty RUNNER [N]: a terminal session's flow control (docs/pty.md, issue 20's point 6).
 * N pings over one session with nothing else on it; then N more while `yes` floods a terminal
 * session on the same connection and this program reads the flood as fast as it comes (the
 * stream moving, not stalled behind an unread window). Prints p50/p99 of both, their ratio,
 * the flood's throughput while it was read, and the target (p99 <= 10 ms during the flood)
 * met or not. One thread, the session stepped by poll on its own fds. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "sbx.h"

static int cmp(const void *a, const void *b)
{
	return fixture_cmp_doubles(a, b);
}

static void die(const char *what, const struct sbx_err *e)
{
	fprintf(stderr, "bench_pty: %s: %s\n", what, e != NULL ? e->msg : "");
	exit(1);
}

static uint8_t buf[1 << 16];
static long long flooded;

/* One round of the session: its fds polled (1 ms at most), stepped, the terminal drained. */
static void step(struct sbx_session *s, struct sbx_pty *p)
{
	struct pollfd fds[16];
	int64_t d;
	int n = sbx_session_fds(s, fds, 16, &d);
	poll(fds, (nfds_t)n, 1);
	if (sbx_session_step(s) != 0)
		die("the session broke", NULL);
	if (p == NULL)
		return;
	size_t got;
	int ended;
	while ((got = sbx_pty_take(p, 1, buf, sizeof buf, &ended)) > 0)
		flooded += (long long)got;
	if (ended)
		die("the flood ended", NULL);
}

/* n pings, one at a time, each waited for by stepping; their round trips in ms, sorted. */
static void pings(struct sbx_session *s, struct sbx_pty *p, double *ms, int n)
{
	struct sbx_err e;
	for (int i = 0; i < n; i++) {
		double a = fixture_now();
		struct sbx_op *op = sbx_ping_async(s, &e);
		if (op == NULL)
			die("ping", &e);
		while (!sbx_op_done(op))
			step(s, p);
		double rtt;
		if (sbx_ping_result(op, &rtt, &e) != 0)
			die("ping", &e);
		ms[i] = (fixture_now() - a) * 1000;
		sbx_op_free(op);
		step(s, p); /* the flood gets its turn between pings too */
	}
	qsort(ms, (size_t)n, sizeof *ms, cmp);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_pty RUNNER [N]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 2000;
	if (n < 10 || n > 1000000)
		n = 2000;
	struct sbx_err e;
	struct sbx_session *s;
	if (fixture_open(&s, argv[1], 30, &e) != 0)
		die("open", &e);
	double *idle = malloc((size_t)n * sizeof *idle), *load = malloc((size_t)n * sizeof *load);
	if (idle == NULL || load == NULL)
		die("memory", NULL);
	pings(s, NULL, idle, n);

	struct sbx_pty_spec sp;
	sbx_pty_spec_init(&sp);
	sp.argv = (char *[]){"yes", NULL};
	char id[SBX_PTY_ID_MAX];
	struct sbx_pty_attach_info ai;
	if (sbx_pty_spawn(s, &sp, id, &e) != 0)
		die("spawn yes", &e);
	struct sbx_pty *p = sbx_pty_attach(s, id, 0, 0, 0, &ai, &e);
	if (p == NULL)
		die("attach", &e);
	while (flooded < (1 << 20)) /* the flood under way first */
		step(s, p);
	/* The flood alone for a second: what reading it at full speed moves. */
	long long a0 = flooded;
	double t0 = fixture_now();
	while (fixture_now() - t0 < 1)
		step(s, p);
	double alone = (double)(flooded - a0) / (1 << 20) / (fixture_now() - t0);
	long long f0 = flooded;
	double t1 = fixture_now();
	pings(s, p, load, n);
	double t2 = fixture_now();
	double p50i = idle[n / 2], p99i = idle[n * 99 / 100];
	double p50l = load[n / 2], p99l = load[n * 99 / 100];
	printf("pings over %s, %d each, one at a time\n\n", argv[1], n);
	printf("| what | p50 | p99 |\n|---|---:|---:|\n");
	printf("| ping, nothing else on the session | %.3f ms | %.3f ms |\n", p50i, p99i);
	printf("| ping while `yes` floods a terminal session read at full speed | %.3f ms | "
	       "%.3f ms |\n",
	       p50l, p99l);
	printf("| ratio (flood / idle) | x%.2f | x%.2f |\n\n", p50l / p50i, p99l / p99i);
	printf("the flood read alone: %.1f MiB/s; during the pings: %.1f MiB/s (%.1f MiB in %.2f "
	       "s)\n",
	       alone, (double)(flooded - f0) / (1 << 20) / (t2 - t1),
	       (double)(flooded - f0) / (1 << 20), t2 - t1);
	printf("target: ping p99 <= 10 ms during the flood: %s\n", p99l <= 10 ? "met" : "not met");
	sbx_pty_detach(p);
	if (sbx_pty_close(s, id, &e) != 0)
		die("close", &e);
	sbx_session_close(s);
	free(idle);
	free(load);
	return 0;
}
