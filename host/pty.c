/* Terminal sessions held in the sandbox (sbx.h, docs/pty.md): the requests (spawn, attach,
 * status, resize, signal, close, list) as request operations, and the live stream as a job
 * whose output waits in per-channel buffers until read (the agent's credit returned only then,
 * so a flooding program is held back by its reader and memory stays within the window) and
 * whose input is a pipe the job streams. Every answer goes through host/ptymsg.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "ptymsg.h"
#include "session.h"

void sbx_pty_spec_init(struct sbx_pty_spec *sp)
{
	memset(sp, 0, sizeof *sp);
}

static int id_check(const char *id, struct sbx_err *e)
{
	size_t n = id != NULL ? strlen(id) : 0;
	if (n != SBX_PTY_ID_LEN || strspn(id, "0123456789abcdef") != n)
		return sbx_err_set(e, SBX_EUSAGE, 0, "a pty session id is 16 lowercase hex digits");
	return 0;
}

static struct sbx_op *request(struct sbx_session *s, const struct sbx_msgw *w, int code,
                              struct sbx_err *e)
{
	struct sbx_op *o = sbx_request_async(s, w, e);
	if (o != NULL)
		o->result = code;
	return o;
}

static int result_of(const struct sbx_op *op, int code, struct sbx_err *e)
{
	if (op->result != code)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not the request asked about",
		                   sbx_op_name(op));
	if (sbx_op_status(op, e) != 0 || sbx_op_answer_ok(op, e) != 0)
		return -1;
	return 0;
}

/* o (an async start) waited for within the session's timeout, its answer judged. */
static int blocking(struct sbx_session *s, struct sbx_op *o, struct sbx_err *e)
{
	if (o == NULL)
		return -1;
	int64_t until = sbx_session_deadline(s);
	int rc = sbx_op_wait_until(o, until, e);
	if (rc == 0)
		rc = sbx_op_answer_ok(o, e);
	sbx_op_free(o);
	return rc;
}

