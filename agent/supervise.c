/* The harness supervisor: one poll loop over signalfd, pidfd, timerfd, inotify and the output
 * pipe feeds events into one state × event table (s6 style), and the output log. Starting the
 * harness is launch.c, the run folder's files rundir.c, finding the run's processes
 * killtree.c, the command line supervise_main.c. */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "killtree.h"
#include "oom.h"
#include "procstat.h"
#include "receipt.h"
#include "runas.h"
#include "rundir.h"
#include "launch.h"
#include "sys.h"

/* The negative control: only the process group is signalled, orphans go to init. */
#ifdef SBX_WEAK_SUPERVISOR
#define WEAK 1
#else
#define WEAK 0
#endif

#define DEFAULT_GRACE_MS 5000
#define DEFAULT_LOG_MAX (16 << 20)
#define NOTE_ROOM 1024 /* of log_max kept for [sbx] notes once output is dropped */
#define KILL_BUDGET_NS 10000000000LL
#define MARKER_POLL_MS 250    /* only where inotify is missing */
#define PUMP_BUDGET (1 << 20) /* output bytes per loop turn, so a flood cannot starve events */

enum state { S_LAUNCHING, S_RUNNING, S_TERMINATING, S_KILLING, S_DONE, S_COUNT };
enum event {
	E_STARTED,
	E_START_FAILED,
	E_CHILD_EXIT, /* the harness was reaped */
	E_TIMER,      /* the timer the state armed ran out: each row below says which */
	E_STOP,
	E_EXPIRE,
	E_SIGNAL,   /* SIGTERM, SIGINT or SIGHUP to the supervisor */
	E_ALL_GONE, /* waitpid said ECHILD and no marked process is left */
	E_GIVE_UP,  /* A_KILL found KILL_BUDGET_NS of SIGKILL rounds spent */
	E_COUNT
};
enum action {
	A_IGNORE, /* stay, do nothing (every cell not listed) */
	A_RUN,    /* the harness runs: note it */
	A_END,    /* nothing ran (not started, runner failed): nothing to kill */
	A_SKIP,   /* a trigger before launch: nothing starts */
	A_TERM,   /* first trigger: SIGTERM + SIGCONT to the run, arm the grace */
	A_SWEEP,  /* the harness exited by itself: the same, for what it left behind */
	A_KEEP,   /* the harness exited while terminating: its status is kept */
	A_LATE,   /* a trigger after the first: noted in the log only */
	A_KILL,   /* one SIGKILL round, reap, arm the next (1, 2, 4 .. 50 ms); once the budget
	             is spent, none: E_GIVE_UP follows */
	A_FINISH, /* termination witnessed */
	A_GIVE_UP /* not witnessed: list the residual processes */
};

struct transition {
	unsigned char act, next;
};

/* Every transition of the supervisor, one cell a line (s6's table of state x event). */
// clang-format off
static const struct transition table[S_COUNT][E_COUNT] = {
	[S_LAUNCHING][E_STARTED]        = {A_RUN,     S_RUNNING},
	[S_LAUNCHING][E_START_FAILED]   = {A_END,     S_DONE},
	[S_LAUNCHING][E_STOP]           = {A_SKIP,    S_DONE},
	[S_LAUNCHING][E_EXPIRE]         = {A_SKIP,    S_DONE},
	[S_LAUNCHING][E_SIGNAL]         = {A_SKIP,    S_DONE},

	[S_RUNNING][E_CHILD_EXIT]       = {A_SWEEP,   S_TERMINATING},
	[S_RUNNING][E_TIMER]            = {A_TERM,    S_TERMINATING}, /* the deadline */
	[S_RUNNING][E_STOP]             = {A_TERM,    S_TERMINATING},
	[S_RUNNING][E_EXPIRE]           = {A_TERM,    S_TERMINATING},
	[S_RUNNING][E_SIGNAL]           = {A_TERM,    S_TERMINATING},

	[S_TERMINATING][E_CHILD_EXIT]   = {A_KEEP,    S_TERMINATING},
	[S_TERMINATING][E_TIMER]        = {A_KILL,    S_KILLING},     /* the grace is over */
	[S_TERMINATING][E_STOP]         = {A_LATE,    S_TERMINATING},
	[S_TERMINATING][E_EXPIRE]       = {A_LATE,    S_TERMINATING},
	[S_TERMINATING][E_SIGNAL]       = {A_LATE,    S_TERMINATING},
	[S_TERMINATING][E_ALL_GONE]     = {A_FINISH,  S_DONE},

	[S_KILLING][E_CHILD_EXIT]       = {A_KEEP,    S_KILLING},
	[S_KILLING][E_TIMER]            = {A_KILL,    S_KILLING},     /* the next round is due */
	[S_KILLING][E_STOP]             = {A_LATE,    S_KILLING},
	[S_KILLING][E_EXPIRE]           = {A_LATE,    S_KILLING},
	[S_KILLING][E_SIGNAL]           = {A_LATE,    S_KILLING},
	[S_KILLING][E_ALL_GONE]         = {A_FINISH,  S_DONE},
	[S_KILLING][E_GIVE_UP]          = {A_GIVE_UP, S_DONE},
};
// clang-format on

