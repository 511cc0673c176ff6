/* The frame codec: every split of a byte stream gives the same frames; corrupt, oversized,
 * unknown and truncated input is refused; tty-style rewriting is caught. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "proto.h"

struct stream {
	uint8_t bytes[4096];
	size_t len;
};

static void add(struct stream *s, uint8_t type, uint8_t flags, uint32_t id, const void *p,
                uint32_t len)
{
	sbx_frame_header(s->bytes + s->len, type, flags, id, len);
	memcpy(s->bytes + s->len + SBX_FRAME_HDR, p, len);
	s->len += SBX_FRAME_HDR + len;
}

static void sample(struct stream *s)
{
	s->len = 0;
	add(s, SBX_F_PING, 0, 0, "12345678", 8);
	add(s, SBX_F_REQUEST, 0, 7, "", 0);
	add(s, SBX_F_DATA, SBX_FL_END, 0xfffffffeu, "\x01payload with \n and \r\n", 23);
	add(s, SBX_F_CREDIT, 0, 3, "\x01\x00\x01\x00\x00", 5);
}

/* Feeds s in pieces of the given sizes (cycled) and checks the four frames of sample(). */
static void decode_in_pieces(const struct stream *s, const size_t *sizes, size_t nsizes)
{
	uint8_t buf[256];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	struct sbx_frame got[8];
	uint8_t copies[8][64];
	int n = 0;
	size_t pos = 0, k = 0;
	while (pos < s->len) {
		size_t piece = sizes[k++ % nsizes];
		if (piece > s->len - pos)
			piece = s->len - pos;
		size_t off = 0;
		while (off < piece) {
			size_t used;
			struct sbx_frame f;
			enum sbx_dec_status st = sbx_frame_dec_feed(&d, s->bytes + pos + off,
			                                            piece - off, &used, &f);
			assert_int_not_equal(st, SBX_DEC_ERROR);
			off += used;
			if (st == SBX_DEC_FRAME) {
				assert_true(n < 8);
				got[n] = f;
				memcpy(copies[n], f.payload, f.len);
				got[n].payload = copies[n];
				n++;
			}
		}
		pos += piece;
	}
	assert_false(sbx_frame_dec_midframe(&d));
	assert_int_equal(n, 4);
	assert_int_equal(got[0].type, SBX_F_PING);
	assert_int_equal(got[0].len, 8);
	assert_memory_equal(got[0].payload, "12345678", 8);
	assert_int_equal(got[1].type, SBX_F_REQUEST);
	assert_int_equal(got[1].stream, 7);
	assert_int_equal(got[1].len, 0);
	assert_int_equal(got[2].type, SBX_F_DATA);
	assert_int_equal(got[2].flags, SBX_FL_END);
	assert_int_equal(got[2].stream, 0xfffffffeu);
	assert_memory_equal(got[2].payload, "\x01payload with \n and \r\n", 23);
	assert_int_equal(got[3].type, SBX_F_CREDIT);
	assert_int_equal(got[3].stream, 3);
}

static void split_at_every_boundary(void **state)
{
	(void)state;
	struct stream s;
	sample(&s);
	/* Two pieces, cut at every byte. */
	for (size_t cut = 1; cut < s.len; cut++) {
		size_t sizes[] = {cut, s.len};
		decode_in_pieces(&s, sizes, 2);
	}
	/* Byte by byte, and three-way cuts over a grid. */
	size_t one[] = {1};
	decode_in_pieces(&s, one, 1);
	for (size_t a = 1; a < 40; a += 3)
		for (size_t b = 1; b < 40; b += 5) {
			size_t sizes[] = {a, b};
			decode_in_pieces(&s, sizes, 2);
		}
	/* All at once. */
	size_t all[] = {s.len};
	decode_in_pieces(&s, all, 1);
}

static enum sbx_dec_status feed_all(struct sbx_frame_dec *d, const uint8_t *p, size_t len,
                                    int *frames)
{
	size_t pos = 0;
	*frames = 0;
	while (pos < len) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st = sbx_frame_dec_feed(d, p + pos, len - pos, &used, &f);
		if (st == SBX_DEC_ERROR)
			return st;
		pos += used;
		if (st == SBX_DEC_FRAME)
			(*frames)++;
	}
	return SBX_DEC_NEED;
}

