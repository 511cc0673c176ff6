/* Host side of harness supervision: the run, stop, expire, status, read, rearm and close
 * requests, and receipt fetching, parsing and signature checking. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cmd.h"
#include "digest.h"
#include "json.h"
#include "proto.h"
#include "session.h"

void sbx_run_opts_init(struct sbx_run_opts *o)
{
	memset(o, 0, sizeof *o);
	o->grace_s = -1;
}

/* ---- launching a run: trust first (asked now if only planned), then the MACed request ---- */

struct run_st {
	uint8_t *req;
	size_t len;
	uint8_t nonce[SBX_NONCE_LEN];
	uint8_t key[SBX_RUN_KEY_LEN]; /* once launched */
};

static void run_send(struct sbx_op *op)
{
	struct run_st *r = op->st;
	struct sbx_err e;
	int t = sbx_trust_state(op->s, &e);
	if (t < 0) {
		sbx_op_finish(op, -1, &e);
		return;
	}
	if (t == 0) {
		op->wait_trust = 1;
		return;
	}
	/* Last: the MAC of everything before it, so no relay can change the harness, its user,
	 * its environment or its deadline. The secret is the one trust proved. */
	struct sbx_msgw w;
	sbx_msgw_init(&w, r->req, r->len + 2 + SBX_MAC_LEN + 8);
	w.len = r->len;
	uint8_t mac[SBX_MAC_LEN];
	sbx_trust_run_mac(op->s->secret, w.buf, w.len, mac);
	sbx_msgw_bytes(&w, SBX_T_MAC, mac, sizeof mac);
	sbx_op_send(op, SBX_STREAM_REQ, w.buf, w.len);
}

static void run_step(struct sbx_op *op, int ev)
{
	struct sbx_err e;
	switch (ev) {
	case SBX_EV_START:
		run_send(op);
		break;
	case SBX_EV_STREAM:
		if (op->p == NULL) { /* trust was decided */
			run_send(op);
		} else {
			/* The run's key is derived from the secret the keeper proved it holds: only
			 * it can have launched a run whose receipt verifies. */
			int rc = sbx_op_response(op, &e);
			struct run_st *r = op->st;
			if (rc == 0)
				sbx_trust_run_key(op->s->secret, r->nonce, r->key);
			sbx_op_finish(op, rc, &e);
		}
		break;
	case SBX_EV_STOP:
		sbx_op_finish(op, -1, &op->stop_err);
		break;
	default:
		break;
	}
}

static void run_release(struct sbx_op *op)
{
	struct run_st *r = op->st;
	if (r != NULL) {
		free(r->req);
		memset(r->key, 0, sizeof r->key);
	}
}

static const struct sbx_op_class run_class = {
        .name = "run", .step = run_step, .release = run_release};

struct sbx_op *sbx_run_start_async(struct sbx_session *s, const struct sbx_run_opts *o,
                                   struct sbx_err *e)
{
	if (o->run_dir == NULL || o->run_dir[0] != '/') {
		sbx_err_set(e, SBX_EUSAGE, 0, "run needs an absolute run folder");
		return NULL;
	}
	if (o->argv == NULL || o->argv[0] == NULL) {
		sbx_err_set(e, SBX_EUSAGE, 0, "run needs a harness argv");
		return NULL;
	}
	struct sbx_cmd c = sbx_cmd_of(o->argv, o->env, o->env_clear, o->cwd, o->user, o->timeout_s);
	if (sbx_cmd_check(&c, e) != 0)
		return NULL;
	struct sbx_op *op = sbx_op_new(s, &run_class, sizeof(struct run_st), e);
	if (op == NULL)
		return NULL;
	struct run_st *r = op->st;
	struct sbx_msgw w;
	size_t need = 256 + strlen(o->run_dir) + sbx_cmd_size(&c);
	r->req = sbx_req_buf(need + 2 + SBX_MAC_LEN + 8, &w, e);
	if (r->req == NULL || getrandom(r->nonce, sizeof r->nonce, 0) != (ssize_t)sizeof r->nonce) {
		if (r->req != NULL)
			sbx_err_set(e, SBX_EUNAVAILABLE, errno, "getrandom");
		sbx_op_finish(op, -1, e);
		sbx_op_free(op);
		return NULL;
	}
	sbx_msgw_init(&w, r->req, need);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SUP_RUN);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, o->run_dir);
	sbx_cmd_write(&w, &c);
	if (o->grace_s >= 0)
		sbx_msgw_i64(&w, SBX_T_GRACE_MS, (int64_t)(o->grace_s * 1000 + 0.5));
	if (o->log_max > 0)
		sbx_msgw_i64(&w, SBX_T_LOG_MAX, o->log_max);
	sbx_msgw_bytes(&w, SBX_T_NONCE, r->nonce, sizeof r->nonce);
	if (w.overflow) {
		sbx_err_set(e, SBX_EUSAGE, 0, "run request too large for one frame");
		sbx_op_finish(op, -1, e);
		sbx_op_free(op);
		return NULL;
	}
	r->len = w.len;
	op->result = SBX_OP_SUP_RUN;
	return sbx_op_go(op, e);
}