static const char *const state_names[S_COUNT] = {"launching", "running", "terminating", "killing",
                                                 "done"};

struct sup {
	const struct sbx_sup_opts *o;
	enum state state;
	int dirfd, logfd, sigfd, pidfd, tfd, ifd, outfd, lockfd;
	int no_files; /* the folder is not ours to write (bad, or a finished run's) */
	pid_t pid;    /* the harness, 0 before launch */
	int harness_reaped, wstatus, pending_exit, children_gone;
	int runner_failed, not_started, start_code;
	int sent_kill, harness_sigkilled, desc_sigkilled, trigger_sig;
	int budget_spent; /* A_KILL found the kill budget spent: E_GIVE_UP follows */
	int saw_stop, saw_expire;
	int64_t grace_ms, log_max, log_bytes, log_dropped;
	int drop_noted;
	char last; /* last byte written to the log, so a note always starts a line */
	int64_t timer_at, kill_until, t0_mono, start_mono;
	struct sbx_kt kt;
	struct sbx_oom oom;
	struct sbx_receipt r;
};

/* ---- the output log -------------------------------------------------------------------- */

static void log_write(struct sup *s, const char *p, size_t n)
{
	while (n > 0 && s->logfd >= 0) {
		ssize_t w = write(s->logfd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->log_dropped += (int64_t)n; /* a full disk: count, keep going */
			return;
		}
		s->log_bytes += w, s->last = p[w - 1];
		p += w, n -= (size_t)w;
	}
}

static void note(struct sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct sup *s, const char *fmt, ...)
{
	char line[512] = "\n[sbx] ";
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + 7, sizeof line - 8, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t len = 7 + ((size_t)n < sizeof line - 8 ? (size_t)n : sizeof line - 9);
	line[len++] = '\n';
	size_t skip = s->log_bytes == 0 || s->last == '\n';
	if (s->log_bytes + (int64_t)(len - skip) > s->log_max)
		s->log_dropped += (int64_t)(len - skip);
	else
		log_write(s, line + skip, len - skip);
}

static void log_output(struct sup *s, const char *p, size_t n)
{
	int64_t room = s->log_max - NOTE_ROOM - s->log_bytes;
	if (s->log_max <= 2 * NOTE_ROOM) /* tiny limits: no room kept for notes */
		room = s->log_max - s->log_bytes;
	size_t keep = room <= 0 ? 0 : (size_t)room < n ? (size_t)room : n;
	log_write(s, p, keep);
	if (keep < n) {
		s->log_dropped += (int64_t)(n - keep);
		if (!s->drop_noted) {
			s->drop_noted = 1;
			note(s, "log limit reached (%" PRId64 " bytes); dropping output",
			     s->log_max);
		}
	}
}