static void oversized_length_is_refused(void **state)
{
	(void)state;
	uint8_t buf[128], h[SBX_FRAME_HDR];
	struct sbx_frame_dec d;
	int frames;
	/* Past the buffer the caller gave. */
	sbx_frame_dec_init(&d, buf, sizeof buf);
	sbx_frame_header(h, SBX_F_DATA, 0, 1, 200);
	assert_int_equal(feed_all(&d, h, sizeof h, &frames), SBX_DEC_ERROR);
	assert_int_equal(d.error, SBX_DEC_TOO_LONG);
	/* Past the protocol's limit, whatever the buffer. */
	sbx_frame_dec_init(&d, buf, SIZE_MAX);
	sbx_frame_header(h, SBX_F_DATA, 0, 1, SBX_FRAME_MAX_PAYLOAD + 1);
	assert_int_equal(feed_all(&d, h, sizeof h, &frames), SBX_DEC_ERROR);
	assert_int_equal(d.error, SBX_DEC_TOO_LONG);
	sbx_frame_header(h, SBX_F_DATA, 0, 1, 0xffffffffu);
	sbx_frame_dec_init(&d, buf, SIZE_MAX);
	assert_int_equal(feed_all(&d, h, sizeof h, &frames), SBX_DEC_ERROR);
	/* Errors are sticky. */
	size_t used;
	struct sbx_frame f;
	uint8_t ok[SBX_FRAME_HDR];
	sbx_frame_header(ok, SBX_F_PING, 0, 0, 0);
	assert_int_equal(sbx_frame_dec_feed(&d, ok, sizeof ok, &used, &f), SBX_DEC_ERROR);
}

static void unknown_type_is_refused(void **state)
{
	(void)state;
	uint8_t buf[128], h[SBX_FRAME_HDR];
	struct sbx_frame_dec d;
	int frames;
	for (unsigned t = 0; t < 256; t++) {
		sbx_frame_dec_init(&d, buf, sizeof buf);
		sbx_frame_header(h, (uint8_t)t, 0, 0, 0);
		enum sbx_dec_status st = feed_all(&d, h, sizeof h, &frames);
		if (sbx_frame_type_known((uint8_t)t)) {
			assert_int_equal(st, SBX_DEC_NEED);
			assert_int_equal(frames, 1);
		} else {
			assert_int_equal(st, SBX_DEC_ERROR);
			assert_int_equal(d.error, SBX_DEC_UNKNOWN_TYPE);
		}
	}
}

static void every_flipped_header_bit_is_caught(void **state)
{
	(void)state;
	uint8_t buf[128], h[SBX_FRAME_HDR + 4];
	struct sbx_frame_dec d;
	int frames;
	sbx_frame_header(h, SBX_F_DATA, 0, 5, 4);
	memcpy(h + SBX_FRAME_HDR, "abcd", 4);
	for (size_t bit = 0; bit < SBX_FRAME_HDR * 8; bit++) {
		uint8_t m[sizeof h];
		memcpy(m, h, sizeof h);
		m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		sbx_frame_dec_init(&d, buf, sizeof buf);
		assert_int_equal(feed_all(&d, m, sizeof m, &frames), SBX_DEC_ERROR);
		assert_int_equal(frames, 0);
	}
}

static void garbage_is_refused_at_once(void **state)
{
	(void)state;
	uint8_t buf[128];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	const char *junk = "bash: sbx-agent: command not found\n";
	size_t used;
	struct sbx_frame f;
	assert_int_equal(sbx_frame_dec_feed(&d, (const uint8_t *)junk, strlen(junk), &used, &f),
	                 SBX_DEC_ERROR);
	assert_int_equal(d.error, SBX_DEC_BAD_MAGIC);
	assert_true(used <= SBX_FRAME_HDR);
	assert_non_null(strstr(sbx_dec_error_text(d.error), "magic"));
}

/* A tty turns every \n into \r\n. A header holding a 0x0a byte (stream 10 here) grows by
 * a byte and its check fails; the decoder never returns the frame. */
static void tty_newline_rewrite_is_caught(void **state)
{
	(void)state;
	uint8_t h[SBX_FRAME_HDR], m[2 * SBX_FRAME_HDR];
	sbx_frame_header(h, SBX_F_PING, 0, 10, 0);
	size_t n = 0;
	for (size_t i = 0; i < sizeof h; i++) {
		if (h[i] == '\n')
			m[n++] = '\r';
		m[n++] = h[i];
	}
	assert_true(n > sizeof h);
	uint8_t buf[128];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	int frames;
	assert_int_equal(feed_all(&d, m, n, &frames), SBX_DEC_ERROR);
	assert_int_equal(frames, 0);
}

