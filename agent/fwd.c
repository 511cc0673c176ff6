/* The agent's side of TCP forwarding (fwd.h, docs/forwarding.md). */
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
#include "job.h"
#include "sys.h"

#define EVENTS 64

enum { K_LISTEN, K_CONN };

struct sbx_fwda_sock {
	int kind;
	int fd;
	uint32_t id;     /* K_CONN: its stream; K_LISTEN: its listener */
	uint16_t port;   /* K_LISTEN: the inside port */
	uint32_t events; /* what it is in the epoll set for (0: not in it) */
	int connecting;
	int64_t connect_dl;
	int shut_done;
	uint8_t *buf; /* the host's bytes the socket did not take yet */
	size_t len, cap;
};

void sbx_fwda_init(struct sbx_fwda *a, struct sbx_outq *out)
{
	memset(a, 0, sizeof *a);
	a->ep = -1;
	a->out = out;
	a->next_id = SBX_FWD_AGENT_ID_BIT | 1;
	sbx_fwdtab_init(&a->tab, NULL, 0, SBX_FWD_FROM_AGENT);
}

static int started(struct sbx_fwda *a)
{
	if (a->ep < 0)
		a->ep = epoll_create1(EPOLL_CLOEXEC);
	return a->ep >= 0 ? 0 : -1;
}

/* In the epoll set only while it wants something (a socket held back is out of it, so an
 * error on it cannot wake the set over and over). */
static void ep_set(struct sbx_fwda *a, struct sbx_fwda_sock *k, uint32_t events)
{
	if (k->fd < 0 || k->events == events)
		return;
	struct epoll_event ev = {.events = events, .data.ptr = k};
	int rc = events == 0      ? epoll_ctl(a->ep, EPOLL_CTL_DEL, k->fd, NULL)
	         : k->events == 0 ? epoll_ctl(a->ep, EPOLL_CTL_ADD, k->fd, &ev)
	                          : epoll_ctl(a->ep, EPOLL_CTL_MOD, k->fd, &ev);
	if (rc == 0)
		k->events = events;
}

static void sock_close(struct sbx_fwda *a, struct sbx_fwda_sock *k, int hard)
{
	if (k->fd < 0)
		return;
	if (hard) {
		struct linger l = {1, 0};
		setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	}
	if (k->events != 0)
		epoll_ctl(a->ep, EPOLL_CTL_DEL, k->fd, NULL);
	close(k->fd);
	k->fd = -1;
	k->events = 0;
}

static void sock_free(struct sbx_fwda *a, struct sbx_fwda_sock *k, int hard)
{
	sock_close(a, k, hard);
	free(k->buf);
	free(k);
}

static void drop(struct sbx_fwda *a, struct sbx_fwd_conn *c, int hard)
{
	struct sbx_fwda_sock *k = c->user;
	sbx_fwdtab_drop(&a->tab, c);
	if (k != NULL)
		sock_free(a, k, hard);
}

/* RESET in the bulk lane: behind the connection's DATA (docs/forwarding.md section 3). */
static void send_reset(struct sbx_fwda *a, uint32_t id, int err, const char *why)
{
	uint8_t buf[SBX_FWD_RESET_MSG_MAX + 32];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_reset_write(&w, err, why);
	sbx_outq_push(a->out, SBX_LANE_BULK, SBX_FRAME_TYPE_RESET, 0, id, NULL, 0, buf, w.len);
}

static void reset_ours(struct sbx_fwda *a, struct sbx_fwd_conn *c, int err, const char *what)
{
	struct sbx_fwda_sock *k = c->user;
	char why[SBX_FWD_RESET_MSG_MAX + 1];
	snprintf(why, sizeof why, "%s: %s", what, strerror(err));
	sbx_fwdtab_reset(c);
	send_reset(a, c->id, err, why);
	if (k != NULL) {
		sock_close(a, k, 1);
		free(k->buf);
		k->buf = NULL;
		k->len = k->cap = 0;
	}
}

static int tab_room(struct sbx_fwda *a)
{
	if (a->tab.n < a->tab.cap)
		return 0;
	size_t most = 0;
	for (size_t i = 0; i < SBX_FWD_MAX_LISTENERS; i++)
		most += a->lis[i].id != 0 ? a->lis[i].max_conn : 0;
	most += SBX_FWD_MAX_CONN; /* the host's OPENs */
	size_t cap = a->tab.cap ? a->tab.cap * 2 : 16;
	if (cap > most)
		cap = most;
	if (cap <= a->tab.cap)
		return -1;
	struct sbx_fwd_conn *c = realloc(a->tab.c, cap * sizeof *c);
	if (c == NULL)
		return -1;
	a->tab.c = c;
	a->tab.cap = cap;
	return 0;
}

