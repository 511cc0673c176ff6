/* sbx exec / sh: a program or a shell command line in the sandbox, one row each, from argv
 * or from JSON lines (exec, sh, exec_as_root). Under --json and in JSON lines the output is
 * captured and sent in the result; in text it streams raw to stdout and stderr. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "utf8.h"

#include "cli.h"

/* ---- exec output ---- */

/* An exec's output under --json, per channel: the first CAPTURE_MEM bytes in memory, the rest
 * in an unlinked temporary file, CAPTURE_MAX in all (what comes after is dropped and the
 * result says "stdout_truncated"). The JSON then goes out in pieces, so a 64 MiB output costs
 * about CAPTURE_MEM per channel of memory, not a document's worth. */
#define CAPTURE_MAX (64u << 20)
#define CAPTURE_MEM (1u << 20)
#define CAPTURE_PIECE (48u << 10) /* a multiple of 3, so base64 pieces join */

struct spool {
	uint8_t *mem;
	size_t len, cap; /* len: bytes captured in all */
	int fd;          /* -1 until the output outgrows mem */
	int truncated;
};

struct capture {
	struct spool ch[3];
};

static void capture_init(struct capture *c)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < 3; i++)
		c->ch[i].fd = -1;
}

static void capture_free(struct capture *c)
{
	for (int i = 0; i < 3; i++) {
		free(c->ch[i].mem);
		if (c->ch[i].fd >= 0)
			close(c->ch[i].fd);
	}
}

static int spool_file(void)
{
	const char *dir = getenv("TMPDIR");
	if (dir == NULL || dir[0] == '\0')
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT))
		return fd;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/sbx-exec-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int capture_sink(void *ctx, int chan, const void *p, size_t n)
{
	struct capture *c = ctx;
	if (chan < 1 || chan > 2)
		return 0;
	struct spool *sp = &c->ch[chan];
	if (n > CAPTURE_MAX - sp->len) {
		sp->truncated = 1;
		n = CAPTURE_MAX - sp->len;
	}
	const uint8_t *b = p;
	if (sp->len < CAPTURE_MEM) {
		size_t take = n < CAPTURE_MEM - sp->len ? n : CAPTURE_MEM - sp->len;
		if (sp->len + take > sp->cap) {
			size_t cap = sp->cap ? sp->cap : 4096;
			while (cap < sp->len + take)
				cap *= 2;
			uint8_t *d = realloc(sp->mem, cap);
			if (d == NULL)
				return -1;
			sp->mem = d;
			sp->cap = cap;
		}
		memcpy(sp->mem + sp->len, b, take);
		sp->len += take;
		b += take;
		n -= take;
	}
	if (n == 0)
		return 0;
	if (sp->fd < 0 && (sp->fd = spool_file()) < 0) {
		sp->truncated = 1; /* nowhere to keep it: said in the result, not fatal */
		return 0;
	}
	size_t off = sp->len - CAPTURE_MEM;
	while (n > 0) {
		ssize_t w = pwrite(sp->fd, b, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			sp->truncated = 1;
			return 0;
		}
		b += w;
		n -= (size_t)w;
		off += (size_t)w;
		sp->len += (size_t)w;
	}
	return 0;
}

/* Up to max bytes of the capture from off into buf; 0 at the end, -1 on a read error. */
static ssize_t spool_read(const struct spool *sp, size_t off, uint8_t *buf, size_t max)
{
	if (off >= sp->len)
		return 0;
	if (max > sp->len - off)
		max = sp->len - off;
	if (off < CAPTURE_MEM) {
		size_t n = max < CAPTURE_MEM - off ? max : CAPTURE_MEM - off;
		memcpy(buf, sp->mem + off, n);
		return (ssize_t)n;
	}
	ssize_t r;
	do
		r = pread(sp->fd, buf, max, (off_t)(off - CAPTURE_MEM));
	while (r < 0 && errno == EINTR);
	return r;
}

