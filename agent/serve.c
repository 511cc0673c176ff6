/* The agent's one event loop: frames in on stdin, frames out on stdout, the jobs' pipes
 * (agent/job.h) and SIGCHLD (signalfd), deadlines as poll timeouts. Single-threaded; requests
 * are dispatched through one table of operations, probes answered inline and ahead of bulk
 * data; DATA flows under per-channel credit. An upload's large payloads bypass the decoder
 * (the sink, agent/stdin.h); the session may move to the direct socket (agent/direct.h). */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "direct.h"
#include "frame.h"
#include "fwd.h"
#include "hello.h"
#include "job.h"
#include "keeper.h"
#include "msg.h"
#include "outq.h"
#include "probe.h"
#include "proto.h"
#include "ptyctl.h"
#include "splice.h"
#include "stdin.h"
#include "supctl.h"
#include "sys.h"

/* Room for several whole DATA frames per read: a frame that arrives whole is decoded in place
 * (no copy). */
#define READ_BUF (256u * 1024u)
#define DIRECT_WAIT_NS (10 * 1000000000LL)

struct serve {
	int in_fd, out_fd, sig_fd;
	/* The direct socket: a listener while one is offered; once taken, in_fd and out_fd are
	 * the socket and life_fd is the exec channel's stdin, read only for its end. */
	struct sbx_direct direct;
	int life_fd;
	int in_eof, out_broken, welcomed;
	struct sbx_frame_dec dec;
	uint8_t *decbuf, *rbuf;
	uint8_t *resp; /* response scratch, SBX_FRAME_MAX_PAYLOAD bytes */
	struct sbx_outq out;
	struct sbx_splice splice; /* jobs' output on to out_fd without a copy (splice.h) */
	struct sbx_jobs jobs;
	struct sbx_sink sink; /* an upload's payload still in the connection */
	/* The keeper the host set up for this session (SETUP with KEEP 0); without a secret,
	 * trust requests go to the sandbox's keeper socket. */
	struct sbx_keeper keeper;
	struct sbx_fwd *fwd; /* TCP forwarding, made on the first FWD_LISTEN or OPEN */
	char fatal[256];
};

static int fail(struct serve *s, const char *msg)
{
	if (s->fatal[0] == '\0')
		snprintf(s->fatal, sizeof s->fatal, "%s", msg);
	return -1;
}

static int queue(struct serve *s, enum sbx_lane lane, uint8_t type, uint8_t flags, uint32_t stream,
                 const void *p, size_t len)
{
	if (sbx_outq_push(&s->out, lane, type, flags, stream, NULL, 0, p, len) != 0)
		return fail(s, "out of memory queueing a frame");
	return 0;
}

/* ---- requests -------------------------------------------------------------------------- */

/* EXEC, UPLOAD, DOWNLOAD: the job answers when it ends. */
static int start_job(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w)
{
	struct sbx_err e;
	int rc = op == SBX_OP_EXEC ? sbx_job_exec(&s->jobs, f->stream, f->payload, f->len, &e)
	         : op == SBX_OP_PTY_STREAM
	                 ? sbx_job_pty(&s->jobs, f->stream, f->payload, f->len, &e)
	                 : sbx_job_xfer(&s->jobs, f->stream, op == SBX_OP_UPLOAD, f->payload,
	                                f->len, &e);
	if (rc == 0)
		return 0;
	sbx_msgw_error(w, e.cls, e.errnum, e.msg);
	return 1;
}

static int commit(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w)
{
	(void)op;
	sbx_job_commit(&s->jobs, f->payload, f->len, w);
	return 1;
}

/* DIRECT: listen, answer where. Only on a quiet session (no job, no direct socket yet): the
 * switch must not cut a stream in half. */
