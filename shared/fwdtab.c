/* The table of forwarded connection streams (docs/forwarding.md, sections 3-5). */
#include "fwdtab.h"

#include <string.h>

void sbx_fwdtab_init(struct sbx_fwd_tab *t, struct sbx_fwd_conn *slots, size_t cap,
                     enum sbx_fwd_from self)
{
	t->c = slots;
	t->cap = cap;
	t->n = 0;
	t->self = self;
}

struct sbx_fwd_conn *sbx_fwdtab_find(struct sbx_fwd_tab *t, uint32_t id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->c[i].id == id)
			return &t->c[i];
	return NULL;
}

size_t sbx_fwdtab_count(const struct sbx_fwd_tab *t, uint32_t listener)
{
	size_t k = 0;
	for (size_t i = 0; i < t->n; i++)
		k += t->c[i].listener == listener && t->c[i].state == SBX_FWD_OPEN;
	return k;
}

int sbx_fwdtab_open(struct sbx_fwd_tab *t, enum sbx_fwd_from from, uint32_t id, uint32_t listener,
                    size_t max, struct sbx_fwd_conn **out, struct sbx_err *e)
{
	int cls = from == t->self ? SBX_EUSAGE : SBX_EPROTOCOL;
	*out = NULL;
	if (!sbx_fwdmsg_id_ok(id, from))
		return sbx_err_set(e, cls, 0, "OPEN on stream %#x, not an id of the %s", id,
		                   from == SBX_FWD_FROM_AGENT ? "agent" : "host");
	if (sbx_fwdtab_find(t, id) != NULL)
		return sbx_err_set(e, cls, 0, "OPEN on stream %#x, already open", id);
	int over = sbx_fwdtab_count(t, listener) >= max;
	if (t->n == t->cap || (over && from == t->self))
		return 1;
	struct sbx_fwd_conn *c = &t->c[t->n++];
	memset(c, 0, sizeof *c);
	c->id = id;
	c->listener = listener;
	c->state = SBX_FWD_OPEN;
	sbx_credit_tx_init(&c->tx, SBX_FWD_WINDOW);
	sbx_credit_rx_init(&c->rx, SBX_FWD_WINDOW);
	*out = c;
	if (over) {
		/* the peer's, past the limit: held as reset, so what it sent before our RESET
		 * reaches it is dropped rather than taken for a protocol error */
		c->state = SBX_FWD_RESET_SENT;
		return 1;
	}
	return 0;
}

int sbx_fwdtab_on_data(struct sbx_fwd_tab *t, uint32_t id, size_t len, int end,
                       struct sbx_fwd_conn **out, struct sbx_err *e)
{
	struct sbx_fwd_conn *c = sbx_fwdtab_find(t, id);
	*out = c;
	if (c == NULL)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "DATA on stream %#x, no connection", id);
	if (c->got_end)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "DATA on stream %#x after its END", id);
	if (sbx_credit_rx_received(&c->rx, len) < 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "DATA on stream %#x beyond credit", id);
	if (end)
		c->got_end = 1;
	return c->state == SBX_FWD_OPEN ? 0 : 1;
}

uint64_t sbx_fwdtab_consumed(struct sbx_fwd_conn *c, uint64_t n)
{
	return sbx_credit_rx_consumed(&c->rx, n);
}

int sbx_fwdtab_on_credit(struct sbx_fwd_tab *t, uint32_t id, uint64_t n, struct sbx_err *e)
{
	struct sbx_fwd_conn *c = sbx_fwdtab_find(t, id);
	if (c == NULL)
		return 0;
	if (sbx_credit_tx_grant(&c->tx, n, SBX_FWD_WINDOW) < 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "CREDIT on stream %#x above the window",
		                   id);
	return 0;
}

size_t sbx_fwdtab_take(struct sbx_fwd_conn *c, size_t want)
{
	if (c->state != SBX_FWD_OPEN || c->sent_end)
		return 0;
	return (size_t)sbx_credit_tx_take(&c->tx, want);
}

void sbx_fwdtab_sent_end(struct sbx_fwd_conn *c)
{
	c->sent_end = 1;
}

int sbx_fwdtab_finished(const struct sbx_fwd_conn *c)
{
	return c->state == SBX_FWD_OPEN && c->sent_end && c->got_end;
}

void sbx_fwdtab_reset(struct sbx_fwd_conn *c)
{
	c->state = SBX_FWD_RESET_SENT;
}

int sbx_fwdtab_on_reset(struct sbx_fwd_tab *t, uint32_t id, void **user)
{
	struct sbx_fwd_conn *c = sbx_fwdtab_find(t, id);
	*user = NULL;
	if (c == NULL)
		return 0;
	int answer = c->state == SBX_FWD_OPEN;
	*user = c->user;
	sbx_fwdtab_drop(t, c);
	return answer;
}

void sbx_fwdtab_drop(struct sbx_fwd_tab *t, struct sbx_fwd_conn *c)
{
	size_t i = (size_t)(c - t->c);
	if (i >= t->n)
		return;
	t->c[i] = t->c[--t->n];
}
