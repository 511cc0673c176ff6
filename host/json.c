/* Strict JSON codec for session mode: a recursive-descent parser bounded in depth, size and
 * node count, and a single-line writer with automatic commas. Numbers go through strtod and
 * printf, which read and write '.' because sbx never changes LC_NUMERIC. */
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- parser ---- */

struct parser {
	const uint8_t *s;
	size_t len, pos, nodes;
	struct sbx_err *e;
};

static int bad(struct parser *p, const char *what)
{
	return sbx_err_set(p->e, SBX_EUSAGE, 0, "json: %s at byte %zu", what, p->pos);
}

static int nomem(struct parser *p)
{
	return sbx_err_set(p->e, SBX_EUNAVAILABLE, ENOMEM, "json: at byte %zu", p->pos);
}

static int at(const struct parser *p, uint8_t c)
{
	return p->pos < p->len && p->s[p->pos] == c;
}

static int digit_at(const struct parser *p)
{
	return p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

static void skip_ws(struct parser *p)
{
	while (at(p, ' ') || at(p, '\t') || at(p, '\n') || at(p, '\r'))
		p->pos++;
}

static int hex4(struct parser *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++, p->pos++) {
		int c = p->pos < p->len ? p->s[p->pos] | 0x20 : 0;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint32_t)(c - 'a' + 10);
		else
			return bad(p, "bad \\u escape");
	}
	*out = v;
	return 0;
}

static int unescape(struct parser *p, uint8_t *buf, size_t *n)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	uint8_t c = p->s[p->pos + 1];
	const char *hit = c != 0 ? strchr(from, c) : NULL;
	if (hit != NULL) {
		buf[(*n)++] = (uint8_t)to[hit - from];
		p->pos += 2;
		return 0;
	}
	if (c != 'u') {
		p->pos++;
		return bad(p, "bad escape");
	}
	uint32_t cp, lo;
	size_t start = p->pos;
	p->pos += 2;
	if (hex4(p, &cp) < 0)
		return -1;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (!at(p, '\\') || p->pos + 1 >= p->len || p->s[p->pos + 1] != 'u') {
			p->pos = start;
			return bad(p, "lone surrogate");
		}
		p->pos += 2;
		if (hex4(p, &lo) < 0)
			return -1;
		if (lo < 0xdc00 || lo > 0xdfff) {
			p->pos = start;
			return bad(p, "lone surrogate");
		}
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	} else if (cp >= 0xdc00 && cp <= 0xdfff) {
		p->pos = start;
		return bad(p, "lone surrogate");
	}
	*n += sbx_utf8_put(buf + *n, cp);
	return 0;
}

/* At the opening quote. The decoded bytes are never more than the quoted source (an escape
 * of 6 or 12 bytes yields at most 3 or 4), so one allocation sized by a first scan is enough;
 * the scan steps over backslash pairs, so every escape ends before the closing quote. */
static int parse_string(struct parser *p, char **out, size_t *outlen)
{
	size_t end = p->pos + 1;
	while (end < p->len && p->s[end] != '"')
		end += p->s[end] == '\\' ? 2 : 1;
	if (end >= p->len)
		return bad(p, "unterminated string");
	uint8_t *buf = malloc(end - p->pos);
	if (buf == NULL)
		return nomem(p);
	size_t n = 0;
	p->pos++;
	while (p->pos < end) {
		uint8_t c = p->s[p->pos];
		if (c == '\\') {
			if (unescape(p, buf, &n) < 0)
				goto fail;
		} else if (c < 0x20) {
			bad(p, "control character in string");
			goto fail;
		} else {
			size_t k = sbx_utf8_seq(p->s + p->pos, end - p->pos);
			if (k == 0) {
				bad(p, "invalid UTF-8");
				goto fail;
			}
			memcpy(buf + n, p->s + p->pos, k);
			n += k;
			p->pos += k;
		}
	}
	buf[n] = 0;
	p->pos = end + 1;
	*out = (char *)buf;
	*outlen = n;
	return 0;
fail:
	free(buf);
	return -1;
}

