/* Starting a command (see launch.h). */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "pathexec.h"
#include "sys.h"

extern char **environ;

/* 1 when a and b name the same variable (b may be a bare "NAME=" prefix). */
static int same_name(const char *a, const char *b)
{
	size_t k = strcspn(b, "=");
	return strncmp(a, b, k) == 0 && a[k] == '=';
}

char **sbx_launch_env(char *const *env, int env_clear, const char *marker)
{
	char *const *inherited = env_clear ? NULL : environ;
	size_t n = 2;
	for (char *const *p = inherited; p != NULL && *p != NULL; p++)
		n++;
	for (char *const *q = env; q != NULL && *q != NULL; q++)
		n++;
	char **out = calloc(n, sizeof *out);
	if (out == NULL)
		return NULL;
	size_t i = 0;
	for (char *const *p = inherited; p != NULL && *p != NULL; p++) {
		int drop = marker != NULL && same_name(*p, marker);
		for (char *const *q = env; !drop && q != NULL && *q != NULL; q++)
			drop = same_name(*p, *q);
		if (!drop)
			out[i++] = *p;
	}
	for (char *const *q = env; q != NULL && *q != NULL; q++)
		if (marker == NULL || !same_name(*q, marker))
			out[i++] = *q;
	if (marker != NULL)
		out[i] = (char *)marker;
	return out;
}

/* What the child writes on the status pipe before exec: a fallback (kind 'F') or why it
 * failed (kind 'E'). */
struct rec {
	char kind, stage;
	int err;
};

static void send_rec(int fd, char kind, char stage, int err)
{
	struct rec r = {kind, stage, err};
	ssize_t n;
	do
		n = write(fd, &r, sizeof r);
	while (n < 0 && errno == EINTR);
}

_Noreturn static void child(const struct sbx_launch *sp, int st)
{
	for (int sig = 1; sig < 65; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	/* Copied above 2 first, so no dup2 below overwrites a source still to be copied. */
	int fd[3];
	for (int i = 0; i < 3; i++)
		if ((fd[i] = fcntl(sp->fd[i], F_DUPFD_CLOEXEC, 3)) < 0) {
			send_rec(st, 'E', 'x', errno);
			_exit(126);
		}
	for (int i = 0; i < 3; i++)
		dup2(fd[i], i);
	/* A terminal session (agent/ptyhold.c): its stdin is the pty, made the controlling
	 * terminal of the new session, so ^C, SIGWINCH and job control reach the program. */
	if ((sp->flags & SBX_LAUNCH_CTTY) && ioctl(0, TIOCSCTTY, 0) != 0) {
		send_rec(st, 'E', 'x', errno);
		_exit(126);
	}
	/* Whatever the agent inherited without close-on-exec stays out of the command. */
	sbx_close_from(3, 1);
	if (sp->as != NULL) {
		int err = sbx_runas_switch(sp->as);
		if (err != 0 && !(err == EPERM && (sp->flags & SBX_LAUNCH_USER_FALLBACK))) {
			send_rec(st, 'E', 'u', err);
			_exit(126);
		}
		if (err != 0)
			send_rec(st, 'F', 'u', err);
	}
	if (sp->cwd != NULL && chdir(sp->cwd) != 0) {
		send_rec(st, 'E', 'c', errno);
		_exit(126);
	}
	int err = sbx_pathexec(sp->argv, sp->env);
	send_rec(st, 'E', 'x', err);
	_exit(err == ENOENT ? 127 : 126);
}

int sbx_launch(const struct sbx_launch *sp, struct sbx_launch_result *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	int st[2];
	if (pipe2(st, O_CLOEXEC) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "status pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close(st[0]), close(st[1]);
		return sbx_err_set(e, SBX_ETRANSFER, err, "fork");
	}
	if (pid == 0) {
		close(st[0]);
		child(sp, st[1]);
	}
	close(st[1]);
	r->pid = pid;
	struct rec rec;
	for (;;) {
		ssize_t n = read(st[0], &rec, sizeof rec);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof rec)
			break; /* closed at exec */
		if (rec.kind == 'F') {
			r->fell_back = rec.err;
			continue;
		}
		r->failed = 1;
		r->stage = rec.stage;
		r->err = rec.err;
		r->code = rec.stage == 'x' && rec.err == ENOENT ? 127 : 126;
		break;
	}
	close(st[0]);
	return 0;
}

void sbx_launch_why(const struct sbx_launch_result *r, const char *user, const char *cwd,
                    const char *argv0, char *buf, size_t cap)
{
	const char *what = r->stage == 'c'   ? "chdir to"
	                   : r->stage == 'u' ? "switch to user"
	                                     : "execute";
	const char *obj = r->stage == 'c' ? cwd : r->stage == 'u' ? user : argv0;
	snprintf(buf, cap, "cannot %s %s: %s", what, obj != NULL ? obj : "", strerror(r->err));
}