/* Reads the harness's output; never blocks, so the harness never waits on a full pipe. */
static void pump(struct sup *s, size_t budget)
{
	char buf[65536];
	while (s->outfd >= 0 && budget > 0) {
		ssize_t n = read(s->outfd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		if (n == 0) {
			close(s->outfd);
			s->outfd = -1;
			return;
		}
		log_output(s, buf, (size_t)n);
		budget -= (size_t)n < budget ? (size_t)n : budget;
	}
}

/* ---- the run folder's files (agent/rundir.h) ------------------------------------------ */

static int write_at(int dirfd, const char *name, struct sbx_err *e, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int write_at(int dirfd, const char *name, struct sbx_err *e, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return sbx_rundir_write(dirfd, name, buf, (size_t)n, e);
}

/* ---- killing ------------------------------------------------------------------------------ */

/* The harness's group while its pid cannot be recycled (unreaped), then every process of the
 * run found by the walk. */
static int signal_run(struct sup *s, int sig1, int sig2)
{
	if (s->pid > 0 && (!s->harness_reaped || WEAK)) {
		kill(-s->pid, sig1);
		if (sig2 != 0)
			kill(-s->pid, sig2);
	}
	return WEAK ? 0 : sbx_killtree(&s->kt, sig1, sig2, NULL, NULL, NULL);
}

/* SIGCHLD coalesces: reap until nothing is waitable; ECHILD proves no descendant is left. */
static void reap(struct sup *s)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0 && errno == ECHILD)
			s->children_gone = 1;
		if (p <= 0)
			return;
		int oom_like = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && !s->sent_kill;
		if (p == s->pid && !s->harness_reaped) {
			s->harness_reaped = 1, s->wstatus = st, s->pending_exit = 1;
			s->harness_sigkilled = oom_like;
			if (s->pidfd >= 0)
				close(s->pidfd);
			s->pidfd = -1;
		} else if (oom_like) {
			s->desc_sigkilled = 1;
		}
	}
}

static int run_gone(struct sup *s)
{
	return WEAK || sbx_killtree(&s->kt, 0, 0, NULL, NULL, NULL) <= 0;
}

static void arm(struct sup *s, int64_t ms)
{
	s->timer_at = sbx_now_ns() + ms * 1000000;
	if (s->tfd >= 0) {
		struct itimerspec it = {0};
		it.it_value.tv_sec = ms / 1000;
		it.it_value.tv_nsec = (ms % 1000) * 1000000 + (ms == 0);
		timerfd_settime(s->tfd, 0, &it, NULL);
	}
}

static void add_residual(void *arg, pid_t pid, const char *cmdline)
{
	struct sbx_receipt *r = arg;
	if (r->nresidual < SBX_RECEIPT_RESIDUAL_MAX) {
		r->residual[r->nresidual].pid = pid;
		snprintf(r->residual[r->nresidual].cmdline, sizeof r->residual[0].cmdline, "%s",
		         cmdline);
	}
	r->nresidual++;
}

/* ---- the state machine ------------------------------------------------------------------ */

static const char *describe(int wstatus, char *buf, size_t cap)
{
	if (WIFEXITED(wstatus))
		snprintf(buf, cap, "code %d", WEXITSTATUS(wstatus));
	else
		snprintf(buf, cap, "signal %d", WTERMSIG(wstatus));
	return buf;
}

static const char *event_trigger(struct sup *s, enum event ev, char *buf, size_t cap)
{
	switch (ev) {
	case E_CHILD_EXIT:
		return "exit";
	case E_TIMER: /* only A_TERM's: the deadline */
		return "deadline";
	case E_STOP:
		return "stop";
	case E_EXPIRE:
		return "expire";
	default:
		snprintf(buf, cap, "signal %d to the supervisor", s->trigger_sig);
		return buf;
	}
}

static void set_trigger(struct sup *s, enum event ev)
{
	static const char *const names[E_COUNT] = {[E_CHILD_EXIT] = "exit",
	                                           [E_TIMER] = "deadline",
	                                           [E_STOP] = "stop",
	                                           [E_EXPIRE] = "expire",
	                                           [E_SIGNAL] = "signal"};
	s->r.trigger = names[ev];
	s->r.timed_out = ev == E_TIMER || ev == E_EXPIRE;
	s->r.cancelled = ev == E_STOP;
}

