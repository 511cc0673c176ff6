/* A retained session to an agent over any exec channel: spawning the channel, moving bytes
 * between its fds and the protocol engine (host/engine.c), the step that does whatever is ready
 * without blocking and drives the operations in flight (host/op.c), the stdin of jobs, and the
 * deadlines that make a dead or hung channel an SBX_EUNAVAILABLE error instead of a hang. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t ns(double s)
{
	return (int64_t)(s * 1e9);
}

/* ---- breaking ---- */

/* Once the engine broke: the error kept with the channel's last stderr line (it usually says
 * why: "not found"), and every operation in flight stopped with it. */
static void observe_break(struct sbx_session *s)
{
	if (s->broken || s->eng.state != SBX_ENGINE_BROKEN)
		return;
	s->broken = 1;
	sbx_session_drain_stderr(s);
	const char *last = s->errtail;
	size_t len = s->errlen;
	while (len > 0 && (s->errtail[len - 1] == '\n' || s->errtail[len - 1] == '\r'))
		len--;
	for (size_t i = len; i > 0; i--)
		if (s->errtail[i - 1] == '\n') {
			last = s->errtail + i;
			break;
		}
	int lastlen = (int)(len - (size_t)(last - s->errtail));
	sbx_err_set(&s->broken_err, s->eng.err.cls, s->eng.err.errnum, "%s%s%.*s", s->eng.err.msg,
	            len > 0 ? "; agent stderr: " : "", lastlen > 120 ? 120 : lastlen, last);
	for (struct sbx_op *op = s->ops; op != NULL; op = op->next)
		if (!op->done && !op->stopping) {
			op->stopping = 1;
			op->stop_err = s->broken_err;
			op->cls->step(op, SBX_EV_STOP);
		}
}

static int broken(struct sbx_session *s, struct sbx_err *e)
{
	observe_break(s);
	if (!s->broken)
		return 0;
	if (e != NULL)
		*e = s->broken_err;
	return -1;
}

int sbx_session_error(struct sbx_session *s, struct sbx_err *e)
{
	return broken(s, e);
}

int sbx_session_fail(struct sbx_session *s, enum sbx_err_class cls, int err, const char *why)
{
	sbx_engine_break(&s->eng, cls, err, "%s", why);
	observe_break(s);
	return -1;
}

/* ---- the channel's fds ---- */

/* What is queued, out to the channel (until it would block); SIGPIPE held back (unless the
 * application ignores it), so a vanished agent is an error value, and a SIGPIPE that was
 * already pending stays so. */