static int offer_direct(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w)
{
	(void)op;
	struct sbx_field tok;
	char err[160];
	if (s->jobs.list != NULL || s->life_fd >= 0 || s->direct.fd >= 0)
		sbx_msgw_error(w, SBX_EUSAGE, 0,
		               "direct socket: only once, and with nothing else running");
	else if (sbx_msg_find(f->payload, f->len, SBX_T_TOKEN, &tok) != 1 ||
	         tok.len != SBX_DIRECT_TOKEN_LEN)
		sbx_msgw_error(w, SBX_EUSAGE, 0, "direct socket: no token");
	else if (sbx_direct_listen(&s->direct, tok.val, sbx_now_ns() + DIRECT_WAIT_NS, err,
	                           sizeof err) != 0)
		sbx_msgw_error(w, SBX_EUNAVAILABLE, errno, err);
	else {
		sbx_msgw_i64(w, SBX_T_STATUS, 0);
		sbx_msgw_str(w, SBX_T_PATH, s->direct.path);
	}
	return 1;
}

/* AUTH, SETUP and SUP_RUN: answered by this process's keeper when it holds the secret, else by
 * the sandbox's keeper over its socket (SETUP with KEEP 1 starts a keeper daemon when there is
 * none). Blocking, bounded by the socket's timeouts (agent/keeper.c). */
static int trust_request(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w)
{
	struct sbx_field fk, fs;
	int64_t keep = 0;
	if (op == SBX_OP_SETUP && sbx_msg_find(f->payload, f->len, SBX_T_KEEP, &fk) == 1)
		sbx_field_i64(&fk, &keep);
	if (s->keeper.have || (op == SBX_OP_SETUP && keep == 0)) {
		sbx_keeper_answer(&s->keeper, f->payload, f->len, w);
		return 1;
	}
	if (sbx_keeper_call(f->payload, f->len, w) == 0)
		return 1;
	int err = errno;
	char msg[200];
	if (op == SBX_OP_SETUP && sbx_msg_find(f->payload, f->len, SBX_T_SECRET, &fs) == 1 &&
	    fs.len == SBX_SECRET_LEN && (err == ENOENT || err == ECONNREFUSED)) {
		if (sbx_keeper_spawn(fs.val, msg, sizeof msg) == 0) {
			sbx_msgw_i64(w, SBX_T_STATUS, 0);
			return 1;
		}
	} else {
		snprintf(msg, sizeof msg, "no keeper answers in this sandbox: %s", strerror(err));
		err = ENOKEY;
	}
	sbx_msgw_error(w, SBX_ETRANSFER, err, msg);
	return 1;
}

/* FWD_LISTEN, FWD_UNLISTEN (agent/fwd.h). */
static int forward(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w)
{
	struct sbx_err e;
	if (op == SBX_OP_FWD_UNLISTEN)
		sbx_fwd_unlisten(s->fwd, f->payload, f->len, w);
	else if (sbx_fwd_listen(&s->fwd, &s->out, f->stream, f->payload, f->len, w, &e) != 0)
		sbx_msgw_error(w, e.cls, e.errnum, e.msg);
	return 1;
}

/* Every operation: answered from the request alone (answer), or with the session's state
 * (handle: 1 when w holds the answer, 0 when the answer comes later). */
struct op {
	void (*answer)(const uint8_t *req, size_t len, struct sbx_msgw *w);
	int (*handle)(struct serve *s, const struct sbx_frame *f, int64_t op, struct sbx_msgw *w);
};