int sbx_run_start_result(const struct sbx_op *op, int64_t *pid, uint8_t key[SBX_RUN_KEY_LEN],
                         struct sbx_err *e)
{
	if (op->cls != &run_class)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s is not a run", op->cls->name);
	if (sbx_op_status(op, e) != 0)
		return -1;
	const struct run_st *r = op->st;
	struct sbx_field f;
	int64_t v = 0;
	if (pid != NULL)
		*pid = sbx_msg_find(op->resp, op->resp_len, SBX_T_PID, &f) == 1 &&
		                       sbx_field_i64(&f, &v) == 0
		               ? v
		               : 0;
	memcpy(key, r->key, SBX_RUN_KEY_LEN);
	return 0;
}

int sbx_run_start(struct sbx_session *s, const struct sbx_run_opts *o, int64_t *pid,
                  uint8_t key[SBX_RUN_KEY_LEN], struct sbx_err *e)
{
	int64_t until = sbx_now_ns() + (int64_t)(2 * sbx_session_timeout(s) * 1e9);
	struct sbx_op *op = sbx_run_start_async(s, o, e);
	if (op == NULL)
		return -1;
	int rc = sbx_op_wait_until(op, until, e);
	if (rc == 0)
		rc = sbx_run_start_result(op, pid, key, e);
	sbx_op_free(op);
	return rc;
}

/* A request that names only the run folder (and maybe a kind and a message). */
static struct sbx_op *simple_async(struct sbx_session *s, int op, const char *run_dir,
                                   const char *name, const char *msg, struct sbx_err *e)
{
	if (run_dir == NULL || run_dir[0] == '\0') {
		sbx_err_set(e, SBX_EUSAGE, 0, "no run folder");
		return NULL;
	}
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(
	        128 + strlen(run_dir) + (name ? strlen(name) : 0) + (msg ? strlen(msg) : 0), &w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(&w, SBX_T_OP, op);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, run_dir);
	if (name != NULL)
		sbx_msgw_str(&w, SBX_T_NAME, name);
	if (msg != NULL)
		sbx_msgw_str(&w, SBX_T_MESSAGE, msg);
	struct sbx_op *o = sbx_request_async(s, &w, e);
	free(b);
	if (o != NULL)
		o->result = op;
	return o;
}

/* The blocking form: o waited for within the session's timeout; on success it is *out. */
static int blocking(struct sbx_session *s, struct sbx_op *o, struct sbx_op **out, struct sbx_err *e)
{
	*out = NULL;
	if (o == NULL)
		return -1;
	int64_t until = sbx_session_deadline(s);
	if (sbx_op_wait_until(o, until, e) != 0) {
		sbx_op_free(o);
		return -1;
	}
	*out = o;
	return 0;
}

/* The op is a done request of this OP: 0, or -1 with *e (its failure, or a misuse). */
static int result_of(const struct sbx_op *op, int code, struct sbx_err *e)
{
	if (op->result != code)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not the request asked about",
		                   sbx_op_name(op));
	return sbx_op_status(op, e);
}

