/* A retained-output window addressed by absolute byte offsets (docs/pty.md): the last `cap`
 * bytes of everything written, so a reader can ask for the bytes from offset N and learn how
 * many before the window it missed. Sans-I/O: the caller owns the buffer. */
#ifndef SBX_RING_H
#define SBX_RING_H

#include <stddef.h>
#include <stdint.h>

struct sbx_ring {
	uint8_t *buf;
	size_t cap;
	uint64_t head; /* bytes ever written: the offset of the next byte */
};

void sbx_ring_init(struct sbx_ring *r, uint8_t *buf, size_t cap);

/* The offset of the oldest byte still held. */
uint64_t sbx_ring_base(const struct sbx_ring *r);

/* Appends n bytes (the oldest dropped when full). */
void sbx_ring_write(struct sbx_ring *r, const uint8_t *p, size_t n);

/* Bytes a reader at offset `at` (not yet given) leaves room for before writing would drop
 * them: cap minus what it still has to take. */
size_t sbx_ring_room(const struct sbx_ring *r, uint64_t at);

/* The bytes from offset *at: *at moved up to the base first when older (the bytes skipped
 * returned in *lost), then a pointer to the contiguous run there and its length (at most
 * max; 0 when *at is the head). An *at past the head is moved back to the head. */
const uint8_t *sbx_ring_peek(const struct sbx_ring *r, uint64_t *at, size_t max, size_t *len,
                             uint64_t *lost);

#endif