static void truncation_is_visible(void **state)
{
	(void)state;
	struct stream s;
	sample(&s);
	for (size_t cut = 1; cut < s.len; cut++) {
		uint8_t buf[256];
		struct sbx_frame_dec d;
		sbx_frame_dec_init(&d, buf, sizeof buf);
		int frames;
		assert_int_equal(feed_all(&d, s.bytes, cut, &frames), SBX_DEC_NEED);
		/* Either the cut fell between frames, or the decoder knows it is mid-frame. */
		size_t bounds[] = {24, 40, 79, 100};
		int between = 0;
		for (size_t i = 0; i < 4; i++)
			between |= cut == bounds[i];
		assert_int_equal(sbx_frame_dec_midframe(&d), !between);
	}
}

/* A frame that arrives whole is handed out in place (its payload points into the input);
 * one that arrives in pieces is assembled in the decoder's buffer; both decode the same. */
static void whole_frames_decode_in_place(void **state)
{
	(void)state;
	static uint8_t in[2 * (SBX_FRAME_HDR + 3000)];
	uint8_t dbuf[SBX_FRAME_HDR + 4000];
	for (int k = 0; k < 2; k++) {
		uint8_t *f = in + (size_t)k * (SBX_FRAME_HDR + 3000);
		sbx_frame_header(f, SBX_F_DATA, 0, 7 + (uint32_t)k, 3000);
		for (int i = 0; i < 3000; i++)
			f[SBX_FRAME_HDR + i] = (uint8_t)(i + k);
	}
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, dbuf, sizeof dbuf);
	size_t used;
	struct sbx_frame fr;
	assert_int_equal(sbx_frame_dec_feed(&d, in, sizeof in, &used, &fr), SBX_DEC_FRAME);
	assert_int_equal(used, SBX_FRAME_HDR + 3000);
	assert_ptr_equal(fr.payload, in + SBX_FRAME_HDR);
	assert_int_equal(fr.stream, 7);
	/* The second in two pieces: header and 100 bytes, then the rest. */
	const uint8_t *second = in + used;
	assert_int_equal(sbx_frame_dec_feed(&d, second, SBX_FRAME_HDR + 100, &used, &fr),
	                 SBX_DEC_NEED);
	assert_int_equal(sbx_frame_dec_feed(&d, second + SBX_FRAME_HDR + 100, 2900, &used, &fr),
	                 SBX_DEC_FRAME);
	assert_ptr_equal(fr.payload, dbuf + SBX_FRAME_HDR);
	assert_int_equal(fr.stream, 8);
	for (int i = 0; i < 3000; i++)
		assert_int_equal(fr.payload[i], (uint8_t)(i + 1));
	/* A bad header is refused on the in-place path too. */
	uint8_t bad[SBX_FRAME_HDR + 4];
	sbx_frame_header(bad, SBX_F_DATA, 0, 1, 4);
	bad[9] ^= 1; /* the length, under the header's CRC */
	sbx_frame_dec_init(&d, dbuf, sizeof dbuf);
	assert_int_equal(sbx_frame_dec_feed(&d, bad, sizeof bad, &used, &fr), SBX_DEC_ERROR);
}

/* The agent's way during uploads: reads stop where sbx_frame_dec_until says, a DATA payload
 * is taken past the decoder once its header and first byte are in, and the frames after it
 * decode as before. */
