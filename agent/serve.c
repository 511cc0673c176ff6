/* The agent's one event loop: frames in on stdin, frames out on stdout, exec jobs' pipes and
 * SIGCHLD (signalfd), deadlines as poll timeouts. Single-threaded; probes are answered inline
 * and ahead of bulk data; DATA flows under per-channel credit. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "credit.h"
#include "exec.h"
#include "frame.h"
#include "hello.h"
#include "keeper.h"
#include "direct.h"
#include "msg.h"
#include "outq.h"
#include "probe.h"
#include "proto.h"
#include "stage.h"
#include "stdin.h"
#include "supctl.h"
#include "sys.h"
#include "xfer.h"

/* Bulk bytes queued for stdout past which the agent stops reading jobs' pipes. */
#define BULK_LIMIT (2u * 1024u * 1024u)
#define MAX_JOBS 256
/* An upload's DATA payload with at least this much still in the connection is spliced. */
#define SPLICE_MIN (16u * 1024u)
/* A pipe full this long: the rest of the payload goes through the ring, so the connection is
 * read again (a CANCEL behind it must not wait on a stuck program). */
#define SINK_STALL_NS (50 * 1000000LL)

struct job {
	struct job *next;
	uint32_t stream;
	pid_t pid;
	int fd_out, fd_err;
	int reaped, status;
	struct sbx_spawned sp;
	int64_t start_ns, deadline_ns;
	/* After the process exits its pipes are drained; a background process may keep them
	 * open forever, so draining stops after linger_left_ns of time in which the agent could
	 * have read (time blocked on the host's credit does not count). */
	int64_t linger_left_ns, linger_mark_ns;
	int timed_out, cancelled;
	struct sbx_credit_tx tx[SBX_CH_COUNT];
	struct sbx_stdin in;
	/* transfer jobs (xfer.h): no stderr channel; the child's RESPONSE comes on fd_res */
	int xfer, upload;
	int fd_res, fd_commit;
	uint8_t *res;
	size_t res_len;
};

