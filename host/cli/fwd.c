/* sbx forward: TCP forwarding over the session (docs/forwarding.md) until SIGINT or SIGTERM;
 * the JSON-lines op "forward" runs until {"op":"cancel"} names it. Once every listener is up
 * it prints one line per forward and `ready`; --verbose adds a line per connection event on
 * stderr. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct fwd_call {
	struct cli_call c;
	const char **out, **in; /* NULL-terminated (argv: pointers into it) */
	size_t nout, nin;
	const char *target, *ready_file;
	int max_conn, verbose;
	double for_s; /* --for: stop after so many seconds (0: until interrupted) */
	struct sbx_forward_opts fo;
	struct sbx_op *op; /* sbx session: the op, for its ready event */
	int ready_sent;
	size_t open;
	uint64_t total;
};

static int add(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 2) * sizeof *nv);
	if (nv == NULL)
		return -1;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

static int max_conn_of(const char *s, int *out, struct sbx_err *e)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	/* its range is libsbx's to check */
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > INT_MAX)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--max-conn takes a count");
	*out = (int)v;
	return 0;
}

static int fwd_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct fwd_call *x = (struct fwd_call *)c;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0)
			x->verbose = 1;
		else if (more && strcmp(a, "--out") == 0) {
			if (add(&x->out, &x->nout, argv[++i]) != 0)
				return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "forward");
		} else if (more && strcmp(a, "--in") == 0) {
			if (add(&x->in, &x->nin, argv[++i]) != 0)
				return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "forward");
		} else if (more && strcmp(a, "--target") == 0)
			x->target = argv[++i];
		else if (more && strcmp(a, "--ready-file") == 0)
			x->ready_file = argv[++i];
		else if (more && strcmp(a, "--for") == 0) {
			char *end;
			x->for_s = strtod(argv[++i], &end);
			if (*end != '\0' || !(x->for_s > 0))
				return sbx_err_set(e, SBX_EUSAGE, 0, "--for takes seconds");
		} else if (more && strcmp(a, "--max-conn") == 0) {
			if (max_conn_of(argv[++i], &x->max_conn, e) != 0)
				return -1;
		} else
			return sbx_err_set(e, SBX_EUSAGE, 0, "forward: unknown option %s", a);
	}
	if (x->nout + x->nin == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: give --out or --in");
	return 0;
}

static int fwd_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct fwd_call *x = (struct fwd_call *)c;
	double mc = 0;
	if (jlist(req, "out", &x->out, &x->nout, e) != 0 ||
	    jlist(req, "in", &x->in, &x->nin, e) != 0 || jdouble(req, "max_conn", &mc, e) != 0 ||
	    jbool(req, "verbose", &x->verbose, e) != 0 ||
	    jbool(req, "stream", &c->stream, e) != 0 || jdouble(req, "for", &x->for_s, e) != 0)
		return -1;
	if (x->for_s < 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "\"for\" takes seconds");
	x->target = jstr(req, "target");
	x->ready_file = jstr(req, "ready_file");
	if (mc != 0) {
		if (mc < 1 || mc > INT_MAX || mc != (int)mc)
			return sbx_err_set(e, SBX_EUSAGE, 0, "max_conn takes a count");
		x->max_conn = (int)mc;
	}
	if (x->nout + x->nin == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: give \"out\" or \"in\"");
	return 0;
}

/* The event "ready" of a request: its data the forward lines `sbx forward` prints, then
 * "ready" (so a client learns the ports bound for LPORT 0). */
static void ready_event(struct fwd_call *x)
{
	char text[4096], line[512];
	size_t n = 0;
	for (size_t i = 0; sbx_forward_describe(x->op, i, line, sizeof line) == 0; i++)
		n += (size_t)snprintf(text + n, n < sizeof text ? sizeof text - n : 0, "%s\n",
		                      line);
	if (n < sizeof text)
		n += (size_t)snprintf(text + n, sizeof text - n, "ready");
	x->ready_sent = 1;
	cli_event(&x->c, "ready", text, n < sizeof text ? n : sizeof text - 1);
}

/* A line of the forward: to stderr (argv, --verbose), or an event of the request. */
static void on_line(void *ctx, const char *line)
{
	struct fwd_call *x = ctx;
	if (x->c.lines) {
		if (!x->c.stream)
			return;
		if (strcmp(line, "ready") != 0)
			cli_event(&x->c, "log", line, strlen(line));
		else if (x->op != NULL)
			ready_event(x); /* else once fwd_start has the op */
		return;
	}
	if (x->verbose && strcmp(line, "ready") != 0)
		cli_fprintf(stderr, "sbx: forward: %s\n", line);
}

static void opts_of(struct fwd_call *x)
{
	x->fo = (struct sbx_forward_opts){.out = x->out,
	                                  .n_out = x->nout,
	                                  .in = x->in,
	                                  .n_in = x->nin,
	                                  .target = x->target,
	                                  .ready_file = x->ready_file,
	                                  .max_conn = x->max_conn,
	                                  .on_event = on_line,
	                                  .ctx = x};
}