static int parse_number(struct parser *p, struct sbx_json *j)
{
	size_t start = p->pos;
	int integer = 1;
	if (at(p, '-'))
		p->pos++;
	if (!digit_at(p))
		return bad(p, "bad number");
	if (at(p, '0')) {
		p->pos++;
		if (digit_at(p))
			return bad(p, "leading zero");
	}
	while (digit_at(p))
		p->pos++;
	if (at(p, '.')) {
		integer = 0;
		p->pos++;
		if (!digit_at(p))
			return bad(p, "digit expected");
		while (digit_at(p))
			p->pos++;
	}
	if (at(p, 'e') || at(p, 'E')) {
		integer = 0;
		p->pos++;
		if (at(p, '+') || at(p, '-'))
			p->pos++;
		if (!digit_at(p))
			return bad(p, "digit expected");
		while (digit_at(p))
			p->pos++;
	}
	/* strtod wants a terminated copy; the grammar above already vetted every byte. */
	size_t n = p->pos - start;
	char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
	if (buf == NULL)
		return nomem(p);
	memcpy(buf, p->s + start, n);
	buf[n] = 0;
	j->type = SBX_JSON_NUMBER;
	j->num = strtod(buf, NULL);
	if (integer) {
		errno = 0;
		long long v = strtoll(buf, NULL, 10);
		j->is_int = errno == 0;
		j->i64 = j->is_int ? v : 0;
	} else if (j->num >= -0x1p63 && j->num < 0x1p63 && (double)(int64_t)j->num == j->num) {
		j->is_int = 1;
		j->i64 = (int64_t)j->num;
	}
	if (buf != small)
		free(buf);
	if (isinf(j->num)) {
		p->pos = start;
		return bad(p, "number out of range");
	}
	return 0;
}

static int parse_literal(struct parser *p, struct sbx_json *j, const char *word)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return bad(p, "unexpected character");
	p->pos += n;
	j->type = word[0] == 'n' ? SBX_JSON_NULL : SBX_JSON_BOOL;
	j->boolean = word[0] == 't';
	return 0;
}

static int parse_value(struct parser *p, struct sbx_json *j, int depth);

/* Each child is counted in j->len before it is parsed, so a failure anywhere below leaves
 * everything allocated reachable from the root for one sbx_json_free. */
static int parse_container(struct parser *p, struct sbx_json *j, int depth)
{
	int obj = at(p, '{');
	uint8_t close = obj ? '}' : ']';
	size_t cap = 0;
	if (depth > SBX_JSON_MAX_DEPTH)
		return bad(p, "nesting too deep");
	j->type = obj ? SBX_JSON_OBJECT : SBX_JSON_ARRAY;
	p->pos++;
	skip_ws(p);
	if (at(p, close)) {
		p->pos++;
		return 0;
	}
	for (;;) {
		if (j->len == cap) {
			cap = cap ? cap * 2 : 4;
			struct sbx_json *k = realloc(j->kids, cap * sizeof *k);
			if (k == NULL)
				return nomem(p);
			j->kids = k;
		}
		struct sbx_json *kid = &j->kids[j->len++];
		memset(kid, 0, sizeof *kid);
		if (obj) {
			skip_ws(p);
			if (!at(p, '"'))
				return bad(p, "object key expected");
			if (parse_string(p, &kid->key, &kid->keylen) < 0)
				return -1;
			skip_ws(p);
			if (!at(p, ':'))
				return bad(p, "':' expected");
			p->pos++;
		}
		if (parse_value(p, kid, depth) < 0)
			return -1;
		skip_ws(p);
		if (at(p, close))
			break;
		if (!at(p, ','))
			return bad(p, obj ? "',' or '}' expected" : "',' or ']' expected");
		p->pos++;
	}
	p->pos++;
	struct sbx_json *fit = realloc(j->kids, j->len * sizeof *fit);
	if (fit != NULL)
		j->kids = fit;
	return 0;
}

