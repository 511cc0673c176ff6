/* Operations in flight on a session (session.h, sbx.h "Operations that do not block"): their
 * lifecycle (start, finish, cancel, free, the completion queue), the two classes most others
 * are made of (a request and its answer; a job with stdin and output), and the waits that make
 * the blocking calls out of them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

/* ---- lifecycle ---- */

struct sbx_op *sbx_op_new(struct sbx_session *s, const struct sbx_op_class *cls, size_t st_size,
                          struct sbx_err *e)
{
	struct sbx_op *op = calloc(1, sizeof *op);
	void *st = st_size > 0 ? calloc(1, st_size) : NULL;
	if (op == NULL || (st_size > 0 && st == NULL)) {
		free(op);
		free(st);
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "%s", cls->name);
		return NULL;
	}
	op->s = s;
	op->cls = cls;
	op->st = st;
	op->start_ns = sbx_now_ns();
	op->deadline_ns = op->timer_ns = INT64_MAX;
	for (int i = 0; i < SBX_OP_FDS; i++)
		op->fds[i].fd = -1;
	op->next = s->ops;
	s->ops = op;
	return op;
}

static void unlink_op(struct sbx_op *op)
{
	struct sbx_session *s = op->s;
	if (s == NULL)
		return;
	for (struct sbx_op **pp = &s->ops; *pp != NULL; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	struct sbx_op *prev = NULL;
	for (struct sbx_op *q = s->done_head; q != NULL; prev = q, q = q->next_done)
		if (q == op) {
			if (prev == NULL)
				s->done_head = q->next_done;
			else
				prev->next_done = q->next_done;
			if (s->done_tail == op)
				s->done_tail = prev;
			break;
		}
	op->s = NULL;
}

static void destroy(struct sbx_op *op)
{
	unlink_op(op);
	if (op->cls->release != NULL)
		op->cls->release(op);
	free(op->resp);
	free(op->st);
	free(op);
}

struct sbx_op *sbx_op_go(struct sbx_op *op, struct sbx_err *e)
{
	struct sbx_session *s = op->s;
	if (sbx_session_broken(s)) {
		sbx_session_error(s, e);
		destroy(op);
		return NULL;
	}
	op->cls->step(op, SBX_EV_START);
	sbx_session_kick(s);
	sbx_loop_note_dirty(s);
	if (op->done && op->rc != 0) {
		*e = op->err;
		destroy(op);
		return NULL;
	}
	return op;
}

void sbx_op_finish(struct sbx_op *op, int rc, const struct sbx_err *err)
{
	if (op->done)
		return;
	op->done = 1;
	op->rc = rc;
	if (rc != 0 && err != NULL)
		op->err = *err;
	op->done_ns = sbx_now_ns();
	struct sbx_session *s = op->s;
	if (op->p != NULL) {
		if (op->p->done) {
			/* The answer stays with the operation for its owner. */
			op->resp = op->p->resp;
			op->resp_len = op->p->resp_len;
			op->answered_ns = op->p->done_ns;
			op->p->resp = NULL;
		}
		if (s != NULL)
			sbx_engine_release(&s->eng, op->p);
		op->p = NULL;
	}
	for (int i = 0; i < SBX_OP_FDS; i++)
		op->fds[i].events = 0;
	op->stream_ready = op->credit_ready = 0;
	if (s == NULL)
		return;
	if (op == s->trust_op)
		for (struct sbx_op *q = s->ops; q != NULL; q = q->next)
			if (q->wait_trust) {
				q->wait_trust = 0;
				q->stream_ready = 1;
			}
	op->next_done = NULL;
	if (s->done_tail != NULL)
		s->done_tail->next_done = op;
	else
		s->done_head = op;
	s->done_tail = op;
	sbx_loop_note_done(s);
}

void sbx_op_stop(struct sbx_op *op, int err, const char *why)
{
	if (op->done || op->stopping)
		return;
	op->stopping = 1;
	sbx_err_set(&op->stop_err, SBX_EUNAVAILABLE, err, "%s: %s", op->cls->name, why);
	op->cls->step(op, SBX_EV_STOP);
	if (op->s != NULL) {
		sbx_session_kick(op->s); /* a CANCEL goes at once */
		sbx_loop_note_dirty(op->s);
	}
}

void sbx_op_cancel(struct sbx_op *op)
{
	if (op != NULL && op->s != NULL)
		sbx_op_stop(op, ECANCELED, "cancelled");
}

void sbx_op_free(struct sbx_op *op)
{
	if (op == NULL)
		return;
	if (!op->done && op->s != NULL) {
		/* Still running: stopped now, and freed by the session once it has ended. */
		op->orphan = 1;
		sbx_op_cancel(op);
		if (!op->done)
			return;
	}
	destroy(op);
}

void sbx_session_reap(struct sbx_session *s)
{
	for (struct sbx_op *op = s->ops, *next; op != NULL; op = next) {
		next = op->next;
		if (op->done && op->orphan)
			destroy(op);
	}
}

struct sbx_op *sbx_session_next_done(struct sbx_session *s)
{
	for (;;) {
		struct sbx_op *op = s->done_head;
		if (op == NULL)
			return NULL;
		s->done_head = op->next_done;
		if (s->done_head == NULL)
			s->done_tail = NULL;
		op->next_done = NULL;
		if (!op->orphan)
			return op;
	}
}

int sbx_op_done(const struct sbx_op *op)
{
	return op->done;
}

int sbx_op_status(const struct sbx_op *op, struct sbx_err *e)
{
	if (!op->done)
		return sbx_err_set(e, SBX_EUSAGE, EINPROGRESS, "%s: still running", op->cls->name);
	if (op->rc != 0 && e != NULL)
		*e = op->err;
	return op->rc;
}

void sbx_op_set_deadline(struct sbx_op *op, double seconds)
{
	op->deadline_ns = seconds > 0 ? sbx_now_ns() + (int64_t)(seconds * 1e9) : INT64_MAX;
	if (op->s != NULL)
		sbx_loop_note_dirty(op->s);
}

void sbx_op_set_tag(struct sbx_op *op, uintptr_t tag)
{
	op->tag = tag;
}

uintptr_t sbx_op_tag(const struct sbx_op *op)
{
	return op->tag;
}

const char *sbx_op_name(const struct sbx_op *op)
{
	return op->cls->name;
}

int sbx_op_wait_until(struct sbx_op *op, int64_t until, struct sbx_err *e)
{
	while (!op->done) {
		struct sbx_session *s = op->s;
		if (sbx_now_ns() >= until) {
			/* A blocking call's deadline is the session's: an agent that answers pings
			 * but not the request is broken. */
			sbx_session_fail(s, SBX_EUNAVAILABLE, ETIMEDOUT,
			                 "no answer from the agent before the deadline");
			break;
		}
		sbx_session_wait(s, until, NULL);
	}
	return sbx_op_status(op, e);
}

int sbx_op_wait(struct sbx_op *op, struct sbx_err *e)
{
	return sbx_op_wait_until(op, INT64_MAX, e);
}

/* ---- streams of operations ---- */

static void on_stream_data(struct sbx_stream *p, int ch, const uint8_t *b, size_t n, int end)
{
	struct sbx_op *op = p->ctx;
	if (op->cls->data != NULL)
		op->cls->data(op, ch, b, n, end);
	else
		sbx_engine_consumed(&op->s->eng, p, ch, n);
}

static void on_stream_done(struct sbx_stream *p)
{
	((struct sbx_op *)p->ctx)->stream_ready = 1;
}

static void on_stream_credit(struct sbx_stream *p)
{
	((struct sbx_op *)p->ctx)->credit_ready = 1;
}

static const struct sbx_stream_ops op_stream_ops = {on_stream_data, on_stream_done,
                                                    on_stream_credit};

struct sbx_stream *sbx_op_stream(struct sbx_op *op, int kind)
{
	struct sbx_session *s = op->s;
	if (op->p != NULL)
		sbx_engine_release(&s->eng, op->p);
	op->p = sbx_engine_stream(&s->eng, kind);
	if (op->p == NULL) {
		struct sbx_err e;
		sbx_err_set(&e, SBX_EUNAVAILABLE, ENOMEM, "%s", op->cls->name);
		sbx_op_finish(op, -1, &e);
		return NULL;
	}
	op->p->ops = &op_stream_ops;
	op->p->ctx = op;
	return op->p;
}

int sbx_op_send(struct sbx_op *op, int kind, const uint8_t *req, size_t len)
{
	struct sbx_err e;
	struct sbx_stream *p = sbx_op_stream(op, kind);
	if (p == NULL)
		return -1;
	if (sbx_engine_request(&op->s->eng, p, req, len, &e) != 0) {
		sbx_op_finish(op, -1, &e);
		return -1;
	}
	return 0;
}

int sbx_op_request(struct sbx_op *op, const struct sbx_msgw *w)
{
	if (w->overflow) {
		struct sbx_err e;
		sbx_err_set(&e, SBX_EUSAGE, 0, "request too large for one frame");
		sbx_op_finish(op, -1, &e);
		return -1;
	}
	return sbx_op_send(op, SBX_STREAM_REQ, w->buf, w->len);
}

int sbx_op_response(struct sbx_op *op, struct sbx_err *e)
{
	if (op->p == NULL || !op->p->done)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "%s: no answer", op->cls->name);
	return sbx_response_status(op->p->resp, op->p->resp_len, e);
}