struct sbx_op *sbx_run_stop_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	return simple_async(s, SBX_OP_SUP_SIGNAL, run_dir, "stop", NULL, e);
}

struct sbx_op *sbx_run_expire_async(struct sbx_session *s, const char *run_dir, const char *reason,
                                    struct sbx_err *e)
{
	return simple_async(s, SBX_OP_SUP_SIGNAL, run_dir, "expire", reason ? reason : "", e);
}

int sbx_run_expire_result(const struct sbx_op *op, int *placed, struct sbx_err *e)
{
	if (result_of(op, SBX_OP_SUP_SIGNAL, e) != 0)
		return -1;
	struct sbx_field f;
	int64_t v = 1;
	if (sbx_msg_find(op->resp, op->resp_len, SBX_T_CLEAR, &f) == 1)
		sbx_field_i64(&f, &v);
	if (placed != NULL)
		*placed = v != 0;
	return 0;
}

struct sbx_op *sbx_run_status_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	return simple_async(s, SBX_OP_SUP_STATUS, run_dir, NULL, NULL, e);
}

int sbx_run_status_result(const struct sbx_op *op, struct sbx_run_status *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (result_of(op, SBX_OP_SUP_STATUS, e) != 0)
		return -1;
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, op->resp, op->resp_len);
	while (sbx_msgr_next(&r, &f) == 1) {
		int64_t v = 0;
		sbx_field_i64(&f, &v);
		if (f.tag == SBX_T_STATE)
			sbx_field_str(&f, st->state, sizeof st->state);
		else if (f.tag == SBX_T_ALIVE)
			st->alive = v != 0;
		else if (f.tag == SBX_T_HAS_RECEIPT)
			st->has_receipt = v != 0;
		else if (f.tag == SBX_T_ACTIVATION)
			st->activation = v;
		else if (f.tag == SBX_T_SIZE)
			st->log_size = v;
	}
	return 0;
}

struct sbx_op *sbx_run_read_async(struct sbx_session *s, const char *run_dir, const char *name,
                                  int64_t offset, size_t max, struct sbx_err *e)
{
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(128 + strlen(run_dir) + strlen(name), &w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SUP_READ);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, run_dir);
	sbx_msgw_str(&w, SBX_T_NAME, name);
	sbx_msgw_i64(&w, SBX_T_OFFSET, offset);
	sbx_msgw_i64(&w, SBX_T_LENGTH, (int64_t)max);
	struct sbx_op *o = sbx_request_async(s, &w, e);
	free(b);
	if (o != NULL) {
		o->result = SBX_OP_SUP_READ;
		o->args[0] = offset;
		o->args[1] = (int64_t)max;
	}
	return o;
}

int sbx_run_read_result(const struct sbx_op *op, char **data, size_t *len, int64_t *size,
                        struct sbx_err *e)
{
	*data = NULL;
	*len = 0;
	if (result_of(op, SBX_OP_SUP_READ, e) != 0)
		return -1;
	int64_t offset = op->args[0];
	size_t max = (size_t)op->args[1];
	struct sbx_field f;
	int64_t fsize = -1;
	if (sbx_msg_find(op->resp, op->resp_len, SBX_T_SIZE, &f) != 1 ||
	    sbx_field_i64(&f, &fsize) != 0 || fsize < 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "read response without the file's size");
	if (size != NULL)
		*size = fsize;
	if (sbx_msg_find(op->resp, op->resp_len, SBX_T_BYTES, &f) != 1)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "read response without bytes");
	/* No more than asked for, and no more than the file the agent says it has. */
	if (f.len > max || fsize - offset < (int64_t)f.len)
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "read response with %u bytes, more than asked (%zu) or than the "
		                   "file holds",
		                   (unsigned)f.len, max);
	*data = malloc((size_t)f.len + 1);
	if (*data == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "read");
	memcpy(*data, f.val, f.len);
	(*data)[f.len] = '\0';
	*len = f.len;
	return 0;
}

