/* Credit accounting for DATA channels. */
#include "credit.h"

void sbx_credit_tx_init(struct sbx_credit_tx *c, uint64_t initial)
{
	c->avail = initial;
}

uint64_t sbx_credit_tx_take(struct sbx_credit_tx *c, uint64_t want)
{
	uint64_t n = want < c->avail ? want : c->avail;
	c->avail -= n;
	return n;
}

int sbx_credit_tx_grant(struct sbx_credit_tx *c, uint64_t n, uint64_t limit)
{
	if (n > limit || c->avail > limit - n)
		return -1;
	c->avail += n;
	return 0;
}

void sbx_credit_rx_init(struct sbx_credit_rx *c, uint64_t window)
{
	c->window = window;
	c->outstanding = window;
	c->consumed = 0;
}

int sbx_credit_rx_received(struct sbx_credit_rx *c, uint64_t n)
{
	if (n > c->outstanding)
		return -1;
	c->outstanding -= n;
	return 0;
}

uint64_t sbx_credit_rx_consumed(struct sbx_credit_rx *c, uint64_t n)
{
	c->consumed += n;
	if (c->consumed < c->window / 4 && c->outstanding > 0)
		return 0;
	uint64_t g = c->consumed;
	c->consumed = 0;
	c->outstanding += g;
	return g;
}
