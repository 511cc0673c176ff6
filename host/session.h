/* libsbx internals shared by session.c (the connection: its fds, its engine, its operations
 * and its step) and the files of operations built on it. Private to host/: runners use
 * channel.h, programs sbx.h. */
#ifndef SBX_HOST_SESSION_H
#define SBX_HOST_SESSION_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "channel.h"
#include "engine.h"
#include "msg.h"
#include "proto.h"
#include "sbx.h"
#include "splice.h"
#include "sys.h"
#include "trust.h"

/* ---- operations (sbx.h, "Operations that do not block") ---- */

/* Why an operation's step runs. */
enum sbx_op_event {
	SBX_EV_START,  /* once, when it is started (its first request goes out) */
	SBX_EV_STREAM, /* its stream (op->p) was answered */
	SBX_EV_FD,     /* one of its fds (op->fds) is ready (revents set) */
	SBX_EV_TIMER,  /* op->timer_ns came */
	SBX_EV_CREDIT, /* its stream got credit to send more stdin */
	SBX_EV_STOP,   /* it must end now: cancelled, past its deadline, or the session broke;
	                  op->stop_err says why. The step cleans up (a job is cancelled in the
	                  sandbox) and finishes; it may finish later, once the sandbox answers */
};

struct sbx_op;

struct sbx_op_class {
	const char *name;
	void (*step)(struct sbx_op *op, int ev);
	/* Frees the class's state (op->st's insides); the op itself is freed by the caller. */
	void (*release)(struct sbx_op *op);
	/* DATA on its stream (NULL: credited at once, dropped); the class returns the credit
	 * with sbx_engine_consumed once the bytes are passed on. */
	void (*data)(struct sbx_op *op, int ch, const uint8_t *b, size_t n, int end);
};

struct sbx_loop_reg; /* host/loop.c */

#define SBX_OP_FDS 4

struct sbx_op {
	struct sbx_session *s;
	struct sbx_op *next;      /* the session's operations in flight */
	struct sbx_op *next_done; /* the completion queue */
	const struct sbx_op_class *cls;
	int done, rc;
	struct sbx_err err;
	int stopping;            /* EV_STOP was delivered */
	struct sbx_err stop_err; /* why it was stopped */
	int64_t start_ns, done_ns;
	int64_t deadline_ns; /* stopped with ETIMEDOUT then; INT64_MAX: none */
	int64_t timer_ns;    /* EV_TIMER then; INT64_MAX: none */
	uintptr_t tag;
	int result;           /* which result reader applies (the OP of its request); 0: none */
	int64_t args[2];      /* what its result reader checks the answer against */
	int wait_trust;       /* woken (EV_STREAM, p NULL) when the session's trust op ends */
	int orphan;           /* freed by its owner before it was done: freed when it is */
	struct sbx_stream *p; /* the stream in flight, if any */
	int stream_ready;     /* p was answered, EV_STREAM not yet delivered */
	int credit_ready;     /* p got credit, EV_CREDIT not yet delivered */
	struct pollfd fds[SBX_OP_FDS]; /* its own fds (-1: unused) and the events it wants */
	void *st;                      /* the class's state */
	/* Once done: the last stream's answer (NULL when it had none), and when it came. */
	uint8_t *resp;
	size_t resp_len;
	int64_t answered_ns;
};

/* A new operation of cls with a zeroed state of st_size bytes, not started yet. */
struct sbx_op *sbx_op_new(struct sbx_session *s, const struct sbx_op_class *cls, size_t st_size,
                          struct sbx_err *e);

/* Starts op (EV_START now); returns op, or NULL with *e (the op freed) when it finished at
 * once with an error. */
struct sbx_op *sbx_op_go(struct sbx_op *op, struct sbx_err *e);

/* Ends op with rc (0, or -1 with *err): its stream released, its fds dropped, its result kept
 * for its owner, it joins the completion queue. */
