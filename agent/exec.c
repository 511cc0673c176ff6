/* Starting a command for the exec operation: environment, user, cwd, PATH search without a
 * shell, and a status pipe that tells "could not start" (with errno) from a running program. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "msg.h"
#include "pathexec.h"
#include "proto.h"
#include "runas.h"
#include "strv.h"

extern char **environ;

void sbx_exec_req_free(struct sbx_exec_req *r)
{
	sbx_strv_free(r->argv);
	sbx_strv_free(r->env);
	free(r->cwd);
	free(r->user);
	memset(r, 0, sizeof *r);
}

int sbx_exec_parse(const uint8_t *p, size_t len, struct sbx_exec_req *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	r->linger_ms = 200;
	size_t nargv = 0, nenv = 0;
	char *shell = NULL;
	struct sbx_msgr rd;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&rd, p, len);
	while ((rc = sbx_msgr_next(&rd, &f)) == 1) {
		int64_t v;
		char *s = NULL;
		switch (f.tag) {
		case SBX_T_ARGV:
		case SBX_T_ENV:
		case SBX_T_SHELL:
		case SBX_T_CWD:
		case SBX_T_USER:
			s = sbx_field_strdup(&f);
			if (s == NULL)
				goto bad;
			if (f.tag == SBX_T_ARGV) {
				if (sbx_strv_push(&r->argv, &nargv, s) != 0)
					goto bad;
			} else if (f.tag == SBX_T_ENV) {
				if (strchr(s, '=') == NULL || s[0] == '=') {
					free(s);
					goto bad;
				}
				if (sbx_strv_push(&r->env, &nenv, s) != 0)
					goto bad;
			} else if (f.tag == SBX_T_SHELL) {
				free(shell);
				shell = s;
			} else if (f.tag == SBX_T_CWD) {
				free(r->cwd);
				r->cwd = s;
			} else {
				free(r->user);
				r->user = s;
			}
			break;
		case SBX_T_ENV_CLEAR:
		case SBX_T_TIMEOUT_MS:
		case SBX_T_STDIN:
		case SBX_T_LINGER_MS:
			/* Times are bounded (a day) so nothing downstream overflows. */
			if (sbx_field_i64(&f, &v) != 0 || v < 0 ||
			    ((f.tag == SBX_T_TIMEOUT_MS || f.tag == SBX_T_LINGER_MS) &&
			     v > 86400000))
				goto bad;
			if (f.tag == SBX_T_ENV_CLEAR)
				r->env_clear = v != 0;
			else if (f.tag == SBX_T_TIMEOUT_MS)
				r->timeout_ms = v;
			else if (f.tag == SBX_T_STDIN)
				r->stdin_stream = v != 0;
			else
				r->linger_ms = v;
			break;
		default:
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if ((shell != NULL) == (nargv > 0)) {
		free(shell);
		sbx_exec_req_free(r);
		return sbx_err_set(e, SBX_EUSAGE, 0, "exec needs either argv or a shell string");
	}
	if (shell != NULL) {
		r->is_shell = 1;
		char *sh = strdup("/bin/sh"), *c = strdup("-c");
		if (sh == NULL || c == NULL || sbx_strv_push(&r->argv, &nargv, sh) != 0 ||
		    sbx_strv_push(&r->argv, &nargv, c) != 0 ||
		    sbx_strv_push(&r->argv, &nargv, shell) != 0) {
			sbx_exec_req_free(r);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "exec request");
		}
	}
	return 0;
bad:
	free(shell);
	sbx_exec_req_free(r);
	return sbx_err_set(e, SBX_EUSAGE, 0, "malformed exec request");
}

/* The environment the child gets: inherited (unless cleared) with the request's entries
 * replacing same-named ones. */
static char **build_env(const struct sbx_exec_req *r)
{
	char **out = NULL;
	size_t n = 0;
	if (!r->env_clear && environ != NULL) {
		for (char **p = environ; *p != NULL; p++) {
			size_t klen = strcspn(*p, "=");
			int replaced = 0;
			for (char **q = r->env; q != NULL && *q != NULL; q++)
				if (strncmp(*q, *p, klen) == 0 && (*q)[klen] == '=')
					replaced = 1;
			if (replaced)
				continue;
			char *s = strdup(*p);
			if (s == NULL || sbx_strv_push(&out, &n, s) != 0)
				goto fail;
		}
	}
	for (char **q = r->env; q != NULL && *q != NULL; q++) {
		char *s = strdup(*q);
		if (s == NULL || sbx_strv_push(&out, &n, s) != 0)
			goto fail;
	}
	if (out == NULL) {
		out = calloc(1, sizeof *out);
	}
	return out;
fail:
	sbx_strv_free(out);
	return NULL;
}