int sbx_op_cancel_remote(struct sbx_op *op)
{
	if (op->p == NULL || op->p->done || op->s == NULL)
		return 0;
	return sbx_engine_send(&op->s->eng, SBX_LANE_CTRL, SBX_F_CANCEL, 0, op->p->id, NULL, 0,
	                       NULL, 0, NULL);
}

/* ---- a request and its answer ---- */

struct request_st {
	uint8_t *req;
	size_t len;
};

static void request_release(struct sbx_op *op)
{
	struct request_st *r = op->st;
	if (r != NULL && r->req != NULL) {
		memset(r->req, 0, r->len); /* a request may carry a secret */
		free(r->req);
		r->req = NULL;
	}
}

static void request_step(struct sbx_op *op, int ev)
{
	struct request_st *r = op->st;
	switch (ev) {
	case SBX_EV_START:
		sbx_op_send(op, SBX_STREAM_REQ, r->req, r->len);
		request_release(op); /* queued: the copy is not needed */
		break;
	case SBX_EV_STREAM: {
		/* Failed when its STATUS says so; the answer is kept either way (op->resp). */
		struct sbx_err e;
		int rc = sbx_op_response(op, &e);
		sbx_op_finish(op, rc, &e);
		break;
	}
	case SBX_EV_STOP:
		sbx_op_finish(op, -1, &op->stop_err);
		break;
	default:
		break;
	}
}