/* "stdout": the text (U+FFFD for bytes that are not UTF-8), then "stdout_b64" when it was not
 * all valid UTF-8, then "stdout_truncated". Piece by piece, each written out at once. */
static void json_spool(struct sbx_jw *w, const char *name, struct spool *sp)
{
	uint8_t buf[CAPTURE_PIECE + 4];
	char key[24];
	size_t off = 0, have = 0;
	int valid = 1;
	sbx_jw_key(w, name);
	sbx_jw_str_begin(w);
	for (;;) {
		ssize_t r = spool_read(sp, off, buf + have, CAPTURE_PIECE);
		if (r < 0)
			sp->truncated = 1;
		if (r <= 0)
			break;
		off += (size_t)r;
		have += (size_t)r;
		/* A piece ends on a whole character, so none turns into U+FFFD at a seam. */
		size_t keep = sbx_utf8_cut_tail(buf, have);
		valid &= sbx_utf8_valid(buf, have - keep);
		sbx_jw_str_add(w, buf, have - keep);
		memmove(buf, buf + have - keep, keep);
		have = keep;
		cli_json_out(w);
	}
	if (have > 0) {
		valid = 0; /* a sequence cut by the end of the output */
		sbx_jw_str_add(w, buf, have);
	}
	sbx_jw_str_end(w);
	if (!valid) {
		snprintf(key, sizeof key, "%s_b64", name);
		sbx_jw_key(w, key);
		sbx_jw_str_begin(w);
		for (off = 0;;) {
			/* Whole pieces (a multiple of 3), so no padding falls inside. */
			ssize_t r = 0;
			for (have = 0; have < CAPTURE_PIECE; have += (size_t)r) {
				r = spool_read(sp, off + have, buf + have, CAPTURE_PIECE - have);
				if (r < 0)
					sp->truncated = 1;
				if (r <= 0)
					break;
			}
			if (have == 0)
				break;
			off += have;
			sbx_jw_b64_add(w, buf, have);
			cli_json_out(w);
		}
		sbx_jw_str_end(w);
	}
	if (sp->truncated) {
		snprintf(key, sizeof key, "%s_truncated", name);
		sbx_jw_kbool(w, key, 1);
	}
}

static int passthrough_sink(void *ctx, int chan, const void *p, size_t n)
{
	(void)ctx;
	int fd = chan == SBX_STDERR ? 2 : 1;
	const char *b = p;
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1; /* our reader is gone: cancel the command */
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The result's fields (after "ok"); with a capture (NULL: the output went as events), its
 * output, streamed to stdout. */
static void json_exec(struct sbx_jw *w, const struct sbx_exec_result *r, struct capture *c)
{
	sbx_jw_kstr(w, "outcome", sbx_outcome_name(r->outcome));
	sbx_jw_kint(w, "code", r->code);
	if (r->outcome == SBX_OUT_SIGNALED)
		sbx_jw_kint(w, "signal", r->signal);
	if (r->outcome == SBX_OUT_NOT_STARTED) {
		sbx_jw_kint(w, "errno", r->err);
		sbx_jw_kstr(w, "message", r->message);
	}
	sbx_jw_kbool(w, "user_fallback", r->user_fallback);
	if (r->user_fallback)
		sbx_jw_kstr(w, "note", r->note);
	sbx_jw_kdouble(w, "seconds", r->seconds);
	if (c == NULL)
		return;
	json_spool(w, "stdout", &c->ch[1]);
	json_spool(w, "stderr", &c->ch[2]);
}

/* ---- the rows ---- */

struct exec_call {
	struct cli_call c;
	struct cmd_opts co;
	struct sbx_exec_opts x;
	const char **jargv;   /* the argv, when it came from JSON */
	uint8_t *stdin_bytes; /* stdin_b64 decoded */
	struct capture cap;
	struct sbx_exec_result r;
	int stream; /* "stream": true: the output as events, not in the result */
};

static int is_sh(const struct cli_call *c)
{
	return c->cmd == &cli_sh;
}

static void exec_init(struct exec_call *x)
{
	sbx_exec_opts_init(&x->x);
	capture_init(&x->cap);
}

static void exec_opts_from(struct sbx_exec_opts *x, const struct cmd_opts *c)
{
	x->user = c->user;
	x->cwd = c->cwd;
	x->env = c->env;
	x->env_clear = c->env_clear;
	x->timeout_s = c->timeout;
}

static int exec_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct exec_call *x = (struct exec_call *)c;
	int i = 0;
	exec_init(x);
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0)
			break;
		if (strcmp(a, "-i") == 0 || strcmp(a, "--stdin") == 0) {
			x->x.stdin_fd = 0;
			continue;
		}
		int r = cmd_opt_arg(&x->co, argc, argv, &i, e);
		if (r == 0)
			sbx_err_set(e, SBX_EUSAGE, 0, "unknown exec option %s", a);
		if (r <= 0)
			return -1;
	}
	if (i >= argc || (is_sh(c) && argc - i != 1))
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   is_sh(c) ? "sh takes one command string"
		                            : "exec needs -- ARGV...");
	exec_opts_from(&x->x, &x->co);
	if (is_sh(c))
		x->x.shell = argv[i];
	else
		x->x.argv = argv + i;
	return 0;
}

