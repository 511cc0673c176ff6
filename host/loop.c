/* Many sessions from one thread (sbx.h, sbx_loop): one epoll set over every session's fds.
 * Each round asks the sessions that were stepped or given an operation since the last one what
 * they wait on (sbx_session_fds), brings their epoll entries up to date where that changed,
 * waits until an fd is ready or the earliest deadline, and steps the sessions that have
 * something to do. A round costs what is ready, not how many sessions there are: the sessions
 * tell their loop when what they wait on changed (sbx_loop_note_dirty) and when an operation
 * ended (sbx_loop_note_done), and the only scan over all of them is of one array of deadlines. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "session.h"

#define REG_FDS 8

struct sbx_loop_reg {
	struct sbx_session *s;
	struct sbx_loop *l;
	size_t idx; /* in l->regs and l->deadlines */
	int n;
	struct pollfd fds[REG_FDS]; /* what is registered (revents unused) */
	uint64_t stepped;           /* the round it was last stepped in */
	int in_dirty, in_done;      /* queued in l->dirty, l->done */
};

struct sbx_loop {
	int ep;
	struct sbx_loop_reg **regs; /* stable pointers: epoll's data points at them */
	int64_t *deadlines;         /* regs[i]'s step is due then even if no fd of it fires */
	size_t n, cap;
	/* Sessions whose fds and deadline are to be asked again, and sessions with ended
	 * operations (done[dhead .. dhead+dn)); each at most once, so cap bounds both. */
	struct sbx_loop_reg **dirty, **done;
	size_t ndirty, dhead, dn;
	uint64_t round;
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

/* Room for cap sessions in every array (the queues never grow on their own). */
static int reserve(struct sbx_loop *l, size_t cap)
{
	struct sbx_loop_reg **r = realloc(l->regs, cap * sizeof *r);
	if (r == NULL)
		return -1;
	l->regs = r;
	int64_t *d = realloc(l->deadlines, cap * sizeof *d);
	if (d == NULL)
		return -1;
	l->deadlines = d;
	if ((r = realloc(l->dirty, cap * sizeof *r)) == NULL)
		return -1;
	l->dirty = r;
	if ((r = realloc(l->done, cap * sizeof *r)) == NULL)
		return -1;
	l->done = r;
	l->cap = cap;
	return 0;
}

void sbx_loop_note_dirty(struct sbx_session *s)
{
	struct sbx_loop_reg *r = s->loop_reg;
	if (r != NULL && !r->in_dirty) {
		r->in_dirty = 1;
		r->l->dirty[r->l->ndirty++] = r;
	}
}

void sbx_loop_note_done(struct sbx_session *s)
{
	struct sbx_loop_reg *r = s->loop_reg;
	if (r == NULL || r->in_done)
		return;
	struct sbx_loop *l = r->l;
	if (l->dhead + l->dn == l->cap) {
		memmove(l->done, l->done + l->dhead, l->dn * sizeof *l->done);
		l->dhead = 0;
	}
	r->in_done = 1;
	l->done[l->dhead + l->dn++] = r;
}

int sbx_loop_add(struct sbx_loop *l, struct sbx_session *s, struct sbx_err *e)
{
	if (s->loop_reg != NULL)
		return sbx_err_set(e, SBX_EUSAGE, EBUSY, "loop: the session is in a loop already");
	if (l->n == l->cap && reserve(l, l->cap ? l->cap * 2 : 16) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "loop");
	struct sbx_loop_reg *r = calloc(1, sizeof *r);
	if (r == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "loop");
	r->s = s;
	r->l = l;
	r->idx = l->n;
	l->regs[l->n] = r;
	l->deadlines[l->n++] = INT64_MAX; /* asked in the next round (dirty) */
	s->loop_reg = r;
	sbx_loop_note_dirty(s);
	if (s->done_head != NULL)
		sbx_loop_note_done(s);
	return 0;
}

static void drop(struct sbx_loop_reg **q, size_t *n, const struct sbx_loop_reg *r)
{
	for (size_t i = 0; i < *n; i++)
		if (q[i] == r) {
			memmove(q + i, q + i + 1, (*n - i - 1) * sizeof *q);
			(*n)--;
			return;
		}
}

void sbx_loop_remove(struct sbx_loop *l, struct sbx_session *s)
{
	struct sbx_loop_reg *r = s->loop_reg;
	if (r == NULL || r->l != l)
		return;
	for (int i = 0; i < r->n; i++)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, r->fds[i].fd, NULL);
	if (r->in_dirty)
		drop(l->dirty, &l->ndirty, r);
	if (r->in_done)
		drop(l->done + l->dhead, &l->dn, r);
	size_t i = r->idx;
	l->regs[i] = l->regs[--l->n];
	l->deadlines[i] = l->deadlines[l->n];
	l->regs[i]->idx = i;
	s->loop_reg = NULL;
	free(r);
}