static int parse_value(struct parser *p, struct sbx_json *j, int depth)
{
	skip_ws(p);
	if (++p->nodes > SBX_JSON_MAX_NODES)
		return bad(p, "too many values");
	if (p->pos >= p->len)
		return bad(p, "unexpected end of input");
	switch (p->s[p->pos]) {
	case '{':
	case '[':
		return parse_container(p, j, depth + 1);
	case '"':
		j->type = SBX_JSON_STRING;
		return parse_string(p, &j->str, &j->len);
	case 't':
		return parse_literal(p, j, "true");
	case 'f':
		return parse_literal(p, j, "false");
	case 'n':
		return parse_literal(p, j, "null");
	case '-':
		return parse_number(p, j);
	default:
		if (digit_at(p))
			return parse_number(p, j);
		return bad(p, "unexpected character");
	}
}

int sbx_json_parse(const char *text, size_t len, struct sbx_json **out, struct sbx_err *e)
{
	struct parser p = {.s = (const uint8_t *)text, .len = len, .e = e};
	*out = NULL;
	if (len > SBX_JSON_MAX_INPUT)
		return bad(&p, "input larger than 16 MiB");
	struct sbx_json *root = calloc(1, sizeof *root);
	if (root == NULL)
		return nomem(&p);
	if (parse_value(&p, root, 0) < 0)
		goto fail;
	skip_ws(&p);
	if (p.pos != len) {
		bad(&p, "garbage after value");
		goto fail;
	}
	*out = root;
	return 0;
fail:
	sbx_json_free(root);
	return -1;
}

static void free_node(struct sbx_json *j)
{
	for (size_t i = 0; j->kids != NULL && i < j->len; i++)
		free_node(&j->kids[i]);
	free(j->kids);
	free(j->str);
	free(j->key);
}

void sbx_json_free(struct sbx_json *j)
{
	if (j == NULL)
		return;
	free_node(j);
	free(j);
}

/* ---- accessors ---- */

const struct sbx_json *sbx_json_get(const struct sbx_json *obj, const char *key)
{
	if (obj == NULL || obj->type != SBX_JSON_OBJECT)
		return NULL;
	size_t n = strlen(key);
	for (size_t i = obj->len; i-- > 0;) {
		const struct sbx_json *m = &obj->kids[i];
		if (m->keylen == n && memcmp(m->key, key, n) == 0)
			return m;
	}
	return NULL;
}

const char *sbx_json_str(const struct sbx_json *j, size_t *len)
{
	if (j == NULL || j->type != SBX_JSON_STRING)
		return NULL;
	if (len != NULL)
		*len = j->len;
	return j->str;
}

int sbx_json_int(const struct sbx_json *j, int64_t *out)
{
	if (j == NULL || j->type != SBX_JSON_NUMBER || !j->is_int)
		return -1;
	*out = j->i64;
	return 0;
}

int sbx_json_double(const struct sbx_json *j, double *out)
{
	if (j == NULL || j->type != SBX_JSON_NUMBER)
		return -1;
	*out = j->num;
	return 0;
}

int sbx_json_bool(const struct sbx_json *j, int *out)
{
	if (j == NULL || j->type != SBX_JSON_BOOL)
		return -1;
	*out = j->boolean;
	return 0;
}

size_t sbx_json_len(const struct sbx_json *arr)
{
	if (arr == NULL || (arr->type != SBX_JSON_ARRAY && arr->type != SBX_JSON_OBJECT))
		return 0;
	return arr->len;
}

const struct sbx_json *sbx_json_at(const struct sbx_json *arr, size_t i)
{
	return i < sbx_json_len(arr) ? &arr->kids[i] : NULL;
}

