/* The output queue: lanes, partial writes, spare reuse and the reserve/commit path (a frame
 * read straight into its own buffer must decode to exactly the bytes written there), and
 * spliced frames (the payload in a pipe of the writer's: it follows its own head before any
 * other byte, whichever lane the others are in and however the writes are cut). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "outq.h"
#include "proto.h"

static size_t drain_spliced(struct sbx_outq *q, int stage, uint8_t *out, size_t cap, size_t step);

/* Drains q through iovecs in pieces of at most step bytes into out; returns the count. */
static size_t drain(struct sbx_outq *q, uint8_t *out, size_t cap, size_t step)
{
	return drain_spliced(q, -1, out, cap, step);
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

/* Writes q as a writer with a staging pipe (stage; -1: none) does: iovecs and moves from the
 * pipe, each cut at step bytes. */
static size_t drain_spliced(struct sbx_outq *q, int stage, uint8_t *out, size_t cap, size_t step)
{
	size_t got = 0;
	while (!sbx_outq_empty(q)) {
		size_t due = sbx_outq_splice_due(q);
		if (due > 0) {
			assert_true(stage >= 0);
			size_t k = due < step ? due : step;
			assert_true(got + k <= cap);
			assert_int_equal(read(stage, out + got, k), (ssize_t)k);
			got += k;
			sbx_outq_spliced(q, k);
			continue;
		}
		struct iovec iov[8];
		int n = sbx_outq_iov(q, iov, 8);
		assert_true(n > 0);
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

static void spliced_payload_follows_its_head(void **state)
{
	(void)state;
	static uint8_t out[4 * 70000];
	static uint8_t copies[8 * 70000];
	static uint8_t pay[2][60000];
	struct sbx_frame fr[8];
	size_t steps[] = {1, 7, 100, 4096, 1 << 20};
	for (size_t si = 0; si < sizeof steps / sizeof *steps; si++) {
		int p[2];
		assert_int_equal(pipe(p), 0);
		struct sbx_outq q;
		sbx_outq_init(&q);
		uint8_t ch = SBX_CH_STDOUT;
		for (int k = 0; k < 2; k++) {
			memset(pay[k], 'a' + k, sizeof pay[k]);
			pay[k][0] = (uint8_t)k;
		}
		/* Two spliced frames around a copied one; the payloads wait in the pipe, in
		 * order. */
		assert_int_equal(write(p[1], pay[0], 30000), 30000);
		assert_int_equal(
		        sbx_outq_push_spliced(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 5, &ch, 1, 30000),
		        0);
		assert_int_equal(
		        sbx_outq_push(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 5, &ch, 1, "mid", 3), 0);
		assert_int_equal(write(p[1], pay[1], 20000), 20000);
		assert_int_equal(
		        sbx_outq_push_spliced(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 5, &ch, 1, 20000),
		        0);
		assert_int_equal(q.bytes, 3 * SBX_FRAME_HDR + 30001 + 4 + 20001);
		assert_int_equal(q.bulk_bytes, q.bytes);
		/* Start the first frame's head, then queue control frames: they may not cut in
		 * before its payload, and go out right after it. */
		struct iovec iov[8];
		assert_int_equal(sbx_outq_iov(&q, iov, 8), 1); /* the head only */
		assert_int_equal(iov[0].iov_len, SBX_FRAME_HDR + 1);
		sbx_outq_advance(&q, 3);
		assert_int_equal(
		        sbx_outq_push(&q, SBX_LANE_CTRL, SBX_F_PONG, 0, 0, NULL, 0, "pp", 2), 0);
		sbx_outq_advance(&q, SBX_FRAME_HDR + 1 - 3);
		assert_int_equal(sbx_outq_splice_due(&q), 30000);
		assert_int_equal(sbx_outq_iov(&q, iov, 8), 0);
		/* What went out so far: the whole head. */
		uint8_t head[SBX_FRAME_HDR + 1];
		sbx_frame_header(head, SBX_F_DATA, 0, 5, 30001);
		head[SBX_FRAME_HDR] = ch;
		memcpy(out, head, sizeof head);
		size_t got = sizeof head;
		got += drain_spliced(&q, p[0], out + got, sizeof out - got, steps[si]);
		assert_int_equal(q.bytes, 0);
		assert_int_equal(q.bulk_bytes, 0);
		int count = 0;
		decode_all(out, got, fr, copies, &count);
		assert_int_equal(count, 4);
		assert_int_equal(fr[0].type, SBX_F_DATA);
		assert_int_equal(fr[0].len, 30001);
		assert_memory_equal(fr[0].payload + 1, pay[0], 30000);
		assert_int_equal(fr[1].type, SBX_F_PONG);
		assert_int_equal(fr[2].len, 4);
		assert_memory_equal(fr[2].payload + 1, "mid", 3);
		assert_int_equal(fr[3].len, 20001);
		assert_memory_equal(fr[3].payload + 1, pay[1], 20000);
		char c;
		close(p[1]);
		assert_int_equal(read(p[0], &c, 1), 0); /* every staged byte went out */
		close(p[0]);
		assert_int_equal(
		        sbx_outq_push_spliced(&q, SBX_LANE_BULK, SBX_F_DATA, 0, 5, &ch, 1, 0), -1);
		sbx_outq_free(&q);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(reserve_commit_round_trip),
	        cmocka_unit_test(commit_more_than_reserved_is_refused),
	        cmocka_unit_test(spliced_payload_follows_its_head),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
