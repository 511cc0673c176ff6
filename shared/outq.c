/* Two-lane frame output queue. */
#include "outq.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"

struct sbx_outq_item {
	struct sbx_outq_item *next;
	enum sbx_lane lane;
	size_t len, off, cap;
	uint8_t data[];
};

/* Frames up to this size come from (and go back to) the spare list. */
#define SMALL 1024
#define MAX_SPARE 32

void sbx_outq_init(struct sbx_outq *q)
{
	memset(q, 0, sizeof *q);
}

static void free_list(struct sbx_outq_item *it)
{
	while (it != NULL) {
		struct sbx_outq_item *next = it->next;
		free(it);
		it = next;
	}
}

void sbx_outq_free(struct sbx_outq *q)
{
	free(q->cur);
	free_list(q->ctrl_head);
	free_list(q->bulk_head);
	free_list(q->spare);
	sbx_outq_init(q);
}

static struct sbx_outq_item *item_new(struct sbx_outq *q, size_t total)
{
	if (total <= SMALL && q->spare != NULL) {
		struct sbx_outq_item *it = q->spare;
		q->spare = it->next;
		q->nspare--;
		return it;
	}
	size_t cap = total <= SMALL ? SMALL : total;
	struct sbx_outq_item *it = malloc(sizeof *it + cap);
	if (it != NULL)
		it->cap = cap;
	return it;
}

static void item_done(struct sbx_outq *q, struct sbx_outq_item *it)
{
	if (it->cap == SMALL && q->nspare < MAX_SPARE) {
		it->next = q->spare;
		q->spare = it;
		q->nspare++;
		return;
	}
	free(it);
}

int sbx_outq_push(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                  uint32_t stream, const void *pre, size_t prelen, const void *data, size_t len)
{
	if (prelen > SBX_FRAME_MAX_PAYLOAD || len > SBX_FRAME_MAX_PAYLOAD - prelen)
		return -1;
	size_t total = SBX_FRAME_HDR + prelen + len;
	struct sbx_outq_item *it = item_new(q, total);
	if (it == NULL)
		return -1;
	it->next = NULL;
	it->lane = lane;
	it->len = total;
	it->off = 0;
	sbx_frame_header(it->data, type, flags, stream, (uint32_t)(prelen + len));
	if (prelen > 0)
		memcpy(it->data + SBX_FRAME_HDR, pre, prelen);
	if (len > 0)
		memcpy(it->data + SBX_FRAME_HDR + prelen, data, len);
	struct sbx_outq_item **head = lane == SBX_LANE_CTRL ? &q->ctrl_head : &q->bulk_head;
	struct sbx_outq_item **tail = lane == SBX_LANE_CTRL ? &q->ctrl_tail : &q->bulk_tail;
	if (*tail != NULL)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
	q->bytes += total;
	if (lane == SBX_LANE_BULK)
		q->bulk_bytes += total;
	return 0;
}

int sbx_outq_iov(const struct sbx_outq *q, struct iovec *iov, int max)
{
	int n = 0;
	if (q->cur != NULL && n < max) {
		iov[n].iov_base = q->cur->data + q->cur->off;
		iov[n].iov_len = q->cur->len - q->cur->off;
		n++;
	}
	for (const struct sbx_outq_item *it = q->ctrl_head; it != NULL && n < max; it = it->next) {
		iov[n].iov_base = (void *)it->data;
		iov[n].iov_len = it->len;
		n++;
	}
	for (const struct sbx_outq_item *it = q->bulk_head; it != NULL && n < max; it = it->next) {
		iov[n].iov_base = (void *)it->data;
		iov[n].iov_len = it->len;
		n++;
	}
	return n;
}

/* Takes the next item in writing order off its lane. */
static struct sbx_outq_item *pop_next(struct sbx_outq *q)
{
	struct sbx_outq_item **head = q->ctrl_head != NULL ? &q->ctrl_head : &q->bulk_head;
	struct sbx_outq_item **tail = q->ctrl_head != NULL ? &q->ctrl_tail : &q->bulk_tail;
	struct sbx_outq_item *it = *head;
	if (it == NULL)
		return NULL;
	*head = it->next;
	if (*head == NULL)
		*tail = NULL;
	it->next = NULL;
	return it;
}

void sbx_outq_advance(struct sbx_outq *q, size_t n)
{
	while (n > 0) {
		if (q->cur == NULL) {
			q->cur = pop_next(q);
			if (q->cur == NULL)
				return;
		}
		size_t left = q->cur->len - q->cur->off;
		size_t k = n < left ? n : left;
		q->cur->off += k;
		q->bytes -= k;
		if (q->cur->lane == SBX_LANE_BULK)
			q->bulk_bytes -= k;
		n -= k;
		if (q->cur->off == q->cur->len) {
			item_done(q, q->cur);
			q->cur = NULL;
		}
	}
}
