/* The forwarded-connection table (shared/fwdtab.c): ids by side, the limit per listener,
 * credit per connection, END once, the reset handshake, as the host applies them to the
 * agent's frames. Shown able to fail: with the got_end check of on_data removed,
 * data_after_end fails; with the count check of open removed, limit_per_listener fails; with
 * on_reset answering every known id, reset_handshake fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fwdtab.h"

#define A SBX_FWD_FROM_AGENT
#define H SBX_FWD_FROM_HOST

static struct sbx_fwd_conn slots[8];

static void ids_by_side(void **state)
{
	(void)state;
	struct sbx_fwd_tab t;
	struct sbx_fwd_conn *c;
	struct sbx_err e;
	sbx_fwdtab_init(&t, slots, 8, H);
	assert_int_equal(sbx_fwdtab_open(&t, A, 5, 1, 8, &c, &e), -1); /* no bit 31 */
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000001u, 1, 8, &c, &e), 0);
	assert_non_null(c);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000001u, 1, 8, &c, &e), -1); /* twice */
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	assert_int_equal(sbx_fwdtab_open(&t, H, 0x80000002u, 1, 8, &c, &e), -1); /* own, bad */
	assert_int_equal(e.cls, SBX_EUSAGE);
	assert_int_equal(sbx_fwdtab_open(&t, H, 7, 2, 8, &c, &e), 0);
	assert_ptr_equal(sbx_fwdtab_find(&t, 7), c);
	assert_null(sbx_fwdtab_find(&t, 8));
}

static void limit_per_listener(void **state)
{
	(void)state;
	struct sbx_fwd_tab t;
	struct sbx_fwd_conn *c;
	struct sbx_err e;
	sbx_fwdtab_init(&t, slots, 8, H);
	for (uint32_t i = 1; i <= 3; i++)
		assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000000u + i, 1, 3, &c, &e), 0);
	/* the agent's fourth: refused, held as reset until the agent's RESET answers ours */
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000010u, 1, 3, &c, &e), 1);
	assert_non_null(c);
	assert_int_equal(c->state, SBX_FWD_RESET_SENT);
	assert_int_equal(sbx_fwdtab_on_data(&t, 0x80000010u, 100, 0, &c, &e), 1); /* dropped */
	void *u;
	assert_int_equal(sbx_fwdtab_on_reset(&t, 0x80000010u, &u), 0);
	assert_null(sbx_fwdtab_find(&t, 0x80000010u));
	/* our own past the limit: nothing kept */
	assert_int_equal(sbx_fwdtab_open(&t, H, 9, 1, 3, &c, &e), 1);
	assert_null(c);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000011u, 2, 3, &c, &e), 0);
	assert_int_equal(sbx_fwdtab_count(&t, 1), 3);
	/* a finished one frees its place */
	c = sbx_fwdtab_find(&t, 0x80000002u);
	sbx_fwdtab_drop(&t, c);
	assert_int_equal(sbx_fwdtab_count(&t, 1), 2);
	assert_non_null(sbx_fwdtab_find(&t, 0x80000003u));
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000010u, 1, 3, &c, &e), 0);
	/* the table itself is bounded */
	for (uint32_t i = 0x20; i < 0x30; i++)
		sbx_fwdtab_open(&t, A, 0x80000000u + i, 9, 100, &c, &e);
	assert_int_equal(t.n, 8);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000040u, 9, 100, &c, &e), 1);
	assert_null(c);
}