/* A request naming the session, with one more integer or string field. */
static struct sbx_op *simple(struct sbx_session *s, int code, const char *id, const char *name,
                             int rows, int cols, struct sbx_err *e)
{
	if (sbx_session_error(s, e) != 0 || id_check(id, e) != 0)
		return NULL;
	uint8_t b[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	sbx_msgw_i64(&w, SBX_T_OP, code);
	sbx_msgw_str(&w, SBX_T_PTY_ID, id);
	if (name != NULL) {
		if (strlen(name) > 31) {
			sbx_err_set(e, SBX_EUSAGE, 0, "unknown signal name");
			return NULL;
		}
		sbx_msgw_str(&w, SBX_T_NAME, name);
	}
	if (rows > 0) {
		sbx_msgw_i64(&w, SBX_T_ROWS, rows);
		sbx_msgw_i64(&w, SBX_T_COLS, cols);
	}
	return request(s, &w, code, e);
}

/* ---- spawn ---- */

struct sbx_op *sbx_pty_spawn_async(struct sbx_session *s, const struct sbx_pty_spec *sp,
                                   struct sbx_err *e)
{
	if (sbx_session_error(s, e) != 0)
		return NULL;
	if (sp->command != NULL && sp->argv != NULL && sp->argv[0] != NULL) {
		sbx_err_set(e, SBX_EUSAGE, 0, "a pty session runs a command or an argv, not both");
		return NULL;
	}
	if (sp->rows < 0 || sp->rows > 65535 || sp->cols < 0 || sp->cols > 65535 ||
	    (sp->retain != 0 &&
	     (sp->retain < SBX_PTY_RETAIN_MIN || sp->retain > SBX_PTY_RETAIN_MAX))) {
		sbx_err_set(e, SBX_EUSAGE, 0, "rows and cols are 1..65535, retain 4 KiB..64 MiB");
		return NULL;
	}
	char *none[] = {NULL};
	struct sbx_cmd c = sbx_cmd_of(sp->argv != NULL ? sp->argv : none, sp->env, sp->env_clear,
	                              sp->cwd, sp->user, 0);
	if (sbx_cmd_check(&c, e) != 0)
		return NULL;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(128 + sbx_cmd_size(&c) + (sp->command ? strlen(sp->command) : 0),
	                         &w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_PTY_SPAWN);
	sbx_cmd_write(&w, &c);
	if (sp->command != NULL)
		sbx_msgw_str(&w, SBX_T_SHELL, sp->command);
	sbx_msgw_i64(&w, SBX_T_ROWS, sp->rows > 0 ? sp->rows : 24);
	sbx_msgw_i64(&w, SBX_T_COLS, sp->cols > 0 ? sp->cols : 80);
	sbx_msgw_i64(&w, SBX_T_PIPE, sp->pipe != 0);
	sbx_msgw_i64(&w, SBX_T_RETAIN,
	             sp->retain > 0 ? (int64_t)sp->retain : SBX_PTY_RETAIN_DEFAULT);
	struct sbx_op *o = request(s, &w, SBX_OP_PTY_SPAWN, e);
	free(b);
	return o;
}

int sbx_pty_spawn_result(const struct sbx_op *op, char id[SBX_PTY_ID_MAX], struct sbx_err *e)
{
	id[0] = '\0';
	if (result_of(op, SBX_OP_PTY_SPAWN, e) != 0)
		return -1;
	struct sbx_field f;
	char got[SBX_PTY_ID_MAX];
	if (sbx_msg_find(op->resp, op->resp_len, SBX_T_PTY_ID, &f) != 1 ||
	    f.len != SBX_PTY_ID_LEN || sbx_field_str(&f, got, sizeof got) != 0 ||
	    id_check(got, e) != 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "the agent's pty answer: no session id");
	memcpy(id, got, sizeof got);
	return 0;
}

int sbx_pty_spawn(struct sbx_session *s, const struct sbx_pty_spec *sp, char id[SBX_PTY_ID_MAX],
                  struct sbx_err *e)
{
	struct sbx_op *o = sbx_pty_spawn_async(s, sp, e);
	if (o == NULL)
		return -1;
	int64_t until = sbx_session_deadline(s);
	int rc = sbx_op_wait_until(o, until, e);
	if (rc == 0)
		rc = sbx_pty_spawn_result(o, id, e);
	sbx_op_free(o);
	return rc;
}

/* ---- status, resize, signal, close, list ---- */

struct sbx_op *sbx_pty_status_async(struct sbx_session *s, const char *id, struct sbx_err *e)
{
	return simple(s, SBX_OP_PTY_STATUS, id, NULL, 0, 0, e);
}

int sbx_pty_status_result(const struct sbx_op *op, struct sbx_pty_info *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (result_of(op, SBX_OP_PTY_STATUS, e) != 0)
		return -1;
	return sbx_ptymsg_info(op->resp, op->resp_len, st, e);
}

int sbx_pty_status(struct sbx_session *s, const char *id, struct sbx_pty_info *st,
                   struct sbx_err *e)
{
	struct sbx_op *o = sbx_pty_status_async(s, id, e);
	if (o == NULL)
		return -1;
	int64_t until = sbx_session_deadline(s);
	int rc = sbx_op_wait_until(o, until, e);
	if (rc == 0)
		rc = sbx_pty_status_result(o, st, e);
	sbx_op_free(o);
	return rc;
}

struct sbx_op *sbx_pty_resize_async(struct sbx_session *s, const char *id, int rows, int cols,
                                    struct sbx_err *e)
{
	if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535) {
		sbx_err_set(e, SBX_EUSAGE, 0, "rows and cols are 1..65535");
		return NULL;
	}
	return simple(s, SBX_OP_PTY_RESIZE, id, NULL, rows, cols, e);
}

int sbx_pty_resize(struct sbx_session *s, const char *id, int rows, int cols, struct sbx_err *e)
{
	return blocking(s, sbx_pty_resize_async(s, id, rows, cols, e), e);
}

struct sbx_op *sbx_pty_signal_async(struct sbx_session *s, const char *id, const char *name,
                                    struct sbx_err *e)
{
	if (name == NULL || name[0] == '\0') {
		sbx_err_set(e, SBX_EUSAGE, 0, "no signal name");
		return NULL;
	}
	return simple(s, SBX_OP_PTY_SIGNAL, id, name, 0, 0, e);
}

int sbx_pty_signal(struct sbx_session *s, const char *id, const char *name, struct sbx_err *e)
{
	return blocking(s, sbx_pty_signal_async(s, id, name, e), e);
}

struct sbx_op *sbx_pty_close_async(struct sbx_session *s, const char *id, struct sbx_err *e)
{
	return simple(s, SBX_OP_PTY_CLOSE, id, NULL, 0, 0, e);
}

int sbx_pty_close(struct sbx_session *s, const char *id, struct sbx_err *e)
{
	return blocking(s, sbx_pty_close_async(s, id, e), e);
}

int sbx_pty_op_result(const struct sbx_op *op, struct sbx_err *e)
{
	if (op->result != SBX_OP_PTY_RESIZE && op->result != SBX_OP_PTY_SIGNAL &&
	    op->result != SBX_OP_PTY_CLOSE)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not a pty resize, signal or close",
		                   sbx_op_name(op));
	return result_of(op, op->result, e);
}

