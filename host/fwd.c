/* TCP forwarding on the core (sbx.h "TCP forwarding over the session", docs/forwarding.md):
 * one operation holds the forwards of one call, its sockets (inward listeners, both kinds of
 * connection) in an epoll set of its own that the session polls as one fd, and its
 * connections in a table (shared/fwdtab.c) that checks every rule the agent could break
 * before a byte reaches a socket. The engine hands this file OPEN, RESET, and DATA or CREDIT on
 * a connection stream (sbx_fwd_frame). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fwdmsg.h"
#include "fwdspec.h"
#include "fwdtab.h"
#include "session.h"

#define EVENTS 64

enum sock_kind { K_LISTEN, K_CONN };

/* A socket in the epoll set (its data.ptr). */
struct fsock {
	int kind;
	int fd;
	size_t spec;
	uint32_t id;        /* K_CONN: its stream */
	uint32_t events;    /* what it is registered for */
	int connecting;     /* K_CONN: connect not yet complete */
	int64_t connect_dl; /* then by when */
	int shut_done;      /* our shutdown(SHUT_WR) went, after the peer's END */
	uint8_t *buf;       /* the agent's bytes the socket did not take yet */
	size_t len, cap;
	uint64_t up, down;    /* bytes to the agent, from it */
	struct sbx_stream *p; /* inward connections: the engine's record of the id */
};

struct fwd {
	struct sbx_fwd_spec *spec;
	size_t nspec;
	struct sockaddr_storage *to; /* out specs: where the host connects */
	socklen_t *tolen;
	struct fsock **lis; /* in specs: their listener (NULL for out) */
	int *port;          /* in specs: the bound port */
	char ready_file[SBX_FWD_READY_MAX + 1];
	size_t max_conn;
	int ep;
	int nout;
	uint32_t listen_id; /* the FWD_LISTEN's stream id once answered */
	int listening;      /* FWD_LISTEN in flight */
	int unlistening;    /* FWD_UNLISTEN in flight */
	int ready;
	int bulk_wait; /* some socket waits for room in the bulk lane */
	struct sbx_fwd_tab tab;
	uint64_t total;
	int64_t stop_by; /* stopping: finish by then even if the agent never answers */
	void (*on_event)(void *, const char *);
	void *ctx;
};

static const struct sbx_op_class fwd_class;

static void say(struct fwd *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct fwd *f, const char *fmt, ...)
{
	if (f->on_event == NULL)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	f->on_event(f->ctx, line);
}

static const char *spec_name(const struct fwd *f, size_t i, char *buf, size_t cap)
{
	const struct sbx_fwd_spec *sp = &f->spec[i];
	if (sp->dir == SBX_FWD_OUT)
		snprintf(buf, cap, "out %u -> %s:%u", sp->inside, sp->host, sp->outside);
	else
		snprintf(buf, cap, "in 127.0.0.1:%d -> %s:%u", f->port[i], sp->host, sp->inside);
	return buf;
}

/* ---- sockets ---- */

/* A socket is in the epoll set only while it wants something: one held back (no credit)
 * is taken out, so an error or hang-up on it cannot wake the set over and over. */
static int ep_set(struct fwd *f, struct fsock *k, uint32_t events)
{
	if (k->fd < 0 || k->events == events)
		return 0;
	struct epoll_event ev = {.events = events, .data.ptr = k};
	int rc = events == 0      ? epoll_ctl(f->ep, EPOLL_CTL_DEL, k->fd, NULL)
	         : k->events == 0 ? epoll_ctl(f->ep, EPOLL_CTL_ADD, k->fd, &ev)
	                          : epoll_ctl(f->ep, EPOLL_CTL_MOD, k->fd, &ev);
	if (rc == 0)
		k->events = events;
	return rc;
}

/* Closes a socket; hard: with a reset (SO_LINGER 0), so its peer never takes the end for a
 * clean one. */
static void sock_close(struct fwd *f, struct fsock *k, int hard)
{
	if (k->fd < 0)
		return;
	if (hard) {
		struct linger l = {1, 0};
		setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	}
	if (k->events != 0)
		epoll_ctl(f->ep, EPOLL_CTL_DEL, k->fd, NULL);
	close(k->fd);
	k->fd = -1;
	k->events = 0;
}

static void conn_free(struct sbx_session *s, struct fwd *f, struct fsock *k, int hard)
{
	sock_close(f, k, hard);
	if (k->p != NULL) {
		k->p->done = 1;
		sbx_engine_release(&s->eng, k->p);
	}
	free(k->buf);
	free(k);
}