// clang-format off
static const struct op ops[] = {
	[SBX_OP_KIND]        = {sbx_probe_kind,        NULL},
	[SBX_OP_STAT]        = {sbx_probe_stat,        NULL},
	[SBX_OP_RESOLVE]     = {sbx_probe_resolve,     NULL},
	[SBX_OP_LANDS_CLEAR] = {sbx_probe_lands_clear, NULL},
	[SBX_OP_EXEC]        = {NULL,                  start_job},
	[SBX_OP_SUP_RUN]     = {NULL,                  trust_request},
	[SBX_OP_SUP_SIGNAL]  = {sbx_supctl_signal,     NULL},
	[SBX_OP_SUP_STATUS]  = {sbx_supctl_status,     NULL},
	[SBX_OP_SUP_READ]    = {sbx_supctl_read,       NULL},
	[SBX_OP_SUP_REARM]   = {sbx_supctl_rearm,      NULL},
	[SBX_OP_SUP_CLOSE]   = {sbx_supctl_close,      NULL},
	[SBX_OP_UPLOAD]      = {NULL,                  start_job},
	[SBX_OP_DOWNLOAD]    = {NULL,                  start_job},
	[SBX_OP_COMMIT]      = {NULL,                  commit},
	[SBX_OP_DIRECT]      = {NULL,                  offer_direct},
	[SBX_OP_AUTH]        = {NULL,                  trust_request},
	[SBX_OP_SETUP]       = {NULL,                  trust_request},
	[SBX_OP_PTY_SPAWN]   = {sbx_ptyctl_spawn,      NULL},
	[SBX_OP_PTY_ATTACH]  = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_STREAM]  = {NULL,                  start_job},
	[SBX_OP_PTY_RESIZE]  = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_SIGNAL]  = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_STATUS]  = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_DETACH]  = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_CLOSE]   = {sbx_ptyctl_forward,    NULL},
	[SBX_OP_PTY_LIST]    = {sbx_ptyctl_list,       NULL},
	[SBX_OP_FWD_LISTEN]  = {NULL,                  forward},
	[SBX_OP_FWD_UNLISTEN] = {NULL,                 forward},
};
// clang-format on

static void on_request(struct serve *s, const struct sbx_frame *f)
{
	struct sbx_field fo;
	int64_t op = 0;
	if (f->stream == 0 || sbx_job_find(&s->jobs, f->stream) != NULL) {
		fail(s, "the host opened a request on stream 0 or on a stream in use");
		return;
	}
	struct sbx_msgw w;
	sbx_msgw_init(&w, s->resp, SBX_FRAME_MAX_PAYLOAD);
	const struct op *o = NULL;
	if (sbx_msg_find(f->payload, f->len, SBX_T_OP, &fo) != 1 || sbx_field_i64(&fo, &op) != 0) {
		sbx_msgw_error(&w, SBX_EUSAGE, 0, "request without an operation");
	} else if (op <= 0 || op >= (int64_t)(sizeof ops / sizeof ops[0]) ||
	           ((o = &ops[op])->answer == NULL && o->handle == NULL)) {
		char msg[64];
		snprintf(msg, sizeof msg, "unknown operation %lld", (long long)op);
		sbx_msgw_error(&w, SBX_EUSAGE, 0, msg);
	} else if (o->answer != NULL) {
		o->answer(f->payload, f->len, &w);
	} else if (o->handle(s, f, op, &w) == 0) {
		return;
	}
	queue(s, SBX_LANE_CTRL, SBX_F_RESPONSE, 0, f->stream, s->resp, w.len);
}

/* ---- frames ---------------------------------------------------------------------------- */

static int on_data(struct serve *s, const struct sbx_frame *f)
{
	if (f->len < 1 || f->payload[0] != SBX_CH_STDIN)
		return fail(s, "DATA from the host on a channel other than stdin");
	struct sbx_job *j = sbx_job_find(&s->jobs, f->stream);
	if (j == NULL)
		return 0; /* the job finished; its stdin no longer matters */
	const char *why;
	if (sbx_job_stdin(&s->jobs, j, f->len - 1, f->payload + 1, f->len - 1, &why) != 0)
		return fail(s, why);
	if (f->flags & SBX_FL_END)
		j->in.end = 1;
	return 0;
}

