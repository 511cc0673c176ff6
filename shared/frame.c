/* Frame codec: header encoding, CRC-32, and the incremental decoder. */
#include "frame.h"
#include "proto.h"

#include <string.h>

#include "proto.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint32_t sbx_crc32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

int sbx_frame_type_known(uint8_t type)
{
	switch (type) {
	case SBX_F_HELLO:
	case SBX_F_WELCOME:
	case SBX_F_PING:
	case SBX_F_PONG:
	case SBX_F_REQUEST:
	case SBX_F_RESPONSE:
	case SBX_F_DATA:
	case SBX_F_CREDIT:
	case SBX_F_CANCEL:
	case SBX_FRAME_TYPE_RESET: /* sent only to a peer that knows them (HELLO FWD) */
	case SBX_FRAME_TYPE_OPEN:
		return 1;
	default:
		return 0;
	}
}

void sbx_frame_header(uint8_t out[SBX_FRAME_HDR], uint8_t type, uint8_t flags, uint32_t stream,
                      uint32_t len)
{
	out[0] = SBX_FRAME_MAGIC0;
	out[1] = SBX_FRAME_MAGIC1;
	out[2] = type;
	out[3] = flags;
	put32(out + 4, stream);
	put32(out + 8, len);
	put32(out + 12, sbx_crc32(out, 12));
}

void sbx_frame_dec_init(struct sbx_frame_dec *d, uint8_t *buf, size_t cap)
{
	sbx_frame_dec_init_max(d, buf, cap, cap - SBX_FRAME_HDR);
}

void sbx_frame_dec_init_max(struct sbx_frame_dec *d, uint8_t *buf, size_t cap, size_t max)
{
	memset(d, 0, sizeof *d);
	d->buf = buf;
	d->cap = cap;
	d->max = max < SBX_FRAME_MAX_PAYLOAD ? max : SBX_FRAME_MAX_PAYLOAD;
}

size_t sbx_frame_dec_room(const struct sbx_frame_dec *d)
{
	return d->have >= SBX_FRAME_HDR ? SBX_FRAME_HDR + (size_t)d->need_len : 0;
}

void sbx_frame_dec_setbuf(struct sbx_frame_dec *d, uint8_t *buf, size_t cap)
{
	d->buf = buf;
	d->cap = cap;
}

int sbx_frame_dec_midframe(const struct sbx_frame_dec *d)
{
	return d->have > 0;
}

/* The current frame's header fields into *out, its payload at payload. */
static void header_out(const struct sbx_frame_dec *d, struct sbx_frame *out, const uint8_t *payload)
{
	out->type = d->buf[2];
	out->flags = d->buf[3];
	out->stream = get32(d->buf + 4);
	out->len = d->need_len;
	out->payload = payload;
}

/* The current frame is done with: the next byte starts a header. */
static void frame_done(struct sbx_frame_dec *d)
{
	d->have = 0;
	d->need_len = 0;
	d->frames++;
}

int sbx_frame_dec_pending(const struct sbx_frame_dec *d, struct sbx_frame *out, size_t *held)
{
	if (d->error != SBX_DEC_OK || d->have < SBX_FRAME_HDR)
		return 0;
	header_out(d, out, d->buf + SBX_FRAME_HDR);
	*held = d->have - SBX_FRAME_HDR;
	return 1;
}

void sbx_frame_dec_detach(struct sbx_frame_dec *d)
{
	if (d->error != SBX_DEC_OK || d->have < SBX_FRAME_HDR)
		return;
	frame_done(d);
}

size_t sbx_frame_dec_until(const struct sbx_frame_dec *d, size_t prefix)
{
	if (d->have < SBX_FRAME_HDR)
		return SBX_FRAME_HDR + prefix - d->have;
	size_t end = SBX_FRAME_HDR + (size_t)d->need_len;
	size_t stop = SBX_FRAME_HDR + prefix < end ? SBX_FRAME_HDR + prefix : end;
	return d->have < stop ? stop - d->have : end - d->have;
}