static void drop(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c, int hard)
{
	struct fsock *k = c->user;
	sbx_fwdtab_drop(&f->tab, c);
	if (k != NULL)
		conn_free(s, f, k, hard);
}

/* A RESET for id (bulk lane: behind the connection's DATA, so the peer never sees DATA for an
 * id it has already forgotten). */
static void send_reset(struct sbx_session *s, uint32_t id, int err, const char *why)
{
	uint8_t buf[SBX_FWD_RESET_MSG_MAX + 32];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_reset_write(&w, err, why);
	sbx_engine_send(&s->eng, SBX_LANE_BULK, SBX_FRAME_TYPE_RESET, 0, id, NULL, 0, buf, w.len,
	                NULL);
}

/* Our side of c failed (a socket error, a refused connect): the peer gets a RESET with why. */
static void reset_ours(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c, int err,
                       const char *what)
{
	struct fsock *k = c->user;
	char why[SBX_FWD_RESET_MSG_MAX + 1];
	snprintf(why, sizeof why, "%s: %s", what, strerror(err));
	char name[300];
	say(f, "%s #%08x reset on the host: %s", spec_name(f, k->spec, name, sizeof name), c->id,
	    why);
	sbx_fwdtab_reset(c);
	send_reset(s, c->id, err, why);
	sock_close(f, k, 1);
	free(k->buf);
	k->buf = NULL;
	k->len = k->cap = 0;
}

static struct sbx_fwd_conn *conn_of(struct fwd *f, struct fsock *k)
{
	return sbx_fwdtab_find(&f->tab, k->id);
}

/* Room for one more connection in the table (it grows by doubling; no pointer into it is
 * held across this). */
static int tab_room(struct fwd *f)
{
	if (f->tab.n < f->tab.cap)
		return 0;
	size_t cap = f->tab.cap ? f->tab.cap * 2 : 16;
	size_t most = f->max_conn * (f->nspec ? f->nspec : 1) + 16;
	if (cap > most)
		cap = most;
	if (cap <= f->tab.cap)
		return -1;
	struct sbx_fwd_conn *c = realloc(f->tab.c, cap * sizeof *c);
	if (c == NULL)
		return -1;
	f->tab.c = c;
	f->tab.cap = cap;
	return 0;
}

static struct fsock *fsock_new(int kind, int fd, size_t spec)
{
	struct fsock *k = calloc(1, sizeof *k);
	if (k != NULL) {
		k->kind = kind;
		k->fd = fd;
		k->spec = spec;
	}
	return k;
}

/* The events a connection wants now: its reads while it has credit and the bulk lane room,
 * writes while it holds bytes or connects. */
static void rearm(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c)
{
	struct fsock *k = c->user;
	if (k == NULL || k->fd < 0)
		return;
	uint32_t ev = 0;
	if (k->connecting || k->len > 0)
		ev |= EPOLLOUT;
	if (!k->connecting && c->state == SBX_FWD_OPEN && !c->sent_end && c->tx.avail > 0) {
		if (s->eng.out.bulk_bytes < SBX_SESSION_BULK_LIMIT)
			ev |= EPOLLIN;
		else
			f->bulk_wait = 1;
	}
	ep_set(f, k, ev);
}

/* Both ENDs passed and everything written: the connection is over. */
static void maybe_finished(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c)
{
	struct fsock *k = c->user;
	if (!sbx_fwdtab_finished(c) || k->len > 0 || !k->shut_done)
		return;
	char name[300];
	say(f, "%s #%08x closed: %llu bytes to the sandbox, %llu from it",
	    spec_name(f, k->spec, name, sizeof name), c->id, (unsigned long long)k->up,
	    (unsigned long long)k->down);
	drop(s, f, c, 0);
}

/* Writes what c holds to its socket; credit goes back for what went. */
static void conn_write(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c)
{
	struct fsock *k = c->user;
	if (k->connecting || k->fd < 0)
		return;
	if (k->len > 0) {
		ssize_t n = send(k->fd, k->buf, k->len, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			reset_ours(s, f, c, errno, "write");
			return;
		}
		if (n > 0) {
			memmove(k->buf, k->buf + n, k->len - (size_t)n);
			k->len -= (size_t)n;
			k->down += (uint64_t)n;
			uint64_t g = sbx_fwdtab_consumed(c, (uint64_t)n);
			if (g > 0) {
				uint8_t cr[5] = {SBX_CH_STDOUT, (uint8_t)(g >> 24),
				                 (uint8_t)(g >> 16), (uint8_t)(g >> 8), (uint8_t)g};
				sbx_engine_send(&s->eng, SBX_LANE_CTRL, SBX_F_CREDIT, 0, c->id,
				                NULL, 0, cr, 5, NULL);
			}
		}
		if (k->len == 0) {
			free(k->buf);
			k->buf = NULL;
			k->cap = 0;
		}
	}
	if (k->len == 0 && c->got_end && !k->shut_done) {
		shutdown(k->fd, SHUT_WR);
		k->shut_done = 1;
	}
	rearm(s, f, c);
	maybe_finished(s, f, c);
}