static void flush(struct sbx_session *s)
{
	if (sbx_outq_empty(&s->eng.out) || s->to_fd < 0)
		return;
	int rc, err;
	if (s->sigpipe_ignored) {
		rc = sbx_splice_out(&s->splice, &s->eng.out, s->to_fd);
		err = errno;
	} else {
		sigset_t pipe_set, old, pending;
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		sigpending(&pending);
		int was_pending = sigismember(&pending, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		rc = sbx_splice_out(&s->splice, &s->eng.out, s->to_fd);
		err = errno;
		if (rc != 0 && err == EPIPE && !was_pending) {
			struct timespec zero = {0, 0};
			sigtimedwait(&pipe_set, NULL, &zero);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (rc != 0)
		sbx_engine_break(&s->eng, SBX_EUNAVAILABLE, err, "cannot write to the channel%s",
		                 err == EPIPE ? " (the agent is gone)" : "");
}

void sbx_session_kick(struct sbx_session *s)
{
	if (!s->broken) {
		flush(s);
		observe_break(s);
	}
}

/* Reads the channel until it would block (at most 16 reads a step, so one busy session cannot
 * hold a loop of many): every byte to the engine. The buffer grows while reads fill it. */
static void read_channel(struct sbx_session *s, int64_t now)
{
	for (int round = 0; round < 16 && s->eng.state != SBX_ENGINE_BROKEN; round++) {
		ssize_t n = read(s->from_fd, s->rbuf, s->rcap);
		if (n < 0) {
			if (errno != EINTR && errno != EAGAIN)
				sbx_engine_break(&s->eng, SBX_EUNAVAILABLE, errno,
				                 "cannot read the channel");
			if (errno == EINTR)
				continue;
			return;
		}
		if (n == 0) {
			/* Collect the channel's last words before explaining. */
			sbx_session_drain_stderr(s);
			sbx_engine_eof(&s->eng);
			return;
		}
		sbx_engine_feed(&s->eng, s->rbuf, (size_t)n, now);
		if ((size_t)n < s->rcap)
			return;
		if (s->rcap < SBX_SESSION_RBUF_MAX) {
			uint8_t *b = realloc(s->rbuf, s->rcap * 4);
			if (b != NULL) {
				s->rbuf = b;
				s->rcap *= 4;
			}
		}
	}
}

void sbx_session_drain_stderr(struct sbx_session *s)
{
	if (s->err_fd < 0)
		return;
	/* At most 256 KiB a call: a channel that floods its stderr still lets the loop go on. */
	for (int round = 0; round < 64; round++) {
		char buf[4096];
		ssize_t n = read(s->err_fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0) {
				close(s->err_fd);
				s->err_fd = -1;
			}
			return;
		}
		/* Keep the last bytes. */
		size_t cap = sizeof s->errtail - 1;
		if ((size_t)n >= cap) {
			memcpy(s->errtail, buf + n - cap, cap);
			s->errlen = cap;
		} else {
			if (s->errlen + (size_t)n > cap) {
				size_t drop = s->errlen + (size_t)n - cap;
				memmove(s->errtail, s->errtail + drop, s->errlen - drop);
				s->errlen -= drop;
			}
			memcpy(s->errtail + s->errlen, buf, (size_t)n);
			s->errlen += (size_t)n;
		}
		s->errtail[s->errlen] = '\0';
	}
}

/* ---- a job's stdin ---- */

static int bulk_room(const struct sbx_session *s)
{
	return s->eng.out.bulk_bytes < SBX_SESSION_BULK_LIMIT &&
	       (!s->splice_tried || !sbx_splice_full(&s->splice, &s->eng.out));
}

int sbx_session_stdin_buf(struct sbx_session *s, struct sbx_stream *p, const void *b, size_t len,
                          size_t *off)
{
	while (s->eng.out.bulk_bytes < SBX_SESSION_BULK_LIMIT) {
		size_t left = len - *off;
		uint64_t n = sbx_credit_tx_take(&p->tx_in,
		                                left < SBX_DATA_CHUNK ? left : SBX_DATA_CHUNK);
		if (n == 0 && left > 0)
			return 0;
		uint8_t ch = SBX_CH_STDIN;
		int end = n == left;
		if (sbx_engine_send(&s->eng, SBX_LANE_BULK, SBX_F_DATA, end ? SBX_FL_END : 0, p->id,
		                    &ch, 1, (const uint8_t *)b + *off, n, NULL) != 0)
			return -1;
		*off += n;
		if (end)
			return 1;
	}
	return 0;
}

int sbx_session_stdin_fd(struct sbx_session *s, struct sbx_stream *p, int fd, int *end)
{
	for (int round = 0; round < 16; round++) {
		if (s->broken || s->eng.state == SBX_ENGINE_BROKEN)
			return -1;
		if (!bulk_room(s))
			return 0;
		/* Only a readable fd is touched: a blocking one (a terminal, a pipe, the caller's
		 * stdin) would otherwise stop the whole session in read() until it has bytes. */
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 0) == 0)
			return 1;
		uint64_t room = sbx_credit_tx_take(&p->tx_in, SBX_DATA_CHUNK);
		if (room == 0)
			return 0;
		/* Moved into the splice pipe when it has room (no copy: an upload's archive, a file
		 * given as stdin); else read below. */
		if (!s->splice_tried) {
			s->splice_tried = 1;
			sbx_splice_open(&s->splice, s->to_fd);
		}
		ssize_t staged = sbx_splice_in(&s->splice, &s->eng.out, fd, (size_t)room, p->id,
		                               SBX_CH_STDIN);
		if (staged > 0) {
			p->tx_in.avail += room - (uint64_t)staged;
			continue;
		}
		if (staged == SBX_SPLICE_LOST) {
			p->tx_in.avail += room;
			return sbx_engine_break(&s->eng, SBX_EUNAVAILABLE, ENOMEM,
			                        "queueing stdin");
		}
		/* Nothing there yet, the end, or a source splice cannot take: read() says which,
		 * straight into the frame that will carry the bytes. */
		uint8_t *buf = sbx_outq_reserve(&s->eng.out, 1, (size_t)room);
		if (buf == NULL) {
			p->tx_in.avail += room;
			return 0;
		}
		ssize_t n = read(fd, buf, room);
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
			sbx_outq_unreserve(&s->eng.out);
			p->tx_in.avail += room;
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (n < 0)
			n = 0; /* an unreadable stdin ends like an empty one */
		p->tx_in.avail += room - (uint64_t)n;
		uint8_t ch = SBX_CH_STDIN;
		sbx_outq_commit(&s->eng.out, SBX_LANE_BULK, SBX_F_DATA, n == 0 ? SBX_FL_END : 0,
		                p->id, &ch, (size_t)n);
		if (n == 0) {
			*end = 1;
			return 0;
		}
	}
	return 1;
}

