/* A retained session to an agent over any exec channel: spawning the channel, the
 * handshake, one poll loop that serves every open stream (responses, exec output under
 * credit, stdin feeding, keepalive pings), and the deadlines that make a dead or hung channel
 * an SBX_EUNAVAILABLE error instead of a hang. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "proto.h"

extern char **environ;

#define BULK_LIMIT (2u * 1024u * 1024u)

static int64_t ns(double s)
{
	return (int64_t)(s * 1e9);
}

/* Marks the session broken with this error (the first one wins) and copies it to e. */
static int breaks(struct sbx_session *s, struct sbx_err *e, enum sbx_err_class cls, int err,
                  const char *fmt, const char *arg)
{
	if (!s->broken) {
		s->broken = 1;
		char msg[200];
		snprintf(msg, sizeof msg, fmt, arg);
		const char *tail = s->errlen > 0 ? "; agent stderr: " : "";
		/* The last line of the channel's stderr usually says why ("not found"). */
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
		sbx_err_set(&s->broken_err, cls, err, "%s%s%.*s", msg, tail,
		            lastlen > 120 ? 120 : lastlen, last);
	}
	if (e != NULL)
		*e = s->broken_err;
	return -1;
}

static int check_broken(struct sbx_session *s, struct sbx_err *e)
{
	if (!s->broken)
		return 0;
	if (e != NULL)
		*e = s->broken_err;
	return -1;
}

struct sbx_stream *sbx_stream_new(struct sbx_session *s, int kind)
{
	struct sbx_stream *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->kind = kind;
	p->id = s->next_id++;
	if (s->next_id == 0)
		s->next_id = 1;
	p->next = s->streams;
	s->streams = p;
	return p;
}

