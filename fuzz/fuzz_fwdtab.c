/* libFuzzer target for the forwarded-connection table (shared/fwdtab.h) as the host drives it:
 * the input is a script of events, most of them the agent's (OPEN, DATA, CREDIT, RESET on any
 * id with any size), some the host's own (its OPEN, take, consumed, END, reset). Whatever the
 * agent does, the table stays within its slots and each listener within its limit, ids stay
 * unique and of the right side, and no credit ever exceeds the window. Shown able to fail:
 * with the per-listener check of sbx_fwdtab_open disabled, the seed `limit` traps. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fwdtab.h"

#define CAP 16
#define MAX 3

static void trap_unless(int ok)
{
	if (!ok)
		__builtin_trap();
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check(const struct sbx_fwd_tab *t)
{
	trap_unless(t->n <= t->cap);
	for (size_t i = 0; i < t->n; i++) {
		const struct sbx_fwd_conn *c = &t->c[i];
		trap_unless(c->id != 0);
		trap_unless(c->tx.avail <= SBX_FWD_WINDOW);
		trap_unless(c->rx.outstanding + c->rx.consumed <= SBX_FWD_WINDOW);
		trap_unless(c->state == SBX_FWD_OPEN || c->state == SBX_FWD_RESET_SENT);
		for (size_t j = 0; j < i; j++)
			trap_unless(t->c[j].id != c->id);
	}
	for (uint32_t l = 0; l < 4; l++)
		trap_unless(sbx_fwdtab_count(t, l) <= MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sbx_fwd_conn slots[CAP];
	struct sbx_fwd_tab t;
	struct sbx_err e;
	struct sbx_fwd_conn *c;
	void *u;
	uint32_t own = 1;
	sbx_fwdtab_init(&t, slots, CAP, SBX_FWD_FROM_HOST);
	for (size_t i = 0; i + 9 <= size; i += 9) {
		uint8_t k = data[i];
		uint32_t id = be32(data + i + 1), arg = be32(data + i + 5);
		/* ids near the few that matter, so scripts hit open connections */
		if (k & 0x80)
			id = SBX_FWD_AGENT_ID_BIT | (id & 7);
		switch (k & 0x0f) {
		case 0: /* the agent's OPEN */
			switch (sbx_fwdtab_open(&t, SBX_FWD_FROM_AGENT, id, arg & 3, MAX, &c, &e)) {
			case 0:
				trap_unless(c != NULL && (c->id & SBX_FWD_AGENT_ID_BIT) != 0);
				break;
			case 1: /* refused: held as reset, or nothing when the table is full */
				trap_unless(c == NULL ? t.n == t.cap
				                      : c->state == SBX_FWD_RESET_SENT);
				break;
			default:
				trap_unless(e.cls == SBX_EPROTOCOL);
			}
			break;
		case 1: /* our OPEN (an inward connection) */
			if (sbx_fwdtab_open(&t, SBX_FWD_FROM_HOST, own, arg & 3, MAX, &c, &e) == 0)
				own = own % 1000 + 1;
			break;
		case 2: { /* DATA from the agent */
			size_t len = arg % (2 * SBX_FWD_WINDOW);
			int rc = sbx_fwdtab_on_data(&t, id, len, (int)(arg >> 31), &c, &e);
			trap_unless(rc == -1 ? e.cls == SBX_EPROTOCOL : c != NULL);
			if (rc == 0)
				sbx_fwdtab_consumed(c, len);
			break;
		}
		case 3: /* CREDIT from the agent */
			if (sbx_fwdtab_on_credit(&t, id, arg, &e) < 0)
				trap_unless(e.cls == SBX_EPROTOCOL);
			break;
		case 4: /* RESET from the agent */
			sbx_fwdtab_on_reset(&t, id, &u);
			trap_unless(sbx_fwdtab_find(&t, id) == NULL);
			break;
		case 5: /* our side of a connection: read and send, END, reset, finish */
		case 6:
		case 7:
		case 8:
			if (t.n == 0)
				break;
			c = &t.c[arg % t.n];
			if ((k & 0x0f) == 5)
				trap_unless(sbx_fwdtab_take(c, arg) <= SBX_FWD_WINDOW);
			else if ((k & 0x0f) == 6)
				sbx_fwdtab_sent_end(c);
			else if ((k & 0x0f) == 7)
				sbx_fwdtab_reset(c);
			else if (sbx_fwdtab_finished(c))
				sbx_fwdtab_drop(&t, c);
			break;
		default:
			break;
		}
		check(&t);
	}
	return 0;
}