const char *sbx_dec_error_text(enum sbx_dec_error e)
{
	switch (e) {
	case SBX_DEC_OK:
		return "no error";
	case SBX_DEC_BAD_MAGIC:
		return "bad frame magic (garbage or a mangled stream)";
	case SBX_DEC_BAD_CHECK:
		return "frame header check failed (corrupt or mangled stream)";
	case SBX_DEC_TOO_LONG:
		return "frame longer than the limit";
	case SBX_DEC_UNKNOWN_TYPE:
		return "unknown frame type";
	}
	return "unknown decoder error";
}

/* Checks a complete header; on success sets need_len. */
static enum sbx_dec_error check_header(struct sbx_frame_dec *d)
{
	const uint8_t *h = d->buf;
	if (h[0] != SBX_FRAME_MAGIC0 || h[1] != SBX_FRAME_MAGIC1)
		return SBX_DEC_BAD_MAGIC;
	if (get32(h + 12) != sbx_crc32(h, 12))
		return SBX_DEC_BAD_CHECK;
	uint32_t len = get32(h + 8);
	if (len > d->max)
		return SBX_DEC_TOO_LONG;
	if (!sbx_frame_type_known(h[2]))
		return SBX_DEC_UNKNOWN_TYPE;
	d->need_len = len;
	return SBX_DEC_OK;
}

enum sbx_dec_status sbx_frame_dec_feed(struct sbx_frame_dec *d, const uint8_t *in, size_t len,
                                       size_t *used, struct sbx_frame *out)
{
	size_t pos = 0;
	*used = 0;
	if (d->error != SBX_DEC_OK)
		return SBX_DEC_ERROR;
	while (pos < len) {
		if (d->have == 0 && len - pos >= SBX_FRAME_HDR && in[pos] == SBX_FRAME_MAGIC0 &&
		    in[pos + 1] == SBX_FRAME_MAGIC1) {
			/* A whole header at hand: check it; a whole frame is handed out in place,
			 * without copying its payload. */
			memcpy(d->buf, in + pos, SBX_FRAME_HDR);
			d->have = SBX_FRAME_HDR;
			pos += SBX_FRAME_HDR;
			d->error = check_header(d);
			if (d->error != SBX_DEC_OK) {
				*used = pos;
				return SBX_DEC_ERROR;
			}
			if (len - pos >= d->need_len) {
				header_out(d, out, in + pos);
				pos += d->need_len;
				frame_done(d);
				*used = pos;
				return SBX_DEC_FRAME;
			}
		}
		if (d->have < SBX_FRAME_HDR) {
			size_t n = SBX_FRAME_HDR - d->have;
			if (n > len - pos)
				n = len - pos;
			memcpy(d->buf + d->have, in + pos, n);
			d->have += n;
			pos += n;
			/* Refuse garbage as early as its first bytes show it. */
			if ((d->have >= 1 && d->buf[0] != SBX_FRAME_MAGIC0) ||
			    (d->have >= 2 && d->buf[1] != SBX_FRAME_MAGIC1)) {
				d->error = SBX_DEC_BAD_MAGIC;
				*used = pos;
				return SBX_DEC_ERROR;
			}
			if (d->have < SBX_FRAME_HDR)
				break;
			d->error = check_header(d);
			if (d->error != SBX_DEC_OK) {
				*used = pos;
				return SBX_DEC_ERROR;
			}
		}
		if (SBX_FRAME_HDR + (size_t)d->need_len > d->cap) {
			*used = pos;
			return SBX_DEC_ROOM;
		}
		size_t want = SBX_FRAME_HDR + d->need_len - d->have;
		size_t n = want < len - pos ? want : len - pos;
		memcpy(d->buf + d->have, in + pos, n);
		d->have += n;
		pos += n;
		if (d->have == SBX_FRAME_HDR + d->need_len) {
			header_out(d, out, d->buf + SBX_FRAME_HDR);
			frame_done(d);
			*used = pos;
			return SBX_DEC_FRAME;
		}
	}
	*used = pos;
	return SBX_DEC_NEED;
}
