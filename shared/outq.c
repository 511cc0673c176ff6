/* Two-lane frame output queue. */
#include "outq.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "proto.h"

struct sbx_outq_item {
	struct sbx_outq_item *next;
	enum sbx_lane lane;
	size_t len, off, cap; /* the bytes in data: the frame, or its head when spliced */
	size_t slen, soff;    /* a spliced frame's payload bytes in the writer's pipe */
	uint8_t data[];
};

/* Frames up to SMALL bytes come from (and go back to) the spare list, and so do DATA-sized
 * frames (BIG): musl returns freed pages at once, so a stream of 64 KiB frames would
 * otherwise page-fault on every one. BIG spares are bounded by MAX_BIG_SPARE (2 MiB). */
#define SMALL 1024
#define MAX_SPARE 32
#define BIG (SBX_FRAME_HDR + 1 + SBX_DATA_CHUNK)
#define MAX_BIG_SPARE 32

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
	free_list(q->big_spare);
	free(q->reserved);
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
	if (total > SMALL && total <= BIG && q->big_spare != NULL) {
		struct sbx_outq_item *it = q->big_spare;
		q->big_spare = it->next;
		q->nbig_spare--;
		return it;
	}
	size_t cap = total <= SMALL ? SMALL : total <= BIG ? BIG : total;
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
	if (it->cap == BIG && q->nbig_spare < MAX_BIG_SPARE) {
		it->next = q->big_spare;
		q->big_spare = it;
		q->nbig_spare++;
		return;
	}
	free(it);
}

static void link_item(struct sbx_outq *q, struct sbx_outq_item *it)
{
	struct sbx_outq_item **head = it->lane == SBX_LANE_CTRL ? &q->ctrl_head : &q->bulk_head;
	struct sbx_outq_item **tail = it->lane == SBX_LANE_CTRL ? &q->ctrl_tail : &q->bulk_tail;
	if (*tail != NULL)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
	q->bytes += it->len + it->slen;
	if (it->lane == SBX_LANE_BULK)
		q->bulk_bytes += it->len + it->slen;
}

uint8_t *sbx_outq_reserve(struct sbx_outq *q, size_t prelen, size_t max)
{
	if (q->reserved != NULL || prelen > SBX_FRAME_MAX_PAYLOAD ||
	    max > SBX_FRAME_MAX_PAYLOAD - prelen)
		return NULL;
	q->reserved = item_new(q, SBX_FRAME_HDR + prelen + max);
	if (q->reserved == NULL)
		return NULL;
	q->reserved_pre = prelen;
	q->reserved_max = max;
	return q->reserved->data + SBX_FRAME_HDR + prelen;
}

int sbx_outq_commit(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                    uint32_t stream, const void *pre, size_t len)
{
	struct sbx_outq_item *it = q->reserved;
	if (it == NULL || len > q->reserved_max)
		return -1;
	q->reserved = NULL;
	it->next = NULL;
	it->lane = lane;
	it->len = SBX_FRAME_HDR + q->reserved_pre + len;
	it->off = it->slen = it->soff = 0;
	sbx_frame_header(it->data, type, flags, stream, (uint32_t)(q->reserved_pre + len));
	if (q->reserved_pre > 0)
		memcpy(it->data + SBX_FRAME_HDR, pre, q->reserved_pre);
	link_item(q, it);
	return 0;
}

void sbx_outq_unreserve(struct sbx_outq *q)
{
	if (q->reserved != NULL) {
		item_done(q, q->reserved);
		q->reserved = NULL;
	}
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
	it->off = it->slen = it->soff = 0;
	sbx_frame_header(it->data, type, flags, stream, (uint32_t)(prelen + len));
	if (prelen > 0)
		memcpy(it->data + SBX_FRAME_HDR, pre, prelen);
	if (len > 0)
		memcpy(it->data + SBX_FRAME_HDR + prelen, data, len);
	link_item(q, it);
	return 0;
}

int sbx_outq_push_spliced(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                          uint32_t stream, const void *pre, size_t prelen, size_t n)
{
	if (n == 0 || prelen > SBX_FRAME_MAX_PAYLOAD || n > SBX_FRAME_MAX_PAYLOAD - prelen ||
	    sbx_outq_push(q, lane, type, flags, stream, pre, prelen, NULL, 0) != 0)
		return -1;
	/* The frame as queued, its header then made to announce the payload to come. */
	struct sbx_outq_item *it = lane == SBX_LANE_CTRL ? q->ctrl_tail : q->bulk_tail;
	sbx_frame_header(it->data, type, flags, stream, (uint32_t)(prelen + n));
	it->slen = n;
	q->spliced += n;
	q->bytes += n;
	if (lane == SBX_LANE_BULK)
		q->bulk_bytes += n;
	return 0;
}

int sbx_outq_iov(const struct sbx_outq *q, struct iovec *iov, int max)
{
	int n = 0;
	if (q->cur != NULL) {
		if (q->cur->off == q->cur->len)
			return 0; /* its spliced payload comes first */
		iov[n].iov_base = q->cur->data + q->cur->off;
		iov[n].iov_len = q->cur->len - q->cur->off;
		n++;
		if (q->cur->slen > 0)
			return n;
	}
	/* Up to and including the head of the first spliced frame: its payload follows it. */
	for (int lane = 0; lane < 2; lane++)
		for (const struct sbx_outq_item *it = lane == 0 ? q->ctrl_head : q->bulk_head;
		     it != NULL && n < max; it = it->next) {
			iov[n].iov_base = (void *)it->data;
			iov[n].iov_len = it->len;
			n++;
			if (it->slen > 0)
				return n;
		}
	return n;
}

size_t sbx_outq_splice_due(const struct sbx_outq *q)
{
	if (q->cur == NULL || q->cur->off < q->cur->len)
		return 0;
	return q->cur->slen - q->cur->soff;
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

static void count_out(struct sbx_outq *q, size_t k)
{
	q->bytes -= k;
	if (q->cur->lane == SBX_LANE_BULK)
		q->bulk_bytes -= k;
	if (q->cur->off == q->cur->len && q->cur->soff == q->cur->slen) {
		item_done(q, q->cur);
		q->cur = NULL;
	}
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
		if (left == 0)
			return; /* a spliced payload is due: sbx_outq_spliced counts it */
		size_t k = n < left ? n : left;
		q->cur->off += k;
		n -= k;
		count_out(q, k);
	}
}

void sbx_outq_spliced(struct sbx_outq *q, size_t n)
{
	size_t due = sbx_outq_splice_due(q);
	if (n == 0 || due == 0)
		return;
	size_t k = n < due ? n : due;
	q->cur->soff += k;
	q->spliced -= k;
	count_out(q, k);
}