void sbx_op_finish(struct sbx_op *op, int rc, const struct sbx_err *err);

/* A new stream for op (the previous one released): NULL with op finished on failure. */
struct sbx_stream *sbx_op_stream(struct sbx_op *op, int kind);

/* Sends a REQUEST on a new stream of op's (REQ kind; sbx_op_send: of kind). 0, or -1 with op
 * finished. */
int sbx_op_request(struct sbx_op *op, const struct sbx_msgw *w);
int sbx_op_send(struct sbx_op *op, int kind, const uint8_t *req, size_t len);

/* Stops op (EV_STOP) with SBX_EUNAVAILABLE, err and why, unless done or stopping already. */
void sbx_op_stop(struct sbx_op *op, int err, const char *why);

/* A CANCEL for op's stream, while it is open: the agent ends the job and still answers. */
int sbx_op_cancel_remote(struct sbx_op *op);

/* Waits (steps the session) until op is done or until (then the session breaks: a blocking
 * call's deadline is the session's); sbx_op_status's result. */
int sbx_op_wait_until(struct sbx_op *op, int64_t until, struct sbx_err *e);

/* Waits (poll) for what the session waits on, at most until `until`, then steps: -1 with *e
 * (may be NULL) once the session is broken. */
int sbx_session_wait(struct sbx_session *s, int64_t until, struct sbx_err *e);

/* Writes what is queued, as far as the channel takes it now (a request goes out at once). */
void sbx_session_kick(struct sbx_session *s);

/* Frees the orphans that have ended (after the step's walk, never inside it). */
void sbx_session_reap(struct sbx_session *s);

/* Breaks the session (the first reason wins) and stops every operation; always -1. */
int sbx_session_fail(struct sbx_session *s, enum sbx_err_class cls, int err, const char *why);

/* -1 with *e (may be NULL) the reason once the session is broken; else 0. */
int sbx_session_error(struct sbx_session *s, struct sbx_err *e);

/* Trust (trust.c) without waiting: 1 established, -1 failed (*e why), 0 the keeper's answer
 * not judged yet: s->trust_op is in flight (asked now when it was only planned), and every op
 * with wait_trust set gets EV_STREAM (with no stream) when it ends. */
int sbx_trust_state(struct sbx_session *s, struct sbx_err *e);

/* ---- the request and the job (op.c) ---- */

/* A request as an operation: done when its answer came (op->resp, its STATUS unjudged). */
struct sbx_op *sbx_request_async(struct sbx_session *s, const struct sbx_msgw *w,
                                 struct sbx_err *e);

/* -1 with *e when a done op's answer says the request failed (or there is none). */
int sbx_op_answer_ok(const struct sbx_op *op, struct sbx_err *e);

/* The request, waited for within the session's timeout and its STATUS judged; on success
 * *out is the done op (read (*out)->resp, free with sbx_op_free). */
int sbx_call(struct sbx_session *s, const struct sbx_msgw *w, struct sbx_op **out,
             struct sbx_err *e);

/* A request nobody waits for (its answer is dropped): an upload's COMMIT. */
int sbx_detached(struct sbx_session *s, const struct sbx_msgw *w, enum sbx_lane lane,
                 struct sbx_err *e);

/* A job (EXEC, UPLOAD, DOWNLOAD): the prepared request, its stdin from o (stdin_data or
 * stdin_fd), its output to o->on_output, called as DATA arrives (credit returned when it
 * returns; nonzero cancels the job). o must outlive the op. Done when the answer came. */
