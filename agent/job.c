/* The jobs of the serve loop (see job.h). */
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "ptyctl.h"
#include "sys.h"
#include "xfer.h"

struct sbx_job *sbx_job_find(struct sbx_jobs *js, uint32_t stream)
{
	for (struct sbx_job *j = js->list; j != NULL; j = j->next)
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

static void nonblock(int fd)
{
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void sbx_job_kill(struct sbx_job *j)
{
	if (j->xfer) {
		close_fd(&j->fd_commit);
		sbx_stdin_close(&j->in);
		close_fd(&j->fd_out);
		close_fd(&j->fd_err);
		return;
	}
	if (!j->reaped)
		kill(-j->pid, SIGKILL);
}

/* A new job on stream, its output under the host's window, its stdin fd (-1: none); linked
 * in. */
static void add(struct sbx_jobs *js, struct sbx_job *j, uint32_t stream, int fd_in, int no_stdin)
{
	j->stream = stream;
	for (int c = 0; c < SBX_CH_COUNT; c++)
		sbx_credit_tx_init(&j->tx[c], js->host_window);
	nonblock(fd_in);
	nonblock(j->fd_out);
	nonblock(j->fd_err);
	sbx_stdin_init(&j->in, fd_in, no_stdin);
	j->next = js->list;
	js->list = j;
	js->n++;
}

int sbx_job_exec(struct sbx_jobs *js, uint32_t stream, const uint8_t *req, size_t len,
                 struct sbx_err *e)
{
	struct sbx_exec_req r;
	if (js->n >= SBX_JOB_MAX)
		return sbx_err_set(e, SBX_EUSAGE, 0, "too many commands running at once");
	if (sbx_exec_parse(req, len, &r, e) != 0)
		return -1;
	struct sbx_job *j = calloc(1, sizeof *j);
	if (j == NULL) {
		sbx_exec_req_free(&r);
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "exec job");
	}
	j->fd_res = j->fd_commit = -1;
	j->start_ns = sbx_now_ns();
	if (sbx_exec_spawn(&r, &j->sp, e) != 0) {
		sbx_exec_req_free(&r);
		free(j);
		return -1;
	}
	j->pid = j->sp.pid;
	j->fd_out = j->sp.fd_out;
	j->fd_err = j->sp.fd_err;
	j->deadline_ns = r.cmd.timeout_ms > 0 ? j->start_ns + r.cmd.timeout_ms * 1000000 : 0;
	j->linger_left_ns = r.linger_ms * 1000000;
	add(js, j, stream, j->sp.fd_in, !r.stdin_stream);
	sbx_exec_req_free(&r);
	return 0;
}

int sbx_job_xfer(struct sbx_jobs *js, uint32_t stream, int upload, const uint8_t *req, size_t len,
                 struct sbx_err *e)
{
	struct sbx_xfer_req r;
	if (js->n >= SBX_JOB_MAX)
		return sbx_err_set(e, SBX_EUSAGE, 0, "too many jobs running at once");
	if (sbx_xfer_parse(upload, req, len, &r, e) != 0)
		return -1;
	struct sbx_job *j = calloc(1, sizeof *j);
	uint8_t *res = malloc(SBX_XFER_RES_MAX);
	struct sbx_xfer_child c;
	if (j == NULL || res == NULL || sbx_xfer_spawn(&r, &c, e) != 0) {
		if (j == NULL || res == NULL)
			sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "transfer job");
		free(j);
		free(res);
		sbx_xfer_req_free(&r);
		return -1;
	}
	sbx_xfer_req_free(&r);
	j->start_ns = sbx_now_ns();
	j->xfer = 1;
	j->upload = upload;
	j->res = res;
	j->pid = c.pid;
	j->fd_out = c.fd_out;
	j->fd_err = -1;
	j->fd_res = c.fd_res;
	j->fd_commit = c.fd_commit;
	nonblock(j->fd_res);
	nonblock(j->fd_commit);
	j->linger_left_ns = 60 * 1000000000LL;
	add(js, j, stream, c.fd_in, !upload);
	return 0;
}

