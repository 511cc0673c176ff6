/* Field writer and reader for message payloads. */
#include "msg.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"

void sbx_msgw_init(struct sbx_msgw *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->overflow = 0;
}

void sbx_msgw_bytes(struct sbx_msgw *w, uint16_t tag, const void *data, size_t len)
{
	if (w->overflow || len > UINT32_MAX || w->cap - w->len < 6 || w->cap - w->len - 6 < len) {
		w->overflow = 1;
		return;
	}
	uint8_t *p = w->buf + w->len;
	p[0] = (uint8_t)(tag >> 8);
	p[1] = (uint8_t)tag;
	p[2] = (uint8_t)(len >> 24);
	p[3] = (uint8_t)(len >> 16);
	p[4] = (uint8_t)(len >> 8);
	p[5] = (uint8_t)len;
	if (len > 0)
		memcpy(p + 6, data, len);
	w->len += 6 + len;
}

void sbx_msgw_str(struct sbx_msgw *w, uint16_t tag, const char *s)
{
	sbx_msgw_bytes(w, tag, s, strlen(s));
}

void sbx_msgw_i64(struct sbx_msgw *w, uint16_t tag, int64_t v)
{
	uint8_t b[8];
	uint64_t u = (uint64_t)v;
	for (int i = 7; i >= 0; i--) {
		b[i] = (uint8_t)u;
		u >>= 8;
	}
	sbx_msgw_bytes(w, tag, b, 8);
}

void sbx_msgr_init(struct sbx_msgr *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->pos = 0;
}

int sbx_msgr_next(struct sbx_msgr *r, struct sbx_field *f)
{
	if (r->pos == r->len)
		return 0;
	if (r->len - r->pos < 6)
		return -1;
	const uint8_t *h = r->p + r->pos;
	uint32_t len = (uint32_t)h[2] << 24 | (uint32_t)h[3] << 16 | (uint32_t)h[4] << 8 | h[5];
	if (r->len - r->pos - 6 < len)
		return -1;
	f->tag = (uint16_t)(h[0] << 8 | h[1]);
	f->len = len;
	f->val = h + 6;
	r->pos += 6 + (size_t)len;
	return 1;
}

int sbx_field_i64(const struct sbx_field *f, int64_t *out)
{
	if (f->len != 8)
		return -1;
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u = u << 8 | f->val[i];
	*out = (int64_t)u;
	return 0;
}

int sbx_field_str(const struct sbx_field *f, char *out, size_t cap)
{
	if (f->len >= cap || memchr(f->val, '\0', f->len) != NULL)
		return -1;
	memcpy(out, f->val, f->len);
	out[f->len] = '\0';
	return 0;
}

int sbx_msg_find(const uint8_t *p, size_t len, uint16_t tag, struct sbx_field *f)
{
	struct sbx_msgr r;
	sbx_msgr_init(&r, p, len);
	int rc;
	while ((rc = sbx_msgr_next(&r, f)) == 1)
		if (f->tag == tag)
			return 1;
	return rc;
}

char *sbx_field_strdup(const struct sbx_field *f)
{
	if (memchr(f->val, '\0', f->len) != NULL)
		return NULL;
	char *s = malloc((size_t)f->len + 1);
	if (s != NULL) {
		memcpy(s, f->val, f->len);
		s[f->len] = '\0';
	}
	return s;
}

void sbx_msgw_error(struct sbx_msgw *w, int cls, int err, const char *msg)
{
	w->len = 0;
	w->overflow = 0;
	sbx_msgw_i64(w, SBX_T_STATUS, cls);
	sbx_msgw_i64(w, SBX_T_ERRNO, err);
	sbx_msgw_str(w, SBX_T_MESSAGE, msg);
}
