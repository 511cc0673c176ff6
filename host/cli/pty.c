/* sbx pty: a terminal client for sessions held in the sandbox (docs/pty.md). The local
 * terminal in raw mode (restored on every exit path sbx can see: the end, a detach, an error,
 * SIGTERM, SIGINT, SIGHUP), its size sent at the start and on SIGWINCH, keystrokes to the
 * session, its output to stdout (stderr in pipe mode); Ctrl-] then d detaches (the session
 * lives on), Ctrl-] twice sends one Ctrl-]. `sbx pty ls` lists the sandbox's sessions, `sbx pty
 * close ID` ends one. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

#define DETACH_KEY 0x1d /* Ctrl-] */

struct pty_call {
	struct cli_call c;
	int ls;
	const char *attach;
	int64_t since;
	int takeover;
	int rows, cols, pipe;
	char **argv;
	struct sbx_pty_info *list; /* pty ls: the sessions, for print */
	size_t nlist;
};

static int num(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int pty_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct pty_call *p = (struct pty_call *)c;
	int i = 0;
	if (argc > 0 && strcmp(argv[0], "ls") == 0) {
		p->ls = 1;
		return argc == 1 ? 0 : sbx_err_set(e, SBX_EUSAGE, 0, "pty ls takes no operand");
	}
	if (argc > 0 && strcmp(argv[0], "close") == 0) {
		p->ls = 2;
		p->attach = argc == 2 ? argv[1] : NULL;
		return argc == 2 ? 0
		                 : sbx_err_set(e, SBX_EUSAGE, 0, "pty close takes one session id");
	}
	for (; i < argc; i++) {
		const char *a = argv[i];
		int64_t v;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--takeover") == 0) {
			p->takeover = 1;
		} else if (strcmp(a, "--pipe") == 0) {
			p->pipe = 1;
		} else if (i + 1 < argc && strcmp(a, "--attach") == 0) {
			p->attach = argv[++i];
		} else if (i + 1 < argc && strcmp(a, "--since") == 0) {
			if (num(argv[++i], 0, INT64_MAX / 2, &p->since) != 0)
				return sbx_err_set(e, SBX_EUSAGE, 0, "--since takes a byte offset");
		} else if (i + 1 < argc && (strcmp(a, "--rows") == 0 || strcmp(a, "--cols") == 0)) {
			if (num(argv[++i], 1, 65535, &v) != 0)
				return sbx_err_set(e, SBX_EUSAGE, 0, "%s takes 1..65535", a);
			*(a[2] == 'r' ? &p->rows : &p->cols) = (int)v;
		} else {
			return sbx_err_set(e, SBX_EUSAGE, 0, "pty: unknown option %s", a);
		}
	}
	if (i < argc)
		p->argv = argv + i;
	if (p->attach != NULL && p->argv != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "pty: --attach runs no new program");
	return 0;
}

/* The local terminal's modes, restored however sbx leaves (that it can see). */
static struct termios saved;
static int raw_on;
static int winch_pipe[2] = {-1, -1};

static void restore(void)
{
	if (raw_on) {
		tcsetattr(0, TCSAFLUSH, &saved);
		raw_on = 0;
	}
}

static void on_fatal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_winch(int sig)
{
	(void)sig;
	int saved_errno = errno;
	if (write(winch_pipe[1], "w", 1) < 0) {
	}
	errno = saved_errno;
}

static void local_size(int *rows, int *cols)
{
	struct winsize ws;
	if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
		*rows = ws.ws_row, *cols = ws.ws_col;
}

static int put_all(int fd, const uint8_t *b, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			struct pollfd q = {fd, POLLOUT, 0};
			poll(&q, 1, 1000);
			continue;
		}
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int pty_ls(struct cli_call *c, struct sbx_err *e)
{
	struct pty_call *p = (struct pty_call *)c;
	return sbx_pty_list(c->s, &p->list, &p->nlist, e);
}

/* pty ls: a table, or "sessions": [{id, mode, held, base, head, base_err, head_err, retain,
 * pid, exited, code, signal}] (every field as libsbx checked it, host/ptymsg.c). pty close:
 * nothing ({"ok":true} in JSON). */
