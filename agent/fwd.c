/* The agent's side of TCP forwarding (docs/forwarding.md, sections 2-6): listeners, accepted
 * and connecting sockets in one level-triggered epoll set; a socket is armed for reading only
 * while its connection has credit and the bulk lane has room, so poll never spins. The stream
 * rules are shared/fwdtab.c's; this file does the sockets. */
#include "fwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fwdmsg.h"
#include "fwdtab.h"
#include "job.h"
#include "proto.h"
#include "sys.h"

#define CHUNK (64u * 1024u)
#define EVENTS 64

enum kind { K_LISTEN, K_CONN };

struct sock {
	int fd;
	uint8_t kind;
	uint8_t connecting, shut, dead;
	uint32_t id;   /* the connection's stream, or the listener's id */
	uint16_t port; /* a listener's port */
	uint32_t armed;
	int registered;
	int64_t deadline; /* of a connect */
	uint8_t *buf;     /* what the socket did not take yet */
	size_t len, cap;
	struct sock *next, *prev;
};

struct lis {
	uint32_t id;
	int64_t max_conn;
	int warned;
};

struct sbx_fwd {
	int ep;
	struct sbx_outq *out;
	struct sbx_fwd_tab tab;
	struct lis lis[SBX_FWD_MAX_LISTENERS];
	size_t nlis;
	uint32_t next_id;
	int room_paused, lis_paused;
	struct sock *socks; /* every live socket */
	struct sock *dead;  /* closed during a step, freed at its end */
};

/* ---- sockets --------------------------------------------------------------------------- */

static int room(const struct sbx_fwd *f)
{
	return f->out->bulk_bytes < SBX_JOB_BULK_LIMIT;
}

static void set_events(struct sbx_fwd *f, struct sock *s, uint32_t ev)
{
	if (s->dead || (s->registered && ev == s->armed))
		return;
	struct epoll_event e = {.events = ev, .data.ptr = s};
	if (ev == 0) {
		/* off the set altogether: a paused socket's HUP would wake poll forever */
		if (s->registered)
			epoll_ctl(f->ep, EPOLL_CTL_DEL, s->fd, NULL);
		s->registered = 0;
	} else if (s->registered) {
		epoll_ctl(f->ep, EPOLL_CTL_MOD, s->fd, &e);
	} else if (epoll_ctl(f->ep, EPOLL_CTL_ADD, s->fd, &e) == 0) {
		s->registered = 1;
	}
	s->armed = ev;
}

static void arm(struct sbx_fwd *f, struct sock *s)
{
	if (s->kind == K_LISTEN) {
		set_events(f, s, f->lis_paused ? 0 : EPOLLIN);
		return;
	}
	struct sbx_fwd_conn *c = sbx_fwdtab_find(&f->tab, s->id);
	uint32_t ev = 0;
	if (s->connecting || s->len > 0)
		ev |= EPOLLOUT;
	if (!s->connecting && c != NULL && c->state == SBX_FWD_OPEN && !c->sent_end &&
	    c->tx.avail > 0) {
		if (room(f))
			ev |= EPOLLIN;
		else
			f->room_paused = 1;
	}
	set_events(f, s, ev);
}

static void unlink_sock(struct sbx_fwd *f, struct sock *s)
{
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		f->socks = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
}

/* Closes s (with a reset when hard) and frees it at once, or at the end of a step (stepping). */
static void close_sock(struct sbx_fwd *f, struct sock *s, int hard, int stepping)
{
	if (s->dead)
		return;
	if (s->registered)
		epoll_ctl(f->ep, EPOLL_CTL_DEL, s->fd, NULL);
	if (hard) {
		struct linger l = {1, 0};
		setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	}
	close(s->fd);
	s->dead = 1;
	unlink_sock(f, s);
	free(s->buf);
	s->buf = NULL;
	if (s->kind == K_CONN && f->lis_paused) {
		f->lis_paused = 0; /* a descriptor is free again: accept once more */
		for (struct sock *o = f->socks; o != NULL; o = o->next)
			if (o->kind == K_LISTEN)
				arm(f, o);
	}
	if (stepping) {
		s->next = f->dead;
		f->dead = s;
	} else {
		free(s);
	}
}