struct sbx_op *sbx_pty_list_async(struct sbx_session *s, struct sbx_err *e)
{
	if (sbx_session_error(s, e) != 0)
		return NULL;
	uint8_t b[32];
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_PTY_LIST);
	return request(s, &w, SBX_OP_PTY_LIST, e);
}

int sbx_pty_list_result(const struct sbx_op *op, struct sbx_pty_info **out, size_t *n,
                        struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	if (result_of(op, SBX_OP_PTY_LIST, e) != 0)
		return -1;
	return sbx_ptymsg_list(op->resp, op->resp_len, SBX_PTY_MAX, out, n, e);
}

int sbx_pty_list(struct sbx_session *s, struct sbx_pty_info **out, size_t *n, struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	struct sbx_op *o = sbx_pty_list_async(s, e);
	if (o == NULL)
		return -1;
	int64_t until = sbx_session_deadline(s);
	int rc = sbx_op_wait_until(o, until, e);
	if (rc == 0)
		rc = sbx_pty_list_result(o, out, n, e);
	sbx_op_free(o);
	return rc;
}

/* ---- attach ---- */

struct attach_args {
	int64_t since[2];
};

struct sbx_op *sbx_pty_attach_async(struct sbx_session *s, const char *id, int takeover,
                                    int64_t since, int64_t since_err, struct sbx_err *e)
{
	if (sbx_session_error(s, e) != 0 || id_check(id, e) != 0)
		return NULL;
	if (since < 0 || since_err < 0) {
		sbx_err_set(e, SBX_EUSAGE, 0, "a replay offset is at least 0");
		return NULL;
	}
	uint8_t b[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_PTY_ATTACH);
	sbx_msgw_str(&w, SBX_T_PTY_ID, id);
	sbx_msgw_i64(&w, SBX_T_TAKEOVER, takeover != 0);
	sbx_msgw_i64(&w, SBX_T_SINCE, since);
	sbx_msgw_i64(&w, SBX_T_SINCE_ERR, since_err);
	struct sbx_op *o = request(s, &w, SBX_OP_PTY_ATTACH, e);
	if (o != NULL) {
		o->args[0] = since;
		o->args[1] = since_err;
	}
	return o;
}

int sbx_pty_attach_result(const struct sbx_op *op, struct sbx_pty_attach_info *ai,
                          struct sbx_err *e)
{
	memset(ai, 0, sizeof *ai);
	if (result_of(op, SBX_OP_PTY_ATTACH, e) != 0)
		return -1;
	return sbx_ptymsg_attach(op->resp, op->resp_len, op->args[0], op->args[1], ai, e);
}

/* ---- the live stream ---- */

struct chanbuf {
	uint8_t *b;
	size_t len, off, cap;
};

/* Owned by the stream's op (its hooks' context), so bytes arriving after the handle let go
 * land somewhere; the handle points at it while it lives. */
struct pty_ctx {
	struct sbx_exec_opts o;
	int rfd;              /* the job's stdin: the read end of the input pipe */
	struct chanbuf ch[2]; /* stdout (the terminal), stderr */
	int gone;             /* the handle let go: bytes are dropped */
};

struct sbx_pty {
	struct sbx_session *s;
	struct sbx_op *op;
	struct pty_ctx *c;
	int wfd;
	int64_t off[2];
	char id[SBX_PTY_ID_MAX];
	uint8_t ticket[16];
};

static void pty_data(struct sbx_op *op, void *ctx, int ch, const uint8_t *b, size_t n)
{
	struct pty_ctx *c = ctx;
	if (ch != SBX_CH_STDOUT && ch != SBX_CH_STDERR) {
		sbx_engine_consumed(&op->s->eng, op->p, ch, n);
		return;
	}
	struct chanbuf *q = &c->ch[ch - 1];
	if (n == 0) /* an empty frame: nothing to keep (and no buffer yet, maybe) */
		return;
	if (c->gone) {
		sbx_engine_consumed(&op->s->eng, op->p, ch, n);
		return;
	}
	if (q->off > 0 && q->off == q->len)
		q->off = q->len = 0;
	if (q->len + n > q->cap) {
		/* Compact, then grow: never past the credit the host granted, which bounds it. The
		 * first chunk finds no buffer (memmove of NULL is undefined even for 0 bytes). */
		if (q->off > 0) {
			memmove(q->b, q->b + q->off, q->len - q->off);
			q->len -= q->off;
			q->off = 0;
		}
		if (q->len + n > q->cap) {
			size_t cap = q->cap ? q->cap : 65536;
			while (cap < q->len + n)
				cap *= 2;
			uint8_t *nb = realloc(q->b, cap);
			if (nb == NULL) {
				sbx_op_stop(op, ENOMEM, "out of memory for pty output");
				return;
			}
			q->b = nb;
			q->cap = cap;
		}
	}
	memcpy(q->b + q->len, b, n);
	q->len += n;
}