static void pty_ls_print(struct cli_call *c)
{
	struct pty_call *p = (struct pty_call *)c;
	if (p->ls != 1)
		return;
	if (c->json) {
		sbx_jw_key(c->w, "sessions");
		sbx_jw_arr_begin(c->w);
		for (size_t i = 0; i < p->nlist; i++) {
			const struct sbx_pty_info *v = &p->list[i];
			sbx_jw_obj_begin(c->w);
			sbx_jw_key(c->w, "id");
			sbx_jw_str(c->w, v->id);
			sbx_jw_key(c->w, "mode");
			sbx_jw_str(c->w, v->pipe ? "pipe" : "pty");
			sbx_jw_key(c->w, "held");
			sbx_jw_bool(c->w, v->held);
			const char *k[] = {"base", "head", "base_err", "head_err", "retain", "pid"};
			const int64_t x[] = {v->base,     v->head,   v->base_err,
			                     v->head_err, v->retain, v->pid};
			for (int j = 0; j < 6; j++) {
				sbx_jw_key(c->w, k[j]);
				sbx_jw_int(c->w, x[j]);
			}
			sbx_jw_key(c->w, "exited");
			sbx_jw_bool(c->w, v->exited);
			if (v->exited) {
				sbx_jw_key(c->w, "code");
				sbx_jw_int(c->w, v->code);
				sbx_jw_key(c->w, "signal");
				sbx_jw_int(c->w, v->signal);
			}
			sbx_jw_obj_end(c->w);
		}
		sbx_jw_arr_end(c->w);
		return;
	}
	cli_printf("%-16s  %-4s  %-4s  %12s  %12s  %s\n", "ID", "MODE", "HELD", "BASE", "HEAD",
	           "STATE");
	for (size_t i = 0; i < p->nlist; i++) {
		const struct sbx_pty_info *v = &p->list[i];
		char state[32];
		if (v->exited)
			snprintf(state, sizeof state, "exited %d", v->code);
		else
			snprintf(state, sizeof state, "running pid %lld", (long long)v->pid);
		cli_printf("%-16s  %-4s  %-4s  %12lld  %12lld  %s\n", v->id,
		           v->pipe ? "pipe" : "pty", v->held ? "yes" : "no", (long long)v->base,
		           (long long)v->head, state);
	}
}

static void pty_done(struct cli_call *c)
{
	struct pty_call *p = (struct pty_call *)c;
	free(p->list);
	p->list = NULL;
}

