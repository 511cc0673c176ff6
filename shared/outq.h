/* The output queue of one end of a connection, sans-I/O: frames wait in two lanes, control
 * (HELLO, PONG, RESPONSE to probes, CREDIT, CANCEL) ahead of bulk (DATA and what must follow
 * it), and the caller pulls iovecs for writev. A frame partly written is always finished
 * first, so lanes never interleave inside a frame; a control frame waits behind at most the
 * rest of one bulk frame. */
#ifndef SBX_OUTQ_H
#define SBX_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct sbx_outq_item;

struct sbx_outq {
	struct sbx_outq_item *cur;   /* partly written */
	struct sbx_outq_item *spare; /* small items kept for reuse: a probe's round trip then
	                                allocates nothing (musl returns freed pages at once) */
	int nspare;
	struct sbx_outq_item *big_spare; /* DATA-sized items kept for reuse (bounded) */
	int nbig_spare;
	struct sbx_outq_item *reserved; /* sbx_outq_reserve's item, not yet queued */
	size_t reserved_pre, reserved_max;
	struct sbx_outq_item *ctrl_head, *ctrl_tail;
	struct sbx_outq_item *bulk_head, *bulk_tail;
	size_t bytes;      /* everything queued */
	size_t bulk_bytes; /* bulk lane only: callers stop producing bulk past a limit */
	size_t spliced;    /* spliced payloads not yet moved: what the writer's pipe holds */
};

enum sbx_lane { SBX_LANE_CTRL, SBX_LANE_BULK };

void sbx_outq_init(struct sbx_outq *q);
void sbx_outq_free(struct sbx_outq *q);

/* Queues one frame whose payload is pre (prelen bytes) followed by data (len bytes); either
 * may be empty. Returns -1 when memory runs out or the payload is too long. */
int sbx_outq_push(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                  uint32_t stream, const void *pre, size_t prelen, const void *data, size_t len);

/* Two steps for a producer that reads straight into the frame (no copy): reserve room for a
 * payload of prelen + max bytes and fill the data part at the returned pointer (NULL when
 * memory runs out, a reservation is open or the sizes are too large); then commit the frame
 * with its first prelen bytes (pre) and len <= max data bytes, or unreserve. */
uint8_t *sbx_outq_reserve(struct sbx_outq *q, size_t prelen, size_t max);
int sbx_outq_commit(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                    uint32_t stream, const void *pre, size_t len);
void sbx_outq_unreserve(struct sbx_outq *q);

/* A frame whose payload is pre then n > 0 bytes the writer holds in a pipe of its own (the
 * agent moves a program's output there with splice, so it is never copied through memory):
 * the queue writes the frame's head, then says (sbx_outq_splice_due) that n bytes are to be
 * moved from that pipe before anything else. The pipe holds the payloads of all such frames
 * in the order they were queued. */
int sbx_outq_push_spliced(struct sbx_outq *q, enum sbx_lane lane, uint8_t type, uint8_t flags,
                          uint32_t stream, const void *pre, size_t prelen, size_t n);

/* Fills up to max iovecs with what to write next; returns how many. They end with the head of
 * a spliced frame, if one comes; 0 when its payload is due. */
int sbx_outq_iov(const struct sbx_outq *q, struct iovec *iov, int max);

/* n bytes of what sbx_outq_iov described were written. */
void sbx_outq_advance(struct sbx_outq *q, size_t n);

/* The bytes of a spliced payload to move now (0: none due); n of them were moved. */
size_t sbx_outq_splice_due(const struct sbx_outq *q);
void sbx_outq_spliced(struct sbx_outq *q, size_t n);

static inline int sbx_outq_empty(const struct sbx_outq *q)
{
	return q->bytes == 0;
}

#endif