void sbx_loop_leave(struct sbx_session *s)
{
	if (s->loop_reg != NULL)
		sbx_loop_remove(s->loop_reg->l, s);
}

size_t sbx_loop_sessions(const struct sbx_loop *l)
{
	return l->n;
}

void sbx_loop_free(struct sbx_loop *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++) {
		l->regs[i]->s->loop_reg = NULL;
		free(l->regs[i]);
	}
	free(l->regs);
	free(l->deadlines);
	free(l->dirty);
	free(l->done);
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
static void update(struct sbx_loop *l, struct sbx_loop_reg *r, const struct pollfd *fds, int n)
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

static void step(struct sbx_loop *l, struct sbx_loop_reg *r, int *stepped)
{
	if (r->stepped == l->round)
		return;
	r->stepped = l->round;
	sbx_session_step(r->s);
	(*stepped)++;
}

int sbx_loop_run_once(struct sbx_loop *l, int timeout_ms)
{
	int64_t now = sbx_now_ns(), d = timeout_ms < 0 ? INT64_MAX : now + timeout_ms * 1000000LL;
	for (size_t i = 0; i < l->ndirty; i++) {
		struct sbx_loop_reg *r = l->dirty[i];
		struct pollfd fds[REG_FDS];
		r->in_dirty = 0;
		int n = sbx_session_fds(r->s, fds, REG_FDS, &l->deadlines[r->idx]);
		update(l, r, fds, n);
	}
	l->ndirty = 0;
	for (size_t i = 0; i < l->n; i++)
		if (l->deadlines[i] < d)
			d = l->deadlines[i];
	int64_t left = d == INT64_MAX ? -1 : d - now;
	int ms = left < 0                 ? (d == INT64_MAX ? -1 : 0)
	         : left > 3600000000000LL ? 3600000
	                                  : (int)((left + 999999) / 1000000);
	struct epoll_event evs[256];
	int k = epoll_wait(l->ep, evs, 256, ms);
	if (k < 0 && errno != EINTR)
		return -1;
	/* Sessions with a ready fd, and those whose deadline came (their fds said when); each once
	 * a round. A step marks its session dirty, which only queues it for the next round. */
	l->round++;
	int stepped = 0;
	for (int i = 0; i < k; i++)
		step(l, evs[i].data.ptr, &stepped);
	now = sbx_now_ns();
	for (size_t i = 0; i < l->n; i++)
		if (l->deadlines[i] <= now)
			step(l, l->regs[i], &stepped);
	return stepped;
}

struct sbx_op *sbx_loop_next_done(struct sbx_loop *l)
{
	/* Round robin: a session that has more after this one goes to the back. */
	while (l->dn > 0) {
		struct sbx_loop_reg *r = l->done[l->dhead];
		struct sbx_op *op = sbx_session_next_done(r->s);
		l->dhead++;
		if (--l->dn == 0)
			l->dhead = 0;
		r->in_done = 0;
		if (op != NULL) {
			if (r->s->done_head != NULL)
				sbx_loop_note_done(r->s);
			return op;
		}
	}
	return NULL;
}
