/* The protocol engine of a session, sans-I/O (docs/protocol.md): the handshake, the streams
 * with their credit, the keepalive. Fed the bytes the channel delivered and the time, it
 * queues the frames to send in its output queue and calls each stream's handlers; it never
 * reads, writes, sleeps or looks at a clock (every call takes `now`). host/session.c drives it
 * over the channel's fds, fuzz/fuzz_engine.c with arbitrary bytes and times. Private to
 * host/. */
#ifndef SBX_HOST_ENGINE_H
#define SBX_HOST_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "credit.h"
#include "err.h"
#include "frame.h"
#include "outq.h"
#include "proto.h"
#include "sbx.h"

/* REQ: a request and its RESPONSE; PING: a ping and its PONG; JOB: a request whose stream also
 * carries DATA (exec, upload, download); DETACHED: a request whose answer nobody waits for (an
 * upload's COMMIT), dropped on arrival. */
enum sbx_stream_kind {
	SBX_STREAM_REQ,
	SBX_STREAM_PING,
	SBX_STREAM_JOB,
	SBX_STREAM_DETACHED,
	SBX_STREAM_CONN, /* a forwarded connection the host opened: only its id is the engine's */
};

struct sbx_stream;

/* What a stream's owner is told. Each may be NULL. */
struct sbx_stream_ops {
	/* n bytes of DATA on channel ch (SBX_CH_STDOUT or SBX_CH_STDERR); end: the channel's END
	 * (n may be 0 then). The owner passes them on and returns the credit with
	 * sbx_engine_consumed, now or later. */
	void (*data)(struct sbx_stream *p, int ch, const uint8_t *b, size_t n, int end);
	/* The RESPONSE (or PONG) arrived: p->resp, p->resp_len. */
	void (*done)(struct sbx_stream *p);
	/* A CREDIT frame gave p->tx_in more room (the owner may send stdin again). */
	void (*credit)(struct sbx_stream *p);
};

struct sbx_stream {
	struct sbx_stream *next;
	uint32_t id;
	int kind;
	/* Nobody waits for it any more (its operation was cancelled or timed out): a late answer
	 * is dropped, DATA is consumed and credited. Freed at its answer or at the end. */
	int abandoned;
	int done;
	int64_t done_ns;
	uint8_t *resp;
	size_t resp_len;
	unsigned out_chans; /* bit per output channel the job may send DATA on (by its OP) */
	int out_end[SBX_CH_COUNT];
	struct sbx_credit_rx rx[SBX_CH_COUNT];
	struct sbx_credit_tx tx_in;
	const struct sbx_stream_ops *ops;
	void *ctx;
};

enum sbx_engine_state { SBX_ENGINE_HELLO, SBX_ENGINE_OPEN, SBX_ENGINE_BROKEN };

struct sbx_engine {
	int state;
	struct sbx_hello hello;
	struct sbx_frame_dec dec;
	uint8_t *decbuf; /* grows to the frame being assembled, shrinks when the engine is idle */
	size_t deccap;
	struct sbx_outq out;
	struct sbx_stream *streams;
	size_t nstreams;
	uint32_t next_id;
	int64_t timeout_ns;        /* keepalive: a PING after half of it quiet, a PONG within it */
	int64_t hello_deadline_ns; /* the HELLO must have come by then */
	int64_t last_rx_ns, keepalive_sent_ns;
	/* TCP forwarding's frames (OPEN, RESET, DATA and CREDIT on a connection stream: an id
	 * with SBX_FWD_AGENT_ID_BIT or a CONN stream) go to fwd_frame (host/fwd.c): 0, or -1
	 * once it broke the engine. NULL: such a frame breaks the session. */
	int (*fwd_frame)(void *ctx, const struct sbx_frame *f);
	void *fwd_ctx;
	struct sbx_err err; /* why it broke: the first failure */
	uint8_t first[48];  /* the first bytes the channel sent, to show when they are garbage */
	size_t seen;
};

/* An engine waiting for HELLO until now + timeout_ns. 0, or -1 when memory runs out. */
int sbx_engine_init(struct sbx_engine *g, int64_t timeout_ns, int64_t now);
void sbx_engine_free(struct sbx_engine *g);

/* Bytes from the channel. 0, or -1 once the engine is broken (g->err says why). A frame's
 * handlers run before it returns. */
int sbx_engine_feed(struct sbx_engine *g, const uint8_t *b, size_t n, int64_t now);

/* The channel ended (EOF): always -1, the engine broken with the reason. */
int sbx_engine_eof(struct sbx_engine *g);

/* Timers: the HELLO's deadline and the keepalive. 0, or -1 once broken. */
int sbx_engine_tick(struct sbx_engine *g, int64_t now);

/* The next time sbx_engine_tick has something to do (INT64_MAX: nothing). */
int64_t sbx_engine_deadline(const struct sbx_engine *g, int64_t now);

/* Breaks the engine with this reason (the first one wins); always -1. */
int sbx_engine_break(struct sbx_engine *g, enum sbx_err_class cls, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* A new stream (NULL when memory runs out). ops and ctx may be set after. */
struct sbx_stream *sbx_engine_stream(struct sbx_engine *g, int kind);

/* Frees p now, or (answered never) marks it abandoned so its late answer is dropped. */
void sbx_engine_release(struct sbx_engine *g, struct sbx_stream *p);

/* Queues a REQUEST opening p (a JOB's credit windows set up from HELLO and the request's OP).
 * 0, or -1 with *e (too large, no memory). */
int sbx_engine_request(struct sbx_engine *g, struct sbx_stream *p, const uint8_t *req, size_t len,
                       struct sbx_err *e);

/* Queues a frame as it is (PING, CANCEL, DATA, CREDIT). 0, or -1 with *e. */
int sbx_engine_send(struct sbx_engine *g, enum sbx_lane lane, uint8_t type, uint8_t flags,
                    uint32_t stream, const void *pre, size_t prelen, const void *p, size_t len,
                    struct sbx_err *e);

/* n bytes of p's channel ch were passed on: credit is returned to the agent as it is due. */
void sbx_engine_consumed(struct sbx_engine *g, struct sbx_stream *p, int ch, uint64_t n);

/* 1 when nothing is in flight: no stream, no partial frame, nothing to send. */
int sbx_engine_idle(const struct sbx_engine *g);

/* Gives back memory an idle engine holds beyond its floor (the decoder's buffer). */
void sbx_engine_trim(struct sbx_engine *g);

#endif