static void rearm(struct sbx_fwda *a, struct sbx_fwd_conn *c)
{
	struct sbx_fwda_sock *k = c->user;
	if (k == NULL || k->fd < 0)
		return;
	uint32_t ev = 0;
	if (k->connecting || k->len > 0)
		ev |= EPOLLOUT;
	if (!k->connecting && c->state == SBX_FWD_OPEN && !c->sent_end && c->tx.avail > 0) {
		if (a->out->bulk_bytes < SBX_JOB_BULK_LIMIT)
			ev |= EPOLLIN;
		else
			a->bulk_wait = 1;
	}
	ep_set(a, k, ev);
}

static void maybe_finished(struct sbx_fwda *a, struct sbx_fwd_conn *c)
{
	struct sbx_fwda_sock *k = c->user;
	if (sbx_fwdtab_finished(c) && k->len == 0 && k->shut_done)
		drop(a, c, 0);
}

static void conn_write(struct sbx_fwda *a, struct sbx_fwd_conn *c)
{
	struct sbx_fwda_sock *k = c->user;
	if (k->connecting || k->fd < 0)
		return;
	if (k->len > 0) {
		ssize_t n = send(k->fd, k->buf, k->len, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			reset_ours(a, c, errno, "write");
			return;
		}
		if (n > 0) {
			memmove(k->buf, k->buf + n, k->len - (size_t)n);
			k->len -= (size_t)n;
			uint64_t g = sbx_fwdtab_consumed(c, (uint64_t)n);
			if (g > 0) {
				uint8_t cr[5] = {SBX_CH_STDIN, (uint8_t)(g >> 24),
				                 (uint8_t)(g >> 16), (uint8_t)(g >> 8), (uint8_t)g};
				sbx_outq_push(a->out, SBX_LANE_CTRL, SBX_F_CREDIT, 0, c->id, NULL,
				              0, cr, 5);
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
	rearm(a, c);
	maybe_finished(a, c);
}

static void conn_read(struct sbx_fwda *a, struct sbx_fwd_conn *c)
{
	struct sbx_fwda_sock *k = c->user;
	for (int round = 0; round < 4 && k->fd >= 0; round++) {
		if (a->out->bulk_bytes >= SBX_JOB_BULK_LIMIT)
			break;
		size_t room = sbx_fwdtab_take(c, SBX_DATA_CHUNK);
		if (room == 0)
			break;
		uint8_t *b = sbx_outq_reserve(a->out, 1, room);
		if (b == NULL) {
			c->tx.avail += room;
			break;
		}
		ssize_t n = recv(k->fd, b, room, 0);
		if (n < 0) {
			int err = errno;
			sbx_outq_unreserve(a->out);
			c->tx.avail += room;
			if (err == EAGAIN || err == EINTR)
				break;
			reset_ours(a, c, err, "read");
			return;
		}
		c->tx.avail += room - (size_t)n;
		uint8_t ch = SBX_CH_STDOUT;
		sbx_outq_commit(a->out, SBX_LANE_BULK, SBX_F_DATA, n == 0 ? SBX_FL_END : 0, c->id,
		                &ch, (size_t)n);
		if (n == 0) {
			sbx_fwdtab_sent_end(c);
			break;
		}
		if ((size_t)n < room)
			break;
	}
	rearm(a, c);
	maybe_finished(a, c);
}

/* ---- listeners ---- */

static struct sbx_fwda_lis *lis_of(struct sbx_fwda *a, uint32_t id)
{
	for (size_t i = 0; i < SBX_FWD_MAX_LISTENERS; i++)
		if (a->lis[i].id == id && id != 0)
			return &a->lis[i];
	return NULL;
}

static void lis_close(struct sbx_fwda *a, struct sbx_fwda_lis *l)
{
	for (size_t i = 0; i < l->n; i++)
		sock_free(a, l->sock[i], 0);
	l->n = 0;
	l->id = 0;
}

/* Makes the ready file: an old one (not a folder) removed first, a new empty one made. */
static int make_ready(const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(path) != 0)
		return -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

void sbx_fwda_listen(struct sbx_fwda *a, uint32_t id, const uint8_t *req, size_t len,
                     struct sbx_msgw *w)
{
	struct sbx_fwd_listen fl;
	struct sbx_err e;
	if (sbx_fwdmsg_listen_parse(req, len, &fl, &e) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, e.msg);
		return;
	}
	struct sbx_fwda_lis *l = lis_of(a, 0);
	for (size_t i = 0; l == NULL && i < SBX_FWD_MAX_LISTENERS; i++)
		if (a->lis[i].id == 0)
			l = &a->lis[i];
	if (l == NULL) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "forward: 16 listeners already");
		return;
	}
	if (started(a) != 0) {
		sbx_msgw_error(w, SBX_EUNAVAILABLE, errno, "forward: epoll");
		return;
	}
	l->id = id;
	l->max_conn = (size_t)fl.max_conn;
	for (size_t i = 0; i < fl.nports; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int one = 1;
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons(fl.ports[i]),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct sbx_fwda_sock *k = NULL;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
		    bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 ||
		    (k = calloc(1, sizeof *k)) == NULL) {
			int err = errno ? errno : ENOMEM;
			if (fd >= 0)
				close(fd);
			lis_close(a, l);
			char msg[96];
			snprintf(msg, sizeof msg, "listen 127.0.0.1:%u: %s", fl.ports[i],
			         strerror(err));
			sbx_msgw_error(w, SBX_EUNAVAILABLE, err, msg);
			return;
		}
		k->kind = K_LISTEN;
		k->fd = fd;
		k->id = id;
		k->port = fl.ports[i];
		l->sock[l->n++] = k;
		ep_set(a, k, EPOLLIN);
	}
	if (fl.ready[0] != '\0' && make_ready(fl.ready) != 0) {
		int err = errno;
		lis_close(a, l);
		char msg[160];
		snprintf(msg, sizeof msg, "ready file: %s", strerror(err));
		sbx_msgw_error(w, SBX_EUNAVAILABLE, err, msg);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

void sbx_fwda_unlisten(struct sbx_fwda *a, const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	struct sbx_field f;
	int64_t id = 0;
	struct sbx_fwda_lis *l = NULL;
	if (sbx_msg_find(req, len, SBX_T_LISTENER, &f) == 1 && sbx_field_i64(&f, &id) == 0 &&
	    id > 0 && id < (int64_t)SBX_FWD_AGENT_ID_BIT)
		l = lis_of(a, (uint32_t)id);
	if (l == NULL) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "forward: no such listener");
		return;
	}
	lis_close(a, l);
	for (size_t i = a->tab.n; i > 0; i--) {
		struct sbx_fwd_conn *c = &a->tab.c[i - 1];
		if (c->listener == (uint32_t)id && c->state == SBX_FWD_OPEN)
			reset_ours(a, c, ECANCELED, "forward");
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

static uint32_t new_id(struct sbx_fwda *a)
{
	for (;;) {
		uint32_t id = a->next_id++;
		if (a->next_id == 0)
			a->next_id = SBX_FWD_AGENT_ID_BIT | 1;
		if (sbx_fwdtab_find(&a->tab, id) == NULL)
			return id;
	}
}

static void accept_on(struct sbx_fwda *a, struct sbx_fwda_sock *l)
{
	struct sbx_fwda_lis *li = lis_of(a, l->id);
	for (int round = 0; li != NULL && round < 64; round++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct sbx_fwda_sock *k = NULL;
		struct sbx_fwd_conn *c = NULL;
		struct sbx_err e;
		if (tab_room(a) != 0 || (k = calloc(1, sizeof *k)) == NULL ||
		    sbx_fwdtab_open(&a->tab, SBX_FWD_FROM_AGENT, new_id(a), l->id, li->max_conn, &c,
		                    &e) != 0) {
			/* past MAX_CONN: refused with a reset, the host is not told */
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			close(fd);
			free(k);
			continue;
		}
		k->kind = K_CONN;
		k->fd = fd;
		k->id = c->id;
		c->user = k;
		uint8_t buf[64];
		struct sbx_msgw w;
		sbx_msgw_init(&w, buf, sizeof buf);
		struct sbx_fwd_open o = {.listener = l->id, .port = l->port};
		sbx_fwdmsg_open_write(&w, SBX_FWD_FROM_AGENT, &o);
		sbx_outq_push(a->out, SBX_LANE_CTRL, SBX_FRAME_TYPE_OPEN, 0, c->id, NULL, 0, buf,
		              w.len);
		rearm(a, c);
	}
}

/* ---- the host's frames ---- */

/* Where an OPEN's ADDR is: a literal, or localhost. Names are not looked up (a resolver
 * could block the whole agent). */
static int addr_of(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof *ss);
	if (strcmp(addr, "localhost") == 0)
		addr = "127.0.0.1";
	if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		*len = sizeof *v4;
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		*len = sizeof *v6;
		return 0;
	}
	return -1;
}

