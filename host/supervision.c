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

int sbx_run_start(struct sbx_session *s, const struct sbx_run_opts *o, int64_t *pid,
                  uint8_t key[SBX_RUN_KEY_LEN], struct sbx_err *e)
{
	if (o->run_dir == NULL || o->run_dir[0] != '/')
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs an absolute run folder");
	if (o->argv == NULL || o->argv[0] == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs a harness argv");
	/* The run's key is derived from the sandbox's secret: only a keeper that proved it holds
	 * it can launch a run whose receipt verifies. */
	if (sbx_session_trusted(s, e) != 0)
		return -1;
	struct sbx_cmd c = sbx_cmd_of(o->argv, o->env, o->env_clear, o->cwd, o->user, o->timeout_s);
	if (sbx_cmd_check(&c, e) != 0)
		return -1;
	uint8_t nonce[SBX_NONCE_LEN];
	if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "getrandom");
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(256 + strlen(o->run_dir) + sbx_cmd_size(&c), &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SUP_RUN);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, o->run_dir);
	sbx_cmd_write(&w, &c);
	if (o->grace_s >= 0)
		sbx_msgw_i64(&w, SBX_T_GRACE_MS, (int64_t)(o->grace_s * 1000 + 0.5));
	if (o->log_max > 0)
		sbx_msgw_i64(&w, SBX_T_LOG_MAX, o->log_max);
	sbx_msgw_bytes(&w, SBX_T_NONCE, nonce, sizeof nonce);
	/* Last: the MAC of everything before it, so no relay can change the harness, its user,
	 * its environment or its deadline. */
	uint8_t mac[SBX_MAC_LEN];
	sbx_trust_run_mac(s->secret, w.buf, w.len, mac);
	sbx_msgw_bytes(&w, SBX_T_MAC, mac, sizeof mac);
	struct sbx_stream *p;
	int rc = sbx_call(s, &w, &p, e);
	free(b);
	if (rc != 0)
		return -1;
	struct sbx_field f;
	int64_t v = 0;
	if (pid != NULL)
		*pid = sbx_msg_find(p->resp, p->resp_len, SBX_T_PID, &f) == 1 &&
		                       sbx_field_i64(&f, &v) == 0
		               ? v
		               : 0;
	sbx_stream_free(s, p);
	sbx_trust_run_key(s->secret, nonce, key);
	return 0;
}

/* A request that names only the run folder (and maybe a kind and a message). */
static int simple(struct sbx_session *s, int op, const char *run_dir, const char *name,
                  const char *msg, struct sbx_stream **out, struct sbx_err *e)
{
	*out = NULL;
	if (run_dir == NULL || run_dir[0] == '\0')
		return sbx_err_set(e, SBX_EUSAGE, 0, "no run folder");
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(
	        128 + strlen(run_dir) + (name ? strlen(name) : 0) + (msg ? strlen(msg) : 0), &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, op);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, run_dir);
	if (name != NULL)
		sbx_msgw_str(&w, SBX_T_NAME, name);
	if (msg != NULL)
		sbx_msgw_str(&w, SBX_T_MESSAGE, msg);
	int rc = sbx_call(s, &w, out, e);
	free(b);
	return rc;
}

int sbx_run_stop(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_stream *p;
	if (simple(s, SBX_OP_SUP_SIGNAL, run_dir, "stop", NULL, &p, e) != 0)
		return -1;
	sbx_stream_free(s, p);
	return 0;
}

int sbx_run_expire(struct sbx_session *s, const char *run_dir, const char *reason, int *placed,
                   struct sbx_err *e)
{
	struct sbx_stream *p;
	if (simple(s, SBX_OP_SUP_SIGNAL, run_dir, "expire", reason ? reason : "", &p, e) != 0)
		return -1;
	struct sbx_field f;
	int64_t v = 1;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_CLEAR, &f) == 1)
		sbx_field_i64(&f, &v);
	if (placed != NULL)
		*placed = v != 0;
	sbx_stream_free(s, p);
	return 0;
}

int sbx_run_status(struct sbx_session *s, const char *run_dir, struct sbx_run_status *st,
                   struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	struct sbx_stream *p;
	if (simple(s, SBX_OP_SUP_STATUS, run_dir, NULL, NULL, &p, e) != 0)
		return -1;
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, p->resp, p->resp_len);
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
	sbx_stream_free(s, p);
	return 0;
}

int sbx_run_read(struct sbx_session *s, const char *run_dir, const char *name, int64_t offset,
                 size_t max, char **data, size_t *len, int64_t *size, struct sbx_err *e)
{
	*data = NULL;
	*len = 0;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(128 + strlen(run_dir) + strlen(name), &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SUP_READ);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, run_dir);
	sbx_msgw_str(&w, SBX_T_NAME, name);
	sbx_msgw_i64(&w, SBX_T_OFFSET, offset);
	sbx_msgw_i64(&w, SBX_T_LENGTH, (int64_t)max);
	struct sbx_stream *p;
	int rc = sbx_call(s, &w, &p, e);
	free(b);
	if (rc != 0)
		return -1;
	struct sbx_field f;
	int64_t fsize = -1;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_SIZE, &f) != 1 ||
	    sbx_field_i64(&f, &fsize) != 0 || fsize < 0) {
		sbx_stream_free(s, p);
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "read response without the file's size");
	}
	if (size != NULL)
		*size = fsize;
	if (sbx_msg_find(p->resp, p->resp_len, SBX_T_BYTES, &f) != 1) {
		sbx_stream_free(s, p);
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "read response without bytes");
	}
	/* No more than asked for, and no more than the file the agent says it has. */
	if (f.len > max || fsize - offset < (int64_t)f.len) {
		sbx_stream_free(s, p);
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "read response with %u bytes of %s, more than asked (%zu) or "
		                   "than the file holds",
		                   (unsigned)f.len, name, max);
	}
	*data = malloc((size_t)f.len + 1);
	if (*data == NULL) {
		sbx_stream_free(s, p);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "read");
	}
	memcpy(*data, f.val, f.len);
	(*data)[f.len] = '\0';
	*len = f.len;
	sbx_stream_free(s, p);
	return 0;
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
			if (sbx_pump(s, until, e) != 0)
				return -1;
		if (nap < 20000000)
			nap *= 2;
	}
}

int sbx_run_rearm(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_stream *p;
	if (simple(s, SBX_OP_SUP_REARM, run_dir, NULL, NULL, &p, e) != 0)
		return -1;
	sbx_stream_free(s, p);
	return 0;
}

int sbx_run_close(struct sbx_session *s, const char *run_dir, struct sbx_err *e)
{
	struct sbx_stream *p;
	if (simple(s, SBX_OP_SUP_CLOSE, run_dir, NULL, NULL, &p, e) != 0)
		return -1;
	sbx_stream_free(s, p);
	return 0;
}
