/* Receipt JSON, written by hand: the agent carries no JSON library, and the key order is part
 * of the contract. The signature covers the exact bytes of receipt.json. */
#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "rundir.h"
#include "utf8.h"

struct buf {
	char *p;
	size_t len, cap;
	int failed;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 1024;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (np == NULL) {
			b->failed = 1;
			return;
		}
		b->p = np, b->cap = nc;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void putf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct buf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_str(struct buf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str != NULL ? str : "");
	size_t n = strlen((const char *)s);
	put(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t l = sbx_utf8_seq(s + i, n - i);
		if (l == 0) {
			put(b, "?", 1);
			i++;
		} else if (l > 1) {
			put(b, (const char *)s + i, l);
			i += l;
		} else if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};
			put(b, esc, 2);
			i++;
		} else if (c < 0x20) {
			putf(b, "\\u%04x", c);
			i++;
		} else {
			put(b, (const char *)s + i, 1);
			i++;
		}
	}
	put(b, "\"", 1);
}

static void key(struct buf *b, const char *k)
{
	putf(b, ",\"%s\":", k);
}

static void key_bool(struct buf *b, const char *k, int v)
{
	key(b, k);
	put(b, v ? "true" : "false", v ? 4 : 5);
}

static void key_i64(struct buf *b, const char *k, int64_t v)
{
	key(b, k);
	putf(b, "%" PRId64, v);
}

static void key_str(struct buf *b, const char *k, const char *v)
{
	key(b, k);
	put_str(b, v);
}

char *sbx_receipt_format(const struct sbx_receipt *r, size_t *len)
{
	struct buf b = {0};
	put(&b, "{\"version\":2", 12);
	key_str(&b, "run_dir", r->run_dir);
	key_i64(&b, "activation", r->activation);
	key_str(&b, "nonce", r->nonce);
	key_str(&b, "trigger", r->trigger);
	key_bool(&b, "timed_out", r->timed_out);
	key_bool(&b, "cancelled", r->cancelled);
	key_bool(&b, "expired_before_launch", r->expired_before_launch);
	key_bool(&b, "stopped_before_launch", r->stopped_before_launch);
	key_bool(&b, "launched", r->launched);
	key(&b, "exit");
	if (r->exit_kind == 1)
		putf(&b, "{\"code\":%d}", r->exit_value);
	else if (r->exit_kind == 2)
		putf(&b, "{\"signal\":%d}", r->exit_value);
	else
		put(&b, "null", 4);
	key_i64(&b, "status", r->status);
	key_i64(&b, "errno", r->err);
	key_str(&b, "error", r->error);
	key_i64(&b, "started_at_ns", r->started_at_ns);
	key_i64(&b, "ended_at_ns", r->ended_at_ns);
	key_i64(&b, "duration_ns", r->duration_ns);
	key_i64(&b, "kill_rounds", r->kill_rounds);
	key_bool(&b, "termination_witnessed", r->termination_witnessed);
	key(&b, "residual");
	put(&b, "[", 1);
	for (size_t i = 0; i < r->nresidual && i < SBX_RECEIPT_RESIDUAL_MAX; i++) {
		putf(&b, "%s{\"pid\":%d,\"cmdline\":", i ? "," : "", r->residual[i].pid);
		put_str(&b, r->residual[i].cmdline);
		put(&b, "}", 1);
	}
	put(&b, "]", 1);
	key(&b, "oom");
	putf(&b, "{\"kills\":%" PRIu64 ",\"source\":", r->oom_kills);
	put_str(&b, r->oom_source);
	put(&b, ",\"attributed\":", 14);
	put_str(&b, r->oom_attributed);
	put(&b, "}", 1);
	key_i64(&b, "log_bytes", r->log_bytes);
	key_i64(&b, "log_dropped", r->log_dropped);
	key_str(&b, "expire_reason", r->expire_reason);
	key_i64(&b, "pid", r->pid);
	key_bool(&b, "subreaper", !r->no_subreaper);
	put(&b, "}\n", 2);
	if (b.failed) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

int sbx_receipt_write(int dirfd, const char *json, size_t len, const uint8_t *key, size_t key_len,
                      struct sbx_err *e)
{
	if (key_len > 0) {
		uint8_t mac[SBX_SHA256_LEN];
		char hex[SBX_SHA256_HEX_LEN + 1];
		sbx_hmac_sha256(key, key_len, json, len, mac);
		sbx_hex(mac, sizeof mac, hex);
		hex[64] = '\n';
		if (sbx_rundir_write(dirfd, "receipt.sig", hex, 65, e) != 0)
			return -1;
	} else if (unlinkat(dirfd, "receipt.sig", 0) != 0 && errno != ENOENT) {
		/* an unsigned receipt must not sit beside a signature someone else wrote */
		return sbx_err_set(e, SBX_ETRANSFER, errno, "remove receipt.sig");
	}
	if (sbx_rundir_write(dirfd, "receipt.json", json, len, e) != 0)
		return -1;
	fsync(dirfd);
	return 0;
}
