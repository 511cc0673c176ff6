/* The output queue: lanes, partial writes, spare reuse and the reserve/commit path (a frame
 * read straight into its own buffer must decode to exactly the bytes written there). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "outq.h"
#include "proto.h"

/* Drains q through iovecs in pieces of at most step bytes into out; returns the count. */
static size_t drain(struct sbx_outq *q, uint8_t *out, size_t cap, size_t step)
{
	size_t got = 0;
	while (!sbx_outq_empty(q)) {
		struct iovec iov[8];
		int n = sbx_outq_iov(q, iov, 8);
		size_t take = 0;
		for (int i = 0; i < n && take < step; i++) {
			size_t k = iov[i].iov_len < step - take ? iov[i].iov_len : step - take;
			assert_true(got + k <= cap);
			memcpy(out + got, iov[i].iov_base, k);
			got += k;
			take += k;
		}
		sbx_outq_advance(q, take);
	}
	return got;
}

static void decode_all(const uint8_t *p, size_t n, struct sbx_frame *frames, uint8_t *copies,
                       int *count)
{
	static uint8_t buf[SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	size_t pos = 0;
	*count = 0;
	while (pos < n) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st = sbx_frame_dec_feed(&d, p + pos, n - pos, &used, &f);
		pos += used;
		assert_int_not_equal(st, SBX_DEC_ERROR);
		if (st == SBX_DEC_FRAME) {
			frames[*count] = f;
			memcpy(copies + (size_t)*count * 70000, f.payload, f.len);
			frames[*count].payload = copies + (size_t)*count * 70000;
			(*count)++;
		}
	}
}

static void reserve_commit_round_trip(void **state)
{
	(void)state;
	struct sbx_outq q;
	sbx_outq_init(&q);
	uint8_t *out = malloc(1 << 20), *copies = malloc(8 * 70000);
	struct sbx_frame fr[8];
	int count;
	for (int round = 0; round < 50; round++) { /* spares are reused across rounds */
		uint8_t *b = sbx_outq_reserve(&q, 1, SBX_DATA_CHUNK);
		assert_non_null(b);
		assert_null(sbx_outq_reserve(&q, 1, 10)); /* one at a time */
		for (size_t i = 0; i < 40000; i++)
			b[i] = (uint8_t)(i * 7 + (size_t)round);
		uint8_t ch = SBX_CH_STDOUT;
		assert_int_equal(sbx_outq_commit(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 9, &ch, 40000),
		                 0);
		/* A control frame queued after still goes first. */
		assert_int_equal(
		        sbx_outq_push(&q, SBX_LANE_CTRL, SBX_F_PONG, 0, 0, NULL, 0, "p", 1), 0);
		/* Reserved then dropped: nothing is sent. */
		assert_non_null(sbx_outq_reserve(&q, 1, 100));
		sbx_outq_unreserve(&q);
		size_t n = drain(&q, out, 1 << 20, 777 + (size_t)round);
		decode_all(out, n, fr, copies, &count);
		assert_int_equal(count, 2);
		assert_int_equal(fr[0].type, SBX_F_PONG);
		assert_int_equal(fr[1].type, SBX_F_DATA);
		assert_int_equal(fr[1].stream, 9);
		assert_int_equal(fr[1].len, 40001);
		assert_int_equal(fr[1].payload[0], SBX_CH_STDOUT);
		for (size_t i = 0; i < 40000; i++)
			if (fr[1].payload[1 + i] != (uint8_t)(i * 7 + (size_t)round))
				fail_msg("byte %zu of round %d differs", i, round);
	}
	assert_int_equal(sbx_outq_commit(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 1, "x", 1), -1);
	assert_null(sbx_outq_reserve(&q, 1, SBX_FRAME_MAX_PAYLOAD)); /* too large */
	sbx_outq_free(&q);
	free(out);
	free(copies);
}

static void commit_more_than_reserved_is_refused(void **state)
{
	(void)state;
	struct sbx_outq q;
	sbx_outq_init(&q);
	assert_non_null(sbx_outq_reserve(&q, 1, 10));
	assert_int_equal(sbx_outq_commit(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 1, "x", 11), -1);
	assert_int_equal(sbx_outq_commit(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 1, "x", 10), 0);
	assert_int_equal(q.bytes, SBX_FRAME_HDR + 11);
	sbx_outq_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(reserve_commit_round_trip),
	        cmocka_unit_test(commit_more_than_reserved_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