/* ---- the step ---- */

int sbx_session_fds(struct sbx_session *s, struct pollfd *fds, int max, int64_t *deadline_ns)
{
	int n = 0;
	int64_t now = sbx_now_ns(), d = INT64_MAX;
	if (!s->broken && s->eng.state != SBX_ENGINE_BROKEN) {
		if (n < max && s->from_fd >= 0)
			fds[n++] = (struct pollfd){s->from_fd, POLLIN, 0};
		if (n < max && s->to_fd >= 0 && !sbx_outq_empty(&s->eng.out))
			fds[n++] = (struct pollfd){s->to_fd, POLLOUT, 0};
		d = sbx_engine_deadline(&s->eng, now);
	}
	if (n < max && s->err_fd >= 0)
		fds[n++] = (struct pollfd){s->err_fd, POLLIN, 0};
	for (struct sbx_op *op = s->ops; op != NULL; op = op->next) {
		if (op->done)
			continue;
		for (int i = 0; i < SBX_OP_FDS && n < max; i++)
			if (op->fds[i].fd >= 0 && op->fds[i].events != 0)
				fds[n++] = (struct pollfd){op->fds[i].fd, op->fds[i].events, 0};
		if (op->timer_ns < d)
			d = op->timer_ns;
		if (!op->stopping && op->deadline_ns < d)
			d = op->deadline_ns;
		/* Work already due (an answer not delivered, room for stdin) wants the step now. */
		if (op->stream_ready || (op->credit_ready && bulk_room(s)))
			d = now;
	}
	*deadline_ns = d;
	return n;
}

/* Delivers what each operation has waiting; an operation may finish, and start others, while
 * this runs: the list is walked again until nothing more is due. */
static void drive_ops(struct sbx_session *s, int64_t now)
{
	struct pollfd pf[64];
	struct sbx_op *owner[64];
	int k = 0;
	for (struct sbx_op *op = s->ops; op != NULL && k < 64; op = op->next)
		for (int i = 0; i < SBX_OP_FDS && k < 64; i++)
			if (!op->done && op->fds[i].fd >= 0 && op->fds[i].events != 0) {
				pf[k] = (struct pollfd){op->fds[i].fd, op->fds[i].events, 0};
				owner[k++] = op;
			}
	if (k > 0 && poll(pf, (nfds_t)k, 0) > 0)
		for (int j = 0; j < k; j++)
			for (int i = 0; i < SBX_OP_FDS; i++)
				if (owner[j]->fds[i].fd == pf[j].fd)
					owner[j]->fds[i].revents = pf[j].revents;
	for (int again = 1; again;) {
		again = 0;
		for (struct sbx_op *op = s->ops; op != NULL; op = op->next) {
			if (op->done)
				continue;
			int ev = -1;
			if (!op->stopping && op->deadline_ns <= now) {
				op->stopping = 1;
				sbx_err_set(&op->stop_err, SBX_EUNAVAILABLE, ETIMEDOUT,
				            "%s: no answer from the agent before the deadline",
				            op->cls->name);
				ev = SBX_EV_STOP;
			} else if (op->stream_ready) {
				op->stream_ready = 0;
				ev = SBX_EV_STREAM;
			} else if (op->credit_ready && bulk_room(s)) {
				op->credit_ready = 0;
				ev = SBX_EV_CREDIT;
			} else if (op->timer_ns <= now) {
				op->timer_ns = INT64_MAX;
				ev = SBX_EV_TIMER;
			} else {
				for (int i = 0; i < SBX_OP_FDS; i++)
					if (op->fds[i].fd >= 0 && op->fds[i].revents != 0)
						ev = SBX_EV_FD;
			}
			if (ev < 0)
				continue;
			op->cls->step(op, ev);
			for (int i = 0; i < SBX_OP_FDS; i++)
				op->fds[i].revents = 0;
			again = 1;
			break; /* the list may have changed */
		}
	}
}