static void act(struct sup *s, enum action a, enum event ev)
{
	char b1[48];
	switch (a) {
	case A_IGNORE:
		break;
	case A_RUN:
		note(s, "activation %" PRId64 ": started pid %d: %s", s->r.activation, (int)s->pid,
		     s->o->cmd.argv[0]);
		break;
	case A_END:
		s->r.termination_witnessed = 1;
		break;
	case A_SKIP:
		set_trigger(s, ev);
		s->r.stopped_before_launch = ev == E_STOP;
		s->r.expired_before_launch = ev == E_EXPIRE;
		s->r.termination_witnessed = 1;
		note(s, "%s before launch; nothing started", event_trigger(s, ev, b1, sizeof b1));
		break;
	case A_TERM:
	case A_SWEEP:
		set_trigger(s, ev);
		if (a == A_TERM)
			note(s, "%s; SIGTERM to the run", event_trigger(s, ev, b1, sizeof b1));
		else
			note(s, "harness exited with %s", describe(s->wstatus, b1, sizeof b1));
		/* CONT: a stopped process must see its TERM. */
		int found = signal_run(s, SIGTERM, SIGCONT);
		if (a == A_SWEEP && found > 0)
			note(s, "%d processes left behind; SIGTERM to them", found);
		arm(s, s->grace_ms);
		break;
	case A_KEEP:
		if (WIFEXITED(s->wstatus))
			note(s, "harness exited with %s while terminating; its status is kept",
			     describe(s->wstatus, b1, sizeof b1));
		else
			note(s, "harness ended by %s", describe(s->wstatus, b1, sizeof b1));
		break;
	case A_LATE:
		note(s, "%s after the run began ending (%s); noted only",
		     event_trigger(s, ev, b1, sizeof b1), s->r.trigger);
		break;
	case A_KILL:
		if (s->r.kill_rounds == 0) {
			note(s, "grace over; SIGKILL rounds");
			s->kill_until = sbx_now_ns() + KILL_BUDGET_NS;
		} else if (sbx_now_ns() >= s->kill_until) {
			s->budget_spent = 1;
			break;
		}
		s->sent_kill = 1;
		signal_run(s, SIGKILL, 0);
		reap(s);
		arm(s, s->r.kill_rounds < 6 ? (int64_t)1 << s->r.kill_rounds : 50);
		s->r.kill_rounds++;
		break;
	case A_FINISH:
		s->r.termination_witnessed = 1;
		break;
	case A_GIVE_UP:
		if (!WEAK)
			sbx_killtree(&s->kt, 0, 0, add_residual, &s->r, NULL);
		note(s, "termination not witnessed after %d SIGKILL rounds; %zu processes remain",
		     s->r.kill_rounds, s->r.nresidual);
		break;
	}
}

static void dispatch(struct sup *s, enum event ev)
{
	struct transition t = table[s->state][ev];
	if (t.act == A_IGNORE)
		return;
	enum state from = s->state;
	act(s, (enum action)t.act, ev);
	s->state = (enum state)t.next;
	if (s->state == S_DONE || s->state == from || s->no_files)
		return; /* `done` is written after the receipt */
	struct sbx_err e;
	if (write_at(s->dirfd, "state", &e, "%s\n", state_names[s->state]) != 0)
		note(s, "cannot write state: %s", e.msg);
}

/* Follow-up events the actions leave behind, dispatched outside any action. */
static void settle(struct sup *s)
{
	for (;;) {
		if (s->pending_exit) {
			s->pending_exit = 0;
			dispatch(s, E_CHILD_EXIT);
		} else if (s->budget_spent) {
			s->budget_spent = 0;
			dispatch(s, E_GIVE_UP);
		} else if (s->children_gone &&
		           (s->state == S_TERMINATING || s->state == S_KILLING) && run_gone(s)) {
			dispatch(s, E_ALL_GONE);
		} else {
			return;
		}
	}
}