int sbx_run_stop(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_op *p;
	if (blocking(s, sbx_run_stop_async(s, run_dir, e), &p, e) != 0)
		return -1;
	sbx_op_free(p);
	return 0;
}

int sbx_run_expire(struct sbx_session *s, const char *run_dir, const char *reason, int *placed,
                   struct sbx_err *e)
{
	struct sbx_op *p;
	if (blocking(s, sbx_run_expire_async(s, run_dir, reason, e), &p, e) != 0)
		return -1;
	int rc = sbx_run_expire_result(p, placed, e);
	sbx_op_free(p);
	return rc;
}

int sbx_run_status(struct sbx_session *s, const char *run_dir, struct sbx_run_status *st,
                   struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	struct sbx_op *p;
	if (blocking(s, sbx_run_status_async(s, run_dir, e), &p, e) != 0)
		return -1;
	int rc = sbx_run_status_result(p, st, e);
	sbx_op_free(p);
	return rc;
}

int sbx_run_read(struct sbx_session *s, const char *run_dir, const char *name, int64_t offset,
                 size_t max, char **data, size_t *len, int64_t *size, struct sbx_err *e)
{
	*data = NULL;
	*len = 0;
	struct sbx_op *p;
	if (blocking(s, sbx_run_read_async(s, run_dir, name, offset, max, e), &p, e) != 0)
		return -1;
	int rc = sbx_run_read_result(p, data, len, size, e);
	sbx_op_free(p);
	return rc;
}

void sbx_receipt_free(struct sbx_receipt *r)
{
	free(r->json);
	memset(r, 0, sizeof *r);
}

static int64_t jint(const struct sbx_json *j, const char *key, int64_t dflt)
{
	int64_t v;
	const struct sbx_json *x = sbx_json_get(j, key);
	return x != NULL && sbx_json_int(x, &v) == 0 ? v : dflt;
}

static int jbool(const struct sbx_json *j, const char *key)
{
	int v;
	const struct sbx_json *x = sbx_json_get(j, key);
	return x != NULL && sbx_json_bool(x, &v) == 0 ? v : 0;
}

int sbx_receipt_parse(const char *json, size_t len, const char *sig_hex, const uint8_t *key,
                      size_t key_len, struct sbx_receipt *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	struct sbx_json *j;
	size_t body = len;
	while (body > 0 && (json[body - 1] == '\n' || json[body - 1] == '\r'))
		body--;
	if (sbx_json_parse(json, body, &j, e) != 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "the receipt is not JSON: %s", e->msg);
	if (j->type != SBX_JSON_OBJECT || jint(j, "version", 0) != 2) {
		sbx_json_free(j);
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "not a version 2 receipt");
	}
	r->json = malloc(len + 1);
	if (r->json == NULL) {
		sbx_json_free(j);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "receipt");
	}
	memcpy(r->json, json, len);
	r->json[len] = '\0';
	r->len = len;
	const struct sbx_json *t = sbx_json_get(j, "trigger");
	size_t tl;
	const char *ts = t ? sbx_json_str(t, &tl) : NULL;
	snprintf(r->trigger, sizeof r->trigger, "%s", ts ? ts : "");
	r->status = (int)jint(j, "status", 125);
	r->timed_out = jbool(j, "timed_out");
	r->cancelled = jbool(j, "cancelled");
	r->expired_before_launch = jbool(j, "expired_before_launch");
	r->launched = jbool(j, "launched");
	r->termination_witnessed = jbool(j, "termination_witnessed");
	r->kill_rounds = jint(j, "kill_rounds", 0);
	r->activation = jint(j, "activation", 0);
	const struct sbx_json *ex = sbx_json_get(j, "exit");
	r->exit_code = ex ? (int)jint(ex, "code", -1) : -1;
	r->exit_signal = ex ? (int)jint(ex, "signal", -1) : -1;
	const struct sbx_json *oom = sbx_json_get(j, "oom");
	r->oom_kills = oom ? jint(oom, "kills", 0) : 0;
	sbx_json_free(j);

	/* The signature covers the file's exact bytes; compared in constant time. */
	r->verified = 0;
	if (key_len > 0 && sig_hex != NULL && strlen(sig_hex) >= 64) {
		uint8_t mac[SBX_SHA256_LEN];
		char hex[SBX_SHA256_HEX_LEN];
		sbx_hmac_sha256(key, key_len, json, len, mac);
		sbx_hex(mac, sizeof mac, hex);
		uint8_t diff = 0;
		for (int i = 0; i < 64; i++)
			diff |= (uint8_t)(hex[i] ^ sig_hex[i]);
		r->verified = diff == 0;
	}
	return 0;
}

