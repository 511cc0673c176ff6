/* The operations of a session: probes (kind, stat, resolve, lands_clear) and exec, encoded
 * as REQUEST fields and decoded from RESPONSE fields (shared/proto.h). */
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

/* A request naming one path (kind, resolve); on success *out holds the answered stream. */
static int call_path(struct sbx_session *s, int op, const char *path, struct sbx_stream **out,
                     struct sbx_err *e)
{
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(64 + strlen(path), &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, op);
	sbx_msgw_str(&w, SBX_T_PATH, path);
	int rc = sbx_call(s, &w, out, e);
	free(b);
	return rc;
}

int sbx_kind(struct sbx_session *s, const char *path, enum sbx_kind *out, struct sbx_err *e)
{
	struct sbx_stream *p;
	if (call_path(s, SBX_OP_KIND, path, &p, e) != 0)
		return -1;
	int rc;
	struct sbx_field f;
	char kind[16];
	rc = sbx_msg_find(p->resp, p->resp_len, SBX_T_KIND, &f) == 1 &&
	                     sbx_field_str(&f, kind, sizeof kind) == 0
	             ? 0
	             : sbx_err_set(e, SBX_EPROTOCOL, 0, "kind response without a kind");
	if (rc == 0) {
		if (strcmp(kind, "dir") == 0)
			*out = SBX_KIND_DIR;
		else if (strcmp(kind, "file") == 0)
			*out = SBX_KIND_FILE;
		else if (strcmp(kind, "absent") == 0)
			*out = SBX_KIND_ABSENT;
		else
			rc = sbx_err_set(e, SBX_EPROTOCOL, 0, "unknown kind '%s'", kind);
	}
	sbx_stream_free(s, p);
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
		struct sbx_stream *p;
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
		sbx_stream_free(s, p);
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
	struct sbx_stream *p;
	if (call_path(s, SBX_OP_RESOLVE, path, &p, e) != 0)
		return -1;
	int rc = 0;
	struct sbx_field f;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_PHYSICAL, &f) == 1)
		*out = field_dup(&f);
	else
		rc = sbx_err_set(e, SBX_EPROTOCOL, 0, "resolve response without a path");
	sbx_stream_free(s, p);
	return rc;
}

int sbx_lands_clear(struct sbx_session *s, const char *dir, const char *const *keep_out, size_t n,
                    int *clear, char **physical, char **warning, struct sbx_err *e)
{
	if (physical != NULL)
		*physical = NULL;
	if (warning != NULL)
		*warning = NULL;
	size_t need = 64 + strlen(dir);
	for (size_t i = 0; i < n; i++)
		need += 6 + strlen(keep_out[i]);
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(need, &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_LANDS_CLEAR);
	sbx_msgw_str(&w, SBX_T_PATH, dir);
	for (size_t i = 0; i < n; i++)
		sbx_msgw_str(&w, SBX_T_KEEP_OUT, keep_out[i]);
	struct sbx_stream *p;
	int rc = sbx_call(s, &w, &p, e);
	free(b);
	if (rc != 0)
		return -1;
	struct sbx_field f;
	int64_t v;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_CLEAR, &f) != 1 ||
	    sbx_field_i64(&f, &v) != 0) {
		sbx_stream_free(s, p);
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "lands_clear response without an answer");
	}
	*clear = v != 0;
	if (physical != NULL && sbx_msg_find(p->resp, p->resp_len, SBX_T_PHYSICAL, &f) == 1)
		*physical = field_dup(&f);
	if (warning != NULL && !*clear &&
	    sbx_msg_find(p->resp, p->resp_len, SBX_T_MESSAGE, &f) == 1)
		*warning = field_dup(&f);
	sbx_stream_free(s, p);
	return 0;
}

void sbx_exec_opts_init(struct sbx_exec_opts *o)
{
	memset(o, 0, sizeof *o);
	o->stdin_fd = -1;
}

struct sbx_exec {
	struct sbx_stream *p;
	int64_t deadline_ns;
};