/* ---- writer ---- */

void sbx_jw_init(struct sbx_jw *w)
{
	memset(w, 0, sizeof *w);
}

void sbx_jw_free(struct sbx_jw *w)
{
	free(w->buf);
	sbx_jw_init(w);
}

void sbx_jw_reset(struct sbx_jw *w)
{
	w->len = 0;
	w->failed = 0;
	w->depth = 0;
	w->keyed = 0;
	w->in_str = 0;
	w->more[0] = 0;
	if (w->buf != NULL)
		w->buf[0] = 0;
}

/* Room for n more bytes plus the terminator that keeps buf a C string at all times. */
static int reserve(struct sbx_jw *w, size_t n)
{
	if (w->failed)
		return -1;
	if (n < w->cap - w->len)
		return 0;
	size_t cap = w->cap ? w->cap : 256;
	while (cap - w->len <= n) {
		if (cap > SIZE_MAX / 2) {
			w->failed = 1;
			return -1;
		}
		cap *= 2;
	}
	char *b = realloc(w->buf, cap);
	if (b == NULL) {
		w->failed = 1;
		return -1;
	}
	w->buf = b;
	w->cap = cap;
	return 0;
}

static void put(struct sbx_jw *w, const void *s, size_t n)
{
	if (reserve(w, n) < 0)
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = 0;
}

/* Every value goes through here: in an object it must follow a key, in an array it may need a
 * comma, and at the top level there is only one. */
static int begin_value(struct sbx_jw *w)
{
	if (w->in_str)
		w->failed = 1;
	if (w->failed)
		return -1;
	if (w->obj[w->depth]) {
		if (!w->keyed)
			w->failed = 1;
		w->keyed = 0;
		return w->failed ? -1 : 0;
	}
	if (w->more[w->depth]) {
		if (w->depth == 0)
			w->failed = 1;
		put(w, ",", 1);
		return w->failed ? -1 : 0;
	}
	w->more[w->depth] = 1;
	return 0;
}

/* The inside of a string: JSON's own escapes, \u00XX for the other C0 controls, DEL and the
 * C1 controls (U+0080-U+009F, which some terminals obey), valid UTF-8 as is, and U+FFFD for
 * each byte that is not part of valid UTF-8, so the document is always valid JSON. */
