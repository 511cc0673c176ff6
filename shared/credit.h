/* Per-channel flow control, sans-I/O. The receiver of a channel grants the sender a window
 * of bytes; the sender sends DATA only within what was granted; as the receiver consumes
 * bytes it returns them in CREDIT frames, batched so credit traffic stays small. A sender
 * that overruns its window is a protocol error. */
#ifndef SBX_CREDIT_H
#define SBX_CREDIT_H

#include <stdint.h>

/* Sender side: bytes it may still send. */
struct sbx_credit_tx {
	uint64_t avail;
};

/* Receiver side. */
struct sbx_credit_rx {
	uint64_t window;      /* the most the sender may have in flight */
	uint64_t outstanding; /* granted and not yet received */
	uint64_t consumed;    /* received and consumed, not yet granted back */
};

void sbx_credit_tx_init(struct sbx_credit_tx *c, uint64_t initial);

/* How many of want bytes may go now (at most avail); takes them. */
uint64_t sbx_credit_tx_take(struct sbx_credit_tx *c, uint64_t want);

/* A CREDIT frame arrived; -1 when the grant would exceed limit (a misbehaving peer). */
int sbx_credit_tx_grant(struct sbx_credit_tx *c, uint64_t n, uint64_t limit);

void sbx_credit_rx_init(struct sbx_credit_rx *c, uint64_t window);

/* n bytes of DATA arrived; -1 when they exceed what was granted. */
int sbx_credit_rx_received(struct sbx_credit_rx *c, uint64_t n);

/* n received bytes were consumed (written to the child, the file, the caller). Returns the
 * amount to grant back now in a CREDIT frame, or 0 to wait: credit is returned once at least
 * a quarter of the window is consumed, so a steady stream sees few CREDIT frames and the
 * sender never stalls while more than three quarters of the window are still in flight. */
uint64_t sbx_credit_rx_consumed(struct sbx_credit_rx *c, uint64_t n);

#endif