static void pty_release(void *ctx)
{
	struct pty_ctx *c = ctx;
	if (c->rfd >= 0)
		close(c->rfd);
	free(c->ch[0].b);
	free(c->ch[1].b);
}

static const struct sbx_job_hooks pty_hooks = {.data = pty_data, .release = pty_release};

struct sbx_pty *sbx_pty_open(struct sbx_session *s, const char *id,
                             const struct sbx_pty_attach_info *ai, struct sbx_err *e)
{
	if (id_check(id, e) != 0)
		return NULL;
	struct sbx_pty *p = calloc(1, sizeof *p);
	struct pty_ctx *c = calloc(1, sizeof *c);
	int pp[2] = {-1, -1};
	if (p == NULL || c == NULL || pipe2(pp, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(p);
		free(c);
		sbx_err_set(e, SBX_EUNAVAILABLE, errno ? errno : ENOMEM, "pty stream");
		return NULL;
	}
	sbx_exec_opts_init(&c->o);
	c->o.stdin_fd = pp[0];
	c->rfd = pp[0];
	p->wfd = pp[1];
	p->s = s;
	p->c = c;
	p->off[0] = ai->start;
	p->off[1] = ai->start_err;
	memcpy(p->id, id, SBX_PTY_ID_MAX);
	memcpy(p->ticket, ai->ticket, sizeof p->ticket);
	uint8_t b[128];
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_PTY_STREAM);
	sbx_msgw_str(&w, SBX_T_PTY_ID, id);
	sbx_msgw_bytes(&w, SBX_T_TICKET, ai->ticket, sizeof ai->ticket);
	p->op = sbx_job_async(s, b, w.len, &c->o, &pty_hooks, c, e);
	if (p->op == NULL) {
		close(p->wfd);
		free(p);
		return NULL;
	}
	p->op->result = SBX_OP_PTY_STREAM;
	return p;
}

struct sbx_pty *sbx_pty_attach(struct sbx_session *s, const char *id, int takeover, int64_t since,
                               int64_t since_err, struct sbx_pty_attach_info *ai, struct sbx_err *e)
{
	struct sbx_op *o = sbx_pty_attach_async(s, id, takeover, since, since_err, e);
	if (o == NULL)
		return NULL;
	int64_t until = sbx_session_deadline(s);
	int rc = sbx_op_wait_until(o, until, e);
	if (rc == 0)
		rc = sbx_pty_attach_result(o, ai, e);
	sbx_op_free(o);
	return rc == 0 ? sbx_pty_open(s, id, ai, e) : NULL;
}

struct sbx_op *sbx_pty_op(const struct sbx_pty *p)
{
	return p->op;
}

size_t sbx_pty_buffered(const struct sbx_pty *p, int chan)
{
	if (chan != 1 && chan != 2)
		return 0;
	const struct chanbuf *q = &p->c->ch[chan - 1];
	return q->len - q->off;
}

int64_t sbx_pty_offset(const struct sbx_pty *p, int chan)
{
	return chan == 1 || chan == 2 ? p->off[chan - 1] : 0;
}

size_t sbx_pty_take(struct sbx_pty *p, int chan, void *buf, size_t cap, int *ended)
{
	*ended = 0;
	if (chan != 1 && chan != 2)
		return 0;
	struct chanbuf *q = &p->c->ch[chan - 1];
	size_t n = q->len - q->off;
	if (n > cap)
		n = cap;
	if (n > 0) {
		memcpy(buf, q->b + q->off, n);
		q->off += n;
		p->off[chan - 1] += (int64_t)n;
		/* Once the stream ended nothing is owed (and the session may be gone). */
		if (!sbx_op_done(p->op) && p->op->p != NULL && p->op->s != NULL) {
			sbx_engine_consumed(&p->op->s->eng, p->op->p, chan, n);
			sbx_session_kick(p->s);
		}
		return n;
	}
	*ended = sbx_op_done(p->op);
	return 0;
}