static int on_open(struct sbx_fwda *a, const struct sbx_frame *f, const char **why)
{
	static char msg[sizeof((struct sbx_err *)0)->msg];
	struct sbx_fwd_open o;
	struct sbx_err e;
	struct sbx_fwd_conn *c;
	if (sbx_fwdmsg_open_parse(f->payload, f->len, SBX_FWD_FROM_HOST, &o, &e) != 0) {
		snprintf(msg, sizeof msg, "%s", e.msg);
		*why = msg;
		return -1;
	}
	if (started(a) != 0 || tab_room(a) != 0) {
		send_reset(a, f->stream, ENOMEM, "too many connections");
		return 1;
	}
	int rc = sbx_fwdtab_open(&a->tab, SBX_FWD_FROM_HOST, f->stream, 0, SBX_FWD_MAX_CONN_LIMIT,
	                         &c, &e);
	if (rc < 0) {
		snprintf(msg, sizeof msg, "%s", e.msg);
		*why = msg;
		return -1;
	}
	if (rc == 1) {
		send_reset(a, f->stream, EMFILE, "too many connections");
		return 1;
	}
	struct sbx_fwda_sock *k = calloc(1, sizeof *k);
	if (k == NULL) {
		sbx_fwdtab_reset(c);
		send_reset(a, f->stream, ENOMEM, "out of memory");
		return 1;
	}
	k->kind = K_CONN;
	k->fd = -1;
	k->id = f->stream;
	c->user = k;
	char what[SBX_FWD_ADDR_MAX + 32];
	snprintf(what, sizeof what, "connect %s:%u", o.addr, o.port);
	struct sockaddr_storage ss;
	socklen_t sl;
	if (addr_of(o.addr, o.port, &ss, &sl) != 0) {
		reset_ours(a, c, EINVAL, what);
		return 1;
	}
	k->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->fd < 0) {
		reset_ours(a, c, errno, what);
		return 1;
	}
	if (connect(k->fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS) {
		reset_ours(a, c, errno, what);
		return 1;
	}
	k->connecting = 1;
	k->connect_dl = sbx_now_ns() + (int64_t)SBX_FWD_CONNECT_MS * 1000000;
	ep_set(a, k, EPOLLOUT);
	return 1;
}