int sbx_session_step(struct sbx_session *s)
{
	int64_t now = sbx_now_ns();
	sbx_loop_note_dirty(s);
	if (!s->broken) {
		if (s->from_fd >= 0)
			read_channel(s, now);
		sbx_engine_tick(&s->eng, now);
		observe_break(s);
	}
	drive_ops(s, now);
	sbx_session_reap(s);
	if (!s->broken) {
		flush(s);
		observe_break(s);
	}
	sbx_session_drain_stderr(s);
	/* Idle: back to the small buffers. */
	if (!s->broken && s->ops == NULL && sbx_engine_idle(&s->eng)) {
		sbx_engine_trim(&s->eng);
		if (s->rcap > SBX_SESSION_RBUF_MIN) {
			uint8_t *b = realloc(s->rbuf, SBX_SESSION_RBUF_MIN);
			if (b != NULL) {
				s->rbuf = b;
				s->rcap = SBX_SESSION_RBUF_MIN;
			}
		}
	}
	return s->broken ? -1 : 0;
}

int sbx_session_wait(struct sbx_session *s, int64_t until, struct sbx_err *e)
{
	struct pollfd fds[3 + 64];
	int64_t d;
	int n = sbx_session_fds(s, fds, (int)(sizeof fds / sizeof fds[0]), &d);
	if (until < d)
		d = until;
	int64_t left = d - sbx_now_ns();
	int ms = left <= 0                ? 0
	         : left > 3600000000000LL ? 3600000
	                                  : (int)((left + 999999) / 1000000);
	if (n > 0 || ms > 0) {
		if (poll(fds, (nfds_t)n, ms) < 0 && errno != EINTR)
			sbx_session_fail(s, SBX_EUNAVAILABLE, errno, "poll");
	}
	sbx_session_step(s);
	return broken(s, e);
}

/* ---- opening ---- */