struct serve {
	int in_fd, out_fd, sig_fd;
	/* The direct socket: a listener while one is offered; once taken, in_fd and out_fd are
	 * the socket and life_fd is the exec channel's stdin, read only for its end. */
	struct sbx_direct direct;
	int life_fd;
	int in_eof, out_broken, welcomed;
	struct sbx_frame_dec dec;
	uint8_t *decbuf;
	uint8_t *resp; /* response scratch, SBX_FRAME_MAX_PAYLOAD bytes */
	struct sbx_outq out;
	struct sbx_stage stage; /* jobs' output on to out_fd without a copy (stage.h) */
	struct job *jobs;
	int njobs;
	uint64_t host_window; /* credit the host grants per output channel */
	/* An upload's DATA payload taken past the decoder (read_input): left bytes of it are
	 * still in the connection, for the stdin of the job on stream. */
	struct {
		uint32_t stream;
		uint64_t left;
		int end;              /* the frame had END */
		int ring;             /* the rest goes through the job's ring, not splice */
		int64_t pipe_wait_ns; /* since when the job's pipe has been full; 0: not waiting */
	} sink;
	int no_splice; /* the connection cannot be spliced from */
	/* The keeper the host set up for this session (SETUP with KEEP 0); without a secret,
	 * trust requests go to the sandbox's keeper socket. */
	struct sbx_keeper keeper;
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

static void respond_error(struct serve *s, uint32_t stream, enum sbx_err_class cls, int err,
                          const char *msg)
{
	struct sbx_msgw w;
	sbx_msgw_init(&w, s->resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_msgw_i64(&w, SBX_T_STATUS, cls);
	sbx_msgw_i64(&w, SBX_T_ERRNO, err);
	sbx_msgw_str(&w, SBX_T_MESSAGE, msg);
	queue(s, SBX_LANE_CTRL, SBX_F_RESPONSE, 0, stream, s->resp, w.len);
}

static struct job *find_job(struct serve *s, uint32_t stream)
{
	for (struct job *j = s->jobs; j != NULL; j = j->next)
		if (j->stream == stream)
			return j;
	return NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void kill_job(struct job *j)
{
	if (j->xfer) {
		/* A transfer child is not killed: its pipes close, so it stops, removes its
		 * staging folder and reports. */
		close_fd(&j->fd_commit);
		sbx_stdin_close(&j->in);
		close_fd(&j->fd_out);
		return;
	}
	if (!j->reaped)
		kill(-j->pid, SIGKILL);
}

static void start_exec(struct serve *s, uint32_t stream, const uint8_t *p, size_t len)
{
	struct sbx_exec_req req;
	struct sbx_err e;
	if (s->njobs >= MAX_JOBS) {
		respond_error(s, stream, SBX_EUSAGE, 0, "too many commands running at once");
		return;
	}
	if (sbx_exec_parse(p, len, &req, &e) != 0) {
		respond_error(s, stream, e.cls, e.errnum, e.msg);
		return;
	}
	struct job *j = calloc(1, sizeof *j);
	if (j == NULL) {
		sbx_exec_req_free(&req);
		respond_error(s, stream, SBX_ETRANSFER, ENOMEM, "exec job");
		return;
	}
	j->fd_res = j->fd_commit = -1;
	j->start_ns = sbx_now_ns();
	if (sbx_exec_spawn(&req, &j->sp, &e) != 0) {
		sbx_exec_req_free(&req);
		free(j);
		respond_error(s, stream, e.cls, e.errnum, e.msg);
		return;
	}
	j->stream = stream;
	j->pid = j->sp.pid;
	j->fd_out = j->sp.fd_out;
	j->fd_err = j->sp.fd_err;
	if (j->sp.fd_in >= 0)
		fcntl(j->sp.fd_in, F_SETFL, fcntl(j->sp.fd_in, F_GETFL) | O_NONBLOCK);
	fcntl(j->fd_out, F_SETFL, fcntl(j->fd_out, F_GETFL) | O_NONBLOCK);
	fcntl(j->fd_err, F_SETFL, fcntl(j->fd_err, F_GETFL) | O_NONBLOCK);
	j->deadline_ns = req.cmd.timeout_ms > 0 ? j->start_ns + req.cmd.timeout_ms * 1000000 : 0;
	j->linger_left_ns = req.linger_ms * 1000000;
	for (int c = 0; c < SBX_CH_COUNT; c++)
		sbx_credit_tx_init(&j->tx[c], s->host_window);
	sbx_stdin_init(&j->in, j->sp.fd_in, !req.stdin_stream);
	sbx_exec_req_free(&req);
	j->next = s->jobs;
	s->jobs = j;
	s->njobs++;
}

static void start_xfer(struct serve *s, uint32_t stream, int upload, const uint8_t *p, size_t len)
{
	struct sbx_xfer_req req;
	struct sbx_err e;
	if (s->njobs >= MAX_JOBS) {
		respond_error(s, stream, SBX_EUSAGE, 0, "too many jobs running at once");
		return;
	}
	if (sbx_xfer_parse(upload, p, len, &req, &e) != 0) {
		respond_error(s, stream, e.cls, e.errnum, e.msg);
		return;
	}
	struct job *j = calloc(1, sizeof *j);
	uint8_t *res = malloc(SBX_XFER_RES_MAX);
	struct sbx_xfer_child c;
	if (j == NULL || res == NULL || sbx_xfer_spawn(&req, &c, &e) != 0) {
		if (j == NULL || res == NULL)
			sbx_err_set(&e, SBX_ETRANSFER, ENOMEM, "transfer job");
		free(j);
		free(res);
		sbx_xfer_req_free(&req);
		respond_error(s, stream, e.cls, e.errnum, e.msg);
		return;
	}
	sbx_xfer_req_free(&req);
	j->start_ns = sbx_now_ns();
	j->stream = stream;
	j->xfer = 1;
	j->upload = upload;
	j->res = res;
	j->pid = c.pid;
	j->fd_out = c.fd_out;
	j->fd_err = -1;
	j->fd_res = c.fd_res;
	j->fd_commit = c.fd_commit;
	for (int i = 0; i < 4; i++) {
		int fd = i == 0 ? c.fd_in : i == 1 ? j->fd_out : i == 2 ? j->fd_res : j->fd_commit;
		if (fd >= 0)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	}
	j->linger_left_ns = 60 * 1000000000LL;
	for (int ch = 0; ch < SBX_CH_COUNT; ch++)
		sbx_credit_tx_init(&j->tx[ch], s->host_window);
	sbx_stdin_init(&j->in, c.fd_in, !upload);
	j->next = s->jobs;
	s->jobs = j;
	s->njobs++;
}

/* COMMIT: hands the host's SHA-256 to the waiting upload child (which compares, then moves
 * the tree into place or discards it). */
static void commit_xfer(struct serve *s, const struct sbx_frame *f, struct sbx_msgw *w)
{
	struct sbx_field fl;
	int64_t id = 0;
	if (sbx_msg_find(f->payload, f->len, SBX_T_JOB, &fl) != 1 || sbx_field_i64(&fl, &id) != 0 ||
	    sbx_msg_find(f->payload, f->len, SBX_T_SHA256, &fl) != 1 || fl.len != 32) {
		sbx_msgw_i64(w, SBX_T_STATUS, SBX_EUSAGE);
		sbx_msgw_str(w, SBX_T_MESSAGE, "COMMIT needs JOB and a 32-byte SHA256");
		return;
	}
	struct job *j = find_job(s, (uint32_t)id);
	if (j == NULL || !j->upload || j->fd_commit < 0) {
		sbx_msgw_i64(w, SBX_T_STATUS, SBX_EUSAGE);
		sbx_msgw_str(w, SBX_T_MESSAGE, "no upload waiting for COMMIT on that stream");
		return;
	}
	ssize_t n;
	do
		n = write(j->fd_commit, fl.val, 32);
	while (n < 0 && errno == EINTR);
	close_fd(&j->fd_commit);
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

#define DIRECT_WAIT_NS (10 * 1000000000LL)

/* DIRECT: listen, answer where. Only on a quiet session (no job, no direct socket yet): the switch
 * must not cut a stream in half. */
static void offer_direct(struct serve *s, const struct sbx_frame *f, struct sbx_msgw *w)
{
	struct sbx_field tok;
	if (s->jobs != NULL || s->life_fd >= 0 || s->direct.fd >= 0) {
		respond_error(s, f->stream, SBX_EUSAGE, 0,
		              "direct socket: only once, and with nothing else running");
		return;
	}
	if (sbx_msg_find(f->payload, f->len, SBX_T_TOKEN, &tok) != 1 ||
	    tok.len != SBX_DIRECT_TOKEN_LEN) {
		respond_error(s, f->stream, SBX_EUSAGE, 0, "direct socket: no token");
		return;
	}
	char err[160];
	if (sbx_direct_listen(&s->direct, tok.val, sbx_now_ns() + DIRECT_WAIT_NS, err,
	                      sizeof err) != 0) {
		respond_error(s, f->stream, SBX_EUNAVAILABLE, errno, err);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_str(w, SBX_T_PATH, s->direct.path);
	queue(s, SBX_LANE_CTRL, SBX_F_RESPONSE, 0, f->stream, s->resp, w->len);
}

/* AUTH, SETUP and SUP_RUN: answered by this process's keeper when it holds the secret, else by
 * the sandbox's keeper over its socket (SETUP with KEEP 1 starts a keeper daemon when there is
 * none). Blocking, bounded by the socket's timeouts (agent/keeper.c). */
static void trust_request(struct serve *s, const struct sbx_frame *f, int64_t op,
                          struct sbx_msgw *w)
{
	struct sbx_field fk, fs;
	int64_t keep = 0;
	if (op == SBX_OP_SETUP && sbx_msg_find(f->payload, f->len, SBX_T_KEEP, &fk) == 1)
		sbx_field_i64(&fk, &keep);
	if (s->keeper.have || (op == SBX_OP_SETUP && keep == 0)) {
		sbx_keeper_answer(&s->keeper, f->payload, f->len, w);
		return;
	}
	if (sbx_keeper_call(f->payload, f->len, w) == 0)
		return;
	int err = errno;
	char msg[200];
	if (op == SBX_OP_SETUP && sbx_msg_find(f->payload, f->len, SBX_T_SECRET, &fs) == 1 &&
	    fs.len == SBX_SECRET_LEN && (err == ENOENT || err == ECONNREFUSED)) {
		if (sbx_keeper_spawn(fs.val, msg, sizeof msg) == 0) {
			sbx_msgw_i64(w, SBX_T_STATUS, 0);
			return;
		}
	} else {
		snprintf(msg, sizeof msg, "no keeper answers in this sandbox: %s", strerror(err));
		err = ENOKEY;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, SBX_ETRANSFER);
	sbx_msgw_i64(w, SBX_T_ERRNO, err);
	sbx_msgw_str(w, SBX_T_MESSAGE, msg);
}

static void on_request(struct serve *s, const struct sbx_frame *f)
{
	struct sbx_field op;
	int64_t v = 0;
	if (f->stream == 0 || find_job(s, f->stream) != NULL) {
		fail(s, "the host opened a request on stream 0 or on a stream in use");
		return;
	}
	if (sbx_msg_find(f->payload, f->len, SBX_T_OP, &op) != 1 || sbx_field_i64(&op, &v) != 0) {
		respond_error(s, f->stream, SBX_EUSAGE, 0, "request without an operation");
		return;
	}
	struct sbx_msgw w;
	sbx_msgw_init(&w, s->resp, SBX_FRAME_MAX_PAYLOAD);
	switch (v) {
	case SBX_OP_KIND:
		sbx_probe_kind(f->payload, f->len, &w);
		break;
	case SBX_OP_STAT:
		sbx_probe_stat(f->payload, f->len, &w);
		break;
	case SBX_OP_RESOLVE:
		sbx_probe_resolve(f->payload, f->len, &w);
		break;
	case SBX_OP_LANDS_CLEAR:
		sbx_probe_lands_clear(f->payload, f->len, &w);
		break;
	case SBX_OP_EXEC:
		start_exec(s, f->stream, f->payload, f->len);
		return;
	case SBX_OP_UPLOAD:
	case SBX_OP_DOWNLOAD:
		start_xfer(s, f->stream, v == SBX_OP_UPLOAD, f->payload, f->len);
		return;
	case SBX_OP_COMMIT:
		commit_xfer(s, f, &w);
		break;
	case SBX_OP_DIRECT:
		offer_direct(s, f, &w);
		return;
	case SBX_OP_SUP_RUN:
	case SBX_OP_AUTH:
	case SBX_OP_SETUP:
		trust_request(s, f, v, &w);
		break;
	case SBX_OP_SUP_SIGNAL:
		sbx_supctl_signal(f->payload, f->len, &w);
		break;
	case SBX_OP_SUP_STATUS:
		sbx_supctl_status(f->payload, f->len, &w);
		break;
	case SBX_OP_SUP_READ:
		sbx_supctl_read(f->payload, f->len, &w);
		break;
	case SBX_OP_SUP_REARM:
		sbx_supctl_rearm(f->payload, f->len, &w);
		break;
	case SBX_OP_SUP_CLOSE:
		sbx_supctl_close(f->payload, f->len, &w);
		break;
	default: {
		char msg[64];
		snprintf(msg, sizeof msg, "unknown operation %lld", (long long)v);
		respond_error(s, f->stream, SBX_EUSAGE, 0, msg);
		return;
	}
	}
	queue(s, SBX_LANE_CTRL, SBX_F_RESPONSE, 0, f->stream, s->resp, w.len);
}

static void grant_stdin(struct serve *s, struct job *j, uint64_t g)
{
	if (g == 0)
		return;
	uint8_t c[5] = {SBX_CH_STDIN, (uint8_t)(g >> 24), (uint8_t)(g >> 16), (uint8_t)(g >> 8),
	                (uint8_t)g};
	queue(s, SBX_LANE_CTRL, SBX_F_CREDIT, 0, j->stream, c, 5);
}

static int on_data(struct serve *s, const struct sbx_frame *f)
{
	if (f->len < 1 || f->payload[0] != SBX_CH_STDIN)
		return fail(s, "DATA from the host on a channel other than stdin");
	struct job *j = find_job(s, f->stream);
	if (j == NULL)
		return 0; /* the job finished; its stdin no longer matters */
	if (sbx_stdin_expect(&j->in, f->len - 1) != 0)
		return fail(s, "host overran its stdin credit");
	uint64_t g;
	if (sbx_stdin_data(&j->in, f->payload + 1, f->len - 1, &g) != 0)
		return fail(s, "out of memory for stdin");
	grant_stdin(s, j, g);
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
	struct job *j = find_job(s, f->stream);
	if (j == NULL)
		return 0;
	if (sbx_credit_tx_grant(&j->tx[f->payload[0]], n, s->host_window) != 0)
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
		s->host_window = (uint64_t)v;
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
		struct job *j = find_job(s, f->stream);
		if (j != NULL) {
			j->cancelled = 1;
			kill_job(j);
		}
		return 0;
	}
	default:
		return fail(s, f->type == SBX_F_WELCOME
		                       ? "the host sent WELCOME twice"
		                       : "the host sent a frame type only the agent sends");
	}
}

/* 1 while an upload's child reads its stdin: reads then stop at frame boundaries, so each DATA
 * payload for it can be spliced from the connection into its pipe (sink_step). */
static int streaming(const struct serve *s)
{
	if (s->no_splice)
		return 0;
	for (const struct job *j = s->jobs; j != NULL; j = j->next)
		if (j->upload && j->in.fd >= 0)
			return 1;
	return 0;
}

static int pipe_full(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	return poll(&p, 1, 0) == 0;
}

/* Moves more of the sink's payload out of the connection: spliced into the job's pipe, read
 * into its ring, or dropped when the job or its stdin is gone. */
static int sink_step(struct serve *s, uint8_t *scratch, size_t cap)
{
	struct job *j = find_job(s, s->sink.stream);
	uint64_t g = 0;
	ssize_t n;
	if (j == NULL) {
		n = read(s->in_fd, scratch, s->sink.left < cap ? (size_t)s->sink.left : cap);
	} else {
		enum sbx_stdin_how how = s->sink.ring ? SBX_STDIN_RING : SBX_STDIN_SPLICE;
		n = sbx_stdin_take(&j->in, s->in_fd, s->sink.left, how, scratch, cap, &g);
	}
	if (n > 0) {
		s->sink.left -= (uint64_t)n;
		s->sink.pipe_wait_ns = 0;
		if (j != NULL) {
			grant_stdin(s, j, g);
			if (s->sink.left == 0 && s->sink.end)
				j->in.end = 1;
		}
		return 0;
	}
	if (n == 0) {
		s->in_eof = 1;
		return 0;
	}
	if (errno == EINTR)
		return 0;
	if (errno == EINVAL && j != NULL && !s->sink.ring) {
		s->no_splice = 1;
		s->sink.ring = 1;
		return 0;
	}
	if (errno == EAGAIN) {
		/* Either the connection has nothing yet (poll it again) or the pipe is full (poll
		 * the pipe instead: the connection stays readable and would spin). */
		if (j != NULL && !s->sink.ring && j->in.fd >= 0 && j->in.len == 0 &&
		    pipe_full(j->in.fd) && s->sink.pipe_wait_ns == 0)
			s->sink.pipe_wait_ns = sbx_now_ns();
		return 0;
	}
	return fail(s, "read from the host failed");
}

/* After a read that stopped just past a DATA header and its channel byte: a large payload for
 * an upload is taken past the decoder and spliced. */
static int detach_payload(struct serve *s, uint8_t *scratch, size_t cap)
{
	struct sbx_frame f;
	size_t held;
	if (!sbx_frame_dec_pending(&s->dec, &f, &held) || f.type != SBX_F_DATA || held < 1 ||
	    f.payload[0] != SBX_CH_STDIN || f.len - held < SPLICE_MIN)
		return 0;
	struct job *j = find_job(s, f.stream);
	if (j == NULL || !j->upload || j->in.fd < 0)
		return 0;
	if (sbx_stdin_expect(&j->in, f.len - 1) != 0)
		return fail(s, "host overran its stdin credit");
	uint64_t g;
	if (sbx_stdin_data(&j->in, f.payload + 1, held - 1, &g) != 0)
		return fail(s, "out of memory for stdin");
	grant_stdin(s, j, g);
	sbx_frame_dec_detach(&s->dec);
	s->sink.stream = f.stream;
	s->sink.left = f.len - held;
	s->sink.end = (f.flags & SBX_FL_END) != 0;
	s->sink.ring = 0;
	s->sink.pipe_wait_ns = 0;
	/* The host writes a payload right behind its header: most of it is there already. */
	return sink_step(s, scratch, cap);
}

static int read_input(struct serve *s)
{
	/* Room for several whole DATA frames per read: a frame that arrives whole is decoded
	 * in place (no copy). One loop, so one static buffer. */
	static uint8_t buf[256 * 1024];
	if (s->sink.left > 0)
		return sink_step(s, buf, sizeof buf);
	size_t want = sizeof buf;
	int stream = streaming(s);
	if (stream) {
		size_t u = sbx_frame_dec_until(&s->dec, 1);
		if (u < want)
			want = u;
	}
	ssize_t n = read(s->in_fd, buf, want);
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
		        sbx_frame_dec_feed(&s->dec, buf + pos, (size_t)n - pos, &used, &f);
		pos += used;
		if (st == SBX_DEC_ERROR)
			return fail(s, sbx_dec_error_text(s->dec.error));
		if (st == SBX_DEC_FRAME && on_frame(s, &f) != 0)
			return -1;
	}
	return stream ? detach_payload(s, buf, sizeof buf) : 0;
}

static void flush_output(struct serve *s)
{
	if (sbx_stage_out(&s->stage, &s->out, s->out_fd) != 0)
		s->out_broken = 1;
}

static void end_channel(struct serve *s, struct job *j, int chan)
{
	uint8_t ch = (uint8_t)chan;
	close_fd(chan == SBX_CH_STDOUT ? &j->fd_out : &j->fd_err);
	sbx_outq_push(&s->out, SBX_LANE_BULK, SBX_F_DATA, SBX_FL_END, j->stream, &ch, 1, NULL, 0);
}

enum pump { PUMP_DATA, PUMP_EOF, PUMP_EMPTY, PUMP_BLOCKED };

/* Reads what credit allows from one output pipe of a job into a DATA frame. */
static enum pump pump_out(struct serve *s, struct job *j, int chan)
{
	int fd = chan == SBX_CH_STDOUT ? j->fd_out : j->fd_err;
	uint8_t ch = (uint8_t)chan;
	uint64_t room = sbx_credit_tx_take(&j->tx[chan], SBX_DATA_CHUNK);
	if (room == 0)
		return PUMP_BLOCKED;
	/* Moved into the staging pipe when there is room (no copy at all), else read straight
	 * into the frame that will carry the bytes. */
	ssize_t staged = sbx_stage_in(&s->stage, &s->out, fd, (size_t)room, j->stream, ch);
	if (staged > 0) {
		j->tx[chan].avail += room - (uint64_t)staged;
		return PUMP_DATA;
	}
	if (staged == 0) {
		j->tx[chan].avail += room;
		end_channel(s, j, chan);
		return PUMP_EOF;
	}
	if (staged == SBX_STAGE_LOST) {
		j->tx[chan].avail += room;
		fail(s, "out of memory queueing output");
		return PUMP_BLOCKED;
	}
	/* Nothing there yet, no room in the stage, or a pipe splice cannot take: read below.
	 * With the stage full this is a copy; waiting for the stage instead (as the host does)
	 * made downloads of many small files 3-5% slower here: the bytes read now keep the
	 * packing child from blocking on its pipe (docs/transfers.md). */
	uint8_t *buf = sbx_outq_reserve(&s->out, 1, (size_t)room);
	if (buf == NULL) {
		j->tx[chan].avail += room;
		fail(s, "out of memory queueing output");
		return PUMP_BLOCKED;
	}
	ssize_t n = read(fd, buf, room);
	if (n < 0) {
		sbx_outq_unreserve(&s->out);
		j->tx[chan].avail += room;
		if (errno == EINTR || errno == EAGAIN)
			return PUMP_EMPTY;
		n = 0; /* a read error ends the channel like EOF */
	}
	j->tx[chan].avail += room - (uint64_t)n;
	if (n == 0) {
		sbx_outq_unreserve(&s->out);
		end_channel(s, j, chan);
		return PUMP_EOF;
	}
	sbx_outq_commit(&s->out, SBX_LANE_BULK, SBX_F_DATA, 0, j->stream, &ch, (size_t)n);
	return PUMP_DATA;
}

/* Linger is over: take what is already in the pipe (as far as credit and the queue allow)
 * and close it once empty, so nothing the command wrote before exiting is lost. */
static void drain_and_close(struct serve *s, struct job *j, int chan)
{
	for (;;) {
		if ((chan == SBX_CH_STDOUT ? j->fd_out : j->fd_err) < 0 ||
		    s->out.bulk_bytes >= BULK_LIMIT)
			return;
		enum pump r = pump_out(s, j, chan);
		if (r == PUMP_EMPTY)
			end_channel(s, j, chan);
		if (r != PUMP_DATA)
			return;
	}
}

static void pump_in(struct serve *s, struct job *j)
{
	uint64_t g;
	sbx_stdin_pump(&j->in, &g);
	grant_stdin(s, j, g);
}

/* Reads the child's result (a RESPONSE payload) until EOF. */
static void read_res(struct job *j)
{
	for (;;) {
		if (j->res_len == SBX_XFER_RES_MAX) {
			close_fd(&j->fd_res); /* oversized: dropped below */
			j->res_len = SBX_XFER_RES_MAX + 1;
			return;
		}
		ssize_t n = read(j->fd_res, j->res + j->res_len, SBX_XFER_RES_MAX - j->res_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_fd(&j->fd_res);
			return;
		}
		j->res_len += (size_t)n;
	}
}

static void finish_xfer(struct serve *s, struct job *j)
{
	struct sbx_field f;
	int64_t v;
	int exited = WIFEXITED(j->status) && WEXITSTATUS(j->status) <= 1;
	if (exited && j->res_len <= SBX_XFER_RES_MAX && j->res_len > 0 &&
	    sbx_msg_find(j->res, j->res_len, SBX_T_STATUS, &f) == 1 && sbx_field_i64(&f, &v) == 0) {
		sbx_outq_push(&s->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, j->res,
		              j->res_len);
		return;
	}
	char msg[160];
	if (WIFSIGNALED(j->status))
		snprintf(msg, sizeof msg, "the transfer process was killed by signal %d",
		         WTERMSIG(j->status));
	else
		snprintf(msg, sizeof msg, "the transfer process ended (code %d) without a result",
		         WEXITSTATUS(j->status));
	struct sbx_msgw w;
	sbx_msgw_init(&w, s->resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_msgw_i64(&w, SBX_T_STATUS, SBX_ETRANSFER);
	sbx_msgw_str(&w, SBX_T_MESSAGE, msg);
	sbx_outq_push(&s->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, s->resp,
	              w.len);
}

static void finish_job(struct serve *s, struct job *j)
{
	if (j->xfer) {
		finish_xfer(s, j);
		return;
	}
	struct sbx_msgw w;
	sbx_msgw_init(&w, s->resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_msgw_i64(&w, SBX_T_STATUS, 0);
	if (j->sp.not_started) {
		sbx_msgw_i64(&w, SBX_T_OUTCOME, SBX_EXEC_NOT_STARTED);
		sbx_msgw_i64(&w, SBX_T_CODE, j->sp.code);
		sbx_msgw_i64(&w, SBX_T_ERRNO, j->sp.err);
		sbx_msgw_str(&w, SBX_T_MESSAGE, j->sp.msg);
	} else if (j->timed_out) {
		sbx_msgw_i64(&w, SBX_T_OUTCOME, SBX_EXEC_TIMED_OUT);
		sbx_msgw_i64(&w, SBX_T_CODE, 124);
	} else if (WIFSIGNALED(j->status)) {
		sbx_msgw_i64(&w, SBX_T_OUTCOME, SBX_EXEC_SIGNALED);
		sbx_msgw_i64(&w, SBX_T_SIGNAL, WTERMSIG(j->status));
		sbx_msgw_i64(&w, SBX_T_CODE, 128 + WTERMSIG(j->status));
	} else {
		sbx_msgw_i64(&w, SBX_T_OUTCOME, SBX_EXEC_EXITED);
		sbx_msgw_i64(&w, SBX_T_CODE, WEXITSTATUS(j->status));
	}
	if (j->cancelled)
		sbx_msgw_i64(&w, SBX_T_CANCELLED, 1);
	if (j->sp.user_fallback) {
		sbx_msgw_i64(&w, SBX_T_USER_FALLBACK, 1);
		sbx_msgw_str(&w, SBX_T_NOTE, j->sp.note);
	}
	sbx_msgw_i64(&w, SBX_T_PID, j->pid);
	sbx_msgw_i64(&w, SBX_T_DURATION_NS, sbx_now_ns() - j->start_ns);
	/* Bulk lane: the result must follow the job's last DATA frames, never overtake them. */
	sbx_outq_push(&s->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, s->resp,
	              w.len);
}

static void reap(struct serve *s)
{
	struct signalfd_siginfo si;
	while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
		;
	for (struct job *j = s->jobs; j != NULL; j = j->next) {
		if (j->reaped)
			continue;
		int st;
		pid_t r = waitpid(j->pid, &st, WNOHANG);
		if (r == j->pid) {
			j->reaped = 1;
			j->status = st;
			j->linger_mark_ns = sbx_now_ns();
		}
	}
}

/* Deadlines, lingering pipes and finished jobs; returns the poll timeout in ms. */
static int tend_jobs(struct serve *s)
{
	int64_t now = sbx_now_ns(), next = -1;
	struct job **pp = &s->jobs;
	while (*pp != NULL) {
		struct job *j = *pp;
		if (!j->reaped && j->deadline_ns > 0) {
			if (now >= j->deadline_ns && !j->timed_out) {
				j->timed_out = 1;
				kill_job(j);
			} else if (!j->timed_out && (next < 0 || j->deadline_ns < next)) {
				next = j->deadline_ns;
			}
		}
		if (j->reaped && (j->fd_out >= 0 || j->fd_err >= 0)) {
			int can_read = s->out.bulk_bytes < BULK_LIMIT &&
			               ((j->fd_out >= 0 && j->tx[SBX_CH_STDOUT].avail > 0) ||
			                (j->fd_err >= 0 && j->tx[SBX_CH_STDERR].avail > 0));
			if (can_read)
				j->linger_left_ns -= now - j->linger_mark_ns;
			j->linger_mark_ns = now;
			if (j->linger_left_ns <= 0) {
				drain_and_close(s, j, SBX_CH_STDOUT);
				drain_and_close(s, j, SBX_CH_STDERR);
			} else if (can_read && (next < 0 || now + j->linger_left_ns < next)) {
				next = now + j->linger_left_ns;
			}
		}
		if (j->reaped && j->xfer && j->fd_res >= 0)
			read_res(j);
		if (j->reaped && j->fd_out < 0 && j->fd_err < 0 && (!j->xfer || j->fd_res < 0)) {
			finish_job(s, j);
			sbx_stdin_free(&j->in);
			close_fd(&j->fd_commit);
			*pp = j->next;
			free(j->res);
			free(j);
			s->njobs--;
			continue;
		}
		pp = &j->next;
	}
	if (next < 0)
		return -1;
	int64_t ms = (next - now + 999999) / 1000000;
	return ms > 60000 ? 60000 : (int)ms;
}

enum { OWN_IN, OWN_SIG, OWN_OUT, OWN_DIRECT, OWN_LIFE, OWN_SINK };

/* The pipe a sink waits on, or -1 (the connection is polled). A wait past SINK_STALL_NS turns
 * the rest of the payload to the ring; *timeout shortened to that moment. */
static int sink_pipe(struct serve *s, int *timeout)
{
	if (s->sink.left == 0 || s->sink.pipe_wait_ns == 0)
		return -1;
	struct job *j = find_job(s, s->sink.stream);
	int64_t left = s->sink.pipe_wait_ns + SINK_STALL_NS - sbx_now_ns();
	if (j == NULL || j->in.fd < 0 || left <= 0) {
		s->sink.ring = left <= 0;
		s->sink.pipe_wait_ns = 0;
		return -1;
	}
	int ms = (int)((left + 999999) / 1000000);
	if (*timeout < 0 || ms < *timeout)
		*timeout = ms;
	return j->in.fd;
}

static void drain(struct serve *s);

/* Closes a direct socket offer past its deadline; the poll timeout shortened to that deadline. */
static int direct_tend(struct serve *s, int timeout)
{
	if (s->direct.fd < 0)
		return timeout;
	int64_t left = s->direct.deadline_ns - sbx_now_ns();
	if (left <= 0) {
		sbx_direct_close(&s->direct);
		return timeout;
	}
	int ms = (int)((left + 999999) / 1000000);
	return timeout < 0 || ms < timeout ? ms : timeout;
}

/* A connection to the direct socket: when it passes, everything queued goes out on stdout first,
 * then the session continues on the socket. */
static int direct_switch(struct serve *s)
{
	int c = sbx_direct_take(&s->direct);
	if (c < 0)
		return 0;
	drain(s);
	if (!sbx_outq_empty(&s->out) || sbx_frame_dec_midframe(&s->dec) || s->sink.left > 0) {
		close(c);
		return fail(s, "direct socket: the exec channel was not quiet at the switch");
	}
	int out = fcntl(c, F_DUPFD_CLOEXEC, 3);
	if (out < 0) {
		close(c);
		return fail(s, "direct socket: dup failed");
	}
	int big = 1 << 20;
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	/* stdout is not written again; /dev/null keeps its number taken. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, s->out_fd);
		close(null);
	}
	s->life_fd = s->in_fd;
	s->in_fd = c;
	s->out_fd = out;
	return 0;
}

/* The exec channel's stdin after the switch: its end ends the session; bytes are a fault. */
static int read_life(struct serve *s)
{
	char b[64];
	ssize_t n = read(s->life_fd, b, sizeof b);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		s->in_eof = 1;
		return 0;
	}
	return n > 0 ? fail(s, "direct socket: the host wrote on stdin after the switch") : 0;
}

static int loop(struct serve *s)
{
	struct pollfd pfd[3 + 4 * MAX_JOBS];
	struct job *owner[3 + 4 * MAX_JOBS];
	int chan[3 + 4 * MAX_JOBS];
	for (;;) {
		int timeout = tend_jobs(s);
		if (s->fatal[0] != '\0')
			return -1;
		if (s->in_eof || s->out_broken)
			return 0;
		timeout = direct_tend(s, timeout);
		int n = 0;
		int sink = sink_pipe(s, &timeout);
		if (sink >= 0) {
			pfd[n] = (struct pollfd){.fd = sink, .events = POLLOUT};
			owner[n] = NULL, chan[n++] = OWN_SINK;
		} else {
			pfd[n] = (struct pollfd){.fd = s->in_fd, .events = POLLIN};
			owner[n] = NULL, chan[n++] = OWN_IN;
		}
		pfd[n] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
		owner[n] = NULL, chan[n++] = OWN_SIG;
		if (!sbx_outq_empty(&s->out)) {
			pfd[n] = (struct pollfd){.fd = s->out_fd, .events = POLLOUT};
			owner[n] = NULL, chan[n++] = OWN_OUT;
		}
		if (s->direct.fd >= 0) {
			pfd[n] = (struct pollfd){.fd = s->direct.fd, .events = POLLIN};
			owner[n] = NULL, chan[n++] = OWN_DIRECT;
		}
		if (s->life_fd >= 0) {
			pfd[n] = (struct pollfd){.fd = s->life_fd, .events = POLLIN};
			owner[n] = NULL, chan[n++] = OWN_LIFE;
		}
		int room = s->out.bulk_bytes < BULK_LIMIT;
		for (struct job *j = s->jobs; j != NULL; j = j->next) {
			if (room && j->fd_out >= 0 && j->tx[SBX_CH_STDOUT].avail > 0) {
				pfd[n] = (struct pollfd){.fd = j->fd_out, .events = POLLIN};
				owner[n] = j, chan[n++] = SBX_CH_STDOUT;
			}
			if (room && j->fd_err >= 0 && j->tx[SBX_CH_STDERR].avail > 0) {
				pfd[n] = (struct pollfd){.fd = j->fd_err, .events = POLLIN};
				owner[n] = j, chan[n++] = SBX_CH_STDERR;
			}
			if (j->in.fd >= 0 && (j->in.len > 0 || j->in.end)) {
				pfd[n] = (struct pollfd){.fd = j->in.fd, .events = POLLOUT};
				owner[n] = j, chan[n++] = SBX_CH_STDIN;
			}
			if (j->fd_res >= 0 && j->xfer) {
				pfd[n] = (struct pollfd){.fd = j->fd_res, .events = POLLIN};
				owner[n] = j, chan[n++] = -1;
			}
		}
		int r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return fail(s, "poll failed");
		}
		for (int i = 0; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (owner[i] == NULL) {
				if (chan[i] == OWN_IN) {
					if (read_input(s) != 0)
						return -1;
				} else if (chan[i] == OWN_SINK) {
					s->sink.pipe_wait_ns = 0;
					if (read_input(s) != 0)
						return -1;
				} else if (chan[i] == OWN_SIG) {
					reap(s);
				} else if (chan[i] == OWN_OUT) {
					flush_output(s);
				} else if (chan[i] == OWN_DIRECT) {
					if (direct_switch(s) != 0)
						return -1;
				} else if (read_life(s) != 0) {
					return -1;
				}
			} else if (chan[i] == -1) {
				read_res(owner[i]);
			} else if (chan[i] == SBX_CH_STDIN) {
				pump_in(s, owner[i]);
			} else if (pump_out(s, owner[i], chan[i]) == PUMP_EMPTY &&
			           (pfd[i].revents & (POLLHUP | POLLERR))) {
				end_channel(s, owner[i], chan[i]);
			}
		}
		/* Stdin may have queued replies; try to send them at once. */
		if (!sbx_outq_empty(&s->out))
			flush_output(s);
	}
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

int sbx_serve(int in_fd, int out_fd)
{
	struct serve s;
	memset(&s, 0, sizeof s);
	s.in_fd = in_fd;
	s.out_fd = out_fd;
	s.life_fd = -1;
	sbx_direct_init(&s.direct);
	s.host_window = SBX_WINDOW_DEFAULT;
	sbx_outq_init(&s.out);
	s.decbuf = malloc(SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	s.resp = malloc(SBX_FRAME_MAX_PAYLOAD);
	if (s.decbuf == NULL || s.resp == NULL) {
		fprintf(stderr, "sbx-agent: out of memory\n");
		return 3;
	}
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
	sbx_stage_open(&s.stage, out_fd);

	struct sbx_msgw w;
	sbx_msgw_init(&w, s.resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_hello_write(&w, SBX_WINDOW_DEFAULT);
	queue(&s, SBX_LANE_CTRL, SBX_F_HELLO, 0, 0, s.resp, w.len);

	int rc = loop(&s);
	sbx_direct_close(&s.direct);
	for (struct job *j = s.jobs; j != NULL; j = j->next)
		kill_job(j);
	drain(&s);
	if (rc != 0 && s.fatal[0] == '\0' && s.dec.error != SBX_DEC_OK)
		fail(&s, sbx_dec_error_text(s.dec.error));
	if (s.in_eof && (sbx_frame_dec_midframe(&s.dec) || s.sink.left > 0) && s.fatal[0] == '\0')
		fail(&s, "the host's stream ended inside a frame");
	if (s.fatal[0] != '\0')
		fprintf(stderr, "sbx-agent: %s\n", s.fatal);
	while (s.jobs != NULL) {
		struct job *j = s.jobs;
		s.jobs = j->next;
		sbx_stdin_free(&j->in);
		close_fd(&j->fd_out), close_fd(&j->fd_err);
		close_fd(&j->fd_res), close_fd(&j->fd_commit);
		if (!j->reaped)
			waitpid(j->pid, NULL, 0);
		free(j->res);
		free(j);
	}
	memset(&s.keeper, 0, sizeof s.keeper);
	sbx_outq_free(&s.out);
	sbx_stage_close(&s.stage);
	free(s.decbuf);
	free(s.resp);
	close(s.sig_fd);
	return s.fatal[0] != '\0' ? 3 : 0;
}
