/* The retained-output window (ring.h). */
#include "ring.h"

#include <string.h>

void sbx_ring_init(struct sbx_ring *r, uint8_t *buf, size_t cap)
{
	r->buf = buf;
	r->cap = cap;
	r->head = 0;
}

uint64_t sbx_ring_base(const struct sbx_ring *r)
{
	return r->head > r->cap ? r->head - r->cap : 0;
}

void sbx_ring_write(struct sbx_ring *r, const uint8_t *p, size_t n)
{
	if (r->cap == 0) {
		r->head += n;
		return;
	}
	if (n > r->cap) { /* only the last cap bytes can stay */
		r->head += n - r->cap;
		p += n - r->cap;
		n = r->cap;
	}
	while (n > 0) {
		size_t at = (size_t)(r->head % r->cap);
		size_t k = r->cap - at < n ? r->cap - at : n;
		memcpy(r->buf + at, p, k);
		r->head += k;
		p += k;
		n -= k;
	}
}

size_t sbx_ring_room(const struct sbx_ring *r, uint64_t at)
{
	if (at >= r->head)
		return r->cap;
	uint64_t owed = r->head - at;
	return owed >= r->cap ? 0 : r->cap - (size_t)owed;
}

const uint8_t *sbx_ring_peek(const struct sbx_ring *r, uint64_t *at, size_t max, size_t *len,
                             uint64_t *lost)
{
	uint64_t base = sbx_ring_base(r);
	*lost = 0;
	if (*at < base) {
		*lost = base - *at;
		*at = base;
	}
	if (*at > r->head)
		*at = r->head;
	*len = 0;
	if (*at == r->head || r->cap == 0)
		return NULL;
	size_t off = (size_t)(*at % r->cap);
	uint64_t avail = r->head - *at;
	size_t k = r->cap - off;
	if (avail < k)
		k = (size_t)avail;
	if (max < k)
		k = max;
	*len = k;
	return r->buf + off;
}