static struct sock *new_sock(struct sbx_fwd *f, int fd, enum kind k, uint32_t id)
{
	struct sock *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->fd = fd;
	s->kind = (uint8_t)k;
	s->id = id;
	s->next = f->socks;
	if (f->socks != NULL)
		f->socks->prev = s;
	f->socks = s;
	return s;
}

/* ---- frames out ------------------------------------------------------------------------ */

static int push(struct sbx_fwd *f, enum sbx_lane lane, uint8_t type, uint8_t flags, uint32_t id,
                const void *pre, size_t prelen, const void *p, size_t len, struct sbx_err *e)
{
	if (sbx_outq_push(f->out, lane, type, flags, id, pre, prelen, p, len) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory queueing a frame");
	return 0;
}

static int send_reset(struct sbx_fwd *f, uint32_t id, int errnum, const char *msg,
                      struct sbx_err *e)
{
	uint8_t buf[SBX_FWD_RESET_MSG_MAX + 64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	if (errnum != 0 || msg[0] != '\0')
		sbx_fwdmsg_reset_write(&w, errnum, msg);
	return push(f, SBX_LANE_CTRL, SBX_FRAME_TYPE_RESET, 0, id, NULL, 0, buf, w.len, e);
}

static int send_credit(struct sbx_fwd *f, uint32_t id, uint8_t ch, uint64_t g, struct sbx_err *e)
{
	if (g == 0)
		return 0;
	uint8_t c[5] = {ch, (uint8_t)(g >> 24), (uint8_t)(g >> 16), (uint8_t)(g >> 8), (uint8_t)g};
	return push(f, SBX_LANE_CTRL, SBX_F_CREDIT, 0, id, NULL, 0, c, 5, e);
}

/* Our side failed: RESET to the host, the socket reset, the slot held for the answer. */
static int reset_conn(struct sbx_fwd *f, struct sbx_fwd_conn *c, int errnum, const char *msg,
                      int stepping, struct sbx_err *e)
{
	struct sock *s = c->user;
	c->user = NULL;
	sbx_fwdtab_reset(c);
	if (s != NULL)
		close_sock(f, s, 1, stepping);
	return send_reset(f, c->id, errnum, msg, e);
}

/* Both ENDs passed and everything is written: the connection is done. */
static void maybe_finish(struct sbx_fwd *f, struct sbx_fwd_conn *c, int stepping)
{
	struct sock *s = c->user;
	if (!sbx_fwdtab_finished(c) || (s != NULL && (s->len > 0 || !s->shut)))
		return;
	if (s != NULL)
		close_sock(f, s, 0, stepping);
	sbx_fwdtab_drop(&f->tab, c);
}

/* ---- the table's slots ----------------------------------------------------------------- */

static int grow(struct sbx_fwd *f)
{
	if (f->tab.n < f->tab.cap || f->tab.cap >= SBX_FWD_MAX_CONN_LIMIT)
		return 0;
	size_t cap = f->tab.cap == 0 ? 16 : f->tab.cap * 2;
	struct sbx_fwd_conn *c = realloc(f->tab.c, cap * sizeof *c);
	if (c == NULL)
		return -1;
	f->tab.c = c;
	f->tab.cap = cap;
	return 0;
}

static struct sbx_fwd *make(struct sbx_fwd **fp, struct sbx_outq *out)
{
	if (*fp != NULL)
		return *fp;
	struct sbx_fwd *f = calloc(1, sizeof *f);
	if (f == NULL)
		return NULL;
	f->ep = epoll_create1(EPOLL_CLOEXEC);
	if (f->ep < 0) {
		free(f);
		return NULL;
	}
	f->out = out;
	f->next_id = SBX_FWD_AGENT_ID_BIT | 1;
	sbx_fwdtab_init(&f->tab, NULL, 0, SBX_FWD_FROM_AGENT);
	return *fp = f;
}

/* ---- FWD_LISTEN, FWD_UNLISTEN ---------------------------------------------------------- */

static struct lis *find_lis(struct sbx_fwd *f, uint32_t id)
{
	for (size_t i = 0; i < f->nlis; i++)
		if (f->lis[i].id == id)
			return &f->lis[i];
	return NULL;
}

static int bind_port(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static int make_ready(const char *path)
{
	if (unlink(path) != 0 && errno != ENOENT)
		return -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	fchmod(fd, 0644); /* past the umask */
	close(fd);
	return 0;
}

int sbx_fwd_listen(struct sbx_fwd **fp, struct sbx_outq *out, uint32_t stream, const uint8_t *p,
                   size_t len, struct sbx_msgw *w, struct sbx_err *e)
{
	struct sbx_fwd_listen *l = malloc(sizeof *l);
	if (l == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
	struct sbx_err pe;
	char msg[300];
	int fds[SBX_FWD_MAX_PORTS];
	size_t nfd = 0;
	struct sbx_fwd *f = NULL;
	if (sbx_fwdmsg_listen_parse(p, len, l, &pe) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, pe.msg);
		goto out;
	}
	if ((f = make(fp, out)) == NULL) {
		free(l);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
	}
	if (find_lis(f, stream) != NULL) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "FWD_LISTEN on a stream that is a listener");
		goto out;
	}
	if (f->nlis == SBX_FWD_MAX_LISTENERS) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "16 listeners open in this session");
		goto out;
	}
	for (; nfd < l->nports; nfd++) {
		fds[nfd] = bind_port(l->ports[nfd]);
		if (fds[nfd] < 0) {
			int err = errno;
			snprintf(msg, sizeof msg, "listen 127.0.0.1:%u: %s", l->ports[nfd],
			         strerror(err));
			sbx_msgw_error(w, SBX_ETRANSFER, err, msg);
			goto undo;
		}
	}
	if (l->ready[0] != '\0' && make_ready(l->ready) != 0) {
		int err = errno;
		snprintf(msg, sizeof msg, "ready file %.200s: %s", l->ready, strerror(err));
		sbx_msgw_error(w, SBX_ETRANSFER, err, msg);
		goto undo;
	}
	for (size_t i = 0; i < nfd; i++) {
		struct sock *s = new_sock(f, fds[i], K_LISTEN, stream);
		if (s == NULL) {
			for (size_t k = i; k < nfd; k++)
				close(fds[k]);
			free(l);
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
		}
		s->port = l->ports[i];
		arm(f, s);
	}
	f->lis[f->nlis++] = (struct lis){.id = stream, .max_conn = l->max_conn};
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	goto out;
undo:
	for (size_t i = 0; i < nfd; i++)
		close(fds[i]);