static int on_credit(struct serve *s, const struct sbx_frame *f)
{
	if (f->len != 5 || f->payload[0] >= SBX_CH_COUNT)
		return fail(s, "malformed CREDIT");
	uint32_t n = (uint32_t)f->payload[1] << 24 | (uint32_t)f->payload[2] << 16 |
	             (uint32_t)f->payload[3] << 8 | f->payload[4];
	struct sbx_job *j = sbx_job_find(&s->jobs, f->stream);
	if (j == NULL)
		return 0;
	if (sbx_credit_tx_grant(&j->tx[f->payload[0]], n, s->jobs.host_window) != 0)
		return fail(s, "host granted more credit than its window");
	return 0;
}

static int on_welcome(struct serve *s, const struct sbx_frame *f)
{
	struct sbx_field fl;
	int64_t v = 0;
	if (sbx_msg_find(f->payload, f->len, SBX_T_CANARY, &fl) != 1 || fl.len != SBX_CANARY_LEN ||
	    memcmp(fl.val, SBX_CANARY, SBX_CANARY_LEN) != 0)
		return fail(
		        s, "the channel mangles bytes (a tty?): run the agent with exec -i, no -t");
	if (sbx_msg_find(f->payload, f->len, SBX_T_VERSION, &fl) != 1 ||
	    sbx_field_i64(&fl, &v) != 0 || v < SBX_PROTO_MIN || v > SBX_PROTO_MAX)
		return fail(s, "the host chose a protocol version this agent does not speak");
	if (sbx_msg_find(f->payload, f->len, SBX_T_WINDOW, &fl) == 1 &&
	    sbx_field_i64(&fl, &v) == 0 && v >= 4096 && v <= (1 << 30))
		s->jobs.host_window = (uint64_t)v;
	s->welcomed = 1;
	return 0;
}

static int on_frame(struct serve *s, const struct sbx_frame *f)
{
	if (!s->welcomed) {
		if (f->type != SBX_F_WELCOME || f->stream != 0)
			return fail(s, "the host sent a frame before WELCOME (on stream 0)");
		return on_welcome(s, f);
	}
	if (f->type == SBX_FRAME_TYPE_OPEN || f->type == SBX_FRAME_TYPE_RESET ||
	    ((f->type == SBX_F_DATA || f->type == SBX_F_CREDIT) &&
	     sbx_fwd_owns(s->fwd, f->stream))) {
		struct sbx_err e;
		return sbx_fwd_frame(&s->fwd, &s->out, f, &e) != 0 ? fail(s, e.msg) : 0;
	}
	switch (f->type) {
	case SBX_F_PING:
		if (f->len > 1024)
			return fail(s, "PING payload too long");
		return queue(s, SBX_LANE_CTRL, SBX_F_PONG, 0, f->stream, f->payload, f->len);
	case SBX_F_REQUEST:
		on_request(s, f);
		return 0;
	case SBX_F_DATA:
		return on_data(s, f);
	case SBX_F_CREDIT:
		return on_credit(s, f);
	case SBX_F_CANCEL: {
		struct sbx_job *j = sbx_job_find(&s->jobs, f->stream);
		if (j != NULL) {
			j->cancelled = 1;
			sbx_job_kill(j);
		}
		return 0;
	}
	default:
		return fail(s, f->type == SBX_F_WELCOME
		                       ? "the host sent WELCOME twice"
		                       : "the host sent a frame type only the agent sends");
	}
}

/* ---- reading the host ------------------------------------------------------------------ */

/* 1 while an upload's child reads its stdin: reads then stop at frame boundaries, so each DATA
 * payload for it can be spliced from the connection into its pipe (the sink). */
static int streaming(const struct serve *s)
{
	if (s->sink.no_splice)
		return 0;
	for (const struct sbx_job *j = s->jobs.list; j != NULL; j = j->next)
		if (j->upload && j->in.fd >= 0)
			return 1;
	return 0;
}

static struct sbx_stdin *sink_stdin(struct serve *s)
{
	struct sbx_job *j = sbx_job_find(&s->jobs, s->sink.stream);
	return j != NULL ? &j->in : NULL;
}

