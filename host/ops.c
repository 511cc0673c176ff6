/* The operations of a session: ping, probes (kind, stat, resolve, lands_clear) and exec,
 * encoded as REQUEST fields and decoded from RESPONSE fields (shared/proto.h); each blocking
 * call is its operation (op.c) waited for within the session's timeout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "proto.h"
#include "session.h"

/* Stat batches stay well inside one frame each way, whatever the paths' lengths. */
#define STAT_BATCH 64

const char *sbx_kind_name(enum sbx_kind k)
{
	return k == SBX_KIND_DIR ? "dir" : k == SBX_KIND_FILE ? "file" : "absent";
}

const char *sbx_outcome_name(enum sbx_outcome o)
{
	switch (o) {
	case SBX_OUT_EXITED:
		return "exited";
	case SBX_OUT_SIGNALED:
		return "signaled";
	case SBX_OUT_TIMED_OUT:
		return "timed_out";
	case SBX_OUT_NOT_STARTED:
		return "not_started";
	}
	return "unknown";
}

static char *field_dup(const struct sbx_field *f)
{
	char *s = malloc((size_t)f->len + 1);
	if (s != NULL) {
		memcpy(s, f->val, f->len);
		s[f->len] = '\0';
	}
	return s;
}

/* The REQUEST of an op naming one path (kind, resolve) into w (buf of b, freed by caller). */
static uint8_t *path_req(int op, const char *path, struct sbx_msgw *w, struct sbx_err *e)
{
	uint8_t *b = sbx_req_buf(64 + strlen(path), w, e);
	if (b != NULL) {
		sbx_msgw_i64(w, SBX_T_OP, op);
		sbx_msgw_str(w, SBX_T_PATH, path);
	}
	return b;
}

static int call_path(struct sbx_session *s, int op, const char *path, struct sbx_op **out,
                     struct sbx_err *e)
{
	struct sbx_msgw w;
	uint8_t *b = path_req(op, path, &w, e);
	if (b == NULL)
		return -1;
	int rc = sbx_call(s, &w, out, e);
	free(b);
	return rc;
}

/* The blocking form of an operation: waited for until the session's timeout, its result
 * taken by result (which judges the answer), then freed. */
static int finish_blocking(struct sbx_op *op, int64_t until, struct sbx_err *e)
{
	if (op == NULL)
		return -1;
	return sbx_op_wait_until(op, until, e);
}

/* ---- ping ---- */

static void ping_step(struct sbx_op *op, int ev)
{
	uint8_t payload[8];
	for (int i = 0; i < 8; i++)
		payload[i] = (uint8_t)(op->start_ns >> (8 * i));
	struct sbx_err e;
	switch (ev) {
	case SBX_EV_START:
		if (sbx_op_stream(op, SBX_STREAM_PING) == NULL)
			return;
		if (sbx_engine_send(&op->s->eng, SBX_LANE_CTRL, SBX_F_PING, 0, op->p->id, NULL, 0,
		                    payload, 8, &e) != 0)
			sbx_op_finish(op, -1, &e);
		break;
	case SBX_EV_STREAM:
		if (op->p->resp_len != 8 || memcmp(op->p->resp, payload, 8) != 0) {
			sbx_session_fail(op->s, SBX_EPROTOCOL, 0, "PONG does not echo the PING");
			return; /* stopped by the break */
		}
		sbx_op_finish(op, 0, NULL);
		break;
	case SBX_EV_STOP:
		sbx_op_finish(op, -1, &op->stop_err);
		break;
	default:
		break;
	}
}

static const struct sbx_op_class ping_class = {.name = "ping", .step = ping_step};

struct sbx_op *sbx_ping_async(struct sbx_session *s, struct sbx_err *e)
{
	struct sbx_op *op = sbx_op_new(s, &ping_class, 0, e);
	return op == NULL ? NULL : sbx_op_go(op, e);
}

int sbx_ping_result(const struct sbx_op *op, double *rtt_s, struct sbx_err *e)
{
	if (op->cls != &ping_class)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is not a ping", op->cls->name);
	if (sbx_op_status(op, e) != 0)
		return -1;
	if (rtt_s != NULL)
		*rtt_s = (double)(op->answered_ns - op->start_ns) / 1e9;
	return 0;
}

int sbx_ping(struct sbx_session *s, double *rtt_s, struct sbx_err *e)
{
	int64_t until = sbx_session_deadline(s);
	struct sbx_op *op = sbx_ping_async(s, e);
	int rc = finish_blocking(op, until, e);
	if (rc == 0)
		rc = sbx_ping_result(op, rtt_s, e);
	sbx_op_free(op);
	return rc;
}

/* ---- kind ---- */