static void check_markers(struct sup *s)
{
	if (!s->saw_stop && sbx_rundir_exists(s->dirfd, "stop")) {
		s->saw_stop = 1;
		dispatch(s, E_STOP);
	}
	if (!s->saw_expire && sbx_rundir_exists(s->dirfd, "expire")) {
		s->saw_expire = 1;
		dispatch(s, E_EXPIRE);
	}
}

static void read_signals(struct sup *s)
{
	struct signalfd_siginfo si;
	while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		s->trigger_sig = (int)si.ssi_signo;
		dispatch(s, E_SIGNAL);
	}
}

static void read_inotify(struct sup *s)
{
	_Alignas(struct inotify_event) char buf[4096];
	ssize_t n;
	int relevant = 0;
	while ((n = read(s->ifd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if ((ev->mask & IN_Q_OVERFLOW) ||
			    (ev->len > 0 &&
			     (strcmp(ev->name, "stop") == 0 || strcmp(ev->name, "expire") == 0)))
				relevant = 1;
			p += sizeof *ev + ev->len;
		}
	}
	if (relevant)
		check_markers(s);
}

static void fire_timer(struct sup *s)
{
	if (s->timer_at == 0 || sbx_now_ns() < s->timer_at)
		return;
	s->timer_at = 0;
	dispatch(s, E_TIMER);
}

static void loop(struct sup *s)
{
	while (s->state != S_DONE) {
		struct pollfd p[5];
		int fds[5] = {s->sigfd, s->pidfd, s->tfd, s->ifd, s->outfd}, n = 0;
		for (int i = 0; i < 5; i++)
			if (fds[i] >= 0)
				p[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
		int timeout = -1;
		if (s->tfd < 0 && s->timer_at != 0) {
			int64_t left = s->timer_at - sbx_now_ns();
			timeout = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
		}
		if (s->ifd < 0 && (timeout < 0 || timeout > MARKER_POLL_MS))
			timeout = MARKER_POLL_MS;
		if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR) {
			nanosleep(&(struct timespec){0, 10000000}, NULL); /* never spin */
			continue;
		}
		int ready[5] = {0};
		for (int i = 0, j = 0; i < 5; i++)
			if (fds[i] >= 0)
				ready[i] = (p[j++].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
		/* Output first, so the log shows what the harness wrote before the notes about
		 * its end. */
		if (ready[4])
			pump(s, PUMP_BUDGET);
		if (ready[0])
			read_signals(s);
		reap(s);
		settle(s);
		if (ready[3])
			read_inotify(s);
		else if (s->ifd < 0)
			check_markers(s);
		settle(s);
		if (ready[2]) {
			uint64_t x;
			ssize_t r = read(s->tfd, &x, sizeof x);
			(void)r;
		}
		fire_timer(s);
		settle(s);
	}
}

/* ---- launching (agent/launch.h) ------------------------------------------------------------ */

static void fail(struct sup *s, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void fail(struct sup *s, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->r.error, sizeof s->r.error, fmt, ap);
	va_end(ap);
	if (err != 0 && n >= 0 && (size_t)n < sizeof s->r.error)
		snprintf(s->r.error + n, sizeof s->r.error - (size_t)n, ": %s", strerror(err));
	s->r.err = err;
	s->runner_failed = 1;
	s->r.trigger = "runner_failed";
	if (s->logfd >= 0)
		note(s, "supervisor failed: %s", s->r.error);
}

static void not_started(struct sup *s, int code, int err, const char *msg)
{
	s->not_started = 1, s->start_code = code, s->r.err = err;
	s->r.trigger = "not_started";
	snprintf(s->r.error, sizeof s->r.error, "%s", msg);
	note(s, "harness not started: %s", msg);
}
/* Who the harness runs as: 1 with *as to switch to, 0 to stay, -1 when it cannot start (noted). */
static int run_as(struct sup *s, struct sbx_runas *as)
{
	const char *user = s->o->cmd.user;
	char msg[400];
	struct sbx_err e;
	if (user == NULL)
		return 0;
	if (sbx_runas_lookup(user, as, &e) != 0) {
		snprintf(msg, sizeof msg, "cannot switch to user %s: no such user", user);
		not_started(s, 126, ENOENT, msg);
		return -1;
	}
	int need = sbx_runas_needed(as);
	if (need < 0) {
		snprintf(msg, sizeof msg, "cannot switch to user %s: the supervisor runs as uid %u",
		         user, (unsigned)geteuid());
		not_started(s, 126, EPERM, msg);
	}
	return need;
}

static void launch(struct sup *s)
{
	struct sbx_runas as;
	char **env = NULL;
	int out[2] = {-1, -1}, devnull = -1;
	int need = run_as(s, &as);
	if (need < 0)
		goto out;
	env = sbx_launch_env(s->o->cmd.env, s->o->cmd.env_clear, s->kt.marker);
	if (env == NULL) {
		fail(s, ENOMEM, "harness environment");
		goto out;
	}
	if (pipe2(out, O_CLOEXEC) != 0 || (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		fail(s, errno, "harness pipes");
		goto out;
	}
	s->r.started_at_ns = sbx_wall_ns();
	s->start_mono = sbx_now_ns();
	struct sbx_launch sp = {.argv = s->o->cmd.argv,
	                        .env = env,
	                        .cwd = s->o->cmd.cwd,
	                        .as = need > 0 ? &as : NULL,
	                        .fd = {devnull, out[1], out[1]}};
	struct sbx_launch_result res;
	struct sbx_err e;
	if (sbx_launch(&sp, &res, &e) != 0) {
		fail(s, 0, "%s", e.msg);
		s->r.err = e.errnum;
		goto out;
	}
	close(out[1]);
	out[1] = -1;
	s->outfd = out[0], out[0] = -1;
	fcntl(s->outfd, F_SETFL, O_NONBLOCK);
	if (res.failed) {
		int wst;
		while (waitpid(res.pid, &wst, 0) < 0 && errno == EINTR)
			;
		char msg[400];
		sbx_launch_why(&res, s->o->cmd.user, s->o->cmd.cwd, s->o->cmd.argv[0], msg,
		               sizeof msg);
		not_started(s, res.code, res.err, msg);
		goto out;
	}
	s->pid = res.pid;
	s->r.pid = res.pid;
	s->r.launched = 1;
	s->children_gone = 0;
	s->pidfd = sbx_pidfd_open(res.pid); /* -1: SIGCHLD alone will do */
	if (s->pidfd >= 0)
		fcntl(s->pidfd, F_SETFD, FD_CLOEXEC);
	if (s->o->cmd.timeout_ms > 0)
		arm(s, s->o->cmd.timeout_ms);
out:
	free(env);
	for (int i = 0; i < 2; i++)
		if (out[i] >= 0)
			close(out[i]);
	if (devnull >= 0)
		close(devnull);
	dispatch(s, s->r.launched ? E_STARTED : E_START_FAILED);
}

/* ---- one activation ---------------------------------------------------------------------- */

static void make_nonce(char out[33])
{
	uint8_t b[16];
	ssize_t n = getrandom(b, sizeof b, 0);
	if (n != (ssize_t)sizeof b) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, b, sizeof b) : -1;
		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)sizeof b) { /* last resort: unique, not secret */
			int64_t t = sbx_now_ns() ^ sbx_wall_ns();
			uint8_t d[SBX_SHA256_LEN];
			int64_t seed[2] = {t, (int64_t)getpid()};
			sbx_sha256(seed, sizeof seed, d);
			memcpy(b, d, sizeof b);
		}
	}
	sbx_hex(b, sizeof b, out);
}