out:
	free(l);
	return 0;
}

void sbx_fwd_unlisten(struct sbx_fwd *f, const uint8_t *p, size_t len, struct sbx_msgw *w)
{
	struct sbx_field fl;
	int64_t id = 0;
	struct lis *l = NULL;
	if (sbx_msg_find(p, len, SBX_T_LISTENER, &fl) != 1 || sbx_field_i64(&fl, &id) != 0 ||
	    id <= 0 || id > 0x7fffffff || f == NULL || (l = find_lis(f, (uint32_t)id)) == NULL) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "FWD_UNLISTEN: no such listener");
		return;
	}
	struct sock *n;
	for (struct sock *s = f->socks; s != NULL; s = n) {
		n = s->next;
		if (s->kind == K_LISTEN && s->id == (uint32_t)id)
			close_sock(f, s, 0, 0);
	}
	struct sbx_err e;
	for (size_t i = 0; i < f->tab.n; i++) {
		struct sbx_fwd_conn *c = &f->tab.c[i];
		if (c->listener == (uint32_t)id && c->state == SBX_FWD_OPEN)
			reset_conn(f, c, ECANCELED, "forward cancelled", 0, &e);
	}
	*l = f->lis[--f->nlis];
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

/* ---- frames in ------------------------------------------------------------------------- */

int sbx_fwd_owns(const struct sbx_fwd *f, uint32_t stream)
{
	if (stream & SBX_FWD_AGENT_ID_BIT)
		return 1;
	return f != NULL && sbx_fwdtab_find((struct sbx_fwd_tab *)&f->tab, stream) != NULL;
}

static int parse_addr(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof *ss);
	if (strcmp(addr, "localhost") == 0)
		addr = "127.0.0.1";
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*sl = sizeof *a4;
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*sl = sizeof *a6;
		return 0;
	}
	return -1;
}