/* Reads c's socket into DATA frames within its credit and the bulk lane's room. */
static void conn_read(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c)
{
	struct fsock *k = c->user;
	for (int round = 0; round < 4 && k->fd >= 0; round++) {
		if (s->eng.out.bulk_bytes >= SBX_SESSION_BULK_LIMIT)
			break;
		size_t room = sbx_fwdtab_take(c, SBX_DATA_CHUNK);
		if (room == 0)
			break;
		uint8_t *b = sbx_outq_reserve(&s->eng.out, 1, room);
		if (b == NULL) {
			c->tx.avail += room;
			break;
		}
		ssize_t n = recv(k->fd, b, room, 0);
		if (n < 0) {
			int err = errno;
			sbx_outq_unreserve(&s->eng.out);
			c->tx.avail += room;
			if (err == EAGAIN || err == EINTR)
				break;
			reset_ours(s, f, c, err, "read");
			return;
		}
		c->tx.avail += room - (size_t)n;
		uint8_t ch = SBX_CH_STDIN;
		sbx_outq_commit(&s->eng.out, SBX_LANE_BULK, SBX_F_DATA, n == 0 ? SBX_FL_END : 0,
		                c->id, &ch, (size_t)n);
		k->up += (uint64_t)n;
		if (n == 0) {
			sbx_fwdtab_sent_end(c);
			break;
		}
		if ((size_t)n < room)
			break;
	}
	rearm(s, f, c);
	maybe_finished(s, f, c);
}

/* ---- the connections the host accepts (in) and the agent opens (out) ---- */

static void accept_in(struct sbx_session *s, struct fwd *f, struct fsock *l)
{
	for (int round = 0; round < 64; round++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		char name[300];
		spec_name(f, l->spec, name, sizeof name);
		struct fsock *k = NULL;
		struct sbx_fwd_conn *c = NULL;
		struct sbx_err e;
		int rc = -1;
		if (sbx_fwdtab_count(&f->tab, (uint32_t)l->spec) >= f->max_conn ||
		    tab_room(f) != 0 || (k = fsock_new(K_CONN, fd, l->spec)) == NULL ||
		    (k->p = sbx_engine_stream(&s->eng, SBX_STREAM_CONN)) == NULL ||
		    (rc = sbx_fwdtab_open(&f->tab, SBX_FWD_FROM_HOST, k->p->id, (uint32_t)l->spec,
		                          f->max_conn, &c, &e)) != 0) {
			say(f, "%s: %zu connections open, refusing", name,
			    sbx_fwdtab_count(&f->tab, (uint32_t)l->spec));
			if (k != NULL) {
				conn_free(s, f, k, 1);
				continue;
			}
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			close(fd);
			continue;
		}
		k->id = c->id;
		c->user = k;
		struct sbx_fwd_open o = {.port = f->spec[l->spec].inside};
		snprintf(o.addr, sizeof o.addr, "%s", f->spec[l->spec].host);
		uint8_t buf[SBX_FWD_ADDR_MAX + 64];
		struct sbx_msgw w;
		sbx_msgw_init(&w, buf, sizeof buf);
		sbx_fwdmsg_open_write(&w, SBX_FWD_FROM_HOST, &o);
		sbx_engine_send(&s->eng, SBX_LANE_CTRL, SBX_FRAME_TYPE_OPEN, 0, c->id, NULL, 0, buf,
		                w.len, NULL);
		f->total++;
		say(f, "%s #%08x opened", name, c->id);
		rearm(s, f, c);
	}
}

/* An OPEN from the agent: a connection accepted inside on one of our listener's ports, to be
 * connected here to where that port's spec says (and nowhere else). */