uint8_t *sbx_kind_req(const char *path, struct sbx_msgw *w, struct sbx_err *e)
{
	return path_req(SBX_OP_KIND, path, w, e);
}

int sbx_kind_parse(const uint8_t *resp, size_t len, enum sbx_kind *out, struct sbx_err *e)
{
	if (resp == NULL)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "kind: no answer");
	if (sbx_response_status(resp, len, e) != 0)
		return -1;
	struct sbx_field f;
	char kind[16];
	if (sbx_msg_find(resp, len, SBX_T_KIND, &f) != 1 ||
	    sbx_field_str(&f, kind, sizeof kind) != 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "kind response without a kind");
	if (strcmp(kind, "dir") == 0)
		*out = SBX_KIND_DIR;
	else if (strcmp(kind, "file") == 0)
		*out = SBX_KIND_FILE;
	else if (strcmp(kind, "absent") == 0)
		*out = SBX_KIND_ABSENT;
	else
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "unknown kind '%s'", kind);
	return 0;
}

struct sbx_op *sbx_kind_async(struct sbx_session *s, const char *path, struct sbx_err *e)
{
	struct sbx_msgw w;
	uint8_t *b = path_req(SBX_OP_KIND, path, &w, e);
	if (b == NULL)
		return NULL;
	struct sbx_op *op = sbx_request_async(s, &w, e);
	free(b);
	if (op != NULL)
		op->result = SBX_OP_KIND;
	return op;
}

int sbx_kind_result(const struct sbx_op *op, enum sbx_kind *out, struct sbx_err *e)
{
	if (op->result != SBX_OP_KIND)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is not a kind probe", op->cls->name);
	if (sbx_op_status(op, e) != 0)
		return -1;
	return sbx_kind_parse(op->resp, op->resp_len, out, e);
}

int sbx_kind(struct sbx_session *s, const char *path, enum sbx_kind *out, struct sbx_err *e)
{
	int64_t until = sbx_session_deadline(s);
	struct sbx_op *op = sbx_kind_async(s, path, e);
	int rc = finish_blocking(op, until, e);
	if (rc == 0)
		rc = sbx_kind_result(op, out, e);
	sbx_op_free(op);
	return rc;
}

void sbx_stat_free(struct sbx_stat *st, size_t n)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(st[i].path);
		free(st[i].message);
		free(st[i].target);
	}
	free(st);
}

static int parse_entry(const struct sbx_field *ef, struct sbx_stat *st)
{
	struct sbx_msgr r;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&r, ef->val, ef->len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		int64_t v = 0;
		int is_int = sbx_field_i64(&f, &v) == 0;
		switch (f.tag) {
		case SBX_T_PATH:
			free(st->path);
			st->path = field_dup(&f);
			break;
		case SBX_T_ERRNO:
			st->err = is_int ? (int)v : EIO;
			break;
		case SBX_T_MESSAGE:
			free(st->message);
			st->message = field_dup(&f);
			break;
		case SBX_T_TYPE:
			if (sbx_field_str(&f, st->type, sizeof st->type) != 0)
				return -1;
			break;
		case SBX_T_MODE:
			st->mode = (uint32_t)v;
			break;
		case SBX_T_UID_OF:
			st->uid = v;
			break;
		case SBX_T_GID_OF:
			st->gid = v;
			break;
		case SBX_T_SIZE:
			st->size = v;
			break;
		case SBX_T_MTIME_NS:
			st->mtime_ns = v;
			break;
		case SBX_T_TARGET:
			free(st->target);
			st->target = field_dup(&f);
			break;
		default:
			break;
		}
	}
	return rc < 0 || st->path == NULL ? -1 : 0;
}

int sbx_stat(struct sbx_session *s, const char *const *paths, size_t n, struct sbx_stat **out,
             struct sbx_err *e)
{
	*out = NULL;
	struct sbx_stat *res = calloc(n ? n : 1, sizeof *res);
	if (res == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "stat results");
	for (size_t base = 0; base < n; base += STAT_BATCH) {
		size_t cnt = n - base < STAT_BATCH ? n - base : STAT_BATCH, need = 64;
		for (size_t i = 0; i < cnt; i++)
			need += 6 + strlen(paths[base + i]);
		struct sbx_msgw w;
		uint8_t *b = sbx_req_buf(need, &w, e);
		if (b == NULL)
			goto fail;
		sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_STAT);
		for (size_t i = 0; i < cnt; i++)
			sbx_msgw_str(&w, SBX_T_PATH, paths[base + i]);
		struct sbx_op *p;
		int rc = sbx_call(s, &w, &p, e);
		free(b);
		if (rc != 0)
			goto fail;
		struct sbx_msgr r;
		struct sbx_field f;
		size_t got = 0;
		sbx_msgr_init(&r, p->resp, p->resp_len);
		while ((rc = sbx_msgr_next(&r, &f)) == 1) {
			if (f.tag != SBX_T_ENTRY)
				continue;
			/* Each entry answers the path asked at its place, byte for byte. */
			if (got >= cnt || parse_entry(&f, &res[base + got]) != 0 ||
			    strcmp(res[base + got].path, paths[base + got]) != 0) {
				rc = -1;
				break;
			}
			got++;
		}
		sbx_op_free(p);
		if (rc < 0 || got != cnt) {
			sbx_err_set(e, SBX_EPROTOCOL, 0,
			            "stat response does not match the request");
			goto fail;
		}
	}
	*out = res;
	return 0;