/* Everything before launch that can fail: the folder, the descriptors, the first files. */
static int setup(struct sup *s, const sigset_t *mask)
{
	struct sbx_err e;
	const char *dir = s->o->dir;
	if (s->o->cmd.argv == NULL || s->o->cmd.argv[0] == NULL) {
		s->no_files = 1;
		fail(s, 0, "no harness argv");
		return -1;
	}
	s->dirfd = sbx_rundir_open(dir, 1, &e);
	if (s->dirfd < 0) {
		s->no_files = 1;
		goto fail;
	}
	if (sbx_rundir_exists(s->dirfd, "receipt.json") || sbx_rundir_alive(s->dirfd)) {
		s->no_files = 1; /* never overwrite a finished (or running) activation */
		fail(s, 0, "run folder %s already has a run: rearm it first", dir);
		return -1;
	}
	if (sbx_rundir_activation(s->dirfd, &s->r.activation, &e) != 0 ||
	    (!sbx_rundir_exists(s->dirfd, "activation") &&
	     write_at(s->dirfd, "activation", &e, "1\n") != 0))
		goto fail;
	if ((s->logfd = sbx_rundir_create(s->dirfd, "output.log", &e)) < 0)
		goto fail;
	/* Subreaper first: from here every orphan of the run stays in our tree. Not dumpable:
	 * a same-uid harness cannot read the key out of our memory. */
	if (!WEAK && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
		/* QEMU user mode refuses this prctl. Go on with what is left (the process group,
		 * the walk of our descendants and the nonce scan) and say so in the receipt: an
		 * orphan that also cleared its environment could outlive the run unseen. */
		s->r.no_subreaper = 1;
		note(s,
		     "no child subreaper here (%s; QEMU user mode?): orphans are followed only "
		     "by the run's marker",
		     strerror(errno));
	}
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	s->sigfd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sigfd < 0) {
		sbx_err_set(&e, SBX_ETRANSFER, errno, "signalfd");
		goto fail;
	}
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); /* -1: poll timeout */
	s->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ifd >= 0) {
		char path[40];
		snprintf(path, sizeof path, "/proc/self/fd/%d", s->dirfd);
		uint32_t m = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR;
		if (inotify_add_watch(s->ifd, path, m) < 0 &&
		    inotify_add_watch(s->ifd, dir, m | IN_DONT_FOLLOW) < 0) {
			close(s->ifd); /* the 4 Hz fallback checks the markers instead */
			s->ifd = -1;
		}
	}
	sbx_oom_begin(&s->oom);
	uint64_t start = 0;
	sbx_proc_stat(getpid(), &start, NULL, NULL);
	if (write_at(s->dirfd, "supervisor.pid", &e, "%d %" PRIu64 "\n", (int)getpid(), start) !=
	            0 ||
	    write_at(s->dirfd, "state", &e, "launching\n") != 0)
		goto fail;
	/* Held until we exit: sbx_rundir_alive's witness. Close-on-exec and closed in the harness
	 * before exec, so no descendant keeps it. */
	struct stat pst;
	s->lockfd = sbx_rundir_open_file(s->dirfd, "supervisor.pid", &pst, &e);
	if (s->lockfd < 0)
		goto fail;
	/* Blocking: a status check may hold a shared lock on it for a moment. */
	int locked;
	while ((locked = flock(s->lockfd, LOCK_EX)) != 0 && errno == EINTR)
		;
	if (locked != 0) {
		sbx_err_set(&e, SBX_ETRANSFER, errno, "lock supervisor.pid");
		goto fail;
	}
	return 0;
