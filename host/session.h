/* libsbx internals shared by session.c (the connection and its loop) and the files of
 * operations built on it. Private to host/: runners use channel.h, programs sbx.h. */
#ifndef SBX_HOST_SESSION_H
#define SBX_HOST_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "credit.h"
#include "frame.h"
#include "msg.h"
#include "outq.h"
#include "proto.h"
#include "sbx.h"
#include "splice.h"
#include "channel.h"
#include "sys.h"
#include "trust.h"

/* DETACHED: a request whose answer nobody waits for (an upload's COMMIT); freed on arrival. */
enum { SBX_STREAM_REQ, SBX_STREAM_PING, SBX_STREAM_EXEC, SBX_STREAM_DETACHED };

struct sbx_stream {
	struct sbx_stream *next;
	uint32_t id;
	int kind;
	int done;
	int64_t done_ns;
	uint8_t *resp; /* RESPONSE (or PONG) payload */
	size_t resp_len;
	/* exec */
	const struct sbx_exec_opts *opts;
	struct sbx_credit_rx rx[SBX_CH_COUNT];
	struct sbx_credit_tx tx_in;
	size_t stdin_off;
	int stdin_done;
	int out_end[SBX_CH_COUNT];
	unsigned out_chans; /* bit per output channel this job may send DATA on (by its OP) */
	int sink_failed;
	int64_t start_ns;
};

#define SBX_SESSION_RBUF (256 * 1024)

struct sbx_session {
	pid_t pid;
	int to_fd, from_fd, err_fd;
	/* After sbx_session_direct: the exec channel's stdin and stdout, kept open (the agent ends
	 * when its stdin does) but no longer carrying frames; -1 before. */
	int life_in, life_out;
	struct sbx_frame_dec dec;
	uint8_t *decbuf;
	uint8_t *rbuf; /* SBX_SESSION_RBUF bytes: what one read of the channel takes */
	struct sbx_outq out;
	/* A stream's stdin on to to_fd without a copy (splice.h), opened when first needed
	 * (splice_tried: asked once). */
	struct sbx_splice splice;
	int splice_tried;
	struct sbx_hello hello;
	int have_hello;
	struct sbx_stream *streams;
	uint32_t next_id;
	int broken;
	struct sbx_err broken_err;
	char errtail[4096];
	size_t errlen;
	double timeout;
	int sigpipe_ignored; /* the application ignores SIGPIPE: write without masking it */
	int64_t last_rx_ns, keepalive_sent_ns;
	int resident; /* over the resident agent's socket (sbx_session_resident) */
	/* Trust (host/trust.c): the sandbox's secret as this host knows it, and whether the
	 * sandbox's keeper has shown it holds it (or took it, for a SETUP). */
	uint8_t secret[SBX_SECRET_LEN];
	int trust; /* enum sbx_trust_state (trust.c) */
	enum sbx_trust_how trust_how;
	char *trust_identity; /* a secret first given (KEEPER) is stored under it once taken */
	struct sbx_stream *trust_stream;
	uint8_t trust_nonce[SBX_NONCE_LEN];
	struct sbx_err trust_err;
	uint8_t first[48]; /* the first bytes the channel sent, to show on garbage */
	size_t seen;
};

struct sbx_stream *sbx_stream_new(struct sbx_session *s, int kind);
void sbx_stream_free(struct sbx_session *s, struct sbx_stream *p);
int sbx_send(struct sbx_session *s, enum sbx_lane lane, uint8_t type, uint8_t flags,
             uint32_t stream, const void *pre, size_t prelen, const void *p, size_t len,
             struct sbx_err *e);
/* One round of the loop: waits for the channel (at most until deadline_ns) and handles
 * everything ready. */
int sbx_pump(struct sbx_session *s, int64_t deadline_ns, struct sbx_err *e);
/* Pumps until p is answered or the deadline passes (which breaks the session). */
int sbx_wait_stream(struct sbx_session *s, struct sbx_stream *p, int64_t deadline_ns,
                    struct sbx_err *e);
void sbx_session_drain_stderr(struct sbx_session *s);
/* The error a RESPONSE carries: -1 with *e set when its STATUS is not ok. */
int sbx_response_status(const uint8_t *p, size_t len, struct sbx_err *e);
/* Sends a request and waits for its response (the session timeout); on success *out is the
 * stream: read (*out)->resp and free it with sbx_stream_free. */
int sbx_call(struct sbx_session *s, const struct sbx_msgw *w, struct sbx_stream **out,
             struct sbx_err *e);
/* A request buffer of need bytes (SBX_EUSAGE past one frame); free() it. */
uint8_t *sbx_req_buf(size_t need, struct sbx_msgw *w, struct sbx_err *e);
double sbx_session_timeout(const struct sbx_session *s);
/* Sends a prepared REQUEST (EXEC, UPLOAD, DOWNLOAD) as a job stream whose stdin comes from o
 * (stdin_data or stdin_fd) and whose output goes to o->on_output; o must outlive the stream.
 * Wait with sbx_wait_stream, read p->resp, free with sbx_stream_free. */
int sbx_job_start(struct sbx_session *s, const uint8_t *req, size_t len,
                  const struct sbx_exec_opts *o, struct sbx_stream **out, struct sbx_err *e);

/* Sockets inside a sandbox (host/sock.c): sock in the folder dir (absolute, as the sandbox sees
 * it) of the sandbox of process pid, the folder resolved inside the sandbox's root (openat2
 * RESOLVE_IN_ROOT through /proc/PID/root): the connected socket (non-blocking), or -1 with e;
 * the listener's pid of a connected unix socket (0 unknown); whether two processes share a pid
 * namespace; 1 MiB socket buffers each way (best effort). */
int sbx_connect_in(pid_t pid, const char *dir, const char *sock, struct sbx_err *e);
pid_t sbx_listener(int c);
int sbx_same_pidns(pid_t a, pid_t b);
void sbx_big_buffers(int c);

#endif
