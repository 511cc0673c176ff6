/* The reference's SandboxSession over libsbx's supervision requests: one harness session,
 * its activation state, and close's bounded, retryable phases. Also shell_assignments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

struct sbx_harness {
	struct sbx_session *s;
	char *dir;
	uint8_t key[SBX_RUN_KEY_LEN]; /* the current activation's receipt key (sbx_run_start) */
	struct sbx_harness_state st;
	int expire_requested;
	int have_receipt;
	struct sbx_receipt receipt;
	struct sbx_err capture_error;
};

int sbx_harness_open(struct sbx_harness **out, struct sbx_session *s, const char *session_dir,
                     struct sbx_err *e)
{
	*out = NULL;
	if (session_dir == NULL || session_dir[0] != '/')
		return sbx_err_set(e, SBX_EUSAGE, 0, "a harness run_dir needs an absolute folder");
	struct sbx_harness *hs = calloc(1, sizeof *hs);
	if (hs == NULL || (hs->dir = strdup(session_dir)) == NULL) {
		free(hs);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "harness run_dir");
	}
	hs->s = s;
	*out = hs;
	return 0;
}

void sbx_harness_free(struct sbx_harness *hs)
{
	if (hs == NULL)
		return;
	sbx_receipt_free(&hs->receipt);
	memset(hs->key, 0, sizeof hs->key);
	free(hs->dir);
	free(hs);
}

void sbx_harness_state(const struct sbx_harness *hs, struct sbx_harness_state *st)
{
	*st = hs->st;
}

const struct sbx_receipt *sbx_harness_receipt(const struct sbx_harness *hs)
{
	return hs->have_receipt ? &hs->receipt : NULL;
}

const struct sbx_err *sbx_harness_capture_error(const struct sbx_harness *hs)
{
	return hs->st.capture_failed ? &hs->capture_error : NULL;
}

/* Waits for the receipt and records what it proves. */
static int take_receipt(struct sbx_harness *hs, double timeout_s, struct sbx_err *e)
{
	struct sbx_receipt r;
	if (sbx_run_wait(hs->s, hs->dir, hs->key, sizeof hs->key, timeout_s, &r, e) != 0)
		return -1;
	if (!r.verified) {
		sbx_receipt_free(&r);
		return sbx_err_set(e, SBX_EPROTOCOL, 0,
		                   "the receipt in %s does not verify: forged or stale", hs->dir);
	}
	sbx_receipt_free(&hs->receipt);
	hs->receipt = r;
	hs->have_receipt = 1;
	hs->st.expired = r.timed_out && strcmp(r.trigger, "expire") == 0;
	hs->st.expired_before_launch = r.expired_before_launch;
	/* Missing termination evidence stays retryable: cleanup is confirmed only by a witness
	 * or by nothing having launched. */
	hs->st.cleanup_confirmed = r.termination_witnessed || !r.launched;
	return 0;
}

static void collect_now(struct sbx_harness *hs, sbx_collect_fn collect, void *ctx)
{
	if (collect == NULL || !hs->st.cleanup_confirmed || hs->st.capture_attempted)
		return;
	hs->st.capture_attempted = 1;
	if (collect(ctx, hs, &hs->capture_error) != 0)
		hs->st.capture_failed = 1;
}

int sbx_harness_execute(struct sbx_harness *hs, sbx_prepare_fn prepare, sbx_collect_fn collect,
                        void *ctx, double timeout_s, double close_timeout_s, struct sbx_err *e)
{
	if (hs->st.closing)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the harness run_dir is closing");
	if (hs->st.launch_started)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "this activation already launched: begin_activation first");
	struct sbx_run_opts o;
	sbx_run_opts_init(&o);
	if (prepare != NULL && prepare(ctx, &o, e) != 0)
		return -1;
	o.run_dir = hs->dir;
	if (timeout_s > 0 && (o.timeout_s <= 0 || o.timeout_s > timeout_s))
		o.timeout_s = timeout_s;
	hs->st.launch_started = 1;
	if (sbx_run_start(hs->s, &o, NULL, hs->key, e) != 0)
		return -1;
	double grace = o.grace_s >= 0 ? o.grace_s : 5;
	double limit = o.timeout_s > 0 ? o.timeout_s + grace + close_timeout_s : 0;
	int rc = take_receipt(hs, limit, e);
	if (rc != 0 && e->cls != SBX_EPROTOCOL) {
		/* The wait failed: stop what runs before giving up, bounded by close_timeout. */
		struct sbx_err e2;
		if (sbx_run_stop(hs->s, hs->dir, &e2) == 0)
			take_receipt(hs, close_timeout_s, &e2);
	}
	/* Artifacts are kept even when execution failed, once cleanup is confirmed. */
	collect_now(hs, collect, ctx);
	return rc;
}