int sbx_job_pty(struct sbx_jobs *js, uint32_t stream, const uint8_t *req, size_t len,
                struct sbx_err *e)
{
	if (js->n >= SBX_JOB_MAX)
		return sbx_err_set(e, SBX_EUSAGE, 0, "too many jobs running at once");
	struct sbx_job *j = calloc(1, sizeof *j);
	uint8_t *res = malloc(SBX_XFER_RES_MAX);
	struct sbx_pty_relay c;
	if (j == NULL || res == NULL) {
		free(j);
		free(res);
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "pty stream");
	}
	if (sbx_ptyctl_stream(req, len, &c, e) != 0) {
		free(j);
		free(res);
		return -1;
	}
	/* A transfer-like job: the relay child's RESPONSE comes on fd_res; a CANCEL closes its
	 * pipes (a detach), it is never killed. */
	j->start_ns = sbx_now_ns();
	j->xfer = 1;
	j->res = res;
	j->pid = c.pid;
	j->fd_out = c.fd_out;
	j->fd_err = c.fd_err;
	j->fd_res = c.fd_res;
	j->fd_commit = -1;
	nonblock(j->fd_res);
	j->linger_left_ns = 1000000000LL;
	add(js, j, stream, c.fd_in, 0);
	return 0;
}

void sbx_job_commit(struct sbx_jobs *js, const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	struct sbx_field fl;
	int64_t id = 0;
	if (sbx_msg_find(req, len, SBX_T_JOB, &fl) != 1 || sbx_field_i64(&fl, &id) != 0 ||
	    sbx_msg_find(req, len, SBX_T_SHA256, &fl) != 1 || fl.len != 32) {
		sbx_msgw_i64(w, SBX_T_STATUS, SBX_EUSAGE);
		sbx_msgw_str(w, SBX_T_MESSAGE, "COMMIT needs JOB and a 32-byte SHA256");
		return;
	}
	struct sbx_job *j = sbx_job_find(js, (uint32_t)id);
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

static void lost(struct sbx_jobs *js, const char *why)
{
	if (js->fatal == NULL)
		js->fatal = why;
}

void sbx_job_grant(struct sbx_jobs *js, struct sbx_job *j, uint64_t g)
{
	if (g == 0)
		return;
	uint8_t c[5] = {SBX_CH_STDIN, (uint8_t)(g >> 24), (uint8_t)(g >> 16), (uint8_t)(g >> 8),
	                (uint8_t)g};
	if (sbx_outq_push(js->out, SBX_LANE_CTRL, SBX_F_CREDIT, 0, j->stream, NULL, 0, c, 5) != 0)
		lost(js, "out of memory queueing a frame");
}

int sbx_job_stdin(struct sbx_jobs *js, struct sbx_job *j, uint64_t total, const uint8_t *p,
                  size_t n, const char **why)
{
	uint64_t g;
	if (sbx_stdin_expect(&j->in, total) != 0) {
		*why = "host overran its stdin credit";
		return -1;
	}
	if (sbx_stdin_data(&j->in, p, n, &g) != 0) {
		*why = "out of memory for stdin";
		return -1;
	}
	sbx_job_grant(js, j, g);
	return 0;
}

static void end_channel(struct sbx_jobs *js, struct sbx_job *j, int chan)
{
	uint8_t ch = (uint8_t)chan;
	close_fd(chan == SBX_CH_STDOUT ? &j->fd_out : &j->fd_err);
	sbx_outq_push(js->out, SBX_LANE_BULK, SBX_F_DATA, SBX_FL_END, j->stream, &ch, 1, NULL, 0);
}

enum pump { PUMP_DATA, PUMP_EOF, PUMP_EMPTY, PUMP_BLOCKED };

/* Reads what credit allows from one output pipe of a job into a DATA frame. */
static enum pump pump_out(struct sbx_jobs *js, struct sbx_job *j, int chan)
{
	int fd = chan == SBX_CH_STDOUT ? j->fd_out : j->fd_err;
	uint8_t ch = (uint8_t)chan;
	if (fd < 0)
		return PUMP_BLOCKED; /* closed: ended, or by a CANCEL read earlier in this round */
	uint64_t room = sbx_credit_tx_take(&j->tx[chan], SBX_DATA_CHUNK);
	if (room == 0)
		return PUMP_BLOCKED;
	/* Moved into the staging pipe when there is room (no copy at all), else read straight
	 * into the frame that will carry the bytes. */
	ssize_t staged = sbx_splice_in(js->splice, js->out, fd, (size_t)room, j->stream, ch);
	if (staged > 0) {
		j->tx[chan].avail += room - (uint64_t)staged;
		return PUMP_DATA;
	}
	if (staged == 0) {
		j->tx[chan].avail += room;
		end_channel(js, j, chan);
		return PUMP_EOF;
	}
	if (staged == SBX_SPLICE_LOST) {
		j->tx[chan].avail += room;
		lost(js, "out of memory queueing output");
		return PUMP_BLOCKED;
	}
	/* Nothing there yet, no room in the splice pipe, or a pipe splice cannot take: read below.
	 * With the pipe full this is a copy; waiting for the pipe instead (as the host does)
	 * made downloads of many small files 3-5% slower here: the bytes read now keep the
	 * packing child from blocking on its pipe (docs/transfers.md). */
	uint8_t *buf = sbx_outq_reserve(js->out, 1, (size_t)room);
	if (buf == NULL) {
		j->tx[chan].avail += room;
		lost(js, "out of memory queueing output");
		return PUMP_BLOCKED;
	}
	ssize_t n = read(fd, buf, room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
		sbx_outq_unreserve(js->out);
		j->tx[chan].avail += room;
		return PUMP_EMPTY;
	}
	if (n < 0)
		n = 0; /* a read error ends the channel like EOF */
	j->tx[chan].avail += room - (uint64_t)n;
	if (n == 0) {
		sbx_outq_unreserve(js->out);
		end_channel(js, j, chan);
		return PUMP_EOF;
	}
	sbx_outq_commit(js->out, SBX_LANE_BULK, SBX_F_DATA, 0, j->stream, &ch, (size_t)n);
	return PUMP_DATA;
}

void sbx_job_output(struct sbx_jobs *js, struct sbx_job *j, int chan, short revents)
{
	if (pump_out(js, j, chan) == PUMP_EMPTY && (revents & (POLLHUP | POLLERR)))
		end_channel(js, j, chan);
}

/* Linger is over: take what is already in the pipe (as far as credit and the queue allow)
 * and close it once empty, so nothing the command wrote before exiting is lost. */
static void drain_and_close(struct sbx_jobs *js, struct sbx_job *j, int chan)
{
	for (;;) {
		if (js->out->bulk_bytes >= SBX_JOB_BULK_LIMIT)
			return;
		enum pump r = pump_out(js, j, chan);
		if (r == PUMP_EMPTY)
			end_channel(js, j, chan);
		if (r != PUMP_DATA)
			return;
	}
}

void sbx_job_input(struct sbx_jobs *js, struct sbx_job *j)
{
	uint64_t g;
	sbx_stdin_pump(&j->in, &g);
	sbx_job_grant(js, j, g);
}

void sbx_job_result(struct sbx_job *j)
{
	for (;;) {
		if (j->res_len == SBX_XFER_RES_MAX) {
			close_fd(&j->fd_res); /* oversized: dropped at the end */
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

static void finish_xfer(struct sbx_jobs *js, struct sbx_job *j)
{
	struct sbx_field f;
	int64_t v;
	int exited = WIFEXITED(j->status) && WEXITSTATUS(j->status) <= 1;
	if (exited && j->res_len <= SBX_XFER_RES_MAX && j->res_len > 0 &&
	    sbx_msg_find(j->res, j->res_len, SBX_T_STATUS, &f) == 1 && sbx_field_i64(&f, &v) == 0) {
		sbx_outq_push(js->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, j->res,
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
	sbx_msgw_init(&w, js->resp, SBX_FRAME_MAX_PAYLOAD);
	sbx_msgw_i64(&w, SBX_T_STATUS, SBX_ETRANSFER);
	sbx_msgw_str(&w, SBX_T_MESSAGE, msg);
	sbx_outq_push(js->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, js->resp,
	              w.len);
}

static void finish(struct sbx_jobs *js, struct sbx_job *j)
{
	if (j->xfer) {
		finish_xfer(js, j);
		return;
	}
	struct sbx_msgw w;
	sbx_msgw_init(&w, js->resp, SBX_FRAME_MAX_PAYLOAD);
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
	sbx_outq_push(js->out, SBX_LANE_BULK, SBX_F_RESPONSE, 0, j->stream, NULL, 0, js->resp,
	              w.len);
}

void sbx_job_reap(struct sbx_jobs *js)
{
	for (struct sbx_job *j = js->list; j != NULL; j = j->next) {
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

/* Closes every fd (so a transfer child still writing sees its pipes gone), reaps, frees. */
static void free_job(struct sbx_job *j)
{
	sbx_stdin_free(&j->in);
	close_fd(&j->fd_out), close_fd(&j->fd_err);
	close_fd(&j->fd_res), close_fd(&j->fd_commit);
	if (!j->reaped)
		waitpid(j->pid, NULL, 0);
	free(j->res);
	free(j);
}

int sbx_job_tend(struct sbx_jobs *js)
{
	int64_t now = sbx_now_ns(), next = -1;
	struct sbx_job **pp = &js->list;
	while (*pp != NULL) {
		struct sbx_job *j = *pp;
		if (!j->reaped && j->deadline_ns > 0) {
			if (now >= j->deadline_ns && !j->timed_out) {
				j->timed_out = 1;
				sbx_job_kill(j);
			} else if (!j->timed_out && (next < 0 || j->deadline_ns < next)) {
				next = j->deadline_ns;
			}
		}
		if (j->reaped && (j->fd_out >= 0 || j->fd_err >= 0)) {
			int can_read = js->out->bulk_bytes < SBX_JOB_BULK_LIMIT &&
			               ((j->fd_out >= 0 && j->tx[SBX_CH_STDOUT].avail > 0) ||
			                (j->fd_err >= 0 && j->tx[SBX_CH_STDERR].avail > 0));
			if (can_read)
				j->linger_left_ns -= now - j->linger_mark_ns;
			j->linger_mark_ns = now;
			if (j->linger_left_ns <= 0) {
				drain_and_close(js, j, SBX_CH_STDOUT);
				drain_and_close(js, j, SBX_CH_STDERR);
			} else if (can_read && (next < 0 || now + j->linger_left_ns < next)) {
				next = now + j->linger_left_ns;
			}
		}
		if (j->reaped && j->xfer && j->fd_res >= 0)
			sbx_job_result(j);
		if (j->reaped && j->fd_out < 0 && j->fd_err < 0 && (!j->xfer || j->fd_res < 0)) {
			finish(js, j);
			*pp = j->next;
			free_job(j);
			js->n--;
			continue;
		}
		pp = &j->next;
	}
	if (next < 0)
		return -1;
	int64_t ms = (next - now + 999999) / 1000000;
	return ms > 60000 ? 60000 : (int)ms;
}

void sbx_job_free_all(struct sbx_jobs *js)
{
	while (js->list != NULL) {
		struct sbx_job *j = js->list;
		js->list = j->next;
		free_job(j);
	}
	js->n = 0;
}