fail:
	fail(s, 0, "%s", e.msg); /* the message already ends in strerror */
	s->r.err = e.errnum;
	return -1;
}

static int finish(struct sup *s)
{
	struct sbx_receipt *r = &s->r;
	for (int i = 0; i < 16 && s->outfd >= 0; i++) /* what the run wrote just before the end */
		pump(s, PUMP_BUDGET);
	int status;
	if (s->runner_failed) {
		status = 125;
	} else if (s->not_started) {
		status = s->start_code;
	} else if (!r->launched) {
		status = r->timed_out ? 124 : 128 + (s->trigger_sig ? s->trigger_sig : SIGTERM);
	} else if (!s->harness_reaped) {
		status = r->timed_out ? 124 : 125;
	} else if (WIFEXITED(s->wstatus)) {
		r->exit_kind = 1, r->exit_value = WEXITSTATUS(s->wstatus);
		status = r->exit_value;
	} else {
		r->exit_kind = 2, r->exit_value = WTERMSIG(s->wstatus);
		status = r->timed_out ? 124 : 128 + r->exit_value;
	}
	r->status = status;
	if (!s->no_files && sbx_rundir_exists(s->dirfd, "expire")) {
		struct sbx_err ignored; /* an expire that is no regular file has no reason */
		ssize_t n = sbx_rundir_read(s->dirfd, "expire", r->expire_reason,
		                            sizeof r->expire_reason, &ignored);
		while (n > 0 &&
		       (r->expire_reason[n - 1] == '\n' || r->expire_reason[n - 1] == '\r'))
			r->expire_reason[--n] = '\0';
	}
	r->oom_kills = sbx_oom_kills(&s->oom);
	r->oom_source = sbx_oom_source_name(&s->oom);
	r->oom_attributed =
	        sbx_oom_attribute(r->oom_kills, s->harness_sigkilled, s->desc_sigkilled);
	if (s->logfd >= 0)
		note(s, "done: trigger %s, status %d, kill rounds %d, termination %s", r->trigger,
		     status, r->kill_rounds,
		     r->termination_witnessed ? "witnessed" : "NOT witnessed");
	if (r->started_at_ns == 0) { /* nothing launched: the run's span is the supervisor's */
		r->started_at_ns = sbx_wall_ns() - (sbx_now_ns() - s->t0_mono);
		s->start_mono = s->t0_mono;
	}
	int64_t end_mono = sbx_now_ns();
	r->duration_ns = end_mono - s->start_mono;
	r->ended_at_ns = r->started_at_ns + r->duration_ns; /* immune to a clock step mid-run */
	r->log_bytes = s->log_bytes;
	r->log_dropped = s->log_dropped;
	size_t len = 0;
	char *json = sbx_receipt_format(r, &len);
	if (json == NULL)
		return 125;
	if (!s->no_files) {
		struct sbx_err e;
		if (sbx_receipt_write(s->dirfd, json, len, s->o->key, s->o->key_len, &e) != 0 ||
		    write_at(s->dirfd, "state", &e, "done\n") != 0)
			status = 125; /* the JSON printed below is all there is */
	}
	if (s->o->foreground) {
		fwrite(json, 1, len, stdout);
		fflush(stdout);
	}
	free(json);
	return status;
}