int sbx_harness_stop(struct sbx_harness *hs, double timeout_s, struct sbx_err *e)
{
	if (!hs->st.launch_started) {
		hs->st.cleanup_confirmed = 1;
		return 0;
	}
	if (hs->have_receipt && hs->st.cleanup_confirmed)
		return 0;
	if (sbx_run_stop(hs->s, hs->dir, e) != 0)
		return -1;
	return take_receipt(hs, timeout_s, e);
}

int sbx_harness_expire(struct sbx_harness *hs, double timeout_s, const char *reason, int *accepted,
                       struct sbx_err *e)
{
	(void)timeout_s;
	*accepted = 0;
	if (hs->st.closing || hs->expire_requested || hs->have_receipt)
		return 0;
	int placed;
	if (sbx_run_expire(hs->s, hs->dir, reason, &placed, e) != 0)
		return -1;
	hs->expire_requested = 1;
	*accepted = placed;
	return 0;
}

int sbx_harness_read_output_log(struct sbx_harness *hs, char **text, size_t *len, struct sbx_err *e)
{
	*text = NULL;
	*len = 0;
	/* What the log holds when the call starts, read by offsets: the first answer's size
	 * is the end (bounded), whatever the agent says later. */
	size_t end = 0;
	int64_t off = 0;
	for (int first = 1;; first = 0) {
		char *part;
		size_t n;
		int64_t size;
		size_t want = first ? 512 * 1024 : end - (size_t)off;
		if (want > 512 * 1024)
			want = 512 * 1024;
		if (sbx_run_read(hs->s, hs->dir, "output.log", off, want, &part, &n, &size, e) !=
		    0) {
			free(*text);
			*text = NULL;
			return -1;
		}
		if (first) {
			if (size > SBX_HS_LOG_MAX) {
				free(part);
				return sbx_err_set(
				        e, SBX_EPROTOCOL, EFBIG,
				        "the output log is %lld bytes, more than this call "
				        "returns (%d MiB): read it by offsets",
				        (long long)size, SBX_HS_LOG_MAX >> 20);
			}
			end = (size_t)size;
			*text = malloc(end + 1);
			if (*text == NULL) {
				free(part);
				return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "output log");
			}
		}
		if (n > end - *len)
			n = end - *len;
		memcpy(*text + *len, part, n);
		*len += n;
		(*text)[*len] = '\0';
		free(part);
		off += (int64_t)n;
		/* A log cut shorter meanwhile (a rearm) ends the read too. */
		if (n == 0 || *len >= end)
			return 0;
	}
}

int sbx_harness_begin_activation(struct sbx_harness *hs, double timeout_s, struct sbx_err *e)
{
	if (hs->st.closing)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the harness run_dir is closing");
	if (hs->st.launch_started && !hs->have_receipt) {
		/* A previous launch must be reaped before anything is reset. */
		if (take_receipt(hs, timeout_s, e) != 0)
			return -1;
	}
	if (hs->st.launch_started && !hs->st.cleanup_confirmed)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "the previous launch is not confirmed cleaned up");
	if (hs->st.launch_started && sbx_run_rearm(hs->s, hs->dir, e) != 0)
		return -1;
	sbx_receipt_free(&hs->receipt);
	hs->have_receipt = 0;
	hs->expire_requested = 0;
	int closing = hs->st.closing;
	memset(&hs->st, 0, sizeof hs->st);
	hs->st.closing = closing;
	/* The next launch brings a fresh key (sbx_run_start): a harness that saw one activation's
	 * files learns nothing about the next. */
	memset(hs->key, 0, sizeof hs->key);
	return 0;
}