static const struct sbx_op_class request_class = {
        .name = "request", .step = request_step, .release = request_release};

struct sbx_op *sbx_request_async(struct sbx_session *s, const struct sbx_msgw *w, struct sbx_err *e)
{
	if (w->overflow) {
		sbx_err_set(e, SBX_EUSAGE, 0, "request too large for one frame");
		return NULL;
	}
	struct sbx_op *op = sbx_op_new(s, &request_class, sizeof(struct request_st), e);
	if (op == NULL)
		return NULL;
	struct request_st *r = op->st;
	r->req = malloc(w->len ? w->len : 1);
	if (r->req == NULL) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "request");
		destroy(op);
		return NULL;
	}
	memcpy(r->req, w->buf, w->len);
	r->len = w->len;
	return sbx_op_go(op, e);
}

int sbx_op_answer_ok(const struct sbx_op *op, struct sbx_err *e)
{
	if (op->resp == NULL)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "%s: no answer", op->cls->name);
	return sbx_response_status(op->resp, op->resp_len, e);
}

int sbx_call(struct sbx_session *s, const struct sbx_msgw *w, struct sbx_op **out,
             struct sbx_err *e)
{
	*out = NULL;
	int64_t until = sbx_session_deadline(s);
	struct sbx_op *op = sbx_request_async(s, w, e);
	if (op == NULL)
		return -1;
	if (sbx_op_wait_until(op, until, e) != 0 || sbx_op_answer_ok(op, e) != 0) {
		sbx_op_free(op);
		return -1;
	}
	*out = op;
	return 0;
}