void sbx_stream_free(struct sbx_session *s, struct sbx_stream *p)
{
	for (struct sbx_stream **pp = &s->streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	free(p->resp);
	free(p);
}

static struct sbx_stream *find(struct sbx_session *s, uint32_t id)
{
	for (struct sbx_stream *p = s->streams; p != NULL; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

int sbx_send(struct sbx_session *s, enum sbx_lane lane, uint8_t type, uint8_t flags,
             uint32_t stream, const void *pre, size_t prelen, const void *p, size_t len,
             struct sbx_err *e)
{
	if (sbx_outq_push(&s->out, lane, type, flags, stream, pre, prelen, p, len) != 0)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "request too large or out of memory");
	return 0;
}

static void send_credit(struct sbx_session *s, uint32_t stream, int chan, uint64_t n)
{
	uint8_t c[5] = {(uint8_t)chan, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
	                (uint8_t)n};
	sbx_outq_push(&s->out, SBX_LANE_CTRL, SBX_F_CREDIT, 0, stream, NULL, 0, c, 5);
}

/* Writes what is queued without ever raising SIGPIPE in the caller's process. When the
 * application ignored SIGPIPE before opening the session (the sbx CLI does), the write goes
 * straight out; otherwise SIGPIPE is blocked around it and a pending one consumed, which
 * costs three system calls per write. */
/* What is queued, out to the channel; SIGPIPE held back (unless the application ignores it),
 * so a vanished agent is an error value, and a SIGPIPE that was already pending stays so. */
static int flush(struct sbx_session *s, struct sbx_err *e)
{
	if (sbx_outq_empty(&s->out))
		return 0;
	int rc, err;
	if (s->sigpipe_ignored) {
		rc = sbx_splice_out(&s->splice, &s->out, s->to_fd);
		err = errno;
	} else {
		sigset_t pipe_set, old, pending;
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		sigpending(&pending);
		int was_pending = sigismember(&pending, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		rc = sbx_splice_out(&s->splice, &s->out, s->to_fd);
		err = errno;
		if (rc != 0 && err == EPIPE && !was_pending) {
			struct timespec zero = {0, 0};
			sigtimedwait(&pipe_set, NULL, &zero);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (rc != 0)
		return breaks(s, e, SBX_EUNAVAILABLE, err, "cannot write to the channel%s",
		              err == EPIPE ? " (the agent is gone)" : "");
	return 0;
}

static int parse_hello(struct sbx_session *s, const struct sbx_frame *f, struct sbx_err *e)
{
	struct sbx_hello *h = &s->hello;
	struct sbx_msgr r;
	struct sbx_field fl;
	int rc, canary_ok = 0;
	sbx_msgr_init(&r, f->payload, f->len);
	while ((rc = sbx_msgr_next(&r, &fl)) == 1) {
		int64_t v = 0;
		int is_int = sbx_field_i64(&fl, &v) == 0;
		switch (fl.tag) {
		case SBX_T_PROTO_MIN:
			h->proto_min = is_int ? v : 0;
			break;
		case SBX_T_PROTO_MAX:
			h->proto_max = is_int ? v : 0;
			break;
		case SBX_T_AGENT_VERSION:
			sbx_field_str(&fl, h->agent_version, sizeof h->agent_version);
			break;
		case SBX_T_ARCH:
			sbx_field_str(&fl, h->arch, sizeof h->arch);
			break;
		case SBX_T_KERNEL:
			sbx_field_str(&fl, h->kernel, sizeof h->kernel);
			break;
		case SBX_T_UID:
			h->uid = v;
			break;
		case SBX_T_EUID:
			h->euid = v;
			break;
		case SBX_T_GID:
			h->gid = v;
			break;
		case SBX_T_EGID:
			h->egid = v;
			break;
		case SBX_T_PID:
			h->pid = v;
			break;
		case SBX_T_CAPS:
			h->caps = v;
			break;
		case SBX_T_CGROUP:
			h->cgroup = (int)v;
			break;
		case SBX_T_MAX_PAYLOAD:
			h->max_payload = v;
			break;
		case SBX_T_WINDOW:
			h->window = v;
			break;
		case SBX_T_SELF_SHA256:
			if (fl.len == sizeof h->sha256)
				memcpy(h->sha256, fl.val, sizeof h->sha256);
			break;
		case SBX_T_CANARY:
			canary_ok = fl.len == SBX_CANARY_LEN &&
			            memcmp(fl.val, SBX_CANARY, SBX_CANARY_LEN) == 0;
			break;
		default:
			break;
		}
	}
	/* A HELLO that does not parse, or whose canary changed, came through a channel that
	 * rewrites bytes: the channel is unusable, not the agent wrong. */
	if (rc < 0 || !canary_ok)
		return breaks(s, e, SBX_EUNAVAILABLE, 0,
		              "the channel mangles bytes (a tty? use exec -i without -t)%s", "");
	h->proto = sbx_proto_choose(h->proto_min, h->proto_max, SBX_PROTO_MIN, SBX_PROTO_MAX);
	if (h->proto == 0) {
		char msg[160];
		snprintf(msg, sizeof msg,
		         "protocol version mismatch: the agent speaks %lld..%lld, this host %d..%d",
		         (long long)h->proto_min, (long long)h->proto_max, SBX_PROTO_MIN,
		         SBX_PROTO_MAX);
		return breaks(s, e, SBX_EPROTOCOL, 0, "%s", msg);
	}
	if (h->window < 4096 || h->window > (1 << 30))
		h->window = SBX_WINDOW_DEFAULT;
	s->have_hello = 1;
	uint8_t buf[128];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_VERSION, h->proto);
	sbx_msgw_bytes(&w, SBX_T_CANARY, SBX_CANARY, SBX_CANARY_LEN);
	sbx_msgw_i64(&w, SBX_T_WINDOW, SBX_WINDOW_DEFAULT);
	return sbx_send(s, SBX_LANE_CTRL, SBX_F_WELCOME, 0, 0, NULL, 0, buf, w.len, e);
}

static int on_data(struct sbx_session *s, const struct sbx_frame *f, struct sbx_err *e)
{
	if (f->len < 1 || (f->payload[0] != SBX_CH_STDOUT && f->payload[0] != SBX_CH_STDERR))
		return breaks(s, e, SBX_EPROTOCOL, 0, "DATA on an unknown channel%s", "");
	int ch = f->payload[0];
	struct sbx_stream *p = find(s, f->stream);
	if (p == NULL || p->kind != SBX_STREAM_EXEC || p->done)
		return breaks(s, e, SBX_EPROTOCOL, 0, "DATA on a stream that is not a command%s",
		              "");
	if (!(p->out_chans & (1u << ch)) || p->out_end[ch])
		return breaks(s, e, SBX_EPROTOCOL, 0, "DATA on a channel %s",
		              p->out_end[ch] ? "after its END" : "this job does not send on");
	uint64_t n = f->len - 1;
	if (sbx_credit_rx_received(&p->rx[ch], n) != 0)
		return breaks(s, e, SBX_EPROTOCOL, 0, "the agent overran its output credit%s", "");
	if (n > 0 && p->opts->on_output != NULL && !p->sink_failed &&
	    p->opts->on_output(p->opts->ctx, ch, f->payload + 1, n) != 0) {
		p->sink_failed = 1;
		sbx_send(s, SBX_LANE_CTRL, SBX_F_CANCEL, 0, p->id, NULL, 0, NULL, 0, NULL);
	}
	uint64_t g = sbx_credit_rx_consumed(&p->rx[ch], n);
	if (g > 0)
		send_credit(s, p->id, ch, g);
	if (f->flags & SBX_FL_END)
		p->out_end[ch] = 1;
	return 0;
}

static int on_frame(struct sbx_session *s, const struct sbx_frame *f, struct sbx_err *e)
{
	s->last_rx_ns = sbx_now_ns();
	if (!s->have_hello) {
		if (f->type != SBX_F_HELLO || f->stream != 0)
			return breaks(s, e, SBX_EPROTOCOL, 0,
			              "the agent did not start with HELLO on stream 0%s", "");
		return parse_hello(s, f, e);
	}
	struct sbx_stream *p;
	switch (f->type) {
	case SBX_F_PONG:
		if (f->stream == 0) {
			s->keepalive_sent_ns = 0;
			return 0;
		}
		/* fallthrough */
	case SBX_F_RESPONSE:
		p = find(s, f->stream);
		if (p == NULL || p->done)
			return breaks(s, e, SBX_EPROTOCOL, 0, "an answer on a stream not open%s",
			              "");
		if ((f->type == SBX_F_PONG) != (p->kind == SBX_STREAM_PING))
			return breaks(s, e, SBX_EPROTOCOL, 0, "the wrong kind of answer%s", "");
		if (p->kind == SBX_STREAM_DETACHED) {
			sbx_stream_free(s, p);
			return 0;
		}
		p->resp = malloc(f->len ? f->len : 1);
		if (p->resp == NULL)
			return breaks(s, e, SBX_EUNAVAILABLE, ENOMEM, "response%s", "");
		memcpy(p->resp, f->payload, f->len);
		p->resp_len = f->len;
		p->done = 1;
		p->done_ns = s->last_rx_ns;
		return 0;
	case SBX_F_DATA:
		return on_data(s, f, e);
	case SBX_F_CREDIT: {
		p = find(s, f->stream);
		if (f->len != 5 || f->payload[0] != SBX_CH_STDIN)
			return breaks(s, e, SBX_EPROTOCOL, 0, "malformed CREDIT%s", "");
		uint64_t n = (uint64_t)f->payload[1] << 24 | (uint64_t)f->payload[2] << 16 |
		             (uint64_t)f->payload[3] << 8 | f->payload[4];
		if (p != NULL && sbx_credit_tx_grant(&p->tx_in, n, (uint64_t)s->hello.window) != 0)
			return breaks(s, e, SBX_EPROTOCOL, 0, "credit past any window%s", "");
		return 0;
	}
	default:
		return breaks(s, e, SBX_EPROTOCOL, 0,
		              f->type == SBX_F_HELLO ? "the agent sent HELLO twice%s"
		                                     : "the agent sent a frame only hosts send%s",
		              "");
	}
}

static int read_channel(struct sbx_session *s, struct sbx_err *e)
{
	/* Room for several whole DATA frames per read: a frame that arrives whole is decoded
	 * in place (no copy). */
	uint8_t *buf = s->rbuf;
	ssize_t n = read(s->from_fd, buf, SBX_SESSION_RBUF);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return 0;
		return breaks(s, e, SBX_EUNAVAILABLE, errno, "cannot read the channel%s", "");
	}
	if (n == 0) {
		/* Collect the channel's last words before explaining. */
		sbx_session_drain_stderr(s);
		return breaks(s, e, SBX_EUNAVAILABLE, 0, "%s",
		              sbx_frame_dec_midframe(&s->dec)
		                      ? "the channel ended inside a frame (the agent was killed?)"
		              : s->have_hello ? "the agent closed the channel"
		                              : "the channel closed before the agent spoke");
	}
	if (s->seen < sizeof s->first) {
		size_t k = sizeof s->first - s->seen < (size_t)n ? sizeof s->first - s->seen
		                                                 : (size_t)n;
		memcpy(s->first + s->seen, buf, k);
		s->seen += k;
	}
	size_t pos = 0;
	while (pos < (size_t)n) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st =
		        sbx_frame_dec_feed(&s->dec, buf + pos, (size_t)n - pos, &used, &f);
		pos += used;
		if (st == SBX_DEC_ERROR) {
			char what[200];
			if (!s->have_hello) {
				/* Show what the channel printed instead of frames. */
				char shown[48];
				size_t k = 0;
				for (size_t i = 0; i < s->seen && k + 1 < sizeof shown; i++)
					shown[k++] = s->first[i] >= 32 && s->first[i] < 127
					                     ? (char)s->first[i]
					                     : '.';
				shown[k] = '\0';
				snprintf(what, sizeof what, "%s; the channel sent \"%s\"",
				         sbx_dec_error_text(s->dec.error), shown);
			} else {
				snprintf(what, sizeof what, "%s", sbx_dec_error_text(s->dec.error));
			}
			return breaks(s, e, SBX_EUNAVAILABLE, 0,
			              "corrupt stream from the agent: %s", what);
		}
		if (st == SBX_DEC_FRAME && on_frame(s, &f, e) != 0)
			return -1;
	}
	return 0;
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

/* Queues stdin DATA for every command that has bytes and credit. */
static void feed_stdin(struct sbx_session *s)
{
	for (struct sbx_stream *p = s->streams; p != NULL; p = p->next) {
		if (p->kind != SBX_STREAM_EXEC || p->stdin_done || p->opts->stdin_data == NULL)
			continue;
		while (!p->stdin_done && s->out.bulk_bytes < BULK_LIMIT) {
			size_t left = p->opts->stdin_len - p->stdin_off;
			uint64_t n = sbx_credit_tx_take(
			        &p->tx_in, left < SBX_DATA_CHUNK ? left : SBX_DATA_CHUNK);
			if (n == 0 && left > 0)
				break;
			uint8_t ch = SBX_CH_STDIN;
			int end = n == left;
			sbx_outq_push(&s->out, SBX_LANE_BULK, SBX_F_DATA, end ? SBX_FL_END : 0,
			              p->id, &ch, 1,
			              (const uint8_t *)p->opts->stdin_data + p->stdin_off, n);
			p->stdin_off += n;
			p->stdin_done = end;
		}
	}
}

static void read_stdin_fd(struct sbx_session *s, struct sbx_stream *p)
{
	uint64_t room = sbx_credit_tx_take(&p->tx_in, SBX_DATA_CHUNK);
	if (room == 0)
		return;
	/* Moved into the staging pipe when it has room (no copy: an upload's archive, a file
	 * given as stdin); else read below. */
	if (!s->splice_tried) {
		s->splice_tried = 1;
		sbx_splice_open(&s->splice, s->to_fd);
	}
	if (sbx_splice_full(&s->splice, &s->out)) {
		p->tx_in.avail += room; /* polled again once the splice pipe has moved on */
		return;
	}
	ssize_t staged = sbx_splice_in(&s->splice, &s->out, p->opts->stdin_fd, (size_t)room, p->id,
	                               SBX_CH_STDIN);
	if (staged > 0) {
		p->tx_in.avail += room - (uint64_t)staged;
		return;
	}
	if (staged == SBX_SPLICE_LOST) {
		p->tx_in.avail += room;
		breaks(s, NULL, SBX_EUNAVAILABLE, ENOMEM, "queueing stdin%s", "");
		return;
	}
	/* Nothing there yet, the end, or a source splice cannot take: read() says which. */
	/* Read straight into the frame that will carry the bytes. */
	uint8_t *buf = sbx_outq_reserve(&s->out, 1, (size_t)room);
	if (buf == NULL) {
		p->tx_in.avail += room;
		return;
	}
	ssize_t n = read(p->opts->stdin_fd, buf, room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
		sbx_outq_unreserve(&s->out);
		p->tx_in.avail += room;
		return;
	}
	if (n < 0)
		n = 0; /* an unreadable stdin ends like an empty one */
	p->tx_in.avail += room - (uint64_t)n;
	uint8_t ch = SBX_CH_STDIN;
	p->stdin_done = n == 0;
	sbx_outq_commit(&s->out, SBX_LANE_BULK, SBX_F_DATA, n == 0 ? SBX_FL_END : 0, p->id, &ch,
	                (size_t)n);
}

int sbx_pump(struct sbx_session *s, int64_t deadline_ns, struct sbx_err *e)
{
	if (check_broken(s, e) != 0)
		return -1;
	feed_stdin(s);
	if (flush(s, e) != 0)
		return -1;
	struct pollfd pfd[3 + 64];
	struct sbx_stream *owner[3 + 64];
	int n = 0;
	pfd[n] = (struct pollfd){.fd = s->from_fd, .events = POLLIN};
	owner[n++] = NULL;
	if (s->err_fd >= 0) {
		pfd[n] = (struct pollfd){.fd = s->err_fd, .events = POLLIN};
		owner[n++] = NULL;
	}
	if (!sbx_outq_empty(&s->out)) {
		pfd[n] = (struct pollfd){.fd = s->to_fd, .events = POLLOUT};
		owner[n++] = NULL;
	}
	for (struct sbx_stream *p = s->streams; p != NULL && n < 3 + 64; p = p->next)
		if (p->kind == SBX_STREAM_EXEC && !p->stdin_done && p->opts->stdin_data == NULL &&
		    p->opts->stdin_fd >= 0 && p->tx_in.avail > 0 &&
		    s->out.bulk_bytes < BULK_LIMIT &&
		    (!s->splice_tried || !sbx_splice_full(&s->splice, &s->out))) {
			pfd[n] = (struct pollfd){.fd = p->opts->stdin_fd, .events = POLLIN};
			owner[n++] = p;
		}
	int64_t now = sbx_now_ns();
	int64_t wait = deadline_ns - now;
	/* Keepalive: a silent agent gets a ping; no answer within the timeout breaks the session.
	 * Never before HELLO: the agent refuses any frame before WELCOME, and the HELLO has its
	 * own deadline (await_hello). */
	int64_t quiet = ns(s->timeout) / 2;
	if (s->have_hello && s->keepalive_sent_ns == 0 && now - s->last_rx_ns >= quiet) {
		sbx_send(s, SBX_LANE_CTRL, SBX_F_PING, 0, 0, NULL, 0, NULL, 0, NULL);
		s->keepalive_sent_ns = now;
		if (flush(s, e) != 0)
			return -1;
	}
	if (s->keepalive_sent_ns != 0 && now - s->keepalive_sent_ns > ns(s->timeout))
		return breaks(s, e, SBX_EUNAVAILABLE, 0,
		              "the agent stopped answering (no pong in %s)", "the session timeout");
	int64_t ka = s->keepalive_sent_ns != 0 ? s->keepalive_sent_ns + ns(s->timeout) - now
	                                       : s->last_rx_ns + quiet - now;
	if (s->have_hello && ka < wait)
		wait = ka;
	if (wait < 0)
		wait = 0;
	int ms = (int)((wait + 999999) / 1000000);
	int r = poll(pfd, (nfds_t)n, ms);
	if (r < 0) {
		if (errno == EINTR)
			return 0;
		return breaks(s, e, SBX_EUNAVAILABLE, errno, "poll%s", "");
	}
	for (int i = 0; i < n; i++) {
		if (pfd[i].revents == 0)
			continue;
		if (owner[i] != NULL) {
			read_stdin_fd(s, owner[i]);
		} else if (pfd[i].fd == s->from_fd) {
			if (read_channel(s, e) != 0)
				return -1;
		} else if (pfd[i].fd == s->err_fd) {
			sbx_session_drain_stderr(s);
		} else if (flush(s, e) != 0) {
			return -1;
		}
	}
	return flush(s, e);
}

int sbx_wait_stream(struct sbx_session *s, struct sbx_stream *p, int64_t deadline_ns,
                    struct sbx_err *e)
{
	while (!p->done) {
		if (sbx_now_ns() >= deadline_ns)
			return breaks(s, e, SBX_EUNAVAILABLE, ETIMEDOUT,
			              "no answer from the agent %s", "before the deadline");
		if (sbx_pump(s, deadline_ns, e) != 0)
			return -1;
	}
	return 0;
}

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
	s->next_id = 1;
	s->timeout = timeout_s > 0 ? timeout_s : 30;
	struct sigaction sa;
	s->sigpipe_ignored = sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
	sbx_outq_init(&s->out);
	s->decbuf = malloc(SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	s->rbuf = malloc(SBX_SESSION_RBUF);
	if (s->decbuf == NULL || s->rbuf == NULL) {
		sbx_session_close(s);
		return NULL;
	}
	sbx_frame_dec_init(&s->dec, s->decbuf, SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	return s;
}

/* The dialog (if any), then the agent's HELLO, within the session's timeout. */
static int await_hello(struct sbx_session *s, const struct sbx_boot *boot, struct sbx_err *e)
{
	s->last_rx_ns = sbx_now_ns();
	int64_t deadline = s->last_rx_ns + ns(s->timeout);
	if (boot != NULL && boot->run(boot->ctx, s->to_fd, s->from_fd, deadline, e) != 0) {
		sbx_session_drain_stderr(s);
		return -1;
	}
	while (!s->have_hello) {
		if (sbx_now_ns() >= deadline) {
			sbx_session_drain_stderr(s);
			return breaks(s, e, SBX_EUNAVAILABLE, ETIMEDOUT,
			              "no HELLO from the agent %s", "before the deadline");
		}
		if (sbx_pump(s, deadline, e) != 0)
			return -1;
	}
	return flush(s, e);
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
	while (s->streams != NULL)
		sbx_stream_free(s, s->streams);
	memset(s->secret, 0, sizeof s->secret);
	free(s->trust_identity);
	sbx_outq_free(&s->out);
	free(s->decbuf);
	free(s->rbuf);
	free(s);
}

const struct sbx_hello *sbx_session_hello(const struct sbx_session *s)
{
	return &s->hello;
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
	return s->broken;
}

void sbx_session_set_timeout(struct sbx_session *s, double seconds)
{
	if (seconds > 0)
		s->timeout = seconds;
}

double sbx_session_timeout(const struct sbx_session *s)
{
	return s->timeout;
}

const char *sbx_session_stderr(const struct sbx_session *s)
{
	return s->errtail;
}

int sbx_ping(struct sbx_session *s, double *rtt_s, struct sbx_err *e)
{
	if (check_broken(s, e) != 0)
		return -1;
	struct sbx_stream *p = sbx_stream_new(s, SBX_STREAM_PING);
	if (p == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "ping");
	int64_t t0 = sbx_now_ns();
	uint8_t payload[8];
	for (int i = 0; i < 8; i++)
		payload[i] = (uint8_t)(t0 >> (8 * i));
	int rc = sbx_send(s, SBX_LANE_CTRL, SBX_F_PING, 0, p->id, NULL, 0, payload, 8, e);
	if (rc == 0)
		rc = sbx_wait_stream(s, p, t0 + ns(s->timeout), e);
	if (rc == 0 && (p->resp_len != 8 || memcmp(p->resp, payload, 8) != 0))
		rc = breaks(s, e, SBX_EPROTOCOL, 0, "PONG does not echo the PING%s", "");
	if (rc == 0 && rtt_s != NULL)
		*rtt_s = (double)(p->done_ns - t0) / 1e9;
	sbx_stream_free(s, p);
	return rc;
}

/* The error a RESPONSE carries, if any: returns -1 with *e set when STATUS is not ok. */
int sbx_response_status(const uint8_t *p, size_t len, struct sbx_err *e)
{
	struct sbx_msgr r;
	struct sbx_field f;
	int64_t status = -1, err = 0;
	char msg[200] = "";
	sbx_msgr_init(&r, p, len);
	int rc;
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag == SBX_T_STATUS)
			sbx_field_i64(&f, &status);
		else if (f.tag == SBX_T_ERRNO)
			sbx_field_i64(&f, &err);
		else if (f.tag == SBX_T_MESSAGE && f.len < sizeof msg)
			sbx_field_str(&f, msg, sizeof msg);
	}
	if (rc < 0 || status < 0 || status > SBX_EUSAGE)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "malformed response from the agent");
	if (status == 0)
		return 0;
	sbx_err_set(e, (enum sbx_err_class)status, 0, "%s", msg);
	e->errnum = (int)err;
	return -1;
}

/* Sends a request and waits for its response; on success *out holds the stream (the caller
 * reads p->resp and frees it with sbx_stream_free). */
int sbx_call(struct sbx_session *s, const struct sbx_msgw *w, struct sbx_stream **out,
             struct sbx_err *e)
{
	*out = NULL;
	if (w->overflow)
		return sbx_err_set(e, SBX_EUSAGE, 0, "request too large for one frame");
	if (s->broken) {
		*e = s->broken_err;
		return -1;
	}
	struct sbx_stream *p = sbx_stream_new(s, SBX_STREAM_REQ);
	if (p == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "request");
	int64_t deadline = sbx_now_ns() + (int64_t)(sbx_session_timeout(s) * 1e9);
	if (sbx_send(s, SBX_LANE_CTRL, SBX_F_REQUEST, 0, p->id, NULL, 0, w->buf, w->len, e) != 0 ||
	    sbx_wait_stream(s, p, deadline, e) != 0 ||
	    sbx_response_status(p->resp, p->resp_len, e) != 0) {
		sbx_stream_free(s, p);
		return -1;
	}
	*out = p;
	return 0;
}

/* A request buffer big enough for the fields given. */
uint8_t *sbx_req_buf(size_t need, struct sbx_msgw *w, struct sbx_err *e)
{
	if (need > SBX_FRAME_MAX_PAYLOAD) {
		sbx_err_set(e, SBX_EUSAGE, 0, "request too large for one frame");
		return NULL;
	}
	uint8_t *b = malloc(need);
	if (b == NULL)
		sbx_err_set(e, SBX_EUSAGE, ENOMEM, "request");
	else
		sbx_msgw_init(w, b, need);
	return b;
}