int sbx_harness_close(struct sbx_harness *hs, double timeout_s, struct sbx_err *e)
{
	if (hs->st.closed)
		return 0;
	/* Close fences later activations at once, even if release then needs a retry. */
	hs->st.closing = 1;
	if (hs->st.launch_started && !(hs->have_receipt && hs->st.cleanup_confirmed) &&
	    sbx_harness_stop(hs, timeout_s, e) != 0)
		return -1;
	if (sbx_run_close(hs->s, hs->dir, e) != 0)
		return -1;
	hs->st.closed = 1;
	return 0;
}

/* Appends s single-quoted ('\'' for each quote). */
static int put_word(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t need = *len + 2 * strlen(s) * 2 + 8;
	if (need > *cap) {
		size_t c = need * 2;
		char *b = realloc(*buf, c);
		if (b == NULL)
			return -1;
		*buf = b;
		*cap = c;
	}
	char *o = *buf + *len;
	*o++ = '\'';
	for (; *s != '\0'; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *s;
		}
	}
	*o++ = '\'';
	*o = '\0';
	*len = (size_t)(o - *buf);
	return 0;
}

static int put_raw(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		size_t c = (*len + n + 1) * 2;
		char *b = realloc(*buf, c);
		if (b == NULL)
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return 0;
}

static int valid_name(const char *n)
{
	if (n == NULL || !((*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z') || *n == '_'))
		return 0;
	for (n++; *n != '\0'; n++)
		if (!((*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z') ||
		      (*n >= '0' && *n <= '9') || *n == '_'))
			return 0;
	return 1;
}

char *sbx_shell_assignments(const struct sbx_shval *v, size_t n, struct sbx_err *e)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int ok = put_raw(&buf, &len, &cap, "") == 0;
	for (size_t i = 0; ok && i < n; i++) {
		if (!valid_name(v[i].name)) {
			free(buf);
			sbx_err_set(e, SBX_EUSAGE, 0, "'%s' is not a shell name",
			            v[i].name ? v[i].name : "");
			return NULL;
		}
		ok = put_raw(&buf, &len, &cap, v[i].name) == 0 &&
		     put_raw(&buf, &len, &cap, "=") == 0;
		if (v[i].kind == SBX_SHVAL_SCALAR) {
			ok = ok && put_word(&buf, &len, &cap, v[i].scalar ? v[i].scalar : "") == 0;
		} else {
			ok = ok && put_raw(&buf, &len, &cap, "(") == 0;
			const char *const *it = v[i].items;
			for (size_t k = 0; ok && it != NULL && it[k] != NULL; k++) {
				if (k > 0)
					ok = put_raw(&buf, &len, &cap, " ") == 0;
				if (v[i].kind == SBX_SHVAL_MAP) {
					if (it[k + 1] == NULL) {
						free(buf);
						sbx_err_set(e, SBX_EUSAGE, 0,
						            "map %s has a key without a value",
						            v[i].name);
						return NULL;
					}
					size_t l = strlen(it[k]) + strlen(it[k + 1]) + 2;
					char *kv = malloc(l);
					ok = ok && kv != NULL;
					if (kv != NULL) {
						snprintf(kv, l, "%s=%s", it[k], it[k + 1]);
						ok = ok && put_word(&buf, &len, &cap, kv) == 0;
						free(kv);
					}
					k++;
				} else {
					ok = ok && put_word(&buf, &len, &cap, it[k]) == 0;
				}
			}
			ok = ok && put_raw(&buf, &len, &cap, ")") == 0;
		}
		ok = ok && put_raw(&buf, &len, &cap, "\n") == 0;
	}
	if (!ok) {
		free(buf);
		sbx_err_set(e, SBX_EUSAGE, ENOMEM, "shell assignments");
		return NULL;
	}
	return buf;
}