static int open_out(struct sbx_session *s, struct fwd *f, uint32_t id, const struct sbx_fwd_open *o)
{
	size_t i;
	for (i = 0; i < f->nspec; i++)
		if (f->spec[i].dir == SBX_FWD_OUT && f->spec[i].inside == o->port)
			break;
	if (i == f->nspec)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0,
		                        "OPEN on port %u, which this forward did not ask for",
		                        o->port);
	struct sbx_fwd_conn *c;
	struct sbx_err e;
	if (tab_room(f) != 0) {
		/* Past every limit the table allows: refused; DATA on it then breaks the session
		 * (an agent that fills the table ignores resets). */
		send_reset(s, id, EMFILE, "too many connections");
		return 0;
	}
	int rc = sbx_fwdtab_open(&f->tab, SBX_FWD_FROM_AGENT, id, (uint32_t)i, f->max_conn, &c, &e);
	if (rc < 0)
		return sbx_engine_break(&s->eng, e.cls, 0, "%s", e.msg);
	char name[300];
	spec_name(f, i, name, sizeof name);
	if (rc == 1) {
		say(f, "%s: %zu connections open, refusing", name,
		    sbx_fwdtab_count(&f->tab, (uint32_t)i));
		send_reset(s, id, EMFILE, "too many connections");
		return 0;
	}
	struct fsock *k = fsock_new(K_CONN, -1, i);
	if (k == NULL) {
		sbx_fwdtab_reset(c);
		send_reset(s, id, ENOMEM, "out of memory");
		return 0;
	}
	k->id = id;
	c->user = k;
	f->total++;
	k->fd = socket(f->to[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->fd < 0) {
		reset_ours(s, f, c, errno, "socket");
		return 0;
	}
	say(f, "%s #%08x opened", name, id);
	char what[300];
	snprintf(what, sizeof what, "connect %s:%u", f->spec[i].host, f->spec[i].outside);
	if (connect(k->fd, (struct sockaddr *)&f->to[i], f->tolen[i]) != 0 &&
	    errno != EINPROGRESS) {
		reset_ours(s, f, c, errno, what);
		return 0;
	}
	k->connecting = 1;
	k->connect_dl = sbx_now_ns() + (int64_t)SBX_FWD_CONNECT_MS * 1000000;
	if (ep_set(f, k, EPOLLOUT) != 0) {
		reset_ours(s, f, c, errno, "epoll");
		return 0;
	}
	return 0;
}

static void connected(struct sbx_session *s, struct fwd *f, struct sbx_fwd_conn *c)
{
	struct fsock *k = c->user;
	int err = 0;
	socklen_t l = sizeof err;
	getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &l);
	if (err != 0) {
		char what[300];
		snprintf(what, sizeof what, "connect %s:%u", f->spec[k->spec].host,
		         f->spec[k->spec].outside);
		reset_ours(s, f, c, err, what);
		return;
	}
	k->connecting = 0;
	conn_write(s, f, c);
}

/* ---- frames from the agent (through the engine) ---- */

static struct sbx_op *owner(struct sbx_session *s, uint32_t id, struct sbx_fwd_conn **c)
{
	for (struct sbx_op *op = s->ops; op != NULL; op = op->next)
		if (op->cls == &fwd_class && !op->done &&
		    (*c = sbx_fwdtab_find(&((struct fwd *)op->st)->tab, id)) != NULL)
			return op;
	*c = NULL;
	return NULL;
}

static void set_ready(struct fwd *f)
{
	f->ready = 1;
	say(f, "ready");
}

static int on_open(struct sbx_session *s, const struct sbx_frame *fr)
{
	struct sbx_fwd_open o;
	struct sbx_err e;
	if (sbx_fwdmsg_open_parse(fr->payload, fr->len, SBX_FWD_FROM_AGENT, &o, &e) != 0)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0, "%s", e.msg);
	for (struct sbx_op *op = s->ops; op != NULL; op = op->next) {
		if (op->cls != &fwd_class || op->done)
			continue;
		struct fwd *f = op->st;
		/* The answer to FWD_LISTEN and the first OPEN may come in one read: the answer is
		 * in (and ok) though the op has not stepped on it yet. */
		if (f->listen_id == 0 && f->listening && op->p != NULL && op->p->done &&
		    op->p->id == o.listener &&
		    sbx_response_status(op->p->resp, op->p->resp_len, &e) == 0) {
			f->listen_id = o.listener;
			set_ready(f);
		}
		if (f->listen_id == o.listener && f->listen_id != 0) {
			struct sbx_fwd_conn *c;
			if (owner(s, fr->stream, &c) != NULL)
				return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0,
				                        "OPEN on stream %#x, already open",
				                        fr->stream);
			if (op->stopping) {
				/* accepted before our FWD_UNLISTEN reached the agent */
				send_reset(s, fr->stream, ECANCELED, "cancelled");
				return 0;
			}
			int rc = open_out(s, f, fr->stream, &o);
			sbx_loop_note_dirty(s);
			return rc;
		}
	}
	return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0,
	                        "OPEN for listener %u, which this host never asked for",
	                        o.listener);
}