static void put_chars(struct sbx_jw *w, const uint8_t *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
	for (size_t i = 0; i < n && !w->failed;) {
		uint8_t c = s[i];
		const char *hit = c != 0 ? strchr(from, c) : NULL;
		size_t k;
		if (hit != NULL) {
			char esc[2] = {'\\', to[hit - from]};
			put(w, esc, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			put(w, esc, 6);
			i++;
		} else if (c < 0x80) {
			k = i + 1; /* a run of plain ASCII goes out in one copy */
			while (k < n && s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\')
				k++;
			put(w, s + i, k - i);
			i = k;
		} else if ((k = sbx_utf8_seq(s + i, n - i)) == 0) {
			put(w, "\xef\xbf\xbd", 3);
			i++;
		} else if (k == 2 && c == 0xc2 && s[i + 1] <= 0x9f) {
			char esc[6] = {'\\', 'u', '0', '0', hex[s[i + 1] >> 4], hex[s[i + 1] & 15]};
			put(w, esc, 6);
			i += 2;
		} else {
			put(w, s + i, k);
			i += k;
		}
	}
}

static void put_string(struct sbx_jw *w, const uint8_t *s, size_t n)
{
	put(w, "\"", 1);
	put_chars(w, s, n);
	put(w, "\"", 1);
}

static void jw_open(struct sbx_jw *w, const char *c, int obj)
{
	if (begin_value(w) < 0)
		return;
	if (w->depth == SBX_JSON_MAX_DEPTH) {
		w->failed = 1;
		return;
	}
	put(w, c, 1);
	w->depth++;
	w->more[w->depth] = 0;
	w->obj[w->depth] = (unsigned char)obj;
}

static void jw_close(struct sbx_jw *w, const char *c, int obj)
{
	if (w->failed)
		return;
	if (w->in_str || w->depth == 0 || w->obj[w->depth] != obj || w->keyed) {
		w->failed = 1;
		return;
	}
	put(w, c, 1);
	w->depth--;
}

void sbx_jw_obj_begin(struct sbx_jw *w)
{
	jw_open(w, "{", 1);
}

void sbx_jw_obj_end(struct sbx_jw *w)
{
	jw_close(w, "}", 1);
}

void sbx_jw_arr_begin(struct sbx_jw *w)
{
	jw_open(w, "[", 0);
}

void sbx_jw_arr_end(struct sbx_jw *w)
{
	jw_close(w, "]", 0);
}

void sbx_jw_keyn(struct sbx_jw *w, const void *name, size_t len)
{
	if (w->failed)
		return;
	if (!w->obj[w->depth] || w->keyed || w->in_str) {
		w->failed = 1;
		return;
	}
	if (w->more[w->depth])
		put(w, ",", 1);
	w->more[w->depth] = 1;
	put_string(w, name, len);
	put(w, ":", 1);
	w->keyed = 1;
}

void sbx_jw_key(struct sbx_jw *w, const char *name)
{
	sbx_jw_keyn(w, name, strlen(name));
}

void sbx_jw_strn(struct sbx_jw *w, const void *bytes, size_t len)
{
	if (begin_value(w) == 0)
		put_string(w, bytes, len);
}

void sbx_jw_str(struct sbx_jw *w, const char *s)
{
	sbx_jw_strn(w, s, strlen(s));
}

/* Base64 of bytes, without quotes. */
static void put_b64(struct sbx_jw *w, const uint8_t *s, size_t len)
{
	if (len / 3 >= SIZE_MAX / 4 - 2) {
		w->failed = 1;
		return;
	}
	if (reserve(w, (len + 2) / 3 * 4) < 0)
		return;
	char *o = w->buf + w->len;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < len)
			v |= s[i + 2];
		*o++ = b64_alphabet[v >> 18];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < len ? b64_alphabet[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64_alphabet[v & 63] : '=';
	}
	*o = 0;
	w->len = (size_t)(o - w->buf);
}

void sbx_jw_b64(struct sbx_jw *w, const void *bytes, size_t len)
{
	if (begin_value(w) < 0)
		return;
	put(w, "\"", 1);
	put_b64(w, bytes, len);
	put(w, "\"", 1);
}

void sbx_jw_str_begin(struct sbx_jw *w)
{
	if (begin_value(w) < 0)
		return;
	put(w, "\"", 1);
	w->in_str = 1;
}

void sbx_jw_str_add(struct sbx_jw *w, const void *bytes, size_t len)
{
	if (!w->in_str)
		w->failed = 1;
	put_chars(w, bytes, len);
}

void sbx_jw_b64_add(struct sbx_jw *w, const void *bytes, size_t len)
{
	if (!w->in_str)
		w->failed = 1;
	if (!w->failed)
		put_b64(w, bytes, len);
}

void sbx_jw_str_end(struct sbx_jw *w)
{
	if (!w->in_str)
		w->failed = 1;
	w->in_str = 0;
	put(w, "\"", 1);
}

void sbx_jw_int(struct sbx_jw *w, int64_t v)
{
	char buf[24];
	if (begin_value(w) == 0)
		put(w, buf, (size_t)snprintf(buf, sizeof buf, "%" PRId64, v));
}

void sbx_jw_double(struct sbx_jw *w, double d)
{
	char buf[32];
	int n = 0;
	if (!isfinite(d))
		w->failed = 1;
	if (begin_value(w) < 0)
		return;
	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(buf, sizeof buf, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	put(w, buf, (size_t)n);
}

void sbx_jw_bool(struct sbx_jw *w, int b)
{
	if (begin_value(w) == 0)
		put(w, b ? "true" : "false", b ? 4 : 5);
}

void sbx_jw_null(struct sbx_jw *w)
{
	if (begin_value(w) == 0)
		put(w, "null", 4);
}

const char *sbx_jw_text(const struct sbx_jw *w, size_t *len)
{
	if (w->failed || w->in_str || w->depth != 0 || !w->more[0])
		return NULL;
	if (len != NULL)
		*len = w->len;
	return w->buf != NULL ? w->buf : "";
}

const char *sbx_jw_flush(struct sbx_jw *w, size_t *len)
{
	*len = 0;
	if (w->failed)
		return NULL;
	*len = w->len;
	w->len = 0; /* the bytes stay in buf until the next write */
	return w->buf != NULL ? w->buf : "";
}

void sbx_jw_kstr(struct sbx_jw *w, const char *key, const char *s)
{
	sbx_jw_key(w, key);
	if (s != NULL)
		sbx_jw_str(w, s);
	else
		sbx_jw_null(w);
}

void sbx_jw_kstrn(struct sbx_jw *w, const char *key, const void *bytes, size_t len)
{
	sbx_jw_key(w, key);
	sbx_jw_strn(w, bytes, len);
}

void sbx_jw_kb64(struct sbx_jw *w, const char *key, const void *bytes, size_t len)
{
	sbx_jw_key(w, key);
	sbx_jw_b64(w, bytes, len);
}

void sbx_jw_kint(struct sbx_jw *w, const char *key, int64_t v)
{
	sbx_jw_key(w, key);
	sbx_jw_int(w, v);
}

void sbx_jw_kbool(struct sbx_jw *w, const char *key, int b)
{
	sbx_jw_key(w, key);
	sbx_jw_bool(w, b);
}

void sbx_jw_kdouble(struct sbx_jw *w, const char *key, double d)
{
	sbx_jw_key(w, key);
	sbx_jw_double(w, d);
}

void sbx_jw_karr_begin(struct sbx_jw *w, const char *key)
{
	sbx_jw_key(w, key);
	sbx_jw_arr_begin(w);
}

void sbx_jw_kobj_begin(struct sbx_jw *w, const char *key)
{
	sbx_jw_key(w, key);
	sbx_jw_obj_begin(w);
}

void sbx_jw_kstr_begin(struct sbx_jw *w, const char *key)
{
	sbx_jw_key(w, key);
	sbx_jw_str_begin(w);
}

/* ---- base64 ---- */

static int b64_value(char c)
{
	const char *hit = c != 0 ? strchr(b64_alphabet, c) : NULL;
	return hit != NULL ? (int)(hit - b64_alphabet) : -1;
}

int sbx_b64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (len % 4 != 0)
		return -1;
	size_t pad = len > 0 && in[len - 1] == '=' ? 1 : 0;
	if (pad && in[len - 2] == '=')
		pad = 2;
	uint8_t *buf = malloc(len / 4 * 3 + 1);
	if (buf == NULL)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < len; i += 4) {
		size_t q = i + 4 == len ? 4 - pad : 4;
		uint32_t v = 0;
		for (size_t k = 0; k < 4; k++) {
			int d = k < q ? b64_value(in[i + k]) : 0;
			if (d < 0)
				goto fail;
			v = v << 6 | (uint32_t)d;
		}
		/* Bits past the last whole byte must be zero, so each byte string has one text. */
		if ((q == 2 && (v & 0xffff)) || (q == 3 && (v & 0xff)))
			goto fail;
		buf[n++] = (uint8_t)(v >> 16);
		if (q > 2)
			buf[n++] = (uint8_t)(v >> 8);
		if (q > 3)
			buf[n++] = (uint8_t)v;
	}
	*out = buf;
	*outlen = n;
	return 0;
fail:
	free(buf);
	return -1;
}