int sbx_exec_start(struct sbx_session *s, const struct sbx_exec_opts *o, struct sbx_exec **out,
                   struct sbx_err *e)
{
	*out = NULL;
	if (s->broken) {
		*e = s->broken_err;
		return -1;
	}
	if ((o->argv == NULL || o->argv[0] == NULL) == (o->shell == NULL))
		return sbx_err_set(e, SBX_EUSAGE, 0, "exec needs either argv or a shell string");
	struct sbx_cmd c = sbx_cmd_of(o->argv, o->env, o->env_clear, o->cwd, o->user, o->timeout_s);
	if (sbx_cmd_check(&c, e) != 0)
		return -1;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(
	        64 + sbx_cmd_size(&c) + (o->shell ? 6 + strlen(o->shell) : 0) + 3 * 14, &w, e);
	if (b == NULL)
		return -1;
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

	struct sbx_exec *x = calloc(1, sizeof *x);
	if (x == NULL) {
		free(b);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "exec");
	}
	int rc = sbx_job_start(s, b, w.len, o, &x->p, e);
	free(b);
	if (rc != 0) {
		free(x);
		return -1;
	}
	x->deadline_ns =
	        o->timeout_s > 0
	                ? x->p->start_ns + (int64_t)((o->timeout_s + sbx_session_timeout(s)) * 1e9)
	                : INT64_MAX;
	*out = x;
	return 0;
}

int sbx_job_start(struct sbx_session *s, const uint8_t *req, size_t len,
                  const struct sbx_exec_opts *o, struct sbx_stream **out, struct sbx_err *e)
{
	*out = NULL;
	struct sbx_stream *p = sbx_stream_new(s, SBX_STREAM_EXEC);
	if (p == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "job");
	p->opts = o;
	p->start_ns = sbx_now_ns();
	/* Which output channels the job may use: a command both, a download its archive on
	 * stdout, an upload none. */
	struct sbx_field of;
	int64_t op = 0;
	if (sbx_msg_find(req, len, SBX_T_OP, &of) == 1)
		sbx_field_i64(&of, &op);
	p->out_chans = op == SBX_OP_EXEC       ? 1u << SBX_CH_STDOUT | 1u << SBX_CH_STDERR
	               : op == SBX_OP_DOWNLOAD ? 1u << SBX_CH_STDOUT
	                                       : 0;
	for (int c = 0; c < SBX_CH_COUNT; c++)
		sbx_credit_rx_init(&p->rx[c], SBX_WINDOW_DEFAULT);
	sbx_credit_tx_init(&p->tx_in, (uint64_t)s->hello.window);
	p->stdin_done = o->stdin_data == NULL && o->stdin_fd < 0;
	if (sbx_send(s, SBX_LANE_CTRL, SBX_F_REQUEST, 0, p->id, NULL, 0, req, len, e) != 0) {
		sbx_stream_free(s, p);
		return -1;
	}
	*out = p;
	return 0;
}

int sbx_exec_wait(struct sbx_session *s, struct sbx_exec *x, struct sbx_exec_result *r,
                  struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	struct sbx_stream *p = x->p;
	int rc = sbx_wait_stream(s, p, x->deadline_ns, e);
	if (rc == 0)
		rc = sbx_response_status(p->resp, p->resp_len, e);
	if (rc == 0) {
		struct sbx_msgr rd;
		struct sbx_field f;
		int64_t outcome = -1;
		sbx_msgr_init(&rd, p->resp, p->resp_len);
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
		if (outcome < SBX_OUT_EXITED || outcome > SBX_OUT_NOT_STARTED)
			rc = sbx_err_set(e, SBX_EPROTOCOL, 0, "exec response without an outcome");
		r->outcome = (enum sbx_outcome)outcome;
		r->seconds = (double)(p->done_ns - p->start_ns) / 1e9;
		if (rc == 0 && p->sink_failed)
			rc = sbx_err_set(e, SBX_EUSAGE, 0,
			                 "the output sink refused data; the command was cancelled");
	}
	sbx_stream_free(s, p);
	free(x);
	return rc;
}

int sbx_exec_done(const struct sbx_exec *x)
{
	return x->p->done;
}

int sbx_exec(struct sbx_session *s, const struct sbx_exec_opts *o, struct sbx_exec_result *r,
             struct sbx_err *e)
{
	struct sbx_exec *x;
	memset(r, 0, sizeof *r);
	if (sbx_exec_start(s, o, &x, e) != 0)
		return -1;
	return sbx_exec_wait(s, x, r, e);
}
