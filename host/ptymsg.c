/* Reading the agent's answers about terminal sessions (ptymsg.h). */
#include "ptymsg.h"

#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "proto.h"

#define OFF_MAX (INT64_C(1) << 62)

static int bad(struct sbx_err *e, const char *what)
{
	return sbx_err_set(e, SBX_EPROTOCOL, 0, "the agent's pty answer: %s", what);
}

static int id_ok(const char *id)
{
	size_t i = 0;
	for (; id[i] != '\0'; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return i == SBX_PTY_ID_LEN;
}

static int exit_fields(int64_t exited, int64_t outcome, int64_t code, int64_t sig,
                       struct sbx_pty_info *st, struct sbx_err *e)
{
	st->exited = exited != 0;
	if (!st->exited)
		return 0;
	if (outcome == 1) {
		if (sig < 1 || sig > 64 || code != 128 + sig)
			return bad(e, "a signal out of range");
		st->signal = (int)sig;
	} else if (outcome != 0 || code < 0 || code > 255) {
		return bad(e, "an exit code out of range");
	}
	st->code = (int)code;
	return 0;
}

int sbx_ptymsg_info(const uint8_t *p, size_t len, struct sbx_pty_info *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	struct sbx_msgr r;
	struct sbx_field f;
	int64_t exited = 0, outcome = -1, code = -1, sig = 0;
	int rc, have_id = 0;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		int64_t v = 0;
		if (f.tag != SBX_T_PTY_ID && f.tag >= SBX_T_PTY_ID && f.tag <= SBX_T_BASE_ERR &&
		    f.tag != SBX_T_SESSION && f.tag != SBX_T_TICKET && sbx_field_i64(&f, &v) != 0)
			return bad(e, "a field that is not an integer");
		if ((f.tag == SBX_T_PID || f.tag == SBX_T_CODE || f.tag == SBX_T_SIGNAL ||
		     f.tag == SBX_T_OUTCOME) &&
		    sbx_field_i64(&f, &v) != 0)
			return bad(e, "a field that is not an integer");
		switch (f.tag) {
		case SBX_T_PTY_ID:
			if (f.len != SBX_PTY_ID_LEN ||
			    sbx_field_str(&f, st->id, sizeof st->id) != 0 || !id_ok(st->id))
				return bad(e, "a session id that is not 16 hex digits");
			have_id = 1;
			break;
		case SBX_T_PIPE:
			st->pipe = v != 0;
			break;
		case SBX_T_PID:
			st->pid = v;
			break;
		case SBX_T_RETAIN:
			st->retain = v;
			break;
		case SBX_T_HEAD:
			st->head = v;
			break;
		case SBX_T_BASE:
			st->base = v;
			break;
		case SBX_T_HEAD_ERR:
			st->head_err = v;
			break;
		case SBX_T_BASE_ERR:
			st->base_err = v;
			break;
		case SBX_T_HELD:
			st->held = v != 0;
			break;
		case SBX_T_EXITED:
			exited = v;
			break;
		case SBX_T_OUTCOME:
			outcome = v;
			break;
		case SBX_T_CODE:
			code = v;
			break;
		case SBX_T_SIGNAL:
			sig = v;
			break;
		default:
			break;
		}
	}
	if (rc < 0)
		return bad(e, "malformed");
	if (!have_id)
		return bad(e, "no session id");
	if (st->retain < SBX_PTY_RETAIN_MIN || st->retain > SBX_PTY_RETAIN_MAX)
		return bad(e, "a window out of range");
	if (st->pid < 0 || st->pid > INT32_MAX)
		return bad(e, "a pid out of range");
	for (int c = 0; c < 2; c++) {
		int64_t h = c == 0 ? st->head : st->head_err, b = c == 0 ? st->base : st->base_err;
		if (h < 0 || h > OFF_MAX || b < 0 || b > h || h - b > st->retain)
			return sbx_err_set(
			        e, SBX_EPROTOCOL, 0,
			        "the agent's pty answer: offsets that do not fit the window "
			        "(channel %d: base %lld, head %lld, window %lld)",
			        c + 1, (long long)b, (long long)h, (long long)st->retain);
	}
	return exit_fields(exited, outcome, code, sig, st, e);
}