int sbx_pty_end_status(const struct sbx_pty *p, int *code, struct sbx_err *e)
{
	*code = -1;
	if (!sbx_op_done(p->op))
		return sbx_err_set(e, SBX_EUSAGE, 0, "the pty stream is still live");
	if (sbx_op_status(p->op, e) != 0 || sbx_op_answer_ok(p->op, e) != 0)
		return -1;
	int rc = sbx_ptymsg_end(p->op->resp, p->op->resp_len, code, e);
	if (rc == 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ECANCELED, "the pty stream was detached");
	return rc < 0 ? -1 : 0;
}

static int64_t until_of(struct sbx_pty *p, double timeout_s)
{
	double t = timeout_s < 0 ? sbx_session_timeout(p->s) : timeout_s;
	return sbx_now_ns() + (int64_t)(t * 1e9);
}

ssize_t sbx_pty_read(struct sbx_pty *p, int chan, void *buf, size_t cap, double timeout_s,
                     struct sbx_err *e)
{
	if (chan != 1 && chan != 2) {
		sbx_err_set(e, SBX_EUSAGE, 0, "a pty channel is 1 or 2");
		return -1;
	}
	int64_t until = until_of(p, timeout_s);
	for (;;) {
		int ended;
		size_t n = sbx_pty_take(p, chan, buf, cap, &ended);
		if (n > 0)
			return (ssize_t)n;
		if (ended) {
			int code;
			return sbx_pty_end_status(p, &code, e) == 0 ? 0 : -1;
		}
		if (sbx_now_ns() >= until) {
			sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT, "no pty output in time");
			return -1;
		}
		if (sbx_session_wait(p->s, until, e) != 0)
			return -1;
	}
}

ssize_t sbx_pty_put(struct sbx_pty *p, const void *data, size_t len, struct sbx_err *e)
{
	if (sbx_op_done(p->op)) {
		int code;
		if (sbx_pty_end_status(p, &code, e) == 0)
			sbx_err_set(e, SBX_EUSAGE, EPIPE, "the pty session's program has ended");
		return -1;
	}
	ssize_t n = write(p->wfd, data, len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0) {
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pty input");
		return -1;
	}
	return n;
}

int sbx_pty_write(struct sbx_pty *p, const void *data, size_t len, struct sbx_err *e)
{
	const uint8_t *b = data;
	int64_t until = until_of(p, -1);
	while (len > 0) {
		ssize_t n = sbx_pty_put(p, b, len, e);
		if (n < 0)
			return -1;
		if (n > 0) {
			b += n;
			len -= (size_t)n;
			sbx_session_step(p->s);
			continue;
		}
		if (sbx_now_ns() >= until)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "pty input not taken in time");
		if (sbx_session_wait(p->s, until, e) != 0)
			return -1;
	}
	return 0;
}

int sbx_pty_wait_exit(struct sbx_pty *p, double timeout_s, int *code, struct sbx_err *e)
{
	int64_t until = until_of(p, timeout_s);
	while (!sbx_op_done(p->op)) {
		if (sbx_now_ns() >= until)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "the pty program did not end in time");
		if (sbx_session_wait(p->s, until, e) != 0)
			return -1;
	}
	return sbx_pty_end_status(p, code, e);
}

void sbx_pty_detach(struct sbx_pty *p)
{
	if (p == NULL)
		return;
	p->c->gone = 1;
	/* The claim is given up in order with what follows on this session (a later attach is
	 * never refused as held by this stream); the stream's cancel then ends the relay. */
	if (!sbx_op_done(p->op) && sbx_session_error(p->s, NULL) == 0) {
		uint8_t b[128];
		struct sbx_msgw w;
		struct sbx_err e;
		sbx_msgw_init(&w, b, sizeof b);
		sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_PTY_DETACH);
		sbx_msgw_str(&w, SBX_T_PTY_ID, p->id);
		sbx_msgw_bytes(&w, SBX_T_TICKET, p->ticket, sizeof p->ticket);
		sbx_detached(p->s, &w, SBX_LANE_CTRL, &e);
	}
	/* Credit still owed for what sat unread is returned, so the agent's side drains. */
	for (int c = 0; c < 2; c++) {
		struct chanbuf *q = &p->c->ch[c];
		size_t n = q->len - q->off;
		if (n > 0 && !sbx_op_done(p->op) && p->op->p != NULL && p->op->s != NULL)
			sbx_engine_consumed(&p->op->s->eng, p->op->p, c + 1, n);
		q->off = q->len = 0;
	}
	if (!sbx_op_done(p->op))
		sbx_op_cancel(p->op);
	sbx_op_free(p->op);
	close(p->wfd);
	free(p);
}