static void payload_taken_past_the_decoder(void **state)
{
	(void)state;
	size_t big = 200000, cap = 3 * SBX_FRAME_HDR + big + 64;
	uint8_t *in = malloc(cap), *payload = malloc(big);
	uint8_t *buf = malloc(SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	assert_non_null(in);
	assert_non_null(payload);
	for (size_t i = 0; i < big; i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	payload[0] = SBX_CH_STDIN;
	size_t len = 0;
	sbx_frame_header(in, SBX_F_CREDIT, 0, 3, 5);
	memcpy(in + SBX_FRAME_HDR, "\x01\x00\x01\x00\x00", 5);
	len = SBX_FRAME_HDR + 5;
	sbx_frame_header(in + len, SBX_F_DATA, SBX_FL_END, 9, (uint32_t)big);
	memcpy(in + len + SBX_FRAME_HDR, payload, big);
	len += SBX_FRAME_HDR + big;
	sbx_frame_header(in + len, SBX_F_PING, 0, 0, 8);
	memcpy(in + len + SBX_FRAME_HDR, "12345678", 8);
	len += SBX_FRAME_HDR + 8;

	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	struct sbx_frame f;
	size_t used, held, pos = 0;
	assert_int_equal(sbx_frame_dec_until(&d, 1), SBX_FRAME_HDR + 1);
	/* The CREDIT frame: 17 bytes, then exactly its last 4. */
	assert_int_equal(sbx_frame_dec_feed(&d, in, 17, &used, &f), SBX_DEC_NEED);
	pos = 17;
	assert_int_equal(sbx_frame_dec_until(&d, 1), 4);
	assert_int_equal(sbx_frame_dec_feed(&d, in + pos, 4, &used, &f), SBX_DEC_FRAME);
	assert_int_equal(f.type, SBX_F_CREDIT);
	pos += 4;
	/* The DATA frame: header and channel byte, pending, detached. */
	assert_false(sbx_frame_dec_pending(&d, &f, &held));
	size_t want = sbx_frame_dec_until(&d, 1);
	assert_int_equal(want, SBX_FRAME_HDR + 1);
	assert_int_equal(sbx_frame_dec_feed(&d, in + pos, want, &used, &f), SBX_DEC_NEED);
	pos += want;
	assert_int_equal(sbx_frame_dec_pending(&d, &f, &held), 1);
	assert_int_equal(f.type, SBX_F_DATA);
	assert_int_equal(f.flags, SBX_FL_END);
	assert_int_equal(f.stream, 9);
	assert_int_equal(f.len, big);
	assert_int_equal(held, 1);
	assert_int_equal(f.payload[0], SBX_CH_STDIN);
	/* Were it not detached, the next read would stop at the frame's end. */
	assert_int_equal(sbx_frame_dec_until(&d, 1), big - 1);
	uint64_t frames = d.frames;
	sbx_frame_dec_detach(&d);
	assert_false(sbx_frame_dec_midframe(&d));
	assert_int_equal(d.frames, frames + 1);
	assert_memory_equal(in + pos, payload + 1, big - 1); /* what the caller takes itself */
	pos += big - 1;
	/* The PING after it decodes from the next byte on. */
	want = sbx_frame_dec_until(&d, 1);
	assert_int_equal(want, SBX_FRAME_HDR + 1);
	assert_int_equal(sbx_frame_dec_feed(&d, in + pos, want, &used, &f), SBX_DEC_NEED);
	pos += want;
	assert_int_equal(sbx_frame_dec_feed(&d, in + pos, len - pos, &used, &f), SBX_DEC_FRAME);
	assert_int_equal(f.type, SBX_F_PING);
	assert_memory_equal(f.payload, "12345678", 8);
	/* A frame shorter than the prefix: the read ends inside the next header, never in a
	 * payload whose header was already in. */
	uint8_t two[2 * SBX_FRAME_HDR + 8];
	sbx_frame_header(two, SBX_F_REQUEST, 0, 1, 0);
	sbx_frame_header(two + SBX_FRAME_HDR, SBX_F_PING, 0, 0, 8);
	memcpy(two + 2 * SBX_FRAME_HDR, "abcdefgh", 8);
	want = sbx_frame_dec_until(&d, 1);
	assert_int_equal(sbx_frame_dec_feed(&d, two, want, &used, &f), SBX_DEC_FRAME);
	assert_int_equal(f.len, 0);
	assert_int_equal(sbx_frame_dec_feed(&d, two + used, want - used, &used, &f), SBX_DEC_NEED);
	assert_int_equal(sbx_frame_dec_until(&d, 1), SBX_FRAME_HDR);
	/* Nothing pending while the header is incomplete; detach then does nothing. */
	assert_false(sbx_frame_dec_pending(&d, &f, &held));
	sbx_frame_dec_detach(&d);
	assert_true(sbx_frame_dec_midframe(&d));
	free(in);
	free(payload);
	free(buf);
}

static void crc32_known_value(void **state)
{
	(void)state;
	assert_int_equal(sbx_crc32("123456789", 9), 0xcbf43926u);
	assert_int_equal(sbx_crc32("", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(split_at_every_boundary),
	        cmocka_unit_test(oversized_length_is_refused),
	        cmocka_unit_test(unknown_type_is_refused),
	        cmocka_unit_test(every_flipped_header_bit_is_caught),
	        cmocka_unit_test(garbage_is_refused_at_once),
	        cmocka_unit_test(tty_newline_rewrite_is_caught),
	        cmocka_unit_test(truncation_is_visible),
	        cmocka_unit_test(crc32_known_value),
	        cmocka_unit_test(whole_frames_decode_in_place),
	        cmocka_unit_test(payload_taken_past_the_decoder),
	};
	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