/* {agent} replaced in one word of the template. */
static char *expand(const char *word, const char *agent)
{
	const char *key = "{agent}";
	size_t klen = strlen(key), alen = strlen(agent), count = 0;
	for (const char *p = strstr(word, key); p != NULL; p = strstr(p + klen, key))
		count++;
	size_t len = strlen(word) + count * alen;
	char *out = malloc(len + 1), *o = out;
	if (out == NULL)
		return NULL;
	for (const char *p = word; *p != '\0';) {
		if (strncmp(p, key, klen) == 0) {
			memcpy(o, agent, alen);
			o += alen;
			p += klen;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	return out;
}

/* A session with no channel yet; NULL when out of memory. */
static struct sbx_session *session_new(double timeout_s)
{
	struct sbx_session *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->to_fd = s->from_fd = s->err_fd = -1;
	s->life_in = s->life_out = -1;
	s->splice.r = s->splice.w = -1;
	s->timeout = timeout_s > 0 ? timeout_s : 30;
	sbx_loop_note_dirty(s);
	struct sigaction sa;
	s->sigpipe_ignored = sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
	s->rbuf = malloc(SBX_SESSION_RBUF_MIN);
	s->rcap = SBX_SESSION_RBUF_MIN;
	if (s->rbuf == NULL || sbx_engine_init(&s->eng, ns(s->timeout), sbx_now_ns()) != 0) {
		sbx_session_close(s);
		return NULL;
	}
	return s;
}

/* The dialog (if any), then the agent's HELLO, within the session's timeout. */
static int await_hello(struct sbx_session *s, const struct sbx_boot *boot, struct sbx_err *e)
{
	int64_t deadline = sbx_now_ns() + ns(s->timeout);
	s->eng.hello_deadline_ns = deadline;
	if (boot != NULL && boot->run(boot->ctx, s->to_fd, s->from_fd, deadline, e) != 0) {
		sbx_session_drain_stderr(s);
		return -1;
	}
	while (s->eng.state == SBX_ENGINE_HELLO)
		sbx_session_wait(s, deadline, NULL);
	if (broken(s, e) != 0)
		return -1;
	flush(s);
	return broken(s, e);
}

int sbx_session_open(struct sbx_session **out, char *const argv_template[], const char *agent,
                     double timeout_s, struct sbx_err *e)
{
	return sbx_session_open_boot(out, argv_template, agent, timeout_s, NULL, e);
}

int sbx_session_open_boot(struct sbx_session **out, char *const argv_template[], const char *agent,
                          double timeout_s, const struct sbx_boot *boot, struct sbx_err *e)
{
	*out = NULL;
	if (argv_template == NULL || argv_template[0] == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "empty channel command");
	size_t argc = 0;
	while (argv_template[argc] != NULL)
		argc++;
	char **argv = calloc(argc + 1, sizeof *argv);
	struct sbx_session *s = session_new(timeout_s);
	int ok = argv != NULL && s != NULL;
	for (size_t i = 0; ok && i < argc; i++)
		ok = (argv[i] = expand(argv_template[i], agent != NULL ? agent : "")) != NULL;
	if (!ok) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "session");
		goto fail;
	}

	int in[2], outp[2], errp[2];
	if (pipe2(in, O_CLOEXEC) != 0) {
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
		goto fail;
	}
	if (pipe2(outp, O_CLOEXEC) != 0) {
		close(in[0]), close(in[1]);
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
		goto fail;
	}
	if (pipe2(errp, O_CLOEXEC) != 0) {
		close(in[0]), close(in[1]), close(outp[0]), close(outp[1]);
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
		goto fail;
	}
	/* Channel pipes of 1 MiB (best effort; the default 64 KiB means a wake-up per 64 KiB of
	 * a transfer). A channel program (podman, kubectl) has its own pipes beyond these. */
	fcntl(in[1], F_SETPIPE_SZ, 1 << 20);
	fcntl(outp[0], F_SETPIPE_SZ, 1 << 20);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	posix_spawnattr_init(&at);
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int rc = posix_spawnp(&s->pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(in[0]);
	close(outp[1]);
	close(errp[1]);
	s->to_fd = in[1];
	s->from_fd = outp[0];
	s->err_fd = errp[0];
	if (rc != 0) {
		s->pid = 0;
		sbx_err_set(e, SBX_EUNAVAILABLE, rc, "cannot start the channel command %s",
		            argv[0]);
		goto fail;
	}
	fcntl(s->to_fd, F_SETFL, fcntl(s->to_fd, F_GETFL) | O_NONBLOCK);
	fcntl(s->from_fd, F_SETFL, fcntl(s->from_fd, F_GETFL) | O_NONBLOCK);
	fcntl(s->err_fd, F_SETFL, fcntl(s->err_fd, F_GETFL) | O_NONBLOCK);
	for (size_t i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
	argv = NULL;

	if (await_hello(s, boot, e) != 0)
		goto fail;
	*out = s;
	return 0;
fail:
	if (argv != NULL) {
		for (size_t i = 0; i < argc; i++)
			free(argv[i]);
		free(argv);
	}
	sbx_session_close(s);
	return -1;
}

int sbx_session_open_fd(struct sbx_session **out, int fd, double timeout_s, struct sbx_err *e)
{
	*out = NULL;
	struct sbx_session *s = session_new(timeout_s);
	int in = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (s == NULL || in < 0) {
		if (in >= 0)
			close(in);
		close(fd);
		sbx_session_close(s);
		return sbx_err_set(e, SBX_EUNAVAILABLE, s == NULL ? ENOMEM : errno, "session");
	}
	s->to_fd = fd;
	s->from_fd = in;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (await_hello(s, NULL, e) != 0) {
		sbx_session_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

void sbx_session_close(struct sbx_session *s)
{
	if (s == NULL)
		return;
	sbx_loop_leave(s); /* still in a loop: out of it first */
	if (s->trust_op != NULL) {
		s->trust_op->orphan = 1;
		s->trust_op = NULL;
	}
	/* Operations still in flight end now (a job's process in the sandbox is killed when the
	 * agent's stdin ends); their owners keep the handles, which then only free. */
	while (s->ops != NULL) {
		struct sbx_op *op = s->ops;
		if (!op->done) {
			op->stopping = 1;
			sbx_err_set(&op->stop_err, SBX_EUNAVAILABLE, 0, "the session was closed");
			sbx_err_set(&s->eng.err, SBX_EUNAVAILABLE, 0, "the session was closed");
			s->eng.state = SBX_ENGINE_BROKEN;
			op->cls->step(op, SBX_EV_STOP);
			if (!op->done)
				sbx_op_finish(op, -1, &op->stop_err);
		}
		s->ops = op->next;
		op->s = NULL;
		op->next = NULL;
		op->next_done = NULL;
		if (op->orphan)
			sbx_op_free(op);
	}
	if (s->to_fd >= 0)
		close(s->to_fd);
	sbx_splice_close(&s->splice);
	if (s->life_in >= 0)
		close(s->life_in);
	if (s->life_out >= 0)
		close(s->life_out);
	if (s->pid > 0) {
		/* EOF tells the agent to finish; give the channel two seconds, then kill it. */
		int64_t end = sbx_now_ns() + ns(2.0);
		int st;
		while (waitpid(s->pid, &st, WNOHANG) == 0) {
			if (sbx_now_ns() >= end) {
				kill(s->pid, SIGKILL);
				waitpid(s->pid, &st, 0);
				break;
			}
			if (s->from_fd >= 0) {
				/* Keep reading so an agent blocked on a full pipe can exit. */
				char buf[4096];
				struct pollfd p = {.fd = s->from_fd, .events = POLLIN};
				if (poll(&p, 1, 10) > 0 && read(s->from_fd, buf, sizeof buf) == 0) {
					close(s->from_fd);
					s->from_fd = -1;
				}
			} else {
				struct timespec t = {0, 5000000};
				nanosleep(&t, NULL);
			}
		}
	}
	if (s->from_fd >= 0)
		close(s->from_fd);
	if (s->err_fd >= 0)
		close(s->err_fd);
	sbx_engine_free(&s->eng);
	memset(s->secret, 0, sizeof s->secret);
	free(s->trust_identity);
	free(s->rbuf);
	free(s);
}

/* ---- what a session is ---- */

const struct sbx_hello *sbx_session_hello(const struct sbx_session *s)
{
	return &s->eng.hello;
}

int sbx_fd_wait(int fd, short events, int64_t deadline_ns, const char *what, struct sbx_err *e)
{
	for (;;) {
		int64_t left = deadline_ns - sbx_now_ns();
		if (left <= 0)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "%s: no answer before the deadline", what);
		struct pollfd p = {fd, events, 0};
		int r = poll(&p, 1, (int)(left / 1000000 + 1));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "%s: poll", what);
	}
}

const char *sbx_session_channel(const struct sbx_session *s)
{
	return s->resident ? "resident" : s->life_in >= 0 ? "direct" : "exec";
}

int sbx_session_broken(const struct sbx_session *s)
{
	return s->broken || s->eng.state == SBX_ENGINE_BROKEN;
}

void sbx_session_set_timeout(struct sbx_session *s, double seconds)
{
	if (seconds > 0) {
		s->timeout = seconds;
		s->eng.timeout_ns = ns(seconds);
	}
}

double sbx_session_timeout(const struct sbx_session *s)
{
	return s->timeout;
}

int64_t sbx_session_deadline(const struct sbx_session *s)
{
	return sbx_now_ns() + (int64_t)(s->timeout * 1e9);
}

const char *sbx_session_stderr(const struct sbx_session *s)
{
	return s->errtail;
}

size_t sbx_session_ops(const struct sbx_session *s)
{
	size_t n = 0;
	for (const struct sbx_op *op = s->ops; op != NULL; op = op->next)
		n += !op->done;
	return n;
}
