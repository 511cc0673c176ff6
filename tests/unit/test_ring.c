/* Unit: the retained-output window (shared/ring.c): offsets stay absolute across wraps, a
 * reader older than the window learns how much it lost, room keeps a reader's unread bytes.
 * Shown able to fail: with sbx_ring_peek reporting no loss for an old offset, and with each
 * piece sbx_ring_write copies one byte short, window_reports_loss failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ring.h"

static void offsets_survive_wraps(void **state)
{
	(void)state;
	uint8_t mem[7], all[100], got[100];
	struct sbx_ring r;
	sbx_ring_init(&r, mem, sizeof mem);
	for (int i = 0; i < 100; i++)
		all[i] = (uint8_t)(i * 7 + 1);
	/* Written in odd pieces, read from every offset the window still holds. */
	size_t w = 0;
	for (size_t k = 1; w < 100; k = k % 5 + 1) {
		size_t n = 100 - w < k ? 100 - w : k;
		sbx_ring_write(&r, all + w, n);
		w += n;
		uint64_t at = w - (w < 7 ? w : 7), lost;
		size_t len, got_n = 0;
		while (got_n < w - at || at < w) {
			uint64_t a = at;
			const uint8_t *p = sbx_ring_peek(&r, &a, 3, &len, &lost);
			assert_int_equal(lost, 0);
			if (len == 0)
				break;
			memcpy(got + got_n, p, len);
			got_n += len;
			at = a + len;
		}
		assert_memory_equal(got, all + w - got_n, got_n);
		assert_int_equal(got_n, w < 7 ? w : 7);
	}
	assert_int_equal(r.head, 100);
	assert_int_equal(sbx_ring_base(&r), 93);
}

static void window_reports_loss(void **state)
{
	(void)state;
	uint8_t mem[16], big[40];
	struct sbx_ring r;
	sbx_ring_init(&r, mem, sizeof mem);
	memset(big, 'x', sizeof big);
	big[39] = 'z';
	sbx_ring_write(&r, big, sizeof big); /* more than the window at once */
	uint64_t at = 10, lost;
	size_t len;
	const uint8_t *p = sbx_ring_peek(&r, &at, 100, &len, &lost);
	assert_int_equal(at, 24);
	assert_int_equal(lost, 14);
	assert_int_equal(len, 8); /* the contiguous run up to the buffer's end */
	at = 32;
	p = sbx_ring_peek(&r, &at, 100, &len, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(len, 8);
	assert_int_equal(p[7], 'z');
	/* Past the head: moved back to it, nothing to read. */
	at = 99;
	assert_null(sbx_ring_peek(&r, &at, 100, &len, &lost));
	assert_int_equal(at, 40);
	assert_int_equal(len, 0);
}

static void room_keeps_unread(void **state)
{
	(void)state;
	uint8_t mem[10];
	struct sbx_ring r;
	sbx_ring_init(&r, mem, sizeof mem);
	sbx_ring_write(&r, (const uint8_t *)"abcdef", 6);
	assert_int_equal(sbx_ring_room(&r, 0), 4);
	assert_int_equal(sbx_ring_room(&r, 6), 10);
	sbx_ring_write(&r, (const uint8_t *)"ghij", 4);
	assert_int_equal(sbx_ring_room(&r, 0), 0);
	assert_int_equal(sbx_ring_room(&r, 3), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(offsets_survive_wraps),
	        cmocka_unit_test(window_reports_loss),
	        cmocka_unit_test(room_keeps_unread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