int sbx_fwda_has(struct sbx_fwda *a, uint32_t id)
{
	return sbx_fwdtab_find(&a->tab, id) != NULL;
}

int sbx_fwda_frame(struct sbx_fwda *a, const struct sbx_frame *f, const char **why)
{
	static char msg[sizeof((struct sbx_err *)0)->msg];
	struct sbx_err e;
	struct sbx_fwd_conn *c;
	if (f->type == SBX_FRAME_TYPE_OPEN)
		return on_open(a, f, why);
	if (f->type == SBX_FRAME_TYPE_RESET) {
		void *user;
		int answer = sbx_fwdtab_on_reset(&a->tab, f->stream, &user);
		if (answer)
			send_reset(a, f->stream, 0, "");
		if (user != NULL)
			sock_free(a, user, 1);
		return 1;
	}
	if (f->type == SBX_F_CREDIT) {
		if (!sbx_fwda_has(a, f->stream))
			return 0;
		if (f->len != 5 || f->payload[0] != SBX_CH_STDOUT) {
			*why = "malformed CREDIT on a connection";
			return -1;
		}
		uint64_t n = (uint64_t)f->payload[1] << 24 | (uint64_t)f->payload[2] << 16 |
		             (uint64_t)f->payload[3] << 8 | f->payload[4];
		if (sbx_fwdtab_on_credit(&a->tab, f->stream, n, &e) != 0) {
			snprintf(msg, sizeof msg, "%s", e.msg);
			*why = msg;
			return -1;
		}
		if ((c = sbx_fwdtab_find(&a->tab, f->stream)) != NULL)
			rearm(a, c);
		return 1;
	}
	if (f->type != SBX_F_DATA || !sbx_fwda_has(a, f->stream))
		return 0;
	if (f->len < 1 || f->payload[0] != SBX_CH_STDIN) {
		*why = "DATA on a connection on a channel other than 0";
		return -1;
	}
	size_t n = f->len - 1;
	int rc = sbx_fwdtab_on_data(&a->tab, f->stream, n, (f->flags & SBX_FL_END) != 0, &c, &e);
	if (rc < 0) {
		snprintf(msg, sizeof msg, "%s", e.msg);
		*why = msg;
		return -1;
	}
	if (rc == 1)
		return 1;
	struct sbx_fwda_sock *k = c->user;
	if (k->len + n > k->cap) {
		size_t cap = k->len + n < 16384 ? 16384 : k->len + n;
		uint8_t *b = realloc(k->buf, cap);
		if (b == NULL) {
			reset_ours(a, c, ENOMEM, "buffer");
			return 1;
		}
		k->buf = b;
		k->cap = cap;
	}
	memcpy(k->buf + k->len, f->payload + 1, n);
	k->len += n;
	conn_write(a, c);
	return 1;
}