struct sbx_job;
struct sbx_job_hooks {
	/* Once, when the whole of stdin went (END sent). */
	void (*stdin_end)(struct sbx_op *op, void *ctx);
	/* Once when the job is answered, and when it is stopped (so possibly twice), before it
	 * finishes. On an answer, 1 says the hook finishes the op itself later (sbx_op_finish:
	 * work of its own is still running, e.g. a download's unpacking); 0 finishes it now. */
	int (*ended)(struct sbx_op *op, void *ctx);
	/* When the op is freed: ctx's insides. */
	void (*release)(void *ctx);
	/* DATA on the job's stream instead of o->on_output: the hook returns the credit
	 * (sbx_engine_consumed) as it passes the bytes on, now or later. */
	void (*data)(struct sbx_op *op, void *ctx, int ch, const uint8_t *b, size_t n);
	/* One of op->fds[1..] is ready (op->fds[0] is the job's stdin). */
	void (*fd)(struct sbx_op *op, void *ctx);
	/* The answer of the probe that went before the job (sbx_job_probed_async), its STATUS
	 * ok: 1 sends the job (j->req, which the hook may replace: sbx_job_set_req), 0 ends
	 * the op with success and no job (op->resp is the probe's answer), -1 fails it with
	 * *e. */
	int (*probed)(struct sbx_op *op, void *ctx, struct sbx_err *e);
};
struct sbx_job {
	const struct sbx_exec_opts *o;
	uint8_t *req;
	size_t len;
	uint8_t *probe; /* a REQUEST sent first, its answer given to hooks->probed; or NULL */
	size_t probe_len;
	int probing; /* the probe is in flight */
	size_t stdin_off;
	int stdin_end;
	int sink_failed;
	const struct sbx_job_hooks *hooks; /* may be NULL */
	void *hctx;                        /* freed with the op (after hooks->release) */
};
/* hooks and hctx (malloc'd; NULL for none) belong to the op from here, even on failure. */
struct sbx_op *sbx_job_async(struct sbx_session *s, const uint8_t *req, size_t len,
                             const struct sbx_exec_opts *o, const struct sbx_job_hooks *hooks,
                             void *hctx, struct sbx_err *e);
/* The same job after a probe (a REQUEST, probe[0..plen)): hooks->probed decides on its
 * answer whether the job goes, and may first change it (its fds, its request). */
struct sbx_op *sbx_job_probed_async(struct sbx_session *s, const uint8_t *probe, size_t plen,
                                    const uint8_t *req, size_t len, const struct sbx_exec_opts *o,
                                    const struct sbx_job_hooks *hooks, void *hctx,
                                    struct sbx_err *e);
/* From hooks->probed: the request the job sends instead (copied). 0, or -1 with *e. */
int sbx_job_set_req(struct sbx_op *op, const uint8_t *req, size_t len, struct sbx_err *e);
/* The hooks' context of a job op (NULL when op is no job or has none). */
void *sbx_op_job_ctx(const struct sbx_op *op);
/* op's job state, or NULL when op is no job. */
const struct sbx_job *sbx_op_job(const struct sbx_op *op);

/* The answer of op's stream: its STATUS checked (-1 with *e: the agent's error, or a protocol
 * error); on 0, op->p->resp holds it. */
int sbx_op_response(struct sbx_op *op, struct sbx_err *e);

/* A request buffer of need bytes (SBX_EUSAGE past one frame); free() it. */
uint8_t *sbx_req_buf(size_t need, struct sbx_msgw *w, struct sbx_err *e);

/* The error a RESPONSE carries: -1 with *e set when its STATUS is not ok. */
int sbx_response_status(const uint8_t *p, size_t len, struct sbx_err *e);

/* The requests and answers of two probes transfers begin with (ops.c): the kind of a path,
 * and lands_clear (its request into w, the buffer returned to free; its answer's fields,
 * *physical and *warning malloc'd, either may be NULL). */
uint8_t *sbx_kind_req(const char *path, struct sbx_msgw *w, struct sbx_err *e);
int sbx_kind_parse(const uint8_t *resp, size_t len, enum sbx_kind *out, struct sbx_err *e);
uint8_t *sbx_lands_clear_req(const char *dir, const char *const *keep_out, size_t n,
                             struct sbx_msgw *w, struct sbx_err *e);