static int exec_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct exec_call *x = (struct exec_call *)c;
	size_t n;
	exec_init(x);
	if (is_sh(c)) {
		/* "command" is the reference's exec_as_root parameter; "cmd" ours. */
		x->x.shell = jstr(req, "cmd");
		if (x->x.shell == NULL)
			x->x.shell = jstr(req, "command");
		if (x->x.shell == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "sh needs \"cmd\" (or \"command\")");
	} else {
		x->jargv = jstrs(sbx_json_get(req, "argv"), &n, e);
		if (x->jargv == NULL)
			return -1;
		if (n == 0)
			return sbx_err_set(e, SBX_EUSAGE, 0, "exec needs a non-empty \"argv\"");
		x->x.argv = (char *const *)x->jargv;
	}
	if (cmd_opts_json(&x->co, req, e) != 0 || jbool(req, "stream", &x->stream, e) != 0)
		return -1;
	exec_opts_from(&x->x, &x->co);
	int64_t linger;
	const struct sbx_json *lg = sbx_json_get(req, "linger_ms");
	if (lg != NULL && sbx_json_int(lg, &linger) == 0)
		x->x.linger_ms = linger <= 0 ? -1 : linger > 600000 ? 600000 : (int)linger;
	const struct sbx_json *in = sbx_json_get(req, "stdin");
	const struct sbx_json *in64 = sbx_json_get(req, "stdin_b64");
	if (in != NULL) {
		x->x.stdin_data = sbx_json_str(in, &x->x.stdin_len);
		if (x->x.stdin_data == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "stdin must be a string");
	} else if (in64 != NULL) {
		size_t l;
		const char *s64 = sbx_json_str(in64, &l);
		if (s64 == NULL || sbx_b64_decode(s64, l, &x->stdin_bytes, &x->x.stdin_len) != 0)
			return sbx_err_set(e, SBX_EUSAGE, 0, "stdin_b64 is not base64");
		x->x.stdin_data = x->stdin_bytes ? (const void *)x->stdin_bytes : (const void *)"";
	}
	return 0;
}

/* Streamed (a request's "stream": true): each piece an event line at once. */
static int event_sink(void *ctx, int chan, const void *p, size_t n)
{
	if (chan == SBX_STDOUT || chan == SBX_STDERR)
		cli_event(ctx, chan == SBX_STDERR ? "stderr" : "stdout", p, n);
	return 0;
}