static int on_open(struct sbx_fwd *f, const struct sbx_frame *fr, struct sbx_err *e)
{
	struct sbx_fwd_open o;
	struct sbx_fwd_conn *c;
	char msg[SBX_FWD_ADDR_MAX + 128]; /* cut to SBX_FWD_RESET_MSG_MAX when sent */
	if (sbx_fwdmsg_open_parse(fr->payload, fr->len, SBX_FWD_FROM_HOST, &o, e) != 0)
		return -1;
	if (grow(f) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
	int rc = sbx_fwdtab_open(&f->tab, SBX_FWD_FROM_HOST, fr->stream, 0, SBX_FWD_MAX_CONN_LIMIT,
	                         &c, e);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return send_reset(f, fr->stream, EMFILE, "too many connections", e);
	struct sockaddr_storage ss;
	socklen_t sl;
	int err = 0;
	int fd = -1;
	if (parse_addr(o.addr, o.port, &ss, &sl) != 0)
		err = EINVAL;
	else if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		err = errno;
	else if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS)
		err = errno;
	if (err != 0) {
		if (fd >= 0)
			close(fd);
		snprintf(msg, sizeof msg, "connect %s:%u: %s", o.addr, o.port, strerror(err));
		return reset_conn(f, c, err, msg, 0, e);
	}
	struct sock *s = new_sock(f, fd, K_CONN, fr->stream);
	if (s == NULL) {
		close(fd);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
	}
	s->connecting = 1;
	s->deadline = sbx_now_ns() + (int64_t)SBX_FWD_CONNECT_MS * 1000000;
	c->user = s;
	arm(f, s);
	return 0;
}

/* Writes what s holds (and then, after the host's END, shuts the write side). */
static int flush_sock(struct sbx_fwd *f, struct sbx_fwd_conn *c, struct sock *s, int stepping,
                      struct sbx_err *e)
{
	size_t off = 0;
	while (!s->connecting && off < s->len) {
		ssize_t n = send(s->fd, s->buf + off, s->len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			int err = errno;
			char msg[80];
			snprintf(msg, sizeof msg, "write: %s", strerror(err));
			return reset_conn(f, c, err, msg, stepping, e);
		}
		off += (size_t)n;
		if (send_credit(f, c->id, SBX_CH_STDIN, sbx_fwdtab_consumed(c, (uint64_t)n), e) !=
		    0)
			return -1;
	}
	if (off > 0) {
		memmove(s->buf, s->buf + off, s->len - off);
		s->len -= off;
	}
	if (s->len == 0) {
		free(s->buf);
		s->buf = NULL;
		s->cap = 0;
		if (c->got_end && !s->shut && !s->connecting) {
			shutdown(s->fd, SHUT_WR);
			s->shut = 1;
		}
	}
	arm(f, s);
	maybe_finish(f, c, stepping);
	return 0;
}

static int on_data(struct sbx_fwd *f, const struct sbx_frame *fr, struct sbx_err *e)
{
	if (fr->len < 1 || fr->payload[0] != SBX_CH_STDIN)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "DATA on connection %#x, not channel 0",
		                   fr->stream);
	struct sbx_fwd_conn *c;
	size_t n = fr->len - 1;
	int rc = sbx_fwdtab_on_data(&f->tab, fr->stream, n, (fr->flags & SBX_FL_END) != 0, &c, e);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	struct sock *s = c->user;
	if (s == NULL)
		return 0;
	if (s->len + n > s->cap) {
		size_t cap = s->len + n;
		uint8_t *b = realloc(s->buf, cap);
		if (b == NULL)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
		s->buf = b;
		s->cap = cap;
	}
	if (n > 0)
		memcpy(s->buf + s->len, fr->payload + 1, n);
	s->len += n;
	return flush_sock(f, c, s, 0, e);
}

static int on_credit(struct sbx_fwd *f, const struct sbx_frame *fr, struct sbx_err *e)
{
	if (fr->len != 5 || fr->payload[0] != SBX_CH_STDOUT)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "malformed CREDIT on connection %#x",
		                   fr->stream);
	uint32_t n = (uint32_t)fr->payload[1] << 24 | (uint32_t)fr->payload[2] << 16 |
	             (uint32_t)fr->payload[3] << 8 | fr->payload[4];
	if (sbx_fwdtab_on_credit(&f->tab, fr->stream, n, e) != 0)
		return -1;
	struct sbx_fwd_conn *c = sbx_fwdtab_find(&f->tab, fr->stream);
	if (c != NULL && c->user != NULL)
		arm(f, c->user);
	return 0;
}

