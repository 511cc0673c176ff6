/* The host's side of trust (sbx.h, "Trust"; docs/supervision.md): asking the sandbox's keeper
 * to prove it holds the secret, or handing it the secret, and judging the answer. Asked when
 * first needed (a run), so probes and transfers cost no round trip and start no keeper. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "session.h"

enum sbx_trust_state { TRUST_NONE = 0, TRUST_PLANNED, TRUST_PENDING, TRUST_OK, TRUST_FAILED };

int sbx_session_trust(struct sbx_session *s, const uint8_t secret[SBX_SECRET_LEN],
                      enum sbx_trust_how how, struct sbx_err *e)
{
	if (s->trust == TRUST_PENDING)
		return sbx_err_set(e, SBX_EUSAGE, 0, "trust: already asked");
	memcpy(s->secret, secret, SBX_SECRET_LEN);
	s->trust_how = how;
	s->trust = TRUST_PLANNED;
	return 0;
}

/* The request, on its way: an AUTH challenge or the SETUP. */
static int ask(struct sbx_session *s, struct sbx_err *e)
{
	uint8_t buf[128];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	if (s->trust_how == SBX_TRUST_CHECK) {
		if (getrandom(s->trust_nonce, SBX_NONCE_LEN, 0) != SBX_NONCE_LEN)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "trust: getrandom");
		sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_AUTH);
		sbx_msgw_bytes(&w, SBX_T_NONCE, s->trust_nonce, SBX_NONCE_LEN);
	} else {
		sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SETUP);
		sbx_msgw_i64(&w, SBX_T_KEEP, s->trust_how == SBX_TRUST_KEEPER);
		sbx_msgw_bytes(&w, SBX_T_SECRET, s->secret, SBX_SECRET_LEN);
	}
	s->trust_op = sbx_request_async(s, &w, e);
	memset(buf, 0, sizeof buf);
	if (s->trust_op == NULL)
		return -1;
	s->trust = TRUST_PENDING;
	return 0;
}

/* The keeper's answer: a SETUP's ok, or an AUTH's MAC of our nonce. */
static void judge(struct sbx_session *s)
{
	struct sbx_op *p = s->trust_op;
	struct sbx_err e;
	s->trust = TRUST_FAILED;
	int setup = s->trust_how != SBX_TRUST_CHECK;
	if (sbx_response_status(p->resp, p->resp_len, &e) != 0) {
		s->trust_err = e;
		if (e.cls != SBX_EPROTOCOL)
			sbx_err_set(&s->trust_err, SBX_ETRANSFER, e.errnum,
			            "agent authentication failed: %s", e.msg);
	} else if (setup) {
		s->trust = TRUST_OK;
		if (s->trust_identity != NULL &&
		    sbx_secret_store(s->trust_identity, s->secret, &e) != 0) {
			s->trust = TRUST_FAILED;
			sbx_err_set(
			        &s->trust_err, SBX_EUSAGE, e.errnum,
			        "the sandbox's keeper took its secret, but this host cannot keep "
			        "it: %s",
			        e.msg);
		}
	} else {
		struct sbx_field f;
		uint8_t want[SBX_MAC_LEN];
		sbx_trust_auth(s->secret, s->trust_nonce, want);
		if (sbx_msg_find(p->resp, p->resp_len, SBX_T_MAC, &f) == 1 &&
		    f.len == SBX_MAC_LEN && sbx_trust_equal(want, f.val))
			s->trust = TRUST_OK;
		else
			sbx_err_set(&s->trust_err, SBX_ETRANSFER, EPERM,
			            "agent authentication failed: the answer does not prove the "
			            "sandbox's secret (another program answers as the agent?)");
	}
	sbx_op_free(p);
	s->trust_op = NULL;
}

int sbx_trust_state(struct sbx_session *s, struct sbx_err *e)
{
	if (s->trust == TRUST_PLANNED && ask(s, e) != 0) {
		s->trust = TRUST_FAILED;
		s->trust_err = *e;
		return -1;
	}
	if (s->trust == TRUST_PENDING) {
		struct sbx_op *p = s->trust_op;
		if (!p->done)
			return 0;
		if (p->resp != NULL) {
			judge(s);
		} else {
			/* No answer (the session broke): nothing was proven. */
			sbx_op_status(p, &s->trust_err);
			sbx_op_free(p);
			s->trust_op = NULL;
			s->trust = TRUST_FAILED;
		}
	}
	if (s->trust == TRUST_OK)
		return 1;
	if (s->trust == TRUST_NONE)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "this session has no trust established (sbx_session_trust)");
	*e = s->trust_err;
	return -1;
}

int sbx_session_trusted(struct sbx_session *s, struct sbx_err *e)
{
	int64_t deadline = sbx_session_deadline(s);
	int st;
	while ((st = sbx_trust_state(s, e)) == 0)
		sbx_op_wait_until(s->trust_op, deadline, NULL);
	return st == 1 ? 0 : -1;
}