int sbx_detached(struct sbx_session *s, const struct sbx_msgw *w, enum sbx_lane lane,
                 struct sbx_err *e)
{
	if (w->overflow)
		return sbx_err_set(e, SBX_EUSAGE, 0, "request too large for one frame");
	struct sbx_stream *p = sbx_engine_stream(&s->eng, SBX_STREAM_DETACHED);
	if (p == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "request");
	if (sbx_engine_send(&s->eng, lane, SBX_F_REQUEST, 0, p->id, NULL, 0, w->buf, w->len, e) !=
	    0) {
		sbx_engine_release(&s->eng, p);
		return -1;
	}
	return 0;
}

/* ---- a job: a request whose stream carries stdin and output ---- */

static void job_feed(struct sbx_op *op);

/* What can go of the job's stdin, now; its stdin_end hook once it all went. */
static void job_stdin(struct sbx_op *op)
{
	struct sbx_job *j = op->st;
	if (j->stdin_end || j->probing || op->p == NULL || op->p->done)
		return;
	job_feed(op);
	if (j->stdin_end && j->hooks != NULL && j->hooks->stdin_end != NULL)
		j->hooks->stdin_end(op, j->hctx);
}

static void job_feed(struct sbx_op *op)
{
	struct sbx_job *j = op->st;
	struct sbx_session *s = op->s;
	const struct sbx_exec_opts *o = j->o;
	int r;
	if (o->stdin_data != NULL) {
		r = sbx_session_stdin_buf(s, op->p, o->stdin_data, o->stdin_len, &j->stdin_off);
		if (r == 1)
			j->stdin_end = 1;
	} else {
		/* What went is the credit taken (none is granted during the call). */
		uint64_t before = op->p->tx_in.avail;
		r = sbx_session_stdin_fd(s, op->p, o->stdin_fd, &j->stdin_end);
		j->stdin_off += before - op->p->tx_in.avail;
	}
	/* 1 from an fd: poll it. Otherwise wait for credit (the credit callback says when) or
	 * for room in the channel's queue (credit_ready kept, delivered once there is room). */
	op->fds[0].fd = o->stdin_fd;
	op->fds[0].events = r == 1 && o->stdin_data == NULL && !j->stdin_end ? POLLIN : 0;
	if (r == 0 && !j->stdin_end && op->p->tx_in.avail > 0)
		op->credit_ready = 1;
}

/* The job's own request goes (after its probe, if any). */
static void job_begin(struct sbx_op *op)
{
	struct sbx_job *j = op->st;
	j->stdin_end = j->o->stdin_data == NULL && j->o->stdin_fd < 0;
	if (sbx_op_send(op, SBX_STREAM_JOB, j->req, j->len) != 0)
		return;
	free(j->req);
	j->req = NULL;
	job_stdin(op);
}

static void job_probed(struct sbx_op *op)
{
	struct sbx_job *j = op->st;
	struct sbx_err e;
	j->probing = 0;
	int rc = sbx_op_response(op, &e);
	if (rc == 0)
		rc = j->hooks->probed(op, j->hctx, &e);
	if (rc < 0)
		sbx_op_finish(op, -1, &e);
	else if (rc == 0)
		sbx_op_finish(op, 0, NULL);
	else
		job_begin(op);
}