/* Status records the child writes before exec: a user-switch fallback, or the failure. */
struct rec {
	char kind;  /* 'F' fallback, 'E' failed */
	char stage; /* 'c' chdir, 'x' exec, 'u' user */
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

/* In the child, after fork: never returns. */
static void child(const struct sbx_exec_req *r, char **env, int fds[3], int status_fd,
                  const struct sbx_runas *as)
{
	/* Signals: default dispositions and an empty mask, since both survive execve. */
	for (int sig = 1; sig < 65; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	for (int i = 0; i < 3; i++) {
		if (fds[i] != i) {
			dup2(fds[i], i);
		} else {
			int fl = fcntl(i, F_GETFD);
			fcntl(i, F_SETFD, fl & ~FD_CLOEXEC);
		}
	}
	if (as != NULL) {
		int err = sbx_runas_switch(as);
		if (err != 0) {
			if (err != EPERM) {
				send_rec(status_fd, 'E', 'u', err);
				_exit(126);
			}
			send_rec(status_fd, 'F', 'u', err);
		}
	}
	if (r->cwd != NULL && chdir(r->cwd) != 0) {
		send_rec(status_fd, 'E', 'c', errno);
		_exit(126);
	}
	int err = sbx_pathexec(r->argv, env);
	send_rec(status_fd, 'E', 'x', err);
	_exit(err == ENOENT ? 127 : 126);
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

int sbx_exec_spawn(const struct sbx_exec_req *r, struct sbx_spawned *s, struct sbx_err *e)
{
	memset(s, 0, sizeof *s);
	s->fd_in = s->fd_out = s->fd_err = -1;

	struct sbx_runas as;
	int switch_user = 0;
	const char *want = r->user != NULL ? r->user : "0";
	if (sbx_runas_lookup(want, &as, e) != 0)
		return -1;
	uid_t uid = as.uid;
	if (uid != geteuid()) {
		if (geteuid() == 0) {
			switch_user = 1;
		} else {
			/* Like the reference's exec_as_root: run as the default user, and say so.
			 */
			s->user_fallback = 1;
			snprintf(s->note, sizeof s->note,
			         "cannot switch to user %s (uid %u): the agent runs as uid %u; ran "
			         "as uid %u",
			         want, (unsigned)uid, (unsigned)geteuid(), (unsigned)geteuid());
		}
	}

	char **env = build_env(r);
	if (env == NULL)
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "exec environment");
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, st[2] = {-1, -1};
	int ok = pipe2(out, O_CLOEXEC) == 0 && pipe2(errp, O_CLOEXEC) == 0 &&
	         pipe2(st, O_CLOEXEC) == 0;
	if (ok && r->stdin_stream)
		ok = pipe2(in, O_CLOEXEC) == 0;
	else if (ok)
		ok = (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
	if (!ok) {
		int err = errno;
		close_pair(in), close_pair(out), close_pair(errp), close_pair(st);
		sbx_strv_free(env);
		return sbx_err_set(e, SBX_ETRANSFER, err, "exec pipes");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close_pair(in), close_pair(out), close_pair(errp), close_pair(st);
		sbx_strv_free(env);
		return sbx_err_set(e, SBX_ETRANSFER, err, "fork");
	}
	if (pid == 0) {
		close(st[0]);
		int fds[3] = {in[0], out[1], errp[1]};
		child(r, env, fds, st[1], switch_user ? &as : NULL);
	}
	sbx_strv_free(env);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	close(st[1]);
	s->pid = pid;
	s->fd_in = in[1];
	s->fd_out = out[0];
	s->fd_err = errp[0];

	/* The status pipe closes at exec (close-on-exec) or carries why not: a short wait. */
	struct rec rec;
	ssize_t n;
	for (;;) {
		n = read(st[0], &rec, sizeof rec);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof rec)
			break;
		if (rec.kind == 'F') {
			s->user_fallback = 1;
			snprintf(s->note, sizeof s->note,
			         "cannot switch to user %s: %s; ran as uid %u", want,
			         strerror(rec.err), (unsigned)geteuid());
			continue;
		}
		s->not_started = 1;
		s->err = rec.err;
		s->code = rec.stage == 'x' && rec.err == ENOENT ? 127 : 126;
		const char *what = rec.stage == 'c'   ? "chdir to"
		                   : rec.stage == 'u' ? "switch to user"
		                                      : "execute";
		const char *obj = rec.stage == 'c' ? r->cwd : rec.stage == 'u' ? want : r->argv[0];
		snprintf(s->msg, sizeof s->msg, "cannot %s %s: %s%s", what, obj, strerror(rec.err),
		         rec.stage == 'x' && r->is_shell && rec.err == ENOENT
		                 ? " (the image has no /bin/sh: send argv instead)"
		                 : "");
		break;
	}
	close(st[0]);
	return 0;
}
