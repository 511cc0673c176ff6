/* Many sessions from one thread (sbx.h, sbx_loop): one epoll set over every session's fds.
 * Each round asks the sessions that were stepped or given an operation since the last one what
 * they wait on (sbx_session_fds), brings their epoll entries up to date where that changed,
 * waits until an fd is ready or the earliest deadline, and steps the sessions that have
 * something to do. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "session.h"

#define REG_FDS 8

struct reg {
	struct sbx_session *s;
	int n;
	struct pollfd fds[REG_FDS]; /* what is registered (revents unused) */
	int ready;                  /* an fd of it fired this round */
	int64_t deadline;           /* its step is due then even if no fd fires */
	int known;                  /* fds and deadline asked at least once */
};

struct sbx_loop {
	int ep;
	struct reg **regs; /* stable pointers: epoll's data points at them */
	size_t n, cap;
	size_t next; /* where the round-robin of next_done starts */
};

static uint32_t to_epoll(short ev)
{
	return (ev & POLLIN ? EPOLLIN : 0) | (ev & POLLOUT ? EPOLLOUT : 0);
}

struct sbx_loop *sbx_loop_new(struct sbx_err *e)
{
	struct sbx_loop *l = calloc(1, sizeof *l);
	if (l == NULL) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "loop");
		return NULL;
	}
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (l->ep < 0) {
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "epoll_create1");
		free(l);
		return NULL;
	}
	return l;
}

int sbx_loop_add(struct sbx_loop *l, struct sbx_session *s, struct sbx_err *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct reg **r = realloc(l->regs, cap * sizeof *r);
		if (r == NULL)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "loop");
		l->regs = r;
		l->cap = cap;
	}
	struct reg *r = calloc(1, sizeof *r);
	if (r == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "loop");
	r->s = s;
	l->regs[l->n++] = r;
	return 0;
}

static void unregister(struct sbx_loop *l, struct reg *r)
{
	for (int i = 0; i < r->n; i++)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, r->fds[i].fd, NULL);
	r->n = 0;
}

void sbx_loop_remove(struct sbx_loop *l, struct sbx_session *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->regs[i]->s == s) {
			unregister(l, l->regs[i]);
			free(l->regs[i]);
			l->regs[i] = l->regs[--l->n];
			return;
		}
}

size_t sbx_loop_sessions(const struct sbx_loop *l)
{
	return l->n;
}

void sbx_loop_free(struct sbx_loop *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->regs[i]);
	free(l->regs);
	close(l->ep);
	free(l);
}

/* One of the session's own fds (its channel's), open for the session's whole life. */
static int own_fd(const struct sbx_session *s, int fd)
{
	return fd == s->from_fd || fd == s->to_fd || fd == s->err_fd;
}

/* r's epoll entries made those of fds[0..n). The session's own fds are told to the kernel only
 * when they change; an operation's fds always are: an operation that ended closed its fds (the
 * kernel dropped their entries), and one started in the same round may have got the same
 * numbers, which only look unchanged. */
static void update(struct sbx_loop *l, struct reg *r, const struct pollfd *fds, int n)
{
	if (n > REG_FDS)
		n = REG_FDS;
	for (int i = 0; i < r->n; i++) {
		int keep = 0;
		for (int j = 0; j < n && !keep; j++)
			keep = fds[j].fd == r->fds[i].fd;
		if (!keep)
			epoll_ctl(l->ep, EPOLL_CTL_DEL, r->fds[i].fd, NULL);
	}
	for (int j = 0; j < n; j++) {
		int was = -1;
		for (int i = 0; i < r->n; i++)
			if (r->fds[i].fd == fds[j].fd)
				was = i;
		if (was >= 0 && r->fds[was].events == fds[j].events && own_fd(r->s, fds[j].fd))
			continue;
		struct epoll_event ev = {.events = to_epoll(fds[j].events), .data.ptr = r};
		int op = was >= 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
		if (epoll_ctl(l->ep, op, fds[j].fd, &ev) != 0 &&
		    (errno == EEXIST || errno == ENOENT))
			epoll_ctl(l->ep, errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fds[j].fd,
			          &ev);
	}
	memcpy(r->fds, fds, (size_t)n * sizeof *fds);
	r->n = n;
}

int sbx_loop_run_once(struct sbx_loop *l, int timeout_ms)
{
	int64_t now = sbx_now_ns(), d = timeout_ms < 0 ? INT64_MAX : now + timeout_ms * 1000000LL;
	for (size_t i = 0; i < l->n; i++) {
		struct reg *r = l->regs[i];
		if (r->s->loop_dirty || !r->known) {
			struct pollfd fds[REG_FDS];
			r->s->loop_dirty = 0;
			r->known = 1;
			int n = sbx_session_fds(r->s, fds, REG_FDS, &r->deadline);
			update(l, r, fds, n);
		}
		if (r->deadline < d)
			d = r->deadline;
		r->ready = 0;
	}
	int64_t left = d == INT64_MAX ? -1 : d - now;
	int ms = left < 0                 ? (d == INT64_MAX ? -1 : 0)
	         : left > 3600000000000LL ? 3600000
	                                  : (int)((left + 999999) / 1000000);
	struct epoll_event evs[256];
	int k = epoll_wait(l->ep, evs, 256, ms);
	if (k < 0 && errno != EINTR)
		return -1;
	for (int i = 0; i < k; i++)
		((struct reg *)evs[i].data.ptr)->ready = 1;
	/* Sessions with a ready fd, and those whose deadline came (their fds said when). */
	now = sbx_now_ns();
	int stepped = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct reg *r = l->regs[i];
		if (!r->ready && r->deadline > now)
			continue;
		sbx_session_step(r->s);
		stepped++;
	}
	return stepped;
}

struct sbx_op *sbx_loop_next_done(struct sbx_loop *l)
{
	for (size_t k = 0; k < l->n; k++) {
		size_t i = (l->next + k) % l->n;
		struct sbx_op *op = sbx_session_next_done(l->regs[i]->s);
		if (op != NULL) {
			l->next = i;
			return op;
		}
	}
	return NULL;
}