int sbx_ptymsg_attach(const uint8_t *p, size_t len, int64_t since, int64_t since_err,
                      struct sbx_pty_attach_info *ai, struct sbx_err *e)
{
	memset(ai, 0, sizeof *ai);
	struct sbx_field f;
	if (sbx_ptymsg_info(p, len, &ai->st, e) != 0)
		return -1;
	if (sbx_msg_find(p, len, SBX_T_TICKET, &f) != 1 || f.len != sizeof ai->ticket)
		return bad(e, "no 16-byte ticket");
	memcpy(ai->ticket, f.val, sizeof ai->ticket);
	const uint16_t tags[4] = {SBX_T_START, SBX_T_LOST, SBX_T_START_ERR, SBX_T_LOST_ERR};
	int64_t v[4];
	for (int i = 0; i < 4; i++)
		if (sbx_msg_find(p, len, tags[i], &f) != 1 || sbx_field_i64(&f, &v[i]) != 0)
			return bad(e, "no replay offsets");
	ai->start = v[0], ai->lost = v[1], ai->start_err = v[2], ai->lost_err = v[3];
	/* The replay starts where asked, or at the window's base with the difference lost, or at
	 * the head when asked past it: nothing else is consistent. */
	for (int c = 0; c < 2; c++) {
		int64_t s = c == 0 ? since : since_err, st = c == 0 ? ai->start : ai->start_err;
		int64_t lost = c == 0 ? ai->lost : ai->lost_err;
		int64_t h = c == 0 ? ai->st.head : ai->st.head_err;
		if (st < 0 || st > h || lost < 0)
			return bad(e, "a replay outside the window");
		if (lost > 0 ? st - lost != s : !(st == s || (s > h && st == h)))
			return bad(e, "a replay start that does not match the offset asked for");
	}
	return 0;
}

int sbx_ptymsg_list(const uint8_t *p, size_t len, size_t max, struct sbx_pty_info **out, size_t *n,
                    struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	struct sbx_msgr r;
	struct sbx_field f;
	size_t count = 0;
	int rc;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1)
		count += f.tag == SBX_T_SESSION;
	if (rc < 0)
		return bad(e, "malformed");
	if (count > max)
		return bad(e, "more sessions than there can be");
	struct sbx_pty_info *v = calloc(count > 0 ? count : 1, sizeof *v);
	if (v == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "out of memory");
	size_t k = 0;
	sbx_msgr_init(&r, p, len);
	while (sbx_msgr_next(&r, &f) == 1) {
		if (f.tag != SBX_T_SESSION)
			continue;
		if (sbx_ptymsg_info(f.val, f.len, &v[k], e) != 0) {
			free(v);
			return -1;
		}
		for (size_t i = 0; i < k; i++)
			if (strcmp(v[i].id, v[k].id) == 0) {
				free(v);
				return bad(e, "a session listed twice");
			}
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

int sbx_ptymsg_end(const uint8_t *p, size_t len, int *code, struct sbx_err *e)
{
	struct sbx_msgr r;
	struct sbx_field f;
	int64_t exited = 0, outcome = -1, c = -1, sig = 0, evicted = 0, cancelled = 0;
	int rc;
	*code = -1;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		int64_t v = 0;
		if (f.tag == SBX_T_EXITED || f.tag == SBX_T_OUTCOME || f.tag == SBX_T_CODE ||
		    f.tag == SBX_T_SIGNAL || f.tag == SBX_T_EVICTED || f.tag == SBX_T_CANCELLED) {
			if (sbx_field_i64(&f, &v) != 0)
				return bad(e, "a field that is not an integer");
		}
		if (f.tag == SBX_T_EXITED)
			exited = v;
		else if (f.tag == SBX_T_OUTCOME)
			outcome = v;
		else if (f.tag == SBX_T_CODE)
			c = v;
		else if (f.tag == SBX_T_SIGNAL)
			sig = v;
		else if (f.tag == SBX_T_EVICTED)
			evicted = v;
		else if (f.tag == SBX_T_CANCELLED)
			cancelled = v;
	}
	if (rc < 0)
		return bad(e, "malformed");
	if (evicted)
		return sbx_err_set(e, SBX_ETRANSFER, SBX_PTY_EVICTED,
		                   "pty session taken over by another client");
	if (cancelled)
		return 0;
	struct sbx_pty_info st;
	memset(&st, 0, sizeof st);
	if (!exited)
		return bad(e, "a stream that ended with the program still running");
	if (exit_fields(exited, outcome, c, sig, &st, e) != 0)
		return -1;
	*code = st.code;
	return 1;
}