static int on_data(struct sbx_session *s, const struct sbx_frame *fr)
{
	if (fr->len < 1 || fr->payload[0] != SBX_CH_STDOUT)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0,
		                        "DATA on connection %#x on a channel other than 1",
		                        fr->stream);
	struct sbx_fwd_conn *c;
	struct sbx_op *op = owner(s, fr->stream, &c);
	if (op == NULL)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0,
		                        "DATA on stream %#x, no connection", fr->stream);
	struct fwd *f = op->st;
	struct sbx_err e;
	size_t n = fr->len - 1;
	int rc = sbx_fwdtab_on_data(&f->tab, fr->stream, n, (fr->flags & SBX_FL_END) != 0, &c, &e);
	if (rc < 0)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0, "%s", e.msg);
	if (rc == 1)
		return 0; /* we reset it; the agent has not seen that yet */
	struct fsock *k = c->user;
	if (k->len + n > k->cap) {
		size_t cap = k->len + n < 16384 ? 16384 : k->len + n;
		uint8_t *b = realloc(k->buf, cap);
		if (b == NULL) {
			reset_ours(s, f, c, ENOMEM, "buffer");
			return 0;
		}
		k->buf = b;
		k->cap = cap;
	}
	if (n > 0) /* an END alone, after everything was written: buf is NULL */
		memcpy(k->buf + k->len, fr->payload + 1, n);
	k->len += n;
	conn_write(s, f, c);
	sbx_loop_note_dirty(s);
	return 0;
}

static int on_credit(struct sbx_session *s, const struct sbx_frame *fr)
{
	if (fr->len != 5 || fr->payload[0] != SBX_CH_STDIN)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0, "malformed CREDIT on %#x",
		                        fr->stream);
	struct sbx_fwd_conn *c;
	struct sbx_op *op = owner(s, fr->stream, &c);
	if (op == NULL)
		return 0; /* credit may trail a closed connection */
	uint64_t n = (uint64_t)fr->payload[1] << 24 | (uint64_t)fr->payload[2] << 16 |
	             (uint64_t)fr->payload[3] << 8 | fr->payload[4];
	struct fwd *f = op->st;
	struct sbx_err e;
	if (sbx_fwdtab_on_credit(&f->tab, fr->stream, n, &e) != 0)
		return sbx_engine_break(&s->eng, SBX_EPROTOCOL, 0, "%s", e.msg);
	rearm(s, f, c);
	sbx_loop_note_dirty(s);
	return 0;
}

static int on_reset(struct sbx_session *s, const struct sbx_frame *fr)
{
	struct sbx_fwd_conn *c;
	struct sbx_op *op = owner(s, fr->stream, &c);
	if (op == NULL)
		return 0; /* it answered ours after all, or never was */
	struct fwd *f = op->st;
	struct sbx_fwd_reset r;
	sbx_fwdmsg_reset_parse(fr->payload, fr->len, &r);
	void *user;
	int answer = sbx_fwdtab_on_reset(&f->tab, fr->stream, &user);
	struct fsock *k = user;
	if (answer) {
		char name[300];
		say(f, "%s #%08x reset in the sandbox: %s",
		    k != NULL ? spec_name(f, k->spec, name, sizeof name) : "forward", fr->stream,
		    r.msg[0] ? r.msg : "(no reason)");
		send_reset(s, fr->stream, 0, "");
	}
	if (k != NULL)
		conn_free(s, f, k, 1);
	sbx_loop_note_dirty(s);
	if (op->stopping)
		op->stream_ready = 1; /* it may be the last one it waits for */
	return 0;
}

static int fwd_frame(void *ctx, const struct sbx_frame *fr)
{
	struct sbx_session *s = ctx;
	switch (fr->type) {
	case SBX_FRAME_TYPE_OPEN:
		return on_open(s, fr);
	case SBX_FRAME_TYPE_RESET:
		return on_reset(s, fr);
	case SBX_F_DATA:
		return on_data(s, fr);
	default:
		return on_credit(s, fr);
	}
}

/* ---- the operation ---- */