static int sink_step(struct serve *s)
{
	struct sbx_job *j = sbx_job_find(&s->jobs, s->sink.stream);
	uint64_t g;
	int rc =
	        sbx_sink_step(&s->sink, s->in_fd, j != NULL ? &j->in : NULL, s->rbuf, READ_BUF, &g);
	if (j != NULL)
		sbx_job_grant(&s->jobs, j, g);
	if (rc == 1)
		s->in_eof = 1;
	return rc < 0 ? fail(s, "read from the host failed") : 0;
}

/* After a read that stopped just past a DATA header and its channel byte: a large payload for
 * an upload is taken past the decoder, to the sink. */
static int detach_payload(struct serve *s)
{
	struct sbx_frame f;
	size_t held;
	if (!sbx_frame_dec_pending(&s->dec, &f, &held) || f.type != SBX_F_DATA || held < 1 ||
	    f.payload[0] != SBX_CH_STDIN || f.len - held < SBX_SINK_MIN)
		return 0;
	struct sbx_job *j = sbx_job_find(&s->jobs, f.stream);
	if (j == NULL || !j->upload || j->in.fd < 0)
		return 0;
	const char *why;
	if (sbx_job_stdin(&s->jobs, j, f.len - 1, f.payload + 1, held - 1, &why) != 0)
		return fail(s, why);
	sbx_frame_dec_detach(&s->dec);
	sbx_sink_begin(&s->sink, f.stream, f.len - held, (f.flags & SBX_FL_END) != 0);
	/* The host writes a payload right behind its header: most of it is there already. */
	return sink_step(s);
}

static int read_input(struct serve *s)
{
	if (s->sink.left > 0)
		return sink_step(s);
	size_t want = READ_BUF;
	int stream = streaming(s);
	if (stream) {
		size_t u = sbx_frame_dec_until(&s->dec, 1);
		if (u < want)
			want = u;
	}
	ssize_t n = read(s->in_fd, s->rbuf, want);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : fail(s, "read from the host failed");
	if (n == 0) {
		s->in_eof = 1;
		return 0;
	}
	size_t pos = 0;
	while (pos < (size_t)n) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st =
		        sbx_frame_dec_feed(&s->dec, s->rbuf + pos, (size_t)n - pos, &used, &f);
		pos += used;
		if (st == SBX_DEC_ERROR)
			return fail(s, sbx_dec_error_text(s->dec.error));
		if (st == SBX_DEC_FRAME && on_frame(s, &f) != 0)
			return -1;
	}
	return stream ? detach_payload(s) : 0;
}

/* ---- writing the host, the direct switch ----------------------------------------------- */

static void flush_output(struct serve *s)
{
	if (sbx_splice_out(&s->splice, &s->out, s->out_fd) != 0)
		s->out_broken = 1;
}

/* Writes what is queued, waiting at most a second in all. */
static void drain(struct serve *s)
{
	int64_t end = sbx_now_ns() + 1000000000;
	while (!sbx_outq_empty(&s->out) && !s->out_broken && sbx_now_ns() < end) {
		struct pollfd p = {.fd = s->out_fd, .events = POLLOUT};
		if (poll(&p, 1, 100) > 0)
			flush_output(s);
	}
}

/* A connection to the direct socket: when it passes, everything queued goes out on stdout
 * first, then the session continues on the socket. */
static int direct_switch(struct serve *s)
{
	int c = sbx_direct_take(&s->direct);
	if (c < 0)
		return 0;
	drain(s);
	int quiet =
	        sbx_outq_empty(&s->out) && !sbx_frame_dec_midframe(&s->dec) && s->sink.left == 0;
	const char *why;
	if (sbx_direct_switch(c, quiet, &s->in_fd, &s->out_fd, &s->life_fd, &why) != 0)
		return fail(s, why);
	return 0;
}

/* ---- the loop -------------------------------------------------------------------------- */