fail:
	sbx_stat_free(res, n);
	return -1;
}

int sbx_resolve(struct sbx_session *s, const char *path, char **out, struct sbx_err *e)
{
	*out = NULL;
	struct sbx_op *p;
	if (call_path(s, SBX_OP_RESOLVE, path, &p, e) != 0)
		return -1;
	int rc = 0;
	struct sbx_field f;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_PHYSICAL, &f) == 1)
		*out = field_dup(&f);
	else
		rc = sbx_err_set(e, SBX_EPROTOCOL, 0, "resolve response without a path");
	sbx_op_free(p);
	return rc;
}

uint8_t *sbx_lands_clear_req(const char *dir, const char *const *keep_out, size_t n,
                             struct sbx_msgw *w, struct sbx_err *e)
{
	size_t need = 64 + strlen(dir);
	for (size_t i = 0; i < n; i++)
		need += 6 + strlen(keep_out[i]);
	uint8_t *b = sbx_req_buf(need, w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(w, SBX_T_OP, SBX_OP_LANDS_CLEAR);
	sbx_msgw_str(w, SBX_T_PATH, dir);
	for (size_t i = 0; i < n; i++)
		sbx_msgw_str(w, SBX_T_KEEP_OUT, keep_out[i]);
	return b;
}

int sbx_lands_clear_parse(const uint8_t *resp, size_t len, int *clear, char **physical,
                          char **warning, struct sbx_err *e)
{
	if (physical != NULL)
		*physical = NULL;
	if (warning != NULL)
		*warning = NULL;
	struct sbx_field f;
	int64_t v;
	if (resp == NULL || sbx_msg_find(resp, len, SBX_T_CLEAR, &f) != 1 ||
	    sbx_field_i64(&f, &v) != 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "lands_clear response without an answer");
	*clear = v != 0;
	if (physical != NULL && sbx_msg_find(resp, len, SBX_T_PHYSICAL, &f) == 1)
		*physical = field_dup(&f);
	if (warning != NULL && !*clear && sbx_msg_find(resp, len, SBX_T_MESSAGE, &f) == 1)
		*warning = field_dup(&f);
	return 0;
}

int sbx_lands_clear(struct sbx_session *s, const char *dir, const char *const *keep_out, size_t n,
                    int *clear, char **physical, char **warning, struct sbx_err *e)
{
	if (physical != NULL)
		*physical = NULL;
	if (warning != NULL)
		*warning = NULL;
	struct sbx_msgw w;
	uint8_t *b = sbx_lands_clear_req(dir, keep_out, n, &w, e);
	if (b == NULL)
		return -1;
	struct sbx_op *p;
	int rc = sbx_call(s, &w, &p, e);
	free(b);
	if (rc != 0)
		return -1;
	rc = sbx_lands_clear_parse(p->resp, p->resp_len, clear, physical, warning, e);
	sbx_op_free(p);
	return rc;
}

void sbx_exec_opts_init(struct sbx_exec_opts *o)
{
	memset(o, 0, sizeof *o);
	o->stdin_fd = -1;
}

struct sbx_op *sbx_exec_async(struct sbx_session *s, const struct sbx_exec_opts *o,
                              struct sbx_err *e)
{
	if (sbx_session_error(s, e) != 0)
		return NULL;
	if ((o->argv == NULL || o->argv[0] == NULL) == (o->shell == NULL)) {
		sbx_err_set(e, SBX_EUSAGE, 0, "exec needs either argv or a shell string");
		return NULL;
	}
	struct sbx_cmd c = sbx_cmd_of(o->argv, o->env, o->env_clear, o->cwd, o->user, o->timeout_s);
	if (sbx_cmd_check(&c, e) != 0)
		return NULL;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(
	        64 + sbx_cmd_size(&c) + (o->shell ? 6 + strlen(o->shell) : 0) + 3 * 14, &w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_EXEC);
	sbx_cmd_write(&w, &c);
	if (o->shell != NULL)
		sbx_msgw_str(&w, SBX_T_SHELL, o->shell);
	sbx_msgw_i64(&w, SBX_T_LINGER_MS,
	             o->linger_ms == 0  ? 200
	             : o->linger_ms < 0 ? 0
	                                : o->linger_ms);
	int has_stdin = o->stdin_data != NULL || o->stdin_fd >= 0;
	sbx_msgw_i64(&w, SBX_T_STDIN, has_stdin);
	struct sbx_op *op = sbx_job_async(s, b, w.len, o, NULL, NULL, e);
	free(b);
	if (op != NULL)
		op->result = SBX_OP_EXEC;
	return op;
}

int sbx_exec_result(const struct sbx_op *op, struct sbx_exec_result *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	const struct sbx_job *j = sbx_op_job(op);
	if (j == NULL || op->result != SBX_OP_EXEC)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is not an exec", op->cls->name);
	if (sbx_op_status(op, e) != 0 || sbx_op_answer_ok(op, e) != 0)
		return -1;
	struct sbx_msgr rd;
	struct sbx_field f;
	int64_t outcome = -1;
	sbx_msgr_init(&rd, op->resp, op->resp_len);
	while (sbx_msgr_next(&rd, &f) == 1) {
		int64_t v = 0;
		sbx_field_i64(&f, &v);
		switch (f.tag) {
		case SBX_T_OUTCOME:
			outcome = v;
			break;
		case SBX_T_CODE:
			r->code = (int)v;
			break;
		case SBX_T_SIGNAL:
			r->signal = (int)v;
			break;
		case SBX_T_ERRNO:
			r->err = (int)v;
			break;
		case SBX_T_MESSAGE:
			if (f.len < sizeof r->message)
				sbx_field_str(&f, r->message, sizeof r->message);
			break;
		case SBX_T_USER_FALLBACK:
			r->user_fallback = v != 0;
			break;
		case SBX_T_CANCELLED:
			r->cancelled = v != 0;
			break;
		case SBX_T_NOTE:
			if (f.len < sizeof r->note)
				sbx_field_str(&f, r->note, sizeof r->note);
			break;
		case SBX_T_PID:
			r->pid = v;
			break;
		default:
			break;
		}
	}
	r->outcome = (enum sbx_outcome)outcome;
	r->seconds = (double)(op->answered_ns - op->start_ns) / 1e9;
	if (outcome < SBX_OUT_EXITED || outcome > SBX_OUT_NOT_STARTED)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "exec response without an outcome");
	if (j->sink_failed)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "the output sink refused data; the command was cancelled");
	return 0;
}