/* The sockets that are ready, a bounded number of rounds. */
static void step_sockets(struct sbx_session *s, struct fwd *f)
{
	struct epoll_event ev[EVENTS];
	for (int round = 0; round < 4; round++) {
		int n = epoll_wait(f->ep, ev, EVENTS, 0);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct fsock *k = ev[i].data.ptr;
			if (k->kind == K_LISTEN) {
				accept_in(s, f, k);
				continue;
			}
			struct sbx_fwd_conn *c = conn_of(f, k);
			if (c == NULL || c->user != k || k->fd < 0)
				continue; /* reset earlier in this round */
			if (k->connecting) {
				if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
					connected(s, f, c);
				continue;
			}
			if (ev[i].events & EPOLLOUT)
				conn_write(s, f, c);
			if ((c = conn_of(f, k)) != NULL && c->user == k && k->fd >= 0 &&
			    (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				conn_read(s, f, c);
		}
		if (n < EVENTS)
			return;
	}
}

/* Connects past their time fail; the timer is set to the next one. */
static void connect_timeouts(struct sbx_session *s, struct sbx_op *op, struct fwd *f)
{
	int64_t now = sbx_now_ns(), next = f->stop_by;
	for (size_t i = 0; i < f->tab.n;) {
		struct sbx_fwd_conn *c = &f->tab.c[i];
		struct fsock *k = c->user;
		if (k != NULL && k->connecting && k->fd >= 0) {
			if (k->connect_dl <= now) {
				char what[300];
				snprintf(what, sizeof what, "connect %s:%u", f->spec[k->spec].host,
				         f->spec[k->spec].outside);
				reset_ours(s, f, c, ETIMEDOUT, what);
			} else if (k->connect_dl < next)
				next = k->connect_dl;
		}
		i++;
	}
	op->timer_ns = next;
}

static void listen_request(struct sbx_op *op, struct fwd *f)
{
	uint8_t buf[SBX_FWD_READY_MAX + 1024];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_FWD_LISTEN);
	struct sbx_fwd_listen l = {.nports = 0, .max_conn = (int64_t)f->max_conn};
	for (size_t i = 0; i < f->nspec; i++)
		if (f->spec[i].dir == SBX_FWD_OUT)
			l.ports[l.nports++] = f->spec[i].inside;
	snprintf(l.ready, sizeof l.ready, "%s", f->ready_file);
	sbx_fwdmsg_listen_write(&w, &l);
	f->listening = 1;
	sbx_op_request(op, &w);
}

static void unlisten_request(struct sbx_op *op, struct fwd *f)
{
	uint8_t buf[64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_FWD_UNLISTEN);
	sbx_msgw_i64(&w, SBX_T_LISTENER, f->listen_id);
	f->unlistening = 1;
	sbx_op_request(op, &w);
}

/* Stopping: every connection reset, the inward listeners closed, the inside ones asked to
 * close; done once the agent answered all of it (or the session broke). */
static void stop(struct sbx_op *op, struct fwd *f)
{
	struct sbx_session *s = op->s;
	for (size_t i = 0; i < f->nspec; i++)
		if (f->lis[i] != NULL) {
			sock_close(f, f->lis[i], 0);
			free(f->lis[i]);
			f->lis[i] = NULL;
		}
	int gone = sbx_session_broken(s) || s->eng.state == SBX_ENGINE_BROKEN;
	for (size_t i = f->tab.n; i > 0; i--) {
		struct sbx_fwd_conn *c = &f->tab.c[i - 1];
		if (gone) {
			drop(s, f, c, 1);
			continue;
		}
		if (c->state == SBX_FWD_OPEN) {
			sbx_fwdtab_reset(c);
			send_reset(s, c->id, ECANCELED, "cancelled");
		}
		struct fsock *k = c->user;
		if (k != NULL) {
			sock_close(f, k, 1);
			free(k->buf);
			k->buf = NULL;
			k->len = k->cap = 0;
		}
	}
	if (!gone && f->listen_id != 0 && !f->unlistening && !f->listening)
		unlisten_request(op, f);
	f->stop_by = sbx_now_ns() + (int64_t)(s->timeout * 1e9);
	op->timer_ns = f->stop_by;
}

static void maybe_stopped(struct sbx_op *op, struct fwd *f)
{
	struct sbx_session *s = op->s;
	int gone = sbx_session_broken(s) || s->eng.state == SBX_ENGINE_BROKEN;
	if (!gone && sbx_now_ns() < f->stop_by && (f->tab.n > 0 || f->listening || f->unlistening))
		return;
	while (f->tab.n > 0)
		drop(s, f, &f->tab.c[f->tab.n - 1], 1);
	sbx_op_finish(op, -1, &op->stop_err);
}