static void credit_per_connection(void **state)
{
	(void)state;
	struct sbx_fwd_tab t;
	struct sbx_fwd_conn *a, *b, *c;
	struct sbx_err e;
	sbx_fwdtab_init(&t, slots, 8, H);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000001u, 1, 8, &a, &e), 0);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000002u, 1, 8, &b, &e), 0);
	/* one connection takes its whole window: the other is untouched */
	assert_int_equal(sbx_fwdtab_on_data(&t, a->id, SBX_FWD_WINDOW, 0, &c, &e), 0);
	assert_int_equal(sbx_fwdtab_on_data(&t, a->id, 1, 0, &c, &e), -1);
	assert_int_equal(e.cls, SBX_EPROTOCOL);
	assert_int_equal(sbx_fwdtab_on_data(&t, b->id, 1000, 0, &c, &e), 0);
	assert_ptr_equal(c, b);
	/* consumed bytes come back a quarter window at a time */
	assert_int_equal(sbx_fwdtab_consumed(b, 1000), 0);
	assert_int_equal(sbx_fwdtab_consumed(a, SBX_FWD_WINDOW / 4), SBX_FWD_WINDOW / 4);
	/* send side: take within credit, grants bounded by the window */
	assert_int_equal(sbx_fwdtab_take(a, SBX_FWD_WINDOW + 5), SBX_FWD_WINDOW);
	assert_int_equal(sbx_fwdtab_take(a, 1), 0);
	assert_int_equal(sbx_fwdtab_on_credit(&t, a->id, 100, &e), 0);
	assert_int_equal(sbx_fwdtab_take(a, 1000), 100);
	assert_int_equal(sbx_fwdtab_on_credit(&t, b->id, 1, &e), -1);      /* b's window is full */
	assert_int_equal(sbx_fwdtab_on_credit(&t, 0x80000077u, 1, &e), 0); /* unknown: ignored */
	assert_int_equal(sbx_fwdtab_on_data(&t, 0x80000077u, 1, 0, &c, &e), -1);
}

static void data_after_end(void **state)
{
	(void)state;
	struct sbx_fwd_tab t;
	struct sbx_fwd_conn *a, *c;
	struct sbx_err e;
	sbx_fwdtab_init(&t, slots, 8, H);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000001u, 1, 8, &a, &e), 0);
	assert_int_equal(sbx_fwdtab_on_data(&t, a->id, 10, 1, &c, &e), 0);
	assert_false(sbx_fwdtab_finished(a));
	assert_int_equal(sbx_fwdtab_on_data(&t, a->id, 0, 1, &c, &e), -1);
	/* half-closed one way, we still send */
	assert_int_equal(sbx_fwdtab_take(a, 5), 5);
	sbx_fwdtab_sent_end(a);
	assert_int_equal(sbx_fwdtab_take(a, 5), 0);
	assert_true(sbx_fwdtab_finished(a));
}

static void reset_handshake(void **state)
{
	(void)state;
	struct sbx_fwd_tab t;
	struct sbx_fwd_conn *a, *b, *c;
	struct sbx_err e;
	void *u;
	int sock = 42;
	sbx_fwdtab_init(&t, slots, 8, H);
	assert_int_equal(sbx_fwdtab_open(&t, A, 0x80000001u, 1, 8, &a, &e), 0);
	a->user = &sock;
	/* the peer resets an open connection: reset the socket and answer */
	assert_int_equal(sbx_fwdtab_on_reset(&t, 0x80000001u, &u), 1);
	assert_ptr_equal(u, &sock);
	assert_null(sbx_fwdtab_find(&t, 0x80000001u));
	/* we reset: what still arrives is dropped, the peer's RESET only forgets it */
	assert_int_equal(sbx_fwdtab_open(&t, H, 3, 2, 8, &b, &e), 0);
	sbx_fwdtab_reset(b);
	assert_int_equal(sbx_fwdtab_take(b, 10), 0);
	assert_int_equal(sbx_fwdtab_on_data(&t, 3, 10, 0, &c, &e), 1);
	assert_int_equal(sbx_fwdtab_on_data(&t, 3, SBX_FWD_WINDOW, 0, &c, &e), -1);
	assert_int_equal(sbx_fwdtab_on_reset(&t, 3, &u), 0);
	assert_null(sbx_fwdtab_find(&t, 3));
	assert_int_equal(sbx_fwdtab_on_reset(&t, 3, &u), 0); /* unknown: ignored */
	assert_null(u);
	assert_int_equal(t.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(ids_by_side),           cmocka_unit_test(limit_per_listener),
	        cmocka_unit_test(credit_per_connection), cmocka_unit_test(data_after_end),
	        cmocka_unit_test(reset_handshake),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