static void exec_sink(struct exec_call *x)
{
	struct cli_call *c = &x->c;
	x->x.on_output = x->stream ? event_sink : c->json ? capture_sink : passthrough_sink;
	x->x.ctx = x->stream ? (void *)c : (void *)&x->cap;
}

static int exec_run(struct cli_call *c, struct sbx_err *e)
{
	struct exec_call *x = (struct exec_call *)c;
	exec_sink(x);
	if (sbx_exec(c->s, &x->x, &x->r, e) != 0)
		return -1;
	c->status = x->r.code;
	return 0;
}

/* As sbx_exec's: the command's own timeout, then the session's for the answer. */
static struct sbx_op *exec_start(struct cli_call *c, struct sbx_err *e)
{
	struct exec_call *x = (struct exec_call *)c;
	exec_sink(x);
	return cli_op_deadline(c, sbx_exec_async(c->s, &x->x, e),
	                       x->x.timeout_s > 0 ? x->x.timeout_s : -1);
}

static int exec_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	struct exec_call *x = (struct exec_call *)c;
	if (sbx_exec_result(op, &x->r, e) != 0)
		return -1;
	c->status = x->r.code;
	return 0;
}

static void exec_print(struct cli_call *c)
{
	struct exec_call *x = (struct exec_call *)c;
	const struct sbx_exec_result *r = &x->r;
	if (c->json) {
		json_exec(c->w, r, x->stream ? NULL : &x->cap);
		return;
	}
	if (r->outcome == SBX_OUT_NOT_STARTED)
		cli_fprintf(stderr, "sbx: %s\n", r->message);
	if (r->outcome == SBX_OUT_TIMED_OUT)
		cli_fprintf(stderr, "sbx: timed out after %g s; process group killed\n",
		            x->x.timeout_s);
	if (r->user_fallback)
		cli_fprintf(stderr, "sbx: note: %s\n", r->note);
}

static void exec_done(struct cli_call *c)
{
	struct exec_call *x = (struct exec_call *)c;
	cmd_opts_free(&x->co);
	free(x->jargv);
	free(x->stdin_bytes);
	capture_free(&x->cap);
}

#define EXEC_ROW                                                                                   \
	.need = CLI_FULL, .own_status = 1, .size = sizeof(struct exec_call),                       \
	.parse_argv = exec_argv, .parse_json = exec_json, .run = exec_run, .start = exec_start,    \
	.finish = exec_finish, .print = exec_print, .done = exec_done
#define EXEC_OPTS "[--user U] [--cwd D] [--env K=V]... [--env-clear] [--timeout S] [-i]"
#define EXEC_FIELDS                                                                                \
	"\"user\" (a name or a uid), \"cwd\", \"env\" (an object or [\"K=V\"]), "                  \
	"\"env_clear\", \"timeout\", \"stdin\" or \"stdin_b64\", \"linger_ms\", \"stream\" (the "  \
	"output as {\"id\",\"event\":\"stdout\"|\"stderr\",\"data_b64\"} lines as it comes, "      \
	"not in the answer)"

const struct cli_cmd cli_exec = {
        .name = "exec",
        .op = "exec",
        EXEC_ROW,
        .synopsis = EXEC_OPTS " -- ARGV...",
        .summary = "run a program (no shell needed); -i streams stdin",
        .details = "Exits with the program's status (128+signal, 124 timed out, 126/127 not "
                   "started), 125 when sbx itself failed. Under --json the output is in the "
                   "result (\"stdout\", \"stderr\"; _b64 when not UTF-8; at most 64 MiB each).",
        .fields = "\"argv\", " EXEC_FIELDS,
};

const struct cli_cmd cli_sh = {
        .name = "sh",
        .op = "sh",
        .alias = "exec_as_root",
        EXEC_ROW,
        .synopsis = EXEC_OPTS " 'COMMAND'",
        .summary = "run a shell command line (/bin/sh -c)",
        .details = "As exec, with one command string.",
        .fields = "\"cmd\" (or \"command\"), " EXEC_FIELDS,
};