int sbx_run_receipt(struct sbx_session *s, const char *run_dir, const uint8_t *key, size_t key_len,
                    struct sbx_receipt *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	char *json, *sig = NULL;
	size_t jl, sl = 0;
	int64_t size;
	if (sbx_run_read(s, run_dir, "receipt.json", 0, 256 * 1024, &json, &jl, &size, e) != 0)
		return -1;
	if (size > (int64_t)jl) {
		free(json);
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "receipt larger than 256 KiB");
	}
	struct sbx_err ignored;
	if (key_len > 0)
		sbx_run_read(s, run_dir, "receipt.sig", 0, 256, &sig, &sl, NULL, &ignored);
	int rc = sbx_receipt_parse(json, jl, sig, key, key_len, r, e);
	free(json);
	free(sig);
	return rc;
}

int sbx_run_wait(struct sbx_session *s, const char *run_dir, const uint8_t *key, size_t key_len,
                 double timeout_s, struct sbx_receipt *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	int64_t end = timeout_s > 0 ? sbx_now_ns() + (int64_t)(timeout_s * 1e9) : INT64_MAX;
	/* Poll: a status request is a few microseconds locally; start fast, back off to 20 ms. */
	int64_t nap = 1000000, dead_since = 0;
	for (;;) {
		struct sbx_run_status st;
		if (sbx_run_status(s, run_dir, &st, e) != 0)
			return -1;
		if (st.has_receipt && !st.alive)
			return sbx_run_receipt(s, run_dir, key, key_len, r, e);
		/* Gone without a receipt (killed by the harness, or the sandbox's OOM killer): once
		 * that has held for 200 ms (a starting supervisor has written its state but not yet
		 * taken its lock; 2 s before any state), nothing about the run is proven. */
		if (!st.alive && !st.has_receipt) {
			/* Before its first state write a supervisor may take a moment to start. */
			int64_t patience = strcmp(st.state, "none") == 0 ? 2000000000 : 200000000;
			if (dead_since == 0)
				dead_since = sbx_now_ns();
			else if (sbx_now_ns() - dead_since > patience)
				return sbx_err_set(
				        e, SBX_ETRANSFER, 0,
				        "the supervisor of %s died without a receipt (state %s): "
				        "nothing is proven about the run's processes",
				        run_dir, st.state);
		} else {
			dead_since = 0;
		}
		if (sbx_now_ns() >= end)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "no receipt in %s within %.1f s (state %s)", run_dir,
			                   timeout_s, st.state);
		/* Keep the channel serviced while we wait. */
		int64_t until = sbx_now_ns() + nap;
		while (sbx_now_ns() < until)
			if (sbx_session_wait(s, until, e) != 0)
				return -1;
		if (nap < 20000000)
			nap *= 2;
	}
}

struct sbx_op *sbx_run_rearm_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	return simple_async(s, SBX_OP_SUP_REARM, run_dir, NULL, NULL, e);
}

struct sbx_op *sbx_run_close_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	return simple_async(s, SBX_OP_SUP_CLOSE, run_dir, NULL, NULL, e);
}

int sbx_run_rearm(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_op *p;
	if (blocking(s, sbx_run_rearm_async(s, run_dir, e), &p, e) != 0)
		return -1;
	sbx_op_free(p);
	return 0;
}

int sbx_run_close(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_op *p;
	if (blocking(s, sbx_run_close_async(s, run_dir, e), &p, e) != 0)
		return -1;
	sbx_op_free(p);
	return 0;
}