int sbx_exec(struct sbx_session *s, const struct sbx_exec_opts *o, struct sbx_exec_result *r,
             struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	/* The command's own timeout, then the session's for the answer. */
	int64_t until =
	        o->timeout_s > 0
	                ? sbx_now_ns() + (int64_t)((o->timeout_s + sbx_session_timeout(s)) * 1e9)
	                : INT64_MAX;
	struct sbx_op *op = sbx_exec_async(s, o, e);
	int rc = finish_blocking(op, until, e);
	if (rc == 0)
		rc = sbx_exec_result(op, r, e);
	sbx_op_free(op);
	return rc;
}

/* ---- requests ---- */

uint8_t *sbx_req_buf(size_t need, struct sbx_msgw *w, struct sbx_err *e)
{
	if (need > SBX_FRAME_MAX_PAYLOAD) {
		sbx_err_set(e, SBX_EUSAGE, 0, "request too large for one frame");
		return NULL;
	}
	uint8_t *b = malloc(need);
	if (b == NULL)
		sbx_err_set(e, SBX_EUSAGE, ENOMEM, "request");
	else
		sbx_msgw_init(w, b, need);
	return b;
}

int sbx_response_status(const uint8_t *p, size_t len, struct sbx_err *e)
{
	struct sbx_msgr r;
	struct sbx_field f;
	int64_t status = -1, err = 0;
	char msg[200] = "";
	sbx_msgr_init(&r, p, len);
	int rc;
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag == SBX_T_STATUS)
			sbx_field_i64(&f, &status);
		else if (f.tag == SBX_T_ERRNO)
			sbx_field_i64(&f, &err);
		else if (f.tag == SBX_T_MESSAGE && f.len < sizeof msg)
			sbx_field_str(&f, msg, sizeof msg);
	}
	if (rc < 0 || status < 0 || status > SBX_EUSAGE)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "malformed response from the agent");
	if (status == 0)
		return 0;
	sbx_err_set(e, (enum sbx_err_class)status, 0, "%s", msg);
	e->errnum = (int)err;
	return -1;
}