static void fwd_step(struct sbx_op *op, int ev)
{
	struct sbx_session *s = op->s;
	struct fwd *f = op->st;
	struct sbx_err e;
	switch (ev) {
	case SBX_EV_START:
		if (f->nout > 0)
			listen_request(op, f);
		else
			set_ready(f);
		return;
	case SBX_EV_STOP:
		stop(op, f);
		maybe_stopped(op, f);
		return;
	case SBX_EV_STREAM:
		if (op->p != NULL && op->p->done && (f->listening || f->unlistening)) {
			int was_listen = f->listening;
			f->listening = f->unlistening = 0;
			int rc = sbx_op_response(op, &e);
			if (was_listen && rc != 0) {
				if (op->stopping)
					maybe_stopped(op, f);
				else
					sbx_op_finish(op, -1, &e);
				return;
			}
			if (was_listen) {
				f->listen_id = op->p->id;
				if (!f->ready)
					set_ready(f);
				if (op->stopping)
					unlisten_request(op, f);
			}
		}
		if (op->stopping)
			maybe_stopped(op, f);
		return;
	case SBX_EV_TIMER:
		if (op->stopping) {
			maybe_stopped(op, f);
			return;
		}
		connect_timeouts(s, op, f);
		return;
	case SBX_EV_CREDIT:
		break;
	case SBX_EV_FD:
		break;
	}
	if (op->stopping)
		return;
	if (f->bulk_wait && s->eng.out.bulk_bytes < SBX_SESSION_BULK_LIMIT) {
		f->bulk_wait = 0;
		for (size_t i = 0; i < f->tab.n; i++)
			rearm(s, f, &f->tab.c[i]);
	}
	step_sockets(s, f);
	/* A socket held back for the bulk lane is woken as the lane drains (EV_CREDIT comes
	 * when there is room). */
	op->credit_ready = f->bulk_wait;
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < f->tab.n; i++) {
		struct fsock *k = f->tab.c[i].user;
		if (k != NULL && k->connecting && k->connect_dl < next)
			next = k->connect_dl;
	}
	op->timer_ns = next;
}

static void fwd_release(struct sbx_op *op)
{
	struct fwd *f = op->st;
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->tab.n; i++) {
		struct fsock *k = f->tab.c[i].user;
		if (k != NULL) {
			if (k->fd >= 0) {
				struct linger l = {1, 0};
				setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
				close(k->fd);
			}
			/* the engine's record (k->p) goes with the session or was released */
			if (k->p != NULL && op->s != NULL) {
				k->p->done = 1;
				sbx_engine_release(&op->s->eng, k->p);
			}
			free(k->buf);
			free(k);
		}
	}
	for (size_t i = 0; i < f->nspec; i++)
		if (f->lis != NULL && f->lis[i] != NULL) {
			if (f->lis[i]->fd >= 0)
				close(f->lis[i]->fd);
			free(f->lis[i]);
		}
	if (f->ep >= 0)
		close(f->ep);
	free(f->tab.c);
	free(f->spec);
	free(f->to);
	free(f->tolen);
	free(f->lis);
	free(f->port);
}

static const struct sbx_op_class fwd_class = {"forward", fwd_step, fwd_release, NULL};

/* Where the host connects for an out spec: a literal, or a name resolved now (once). */
static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len,
                   struct sbx_err *e)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	char ps[8];
	snprintf(ps, sizeof ps, "%u", port);
	int rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc != 0 || ai == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward to %s:%u: %s", host, port,
		                   rc != 0 ? gai_strerror(rc) : "no address");
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int listen_in(struct fwd *f, size_t i, struct sbx_err *e)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons(f->spec[i].outside),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "listen 127.0.0.1:%u: %s",
		                   f->spec[i].outside, strerror(err));
	}
	f->port[i] = ntohs(a.sin_port);
	f->lis[i] = fsock_new(K_LISTEN, fd, i);
	if (f->lis[i] == NULL || ep_set(f, f->lis[i], EPOLLIN) != 0) {
		close(fd);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "listen 127.0.0.1:%u",
		                   f->spec[i].outside);
	}
	return 0;
}