static int pty_run(struct cli_call *c, struct sbx_err *e)
{
	struct pty_call *p = (struct pty_call *)c;
	if (p->ls == 2)
		return sbx_pty_close(c->s, p->attach, e);
	if (p->ls)
		return pty_ls(c, e);
	int tty = isatty(0);
	char id[SBX_PTY_ID_MAX];
	int created = 0;
	if (p->attach == NULL) {
		struct sbx_pty_spec sp;
		sbx_pty_spec_init(&sp);
		sp.argv = p->argv;
		sp.pipe = p->pipe;
		sp.rows = 24, sp.cols = 80;
		if (tty)
			local_size(&sp.rows, &sp.cols);
		if (p->rows)
			sp.rows = p->rows;
		if (p->cols)
			sp.cols = p->cols;
		if (sbx_pty_spawn(c->s, &sp, id, e) != 0)
			return -1;
		created = 1;
	} else {
		snprintf(id, sizeof id, "%s", p->attach);
	}
	struct sbx_pty_attach_info ai;
	struct sbx_pty *t = sbx_pty_attach(c->s, id, p->takeover, p->since, 0, &ai, e);
	if (t == NULL)
		return -1;
	cli_fprintf(stderr, "sbx: pty session %s%s (Ctrl-] d detaches)\r\n", id,
	            created ? "" : " attached");
	if (ai.lost > 0)
		cli_fprintf(stderr, "sbx: %lld bytes before offset %lld had left the window\r\n",
		            (long long)ai.lost, (long long)ai.start);
	if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		sbx_pty_detach(t);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	}
	if (tty && tcgetattr(0, &saved) == 0) {
		struct termios r = saved;
		cfmakeraw(&r);
		if (tcsetattr(0, TCSAFLUSH, &r) == 0) {
			raw_on = 1;
			atexit(restore);
		}
	}
	signal(SIGTERM, on_fatal);
	signal(SIGINT, on_fatal);
	signal(SIGHUP, on_fatal);
	signal(SIGWINCH, on_winch);
	if (tty && p->attach != NULL) { /* the attaching terminal's size wins */
		int rows = 0, cols = 0;
		local_size(&rows, &cols);
		if (rows > 0 && !ai.st.pipe)
			sbx_pty_resize(c->s, id, rows, cols, e);
	}
	int detached = 0, in_open = 1, esc = 0, rc = 0;
	static uint8_t buf[65536];
	for (;;) {
		for (int ch = 1; ch <= 2; ch++) {
			int ended;
			size_t n;
			while ((n = sbx_pty_take(t, ch, buf, sizeof buf, &ended)) > 0)
				if (put_all(ch == 1 ? 1 : 2, buf, n) != 0) {
					detached = 1; /* our output is gone: let go, the session
					                 lives */
					break;
				}
		}
		if (detached || sbx_op_done(sbx_pty_op(t)))
			break;
		struct pollfd fds[64];
		int64_t dl;
		int n = sbx_session_fds(c->s, fds + 2, 62, &dl);
		fds[0] = (struct pollfd){in_open ? 0 : -1, POLLIN, 0};
		fds[1] = (struct pollfd){winch_pipe[0], POLLIN, 0};
		int64_t now = sbx_now_ns();
		int ms = dl == INT64_MAX ? 1000 : dl <= now ? 0 : (int)((dl - now) / 1000000 + 1);
		if (ms > 1000)
			ms = 1000;
		if (poll(fds, (nfds_t)n + 2, ms) < 0 && errno != EINTR) {
			rc = sbx_err_set(e, SBX_EUNAVAILABLE, errno, "poll");
			break;
		}
		if (fds[1].revents) {
			char w[16];
			while (read(winch_pipe[0], w, sizeof w) > 0)
				;
			int rows = 0, cols = 0;
			local_size(&rows, &cols);
			if (rows > 0 && !ai.st.pipe)
				(void)sbx_pty_resize_async(c->s, id, rows, cols, e);
		}
		if (fds[0].revents) {
			uint8_t in[4096], out[4096];
			ssize_t k = read(0, in, sizeof in);
			if (k <= 0) {
				in_open = 0; /* no more input: output still comes until the end */
			} else {
				size_t m = 0;
				for (ssize_t i = 0; i < k; i++) {
					if (esc) {
						esc = 0;
						if (in[i] == 'd') {
							detached = 1;
							break;
						}
						if (in[i] != DETACH_KEY)
							out[m++] = DETACH_KEY;
						out[m++] = in[i];
					} else if (in[i] == DETACH_KEY && tty) {
						esc = 1;
					} else {
						out[m++] = in[i];
					}
				}
				if (m > 0 && sbx_pty_write(t, out, m, e) != 0 &&
				    !sbx_op_done(sbx_pty_op(t))) {
					rc = -1;
					break;
				}
				if (detached)
					break;
			}
		}
		if (sbx_session_step(c->s) != 0) {
			/* The session broke: the stream's op ends with its error. */
			if (!sbx_op_done(sbx_pty_op(t)))
				rc = sbx_err_set(e, SBX_EUNAVAILABLE, 0, "the session broke");
			else
				continue;
			break;
		}
		struct sbx_op *done;
		while ((done = sbx_session_next_done(c->s)) != NULL)
			if (done != sbx_pty_op(t))
				sbx_op_free(done); /* a resize's answer */
	}
	restore();
	if (rc != 0 || detached) {
		sbx_pty_detach(t);
		if (detached)
			cli_fprintf(stderr, "sbx: detached from %s; sbx pty --attach %s\n", id, id);
		c->answered = 1;
		return rc;
	}
	int code;
	rc = sbx_pty_end_status(t, &code, e);
	sbx_pty_detach(t);
	if (rc == 0) {
		c->status = code;
		if (created)
			sbx_pty_close(c->s, id, e);
	}
	c->answered = 1;
	return rc;
}

const struct cli_cmd cli_pty = {
        .name = "pty",
        .need = CLI_FULL,
        .own_status = 1,
        .size = sizeof(struct pty_call),
        .parse_argv = pty_argv,
        .run = pty_run,
        .print = pty_ls_print,
        .done = pty_done,
        .synopsis = "[--attach ID [--since N] [--takeover]] [--rows R --cols C] [--pipe] [-- "
                    "ARGV] | ls | close ID",
        .summary = "a terminal session held in the sandbox (docs/pty.md)",
        .details = "Raw mode on a terminal, its size sent on SIGWINCH; Ctrl-] then d detaches "
                   "(the session lives on; Ctrl-] twice sends one). Exits with the program's "
                   "status; a session this command made is closed when its program ends. "
                   "`sbx pty ls` lists the sessions, their holder and offsets; `sbx pty close ID` "
                   "ends one.",
};

/* The listing as a JSON-lines request: {"op":"pty_ls"}. */
static int pty_ls_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	(void)req;
	(void)e;
	((struct pty_call *)c)->ls = 1;
	return 0;
}

const struct cli_cmd cli_pty_ls = {
        .name = "pty-ls",
        .op = "pty_ls",
        .need = CLI_FULL,
        .size = sizeof(struct pty_call),
        .parse_json = pty_ls_json,
        .run = pty_ls,
        .print = pty_ls_print,
        .done = pty_done,
        .summary = "the sandbox's terminal sessions, their holder and offsets (as `pty ls`)",
        .fields = "(none)",
};