/* What a polled descriptor is: the session's own, or a job's pipe. */
enum what {
	W_IN,
	W_SINK,
	W_SIG,
	W_OUT,
	W_DIRECT,
	W_LIFE,
	W_STDOUT,
	W_STDERR,
	W_STDIN,
	W_RESULT,
	W_FWD
};

struct watch {
	enum what what;
	struct sbx_job *job;
};

#define WATCH_MAX (4 + 4 * SBX_JOB_MAX)

static void watch_fd(struct pollfd *pfd, struct watch *w, int *n, int fd, short events,
                     enum what what, struct sbx_job *job)
{
	pfd[*n] = (struct pollfd){.fd = fd, .events = events};
	w[(*n)++] = (struct watch){what, job};
}

/* The descriptors to poll now; *timeout lowered to the sink's and the offer's deadlines. */
static int watches(struct serve *s, struct pollfd *pfd, struct watch *w, int *timeout)
{
	int n = 0;
	*timeout = sbx_direct_timeout(&s->direct, *timeout);
	int sink = sbx_sink_pipe(&s->sink, sink_stdin(s), timeout);
	if (sink >= 0)
		watch_fd(pfd, w, &n, sink, POLLOUT, W_SINK, NULL);
	else
		watch_fd(pfd, w, &n, s->in_fd, POLLIN, W_IN, NULL);
	watch_fd(pfd, w, &n, s->sig_fd, POLLIN, W_SIG, NULL);
	if (!sbx_outq_empty(&s->out))
		watch_fd(pfd, w, &n, s->out_fd, POLLOUT, W_OUT, NULL);
	if (s->direct.fd >= 0)
		watch_fd(pfd, w, &n, s->direct.fd, POLLIN, W_DIRECT, NULL);
	if (s->life_fd >= 0)
		watch_fd(pfd, w, &n, s->life_fd, POLLIN, W_LIFE, NULL);
	int fwd = sbx_fwd_prepare(s->fwd, timeout);
	if (fwd >= 0)
		watch_fd(pfd, w, &n, fwd, POLLIN, W_FWD, NULL);
	int room = s->out.bulk_bytes < SBX_JOB_BULK_LIMIT;
	for (struct sbx_job *j = s->jobs.list; j != NULL; j = j->next) {
		if (room && j->fd_out >= 0 && j->tx[SBX_CH_STDOUT].avail > 0)
			watch_fd(pfd, w, &n, j->fd_out, POLLIN, W_STDOUT, j);
		if (room && j->fd_err >= 0 && j->tx[SBX_CH_STDERR].avail > 0)
			watch_fd(pfd, w, &n, j->fd_err, POLLIN, W_STDERR, j);
		if (j->in.fd >= 0 && (j->in.len > 0 || j->in.end))
			watch_fd(pfd, w, &n, j->in.fd, POLLOUT, W_STDIN, j);
		if (j->fd_res >= 0 && j->xfer)
			watch_fd(pfd, w, &n, j->fd_res, POLLIN, W_RESULT, j);
	}
	return n;
}

/* One ready descriptor; -1 ends the session. */
static int ready(struct serve *s, const struct watch *w, short revents)
{
	struct signalfd_siginfo si;
	switch (w->what) {
	case W_SINK:
		s->sink.pipe_wait_ns = 0;
		return read_input(s);
	case W_IN:
		return read_input(s);
	case W_SIG:
		while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
			;
		sbx_job_reap(&s->jobs);
		return 0;
	case W_OUT:
		flush_output(s);
		return 0;
	case W_DIRECT:
		return direct_switch(s);
	case W_LIFE:
		switch (sbx_direct_life(s->life_fd)) {
		case 1:
			s->in_eof = 1;
			return 0;
		case -1:
			return fail(s, "direct socket: the host wrote on stdin after the switch");
		default:
			return 0;
		}
	case W_STDOUT:
		sbx_job_output(&s->jobs, w->job, SBX_CH_STDOUT, revents);
		return 0;
	case W_STDERR:
		sbx_job_output(&s->jobs, w->job, SBX_CH_STDERR, revents);
		return 0;
	case W_STDIN:
		sbx_job_input(&s->jobs, w->job);
		return 0;
	case W_RESULT:
		sbx_job_result(w->job);
		return 0;
	case W_FWD: {
		struct sbx_err e;
		return sbx_fwd_step(s->fwd, &e) != 0 ? fail(s, e.msg) : 0;
	}
	}
	return 0;
}