int sbx_fwd_frame(struct sbx_fwd **fp, struct sbx_outq *out, const struct sbx_frame *fr,
                  struct sbx_err *e)
{
	struct sbx_fwd *f = *fp;
	if (fr->type == SBX_FRAME_TYPE_OPEN && (f = make(fp, out)) == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
	if (f == NULL) {
		if (fr->type == SBX_F_CREDIT || fr->type == SBX_FRAME_TYPE_RESET)
			return 0; /* may trail a connection: none here */
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "frame %#x on stream %#x: no connection",
		                   fr->type, fr->stream);
	}
	switch (fr->type) {
	case SBX_FRAME_TYPE_OPEN:
		return on_open(f, fr, e);
	case SBX_FRAME_TYPE_RESET: {
		void *user;
		if (sbx_fwdtab_on_reset(&f->tab, fr->stream, &user) == 1) {
			if (user != NULL)
				close_sock(f, user, 1, 0);
			return send_reset(f, fr->stream, 0, "", e);
		}
		if (user != NULL)
			close_sock(f, user, 1, 0);
		return 0;
	}
	case SBX_F_DATA:
		return on_data(f, fr, e);
	case SBX_F_CREDIT:
		return on_credit(f, fr, e);
	default:
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "frame %#x on a connection", fr->type);
	}
}

/* ---- the sockets' events --------------------------------------------------------------- */

static uint32_t new_id(struct sbx_fwd *f)
{
	for (;;) {
		uint32_t id = f->next_id;
		f->next_id = id == 0xffffffffu ? (SBX_FWD_AGENT_ID_BIT | 1) : id + 1;
		if (sbx_fwdtab_find(&f->tab, id) == NULL)
			return id;
	}
}

static int on_accept(struct sbx_fwd *f, struct sock *ls, struct sbx_err *e)
{
	struct lis *l = find_lis(f, ls->id);
	for (int k = 0; k < 16 && l != NULL; k++) {
		int fd = accept4(ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				f->lis_paused = 1; /* until a connection closes */
				for (struct sock *o = f->socks; o != NULL; o = o->next)
					if (o->kind == K_LISTEN)
						arm(f, o);
			}
			return 0;
		}
		struct sbx_fwd_conn *c;
		if (grow(f) != 0) {
			close(fd);
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
		}
		uint32_t id = new_id(f);
		int rc = sbx_fwdtab_open(&f->tab, SBX_FWD_FROM_AGENT, id, l->id,
		                         (size_t)l->max_conn, &c, e);
		struct sock *s = rc == 0 ? new_sock(f, fd, K_CONN, id) : NULL;
		if (s == NULL) {
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			close(fd);
			if (rc == 0) {
				sbx_fwdtab_drop(&f->tab, c);
				return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
			}
			if (!l->warned)
				fprintf(stderr,
				        "sbx-agent: forward %u: %lld connections open, refusing\n",
				        ls->port, (long long)l->max_conn);
			l->warned = 1;
			continue;
		}
		c->user = s;
		uint8_t buf[64];
		struct sbx_msgw w;
		sbx_msgw_init(&w, buf, sizeof buf);
		struct sbx_fwd_open o = {.listener = l->id, .port = ls->port};
		sbx_fwdmsg_open_write(&w, SBX_FWD_FROM_AGENT, &o);
		if (push(f, SBX_LANE_CTRL, SBX_FRAME_TYPE_OPEN, 0, id, NULL, 0, buf, w.len, e) != 0)
			return -1;
		arm(f, s);
	}
	return 0;
}