int sbx_lands_clear_parse(const uint8_t *resp, size_t len, int *clear, char **physical,
                          char **warning, struct sbx_err *e);

/* ---- a job's stdin (exec, upload) ---- */

/* Moves what it can of fd (non-blocking) to p's stdin channel within p's credit: by splice
 * through the session's splice pipe when it can, else by read. *end is set once fd ended (END
 * sent). 1: fd must be polled for POLLIN before more can go; 0: waiting for credit or for the
 * splice pipe (the session says when); -1: the session broke. */
int sbx_session_stdin_fd(struct sbx_session *s, struct sbx_stream *p, int fd, int *end);

/* Queues bytes of a buffer to p's stdin within credit, from *off; END once all went. 1 when
 * everything went, 0 when waiting for credit. */
int sbx_session_stdin_buf(struct sbx_session *s, struct sbx_stream *p, const void *b, size_t len,
                          size_t *off);

/* ---- the session ---- */

/* Bulk bytes queued for the channel past which a session stops producing more of them (a job's
 * stdin, a forwarded connection's reads). */
#define SBX_SESSION_BULK_LIMIT (2u * 1024u * 1024u)
#define SBX_SESSION_RBUF_MIN (16 * 1024)
#define SBX_SESSION_RBUF_MAX (256 * 1024)

struct sbx_session {
	pid_t pid;
	int to_fd, from_fd, err_fd;
	/* After sbx_session_direct: the exec channel's stdin and stdout, kept open (the agent ends
	 * when its stdin does) but no longer carrying frames; -1 before. */
	int life_in, life_out;
	struct sbx_engine eng;
	/* What one read of the channel takes: small while idle, grown while frames keep it full
	 * (a transfer), shrunk again when the session is idle. */
	uint8_t *rbuf;
	size_t rcap;
	/* A stream's stdin on to to_fd without a copy (splice.h), opened when first needed
	 * (splice_tried: asked once). */
	struct sbx_splice splice;
	int splice_tried;
	int broken;
	struct sbx_err broken_err; /* the engine's error, with the channel's last stderr line */
	char errtail[4096];
	size_t errlen;
	double timeout;
	int sigpipe_ignored; /* the application ignores SIGPIPE: write without masking it */
	int resident;        /* over the resident agent's socket (sbx_session_resident) */
	struct sbx_op *ops;
	struct sbx_op *done_head, *done_tail; /* the completion queue */
	/* The sbx_loop it is in, if any: told by sbx_loop_note_dirty (every step, every operation
	 * started) that what it waits on may have changed. */
	struct sbx_loop_reg *loop_reg;
	/* Trust (host/trust.c): the sandbox's secret as this host knows it, and whether the
	 * sandbox's keeper has shown it holds it (or took it, for a SETUP). */
	uint8_t secret[SBX_SECRET_LEN];
	int trust; /* enum sbx_trust_state (trust.c) */
	enum sbx_trust_how trust_how;
	char *trust_identity; /* a secret first given (KEEPER) is stored under it once taken */
	struct sbx_op *trust_op;
	uint8_t trust_nonce[SBX_NONCE_LEN];
	struct sbx_err trust_err;
};

/* Tell the session's sbx_loop, if it is in one (host/loop.c): what the session waits on may have
 * changed (it is asked again before the next wait), and an operation of it ended (it is queued
 * for sbx_loop_next_done). Never fail: the loop keeps room for every session in both queues. */
void sbx_loop_note_dirty(struct sbx_session *s);
void sbx_loop_note_done(struct sbx_session *s);
/* Out of its loop, if it is in one (sbx_session_close does it). */
void sbx_loop_leave(struct sbx_session *s);

/* The time (sbx_now_ns clock) one session timeout from now: a blocking call's deadline. */
int64_t sbx_session_deadline(const struct sbx_session *s);

/* Reads what the channel's stderr holds (bounded a call), keeping the last 4 KiB. */
void sbx_session_drain_stderr(struct sbx_session *s);

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