/* ---- the loop's side ---- */

int sbx_fwda_fd(const struct sbx_fwda *a)
{
	return a->ep;
}

int sbx_fwda_timeout(const struct sbx_fwda *a, int timeout_ms)
{
	int64_t now = sbx_now_ns();
	for (size_t i = 0; i < a->tab.n; i++) {
		const struct sbx_fwda_sock *k = a->tab.c[i].user;
		if (k == NULL || !k->connecting || k->fd < 0)
			continue;
		int64_t left = (k->connect_dl - now + 999999) / 1000000;
		int ms = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		if (timeout_ms < 0 || ms < timeout_ms)
			timeout_ms = ms;
	}
	return timeout_ms;
}

static void connected(struct sbx_fwda *a, struct sbx_fwd_conn *c)
{
	struct sbx_fwda_sock *k = c->user;
	int err = 0;
	socklen_t l = sizeof err;
	getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &l);
	if (err != 0) {
		reset_ours(a, c, err, "connect");
		return;
	}
	k->connecting = 0;
	conn_write(a, c);
}

void sbx_fwda_step(struct sbx_fwda *a)
{
	if (a->ep < 0)
		return;
	int64_t now = sbx_now_ns();
	for (size_t i = a->tab.n; i > 0; i--) {
		struct sbx_fwd_conn *c = &a->tab.c[i - 1];
		struct sbx_fwda_sock *k = c->user;
		if (k != NULL && k->connecting && k->fd >= 0 && k->connect_dl <= now)
			reset_ours(a, c, ETIMEDOUT, "connect");
	}
	struct epoll_event ev[EVENTS];
	for (int round = 0; round < 4; round++) {
		int n = epoll_wait(a->ep, ev, EVENTS, 0);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct sbx_fwda_sock *k = ev[i].data.ptr;
			if (k->kind == K_LISTEN) {
				accept_on(a, k);
				continue;
			}
			struct sbx_fwd_conn *c = sbx_fwdtab_find(&a->tab, k->id);
			if (c == NULL || c->user != k || k->fd < 0)
				continue;
			if (k->connecting) {
				connected(a, c);
				continue;
			}
			if (ev[i].events & EPOLLOUT)
				conn_write(a, c);
			if ((c = sbx_fwdtab_find(&a->tab, k->id)) != NULL && c->user == k &&
			    k->fd >= 0 && (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				conn_read(a, c);
		}
		if (n < EVENTS)
			return;
	}
}

void sbx_fwda_room(struct sbx_fwda *a)
{
	if (!a->bulk_wait || a->out->bulk_bytes >= SBX_JOB_BULK_LIMIT)
		return;
	a->bulk_wait = 0;
	for (size_t i = 0; i < a->tab.n; i++)
		rearm(a, &a->tab.c[i]);
}

void sbx_fwda_close(struct sbx_fwda *a)
{
	while (a->tab.n > 0)
		drop(a, &a->tab.c[a->tab.n - 1], 1);
	for (size_t i = 0; i < SBX_FWD_MAX_LISTENERS; i++)
		if (a->lis[i].id != 0)
			lis_close(a, &a->lis[i]);
	free(a->tab.c);
	a->tab.c = NULL;
	a->tab.cap = 0;
	if (a->ep >= 0)
		close(a->ep);
	a->ep = -1;
}