static int on_read(struct sbx_fwd *f, struct sbx_fwd_conn *c, struct sock *s, struct sbx_err *e)
{
	if (c->state != SBX_FWD_OPEN || c->sent_end || c->tx.avail == 0 || !room(f)) {
		arm(f, s);
		return 0;
	}
	size_t want = c->tx.avail < CHUNK ? (size_t)c->tx.avail : CHUNK;
	uint8_t *p = sbx_outq_reserve(f->out, 1, want);
	if (p == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory reading a socket");
	ssize_t n = recv(s->fd, p, want, 0);
	uint8_t ch = SBX_CH_STDOUT;
	if (n > 0) {
		sbx_fwdtab_take(c, (size_t)n);
		if (sbx_outq_commit(f->out, SBX_LANE_BULK, SBX_F_DATA, 0, c->id, &ch, (size_t)n) !=
		    0)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "out of memory");
		arm(f, s);
		return 0;
	}
	sbx_outq_unreserve(f->out);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0) {
		int err = errno;
		char msg[80];
		snprintf(msg, sizeof msg, "read: %s", strerror(err));
		return reset_conn(f, c, err, msg, 1, e);
	}
	if (push(f, SBX_LANE_BULK, SBX_F_DATA, SBX_FL_END, c->id, &ch, 1, NULL, 0, e) != 0)
		return -1;
	sbx_fwdtab_sent_end(c);
	arm(f, s);
	maybe_finish(f, c, 1);
	return 0;
}

static int on_event(struct sbx_fwd *f, struct sock *s, uint32_t ev, struct sbx_err *e)
{
	if (s->kind == K_LISTEN)
		return on_accept(f, s, e);
	struct sbx_fwd_conn *c = sbx_fwdtab_find(&f->tab, s->id);
	if (c == NULL) {
		close_sock(f, s, 1, 1);
		return 0;
	}
	if (s->connecting && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t el = sizeof err;
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err != 0) {
			char msg[80];
			snprintf(msg, sizeof msg, "connect: %s", strerror(err));
			return reset_conn(f, c, err, msg, 1, e);
		}
		s->connecting = 0;
	}
	if (ev & (EPOLLERR)) {
		int err = 0;
		socklen_t el = sizeof err;
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err == 0)
			err = ECONNRESET;
		char msg[80];
		snprintf(msg, sizeof msg, "socket: %s", strerror(err));
		return reset_conn(f, c, err, msg, 1, e);
	}
	if ((ev & EPOLLOUT) || (s->len == 0 && c->got_end && !s->shut)) {
		if (flush_sock(f, c, s, 1, e) != 0)
			return -1;
		if (s->dead || (c = sbx_fwdtab_find(&f->tab, s->id)) == NULL)
			return 0;
	}
	if (ev & (EPOLLIN | EPOLLHUP))
		return on_read(f, c, s, e);
	return 0;
}

int sbx_fwd_step(struct sbx_fwd *f, struct sbx_err *e)
{
	struct epoll_event ev[EVENTS];
	int n = epoll_wait(f->ep, ev, EVENTS, 0);
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		struct sock *s = ev[i].data.ptr;
		if (!s->dead)
			rc = on_event(f, s, ev[i].events, e);
	}
	while (f->dead != NULL) {
		struct sock *s = f->dead;
		f->dead = s->next;
		free(s);
	}
	return rc;
}

int sbx_fwd_prepare(struct sbx_fwd *f, int *timeout)
{
	if (f == NULL)
		return -1;
	int64_t now = sbx_now_ns();
	struct sbx_err e;
	if (f->room_paused && room(f)) {
		f->room_paused = 0;
		for (struct sock *s = f->socks; s != NULL; s = s->next)
			if (s->kind == K_CONN)
				arm(f, s);
	}
	struct sock *n;
	for (struct sock *s = f->socks; s != NULL; s = n) {
		n = s->next;
		if (!s->connecting)
			continue;
		if (now >= s->deadline) {
			struct sbx_fwd_conn *c = sbx_fwdtab_find(&f->tab, s->id);
			if (c != NULL)
				reset_conn(f, c, ETIMEDOUT, "connect: timed out after 10 s", 0, &e);
			else
				close_sock(f, s, 1, 0);
			continue;
		}
		int64_t ms = (s->deadline - now) / 1000000 + 1;
		if (*timeout < 0 || ms < *timeout)
			*timeout = (int)ms;
	}
	return f->ep;
}

void sbx_fwd_free(struct sbx_fwd **fp)
{
	struct sbx_fwd *f = *fp;
	if (f == NULL)
		return;
	while (f->socks != NULL)
		close_sock(f, f->socks, f->socks->kind == K_CONN, 0);
	close(f->ep);
	free(f->tab.c);
	free(f);
	*fp = NULL;
}
