/* Message fields, credit accounting and version choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "credit.h"
#include "msg.h"
#include "proto.h"

static void fields_round_trip(void **state)
{
	(void)state;
	uint8_t buf[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_STAT);
	sbx_msgw_str(&w, SBX_T_PATH, "/a b");
	sbx_msgw_str(&w, SBX_T_PATH, "");
	sbx_msgw_i64(&w, SBX_T_CODE, -5);
	sbx_msgw_i64(&w, SBX_T_SIZE, INT64_MIN);
	sbx_msgw_bytes(&w, 999, "\0\xff", 2);
	assert_false(w.overflow);

	struct sbx_msgr r;
	struct sbx_field f;
	int64_t v;
	char s[16];
	sbx_msgr_init(&r, buf, w.len);
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(f.tag, SBX_T_OP);
	assert_int_equal(sbx_field_i64(&f, &v), 0);
	assert_int_equal(v, SBX_OP_STAT);
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(sbx_field_str(&f, s, sizeof s), 0);
	assert_string_equal(s, "/a b");
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(sbx_field_str(&f, s, sizeof s), 0);
	assert_string_equal(s, "");
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(sbx_field_i64(&f, &v), 0);
	assert_int_equal(v, -5);
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(sbx_field_i64(&f, &v), 0);
	assert_true(v == INT64_MIN);
	assert_int_equal(sbx_msgr_next(&r, &f), 1);
	assert_int_equal(f.tag, 999);
	assert_int_equal(f.len, 2);
	/* A string field holding NUL is refused: paths never do. */
	assert_int_equal(sbx_field_str(&f, s, sizeof s), -1);
	assert_int_equal(sbx_field_i64(&f, &v), -1);
	assert_int_equal(sbx_msgr_next(&r, &f), 0);

	assert_int_equal(sbx_msg_find(buf, w.len, SBX_T_CODE, &f), 1);
	assert_int_equal(sbx_msg_find(buf, w.len, SBX_T_KIND, &f), 0);
}

static void writer_overflow_is_sticky(void **state)
{
	(void)state;
	uint8_t buf[20];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, 1, 1); /* 14 bytes */
	assert_false(w.overflow);
	sbx_msgw_str(&w, 2, "toolong"); /* 13 more: does not fit */
	assert_true(w.overflow);
	sbx_msgw_str(&w, 3, ""); /* would fit, but the message is already broken */
	assert_true(w.overflow);
	assert_int_equal(w.len, 14);
}

static void truncated_fields_are_malformed(void **state)
{
	(void)state;
	uint8_t buf[64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_str(&w, 7, "hello");
	for (size_t cut = 1; cut < w.len; cut++) {
		struct sbx_msgr r;
		struct sbx_field f;
		sbx_msgr_init(&r, buf, cut);
		assert_int_equal(sbx_msgr_next(&r, &f), -1);
	}
	/* A length field claiming 4 GiB. */
	uint8_t big[] = {0, 1, 0xff, 0xff, 0xff, 0xff, 'x'};
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, big, sizeof big);
	assert_int_equal(sbx_msgr_next(&r, &f), -1);
}

static void credit_sender(void **state)
{
	(void)state;
	struct sbx_credit_tx c;
	sbx_credit_tx_init(&c, 100);
	assert_int_equal(sbx_credit_tx_take(&c, 60), 60);
	assert_int_equal(sbx_credit_tx_take(&c, 60), 40);
	assert_int_equal(sbx_credit_tx_take(&c, 1), 0);
	assert_int_equal(sbx_credit_tx_grant(&c, 30, 1000), 0);
	assert_int_equal(sbx_credit_tx_take(&c, 100), 30);
	/* A grant past the limit is a misbehaving peer. */
	assert_int_equal(sbx_credit_tx_grant(&c, 1001, 1000), -1);
	assert_int_equal(sbx_credit_tx_grant(&c, 1000, 1000), 0);
	assert_int_equal(sbx_credit_tx_grant(&c, 1, 1000), -1);
	assert_int_equal(sbx_credit_tx_grant(&c, UINT64_MAX, UINT64_MAX), -1);
}