struct sbx_op *sbx_forward_async(struct sbx_session *s, const struct sbx_forward_opts *o,
                                 struct sbx_err *e)
{
	size_t n = o->n_out + o->n_in;
	if (n == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: no --out or --in"), NULL;
	if (o->n_out > SBX_FWD_MAX_PORTS)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: at most %d out ports",
		                   SBX_FWD_MAX_PORTS),
		       NULL;
	if (o->max_conn < 0 || o->max_conn > SBX_FWD_MAX_CONN_LIMIT)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: max_conn outside 1..%d",
		                   SBX_FWD_MAX_CONN_LIMIT),
		       NULL;
	if (o->ready_file != NULL &&
	    (o->ready_file[0] == '\0' || strlen(o->ready_file) > SBX_FWD_READY_MAX))
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: a ready file of 1..%d bytes",
		                   SBX_FWD_READY_MAX),
		       NULL;
	if (o->ready_file != NULL && o->n_out == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "forward: a ready file is made by out forwards; none given"),
		       NULL;
	if (sbx_session_error(s, e) != 0)
		return NULL;
	if (!sbx_session_hello(s)->fwd)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this agent cannot forward; update it"), NULL;
	struct sbx_op *op = sbx_op_new(s, &fwd_class, sizeof(struct fwd), e);
	if (op == NULL)
		return NULL;
	struct fwd *f = op->st;
	f->ep = -1;
	f->spec = calloc(n, sizeof *f->spec);
	f->to = calloc(n, sizeof *f->to);
	f->tolen = calloc(n, sizeof *f->tolen);
	f->lis = calloc(n, sizeof *f->lis);
	f->port = calloc(n, sizeof *f->port);
	f->ep = epoll_create1(EPOLL_CLOEXEC);
	int rc = 0;
	if (f->spec == NULL || f->to == NULL || f->tolen == NULL || f->lis == NULL ||
	    f->port == NULL || f->ep < 0)
		rc = sbx_err_set(e, SBX_EUNAVAILABLE, errno ? errno : ENOMEM, "forward");
	f->nspec = n;
	f->max_conn = o->max_conn > 0 ? (size_t)o->max_conn : SBX_FWD_MAX_CONN;
	f->on_event = o->on_event;
	f->ctx = o->ctx;
	f->stop_by = INT64_MAX;
	if (o->ready_file != NULL)
		snprintf(f->ready_file, sizeof f->ready_file, "%s", o->ready_file);
	const char *target = o->target != NULL ? o->target : "127.0.0.1";
	for (size_t i = 0; rc == 0 && i < n; i++) {
		int out = i < o->n_out;
		const char *arg = out ? o->out[i] : o->in[i - o->n_out];
		rc = sbx_fwdspec_parse(arg, out ? SBX_FWD_OUT : SBX_FWD_IN, target, &f->spec[i], e);
		if (rc == 0 && out)
			for (size_t j = 0; j < i; j++)
				if (f->spec[j].inside == f->spec[i].inside)
					rc = sbx_err_set(e, SBX_EUSAGE, 0,
					                 "forward: inside port %u given twice",
					                 f->spec[i].inside);
		if (rc == 0 && out) {
			f->nout++;
			rc = resolve(f->spec[i].host, f->spec[i].outside, &f->to[i], &f->tolen[i],
			             e);
		}
		if (rc == 0 && !out)
			rc = listen_in(f, i, e);
	}
	if (rc != 0) {
		sbx_op_finish(op, -1, e);
		sbx_op_free(op);
		return NULL;
	}
	op->fds[0] = (struct pollfd){.fd = f->ep, .events = POLLIN};
	s->eng.fwd_frame = fwd_frame;
	s->eng.fwd_ctx = s;
	return sbx_op_go(op, e);
}

static const struct fwd *fwd_of(const struct sbx_op *op)
{
	return op != NULL && op->cls == &fwd_class ? op->st : NULL;
}

int sbx_forward_ready(const struct sbx_op *op)
{
	const struct fwd *f = fwd_of(op);
	return f != NULL && f->ready && !op->done;
}

int sbx_forward_describe(const struct sbx_op *op, size_t i, char *buf, size_t cap)
{
	const struct fwd *f = fwd_of(op);
	if (f == NULL || i >= f->nspec)
		return -1;
	spec_name(f, i, buf, cap);
	return 0;
}

int sbx_forward_port(const struct sbx_op *op, size_t i)
{
	const struct fwd *f = fwd_of(op);
	size_t k = 0;
	if (f == NULL)
		return -1;
	for (size_t j = 0; j < f->nspec; j++)
		if (f->spec[j].dir == SBX_FWD_IN && k++ == i)
			return f->port[j];
	return -1;
}

void sbx_forward_counts(const struct sbx_op *op, size_t *open, uint64_t *total)
{
	const struct fwd *f = fwd_of(op);
	size_t k = 0;
	if (f != NULL)
		for (size_t i = 0; i < f->tab.n; i++)
			k += f->tab.c[i].state == SBX_FWD_OPEN;
	if (open != NULL)
		*open = k;
	if (total != NULL)
		*total = f != NULL ? f->total : 0;
}