static struct sbx_op *fwd_start(struct cli_call *c, struct sbx_err *e)
{
	struct fwd_call *x = (struct fwd_call *)c;
	opts_of(x);
	struct sbx_op *op = sbx_forward_async(c->s, &x->fo, e);
	if (op != NULL && x->for_s > 0)
		sbx_op_set_deadline(op, x->for_s); /* its end: success (fwd_finish) */
	x->op = op;
	if (op != NULL && c->stream && !x->ready_sent && sbx_forward_ready(op))
		ready_event(x);
	return op;
}

static int fwd_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	struct fwd_call *x = (struct fwd_call *)c;
	sbx_forward_counts(op, &x->open, &x->total);
	int rc = sbx_op_status(op, e);
	if (rc != 0 && x->for_s > 0 && e->errnum == ETIMEDOUT && e->cls == SBX_EUNAVAILABLE)
		rc = 0; /* it ran for as long as it was asked to */
	return rc;
}

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

/* One wait on what the session waits for (a signal cuts it short), then a step. */
static void wait_step(struct sbx_session *s)
{
	struct pollfd fds[64];
	int64_t dl;
	int n = sbx_session_fds(s, fds, 64, &dl);
	int64_t left = dl == INT64_MAX ? 500000000LL : dl - sbx_now_ns();
	int ms = left <= 0 ? 0 : left > 500000000LL ? 500 : (int)((left + 999999) / 1000000);
	poll(fds, (nfds_t)n, ms);
	sbx_session_step(s);
}

static int fwd_run(struct cli_call *c, struct sbx_err *e)
{
	struct fwd_call *x = (struct fwd_call *)c;
	opts_of(x);
	struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	struct sbx_op *op = sbx_forward_async(c->s, &x->fo, e);
	int printed = 0, cancelled = 0, rc = -1;
	int64_t until = x->for_s > 0 ? sbx_now_ns() + (int64_t)(x->for_s * 1e9) : INT64_MAX;
	while (op != NULL && !sbx_op_done(op)) {
		if ((stop_signal || sbx_now_ns() >= until) && !cancelled) {
			cancelled = 1;
			sbx_op_cancel(op);
			continue;
		}
		if (!printed && sbx_forward_ready(op)) {
			printed = 1;
			if (c->json)
				continue; /* the document comes at the end */
			char line[512];
			for (size_t i = 0; sbx_forward_describe(op, i, line, sizeof line) == 0; i++)
				cli_printf("%s\n", line);
			cli_printf("ready\n");
			fflush(stdout);
		}
		wait_step(c->s);
	}
	if (op != NULL) {
		rc = fwd_finish(c, op, e);
		if (cancelled && rc != 0 && e->errnum == ECANCELED)
			rc = 0; /* stopped as asked */
		sbx_op_free(op);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return rc;
}

static void fwd_print(struct cli_call *c)
{
	struct fwd_call *x = (struct fwd_call *)c;
	if (c->json) {
		sbx_jw_kint(c->w, "connections", (long long)x->total);
		return;
	}
	if (x->verbose)
		cli_fprintf(stderr, "sbx: forward: stopped after %llu connections\n",
		            (unsigned long long)x->total);
}

static void fwd_done(struct cli_call *c)
{
	struct fwd_call *x = (struct fwd_call *)c;
	free(x->out);
	free(x->in);
}

const struct cli_cmd cli_forward = {
        .name = "forward",
        .op = "forward",
        .need = CLI_FULL,
        .size = sizeof(struct fwd_call),
        .parse_argv = fwd_argv,
        .parse_json = fwd_json,
        .run = fwd_run,
        .start = fwd_start,
        .finish = fwd_finish,
        .print = fwd_print,
        .done = fwd_done,
        .synopsis = "[--out PORT[:HOST:HPORT]]... [--in LPORT:ADDR:PORT]... [--target HOST] "
                    "[--ready-file F] [--max-conn N] [--for S] [--verbose]",
        .summary = "TCP over the session, both ways, until interrupted (docs/forwarding.md)",
        .details = "--out: the sandbox's 127.0.0.1:PORT reaches HOST:HPORT from here (a bare "
                   "PORT: --target, default 127.0.0.1, same port); --in: 127.0.0.1:LPORT here "
                   "(0 picks one) reaches ADDR:PORT as the sandbox sees it; IPv6 in brackets. "
                   "Once every listener is up (the ready file made inside) it prints one line "
                   "per forward and `ready`; SIGINT or SIGTERM stops it (exit 0), as does the end "
                   "of --for S seconds. At most "
                   "--max-conn (1024) connections per forward; past it a connection is reset.",
        .fields = "out (array of specs), in (array), target, ready_file, max_conn, for, verbose; "
                  "with \"stream\": true the events \"ready\" (its data the forward lines, then "
                  "\"ready\") and \"log\" (one per connection "
                  "event); runs until {\"op\":\"cancel\",\"id\":...}",
};