int sbx_supervise(const struct sbx_sup_opts *o)
{
	/* Descriptors 0-2 must be taken, or a pipe could land there and be clobbered by dup2. */
	for (int fd = 0; fd >= 0 && fd <= 2;)
		if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) > 2)
			close(fd);
	struct sup s;
	memset(&s, 0, sizeof s);
	s.o = o;
	s.dirfd = s.logfd = s.sigfd = s.pidfd = s.tfd = s.ifd = s.outfd = s.lockfd = -1;
	s.grace_ms = o->grace_ms < 0 ? DEFAULT_GRACE_MS : o->grace_ms;
	s.log_max = o->log_max <= 0 ? DEFAULT_LOG_MAX : o->log_max;
	s.t0_mono = sbx_now_ns();
	s.r.run_dir = o->dir != NULL ? o->dir : "";
	s.r.activation = 1;
	make_nonce(s.r.nonce);
	s.kt.self = getpid();
	snprintf(s.kt.marker, sizeof s.kt.marker, "SBX_SUPERVISOR=%s", s.r.nonce);

	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD), sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT), sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	/* SIGCHLD ignored by whoever started us would make the kernel reap for us (and
	 * waitpid fail with ECHILD at once): the default is needed for witnessing. */
	struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
	struct sigaction old_pipe, old_chld;
	sigaction(SIGPIPE, &ign, &old_pipe);
	sigaction(SIGCHLD, &dfl, &old_chld);

	if (setup(&s, &mask) != 0) {
		dispatch(&s, E_START_FAILED);
	} else {
		read_signals(&s); /* a signal that came before launch: nothing starts */
		check_markers(&s);
		if (s.state == S_LAUNCHING)
			launch(&s);
	}
	loop(&s);
	int status = finish(&s);

	int fds[7] = {s.dirfd, s.logfd, s.sigfd, s.pidfd, s.tfd, s.ifd, s.outfd};
	for (int i = 0; i < 7; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigaction(SIGCHLD, &old_chld, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}