static int loop(struct serve *s)
{
	struct pollfd pfd[WATCH_MAX];
	struct watch w[WATCH_MAX];
	for (;;) {
		int timeout = sbx_job_tend(&s->jobs);
		if (s->jobs.fatal != NULL)
			fail(s, s->jobs.fatal);
		if (s->fatal[0] != '\0')
			return -1;
		if (s->in_eof || s->out_broken)
			return 0;
		int n = watches(s, pfd, w, &timeout);
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			return fail(s, "poll failed");
		}
		for (int i = 0; i < n; i++)
			if (pfd[i].revents != 0 && ready(s, &w[i], pfd[i].revents) != 0)
				return -1;
		/* Stdin may have queued replies; try to send them at once. */
		if (!sbx_outq_empty(&s->out))
			flush_output(s);
	}
}

int sbx_serve(int in_fd, int out_fd)
{
	struct serve s;
	memset(&s, 0, sizeof s);
	s.in_fd = in_fd;
	s.out_fd = out_fd;
	s.life_fd = -1;
	sbx_direct_init(&s.direct);
	sbx_outq_init(&s.out);
	s.decbuf = malloc(SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	s.rbuf = malloc(READ_BUF);
	s.resp = malloc(SBX_FRAME_MAX_PAYLOAD);
	if (s.decbuf == NULL || s.rbuf == NULL || s.resp == NULL) {
		fprintf(stderr, "sbx-agent: out of memory\n");
		return 3;
	}
	s.jobs = (struct sbx_jobs){.host_window = SBX_WINDOW_DEFAULT,
	                           .out = &s.out,
	                           .splice = &s.splice,
	                           .resp = s.resp};
	sbx_frame_dec_init(&s.dec, s.decbuf, SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);

	/* SIGCHLD through a signalfd; SIGPIPE ignored so a vanished host is an error value. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s.sig_fd < 0) {
		fprintf(stderr, "sbx-agent: signalfd: %s\n", strerror(errno));
		return 3;
	}
	fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
	fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
	sbx_splice_open(&s.splice, out_fd);

	struct sbx_msgw w;
	sbx_msgw_init(&w, s.resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_hello_write(&w, SBX_WINDOW_DEFAULT);
	queue(&s, SBX_LANE_CTRL, SBX_F_HELLO, 0, 0, s.resp, w.len);

	int rc = loop(&s);
	sbx_fwd_free(&s.fwd);
	sbx_direct_close(&s.direct);
	for (struct sbx_job *j = s.jobs.list; j != NULL; j = j->next)
		sbx_job_kill(j);
	drain(&s);
	if (rc != 0 && s.fatal[0] == '\0' && s.dec.error != SBX_DEC_OK)
		fail(&s, sbx_dec_error_text(s.dec.error));
	if (s.in_eof && (sbx_frame_dec_midframe(&s.dec) || s.sink.left > 0) && s.fatal[0] == '\0')
		fail(&s, "the host's stream ended inside a frame");
	if (s.fatal[0] != '\0')
		fprintf(stderr, "sbx-agent: %s\n", s.fatal);
	sbx_job_free_all(&s.jobs);
	memset(&s.keeper, 0, sizeof s.keeper);
	sbx_outq_free(&s.out);
	sbx_splice_close(&s.splice);
	free(s.decbuf);
	free(s.rbuf);
	free(s.resp);
	close(s.sig_fd);
	return s.fatal[0] != '\0' ? 3 : 0;
}