static void job_step(struct sbx_op *op, int ev)
{
	struct sbx_job *j = op->st;
	switch (ev) {
	case SBX_EV_START:
		if (j->probe == NULL) {
			job_begin(op);
			break;
		}
		j->probing = 1;
		if (sbx_op_send(op, SBX_STREAM_REQ, j->probe, j->probe_len) != 0)
			return;
		free(j->probe);
		j->probe = NULL;
		break;
	case SBX_EV_FD:
		job_stdin(op);
		if (j->hooks != NULL && j->hooks->fd != NULL && !op->done)
			j->hooks->fd(op, j->hctx);
		break;
	case SBX_EV_CREDIT:
		job_stdin(op);
		break;
	case SBX_EV_STREAM:
		if (j->probing) {
			job_probed(op);
			break;
		}
		if (j->hooks != NULL && j->hooks->ended != NULL && j->hooks->ended(op, j->hctx))
			break; /* the hook finishes it */
		sbx_op_finish(op, 0, NULL);
		break;
	case SBX_EV_STOP:
		/* The command in the sandbox is cancelled; its late answer is dropped. */
		if (!sbx_session_broken(op->s) && !j->probing)
			sbx_op_cancel_remote(op);
		if (j->hooks != NULL && j->hooks->ended != NULL)
			j->hooks->ended(op, j->hctx);
		sbx_op_finish(op, -1, &op->stop_err);
		break;
	default:
		break;
	}
}

static void job_data(struct sbx_op *op, int ch, const uint8_t *b, size_t n, int end)
{
	(void)end;
	struct sbx_job *j = op->st;
	if (j->hooks != NULL && j->hooks->data != NULL) {
		j->hooks->data(op, j->hctx, ch, b, n);
		return;
	}
	const struct sbx_exec_opts *o = j->o;
	if (n > 0 && o->on_output != NULL && !j->sink_failed &&
	    o->on_output(o->ctx, ch, b, n) != 0) {
		j->sink_failed = 1;
		sbx_op_cancel_remote(op);
	}
	sbx_engine_consumed(&op->s->eng, op->p, ch, n);
}

static void job_release(struct sbx_op *op)
{
	struct sbx_job *j = op->st;
	if (j == NULL)
		return;
	free(j->req);
	free(j->probe);
	if (j->hooks != NULL && j->hooks->release != NULL && j->hctx != NULL)
		j->hooks->release(j->hctx);
	free(j->hctx);
}

static const struct sbx_op_class job_class = {
        .name = "job", .step = job_step, .release = job_release, .data = job_data};

static uint8_t *dup_bytes(const uint8_t *b, size_t len)
{
	uint8_t *c = malloc(len ? len : 1);
	if (c != NULL && len > 0)
		memcpy(c, b, len);
	return c;
}

struct sbx_op *sbx_job_probed_async(struct sbx_session *s, const uint8_t *probe, size_t plen,
                                    const uint8_t *req, size_t len, const struct sbx_exec_opts *o,
                                    const struct sbx_job_hooks *hooks, void *hctx,
                                    struct sbx_err *e)
{
	struct sbx_op *op = sbx_op_new(s, &job_class, sizeof(struct sbx_job), e);
	if (op == NULL) {
		if (hooks != NULL && hooks->release != NULL && hctx != NULL)
			hooks->release(hctx);
		free(hctx);
		return NULL;
	}
	struct sbx_job *j = op->st;
	j->o = o;
	j->hooks = hooks;
	j->hctx = hctx;
	j->req = dup_bytes(req, len);
	j->len = len;
	if (probe != NULL) {
		j->probe = dup_bytes(probe, plen);
		j->probe_len = plen;
	}
	if (j->req == NULL || (probe != NULL && j->probe == NULL)) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "job");
		destroy(op);
		return NULL;
	}
	return sbx_op_go(op, e);
}

struct sbx_op *sbx_job_async(struct sbx_session *s, const uint8_t *req, size_t len,
                             const struct sbx_exec_opts *o, const struct sbx_job_hooks *hooks,
                             void *hctx, struct sbx_err *e)
{
	return sbx_job_probed_async(s, NULL, 0, req, len, o, hooks, hctx, e);
}

int sbx_job_set_req(struct sbx_op *op, const uint8_t *req, size_t len, struct sbx_err *e)
{
	struct sbx_job *j = op->st;
	uint8_t *c = dup_bytes(req, len);
	if (c == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "job");
	free(j->req);
	j->req = c;
	j->len = len;
	return 0;
}

const struct sbx_job *sbx_op_job(const struct sbx_op *op)
{
	return op->cls == &job_class ? op->st : NULL;
}

void *sbx_op_job_ctx(const struct sbx_op *op)
{
	const struct sbx_job *j = sbx_op_job(op);
	return j != NULL ? j->hctx : NULL;
}