static void credit_receiver(void **state)
{
	(void)state;
	struct sbx_credit_rx c;
	sbx_credit_rx_init(&c, 1000);
	assert_int_equal(sbx_credit_rx_received(&c, 600), 0);
	assert_int_equal(sbx_credit_rx_received(&c, 401), -1); /* overran the window */
	assert_int_equal(sbx_credit_rx_received(&c, 400), 0);
	/* Nothing outstanding: every consumed byte is granted back at once. */
	assert_int_equal(sbx_credit_rx_consumed(&c, 100), 100);
	assert_int_equal(sbx_credit_rx_received(&c, 100), 0);
	/* Batched: below a quarter of the window, wait while the sender still has credit. */
	assert_int_equal(sbx_credit_rx_consumed(&c, 200), 200); /* outstanding was 0 again */
	assert_int_equal(sbx_credit_rx_consumed(&c, 100), 0);
	assert_int_equal(sbx_credit_rx_consumed(&c, 149), 0);
	assert_int_equal(sbx_credit_rx_consumed(&c, 1), 250);
	/* The books balance: outstanding + in-hand never exceed the window. */
	assert_true(c.outstanding <= c.window);
}

/* Sender and receiver together over random-sized sends: never more than the window in
 * flight, and everything sent is eventually delivered. */
static void credit_end_to_end(void **state)
{
	(void)state;
	struct sbx_credit_tx tx;
	struct sbx_credit_rx rx;
	const uint64_t window = 4096;
	sbx_credit_tx_init(&tx, window);
	sbx_credit_rx_init(&rx, window);
	uint64_t sent = 0, delivered = 0, inflight = 0, seed = 12345;
	const uint64_t total = 1000000;
	while (delivered < total) {
		seed = seed * 6364136223846793005u + 1442695040888963407u;
		uint64_t want = (seed >> 33) % 3000 + 1;
		if (want > total - sent)
			want = total - sent;
		uint64_t n = sbx_credit_tx_take(&tx, want);
		sent += n;
		inflight += n;
		assert_true(inflight <= window);
		assert_int_equal(sbx_credit_rx_received(&rx, n), 0);
		uint64_t eat = inflight < 1500 ? inflight : 1500;
		inflight -= eat;
		delivered += eat;
		uint64_t g = sbx_credit_rx_consumed(&rx, eat);
		if (g > 0)
			assert_int_equal(sbx_credit_tx_grant(&tx, g, window), 0);
	}
	assert_true(sent == total);
}

static void version_choice(void **state)
{
	(void)state;
	assert_int_equal(sbx_proto_choose(1, 1, 1, 1), 1);
	assert_int_equal(sbx_proto_choose(1, 3, 2, 5), 3);
	assert_int_equal(sbx_proto_choose(2, 5, 1, 3), 3);
	assert_int_equal(sbx_proto_choose(1, 1, 2, 2), 0); /* agent too old */
	assert_int_equal(sbx_proto_choose(3, 4, 1, 2), 0); /* agent too new */
	assert_int_equal(sbx_proto_choose(0, 0, 0, 0), 0);
	assert_int_equal(sbx_proto_choose(5, 1, 1, 5), 0); /* an inverted range */
	assert_int_equal(
	        sbx_proto_choose(SBX_PROTO_MIN, SBX_PROTO_MAX, SBX_PROTO_MIN, SBX_PROTO_MAX),
	        SBX_PROTO_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(fields_round_trip),
	        cmocka_unit_test(writer_overflow_is_sticky),
	        cmocka_unit_test(truncated_fields_are_malformed),
	        cmocka_unit_test(credit_sender),
	        cmocka_unit_test(credit_receiver),
	        cmocka_unit_test(credit_end_to_end),
	        cmocka_unit_test(version_choice),
	};
	return cmocka_run_group_tests_name("msg", tests, NULL, NULL);
}
