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
	sbx_cmd_free(&r->cmd);
	memset(r, 0, sizeof *r);
}

int sbx_exec_parse(const uint8_t *p, size_t len, struct sbx_exec_req *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	r->linger_ms = 200;
	char *shell = NULL;
	struct sbx_msgr rd;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&rd, p, len);
	while ((rc = sbx_msgr_next(&rd, &f)) == 1) {
		int64_t v;
		int taken = sbx_cmd_take(&r->cmd, &f);
		if (taken < 0)
			goto bad;
		if (taken)
			continue;
		switch (f.tag) {
		case SBX_T_SHELL:
			free(shell);
			if ((shell = sbx_field_strdup(&f)) == NULL)
				goto bad;
			break;
		case SBX_T_STDIN:
		case SBX_T_LINGER_MS:
			/* A linger is bounded (a day) so nothing downstream overflows. */
			if (sbx_field_i64(&f, &v) != 0 || v < 0 ||
			    (f.tag == SBX_T_LINGER_MS && v > 86400000))
				goto bad;
			if (f.tag == SBX_T_STDIN)
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
	if ((shell != NULL) == (r->cmd.argc > 0)) {
		free(shell);
		sbx_exec_req_free(r);
		return sbx_err_set(e, SBX_EUSAGE, 0, "exec needs either argv or a shell string");
	}
	if (shell != NULL) {
		r->is_shell = 1;
		char *sh = strdup("/bin/sh"), *c = strdup("-c");
		if (sh == NULL || c == NULL || sbx_strv_push(&r->cmd.argv, &r->cmd.argc, sh) != 0 ||
		    sbx_strv_push(&r->cmd.argv, &r->cmd.argc, c) != 0 ||
		    sbx_strv_push(&r->cmd.argv, &r->cmd.argc, shell) != 0) {
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
	if (!r->cmd.env_clear && environ != NULL) {
		for (char **p = environ; *p != NULL; p++) {
			size_t klen = strcspn(*p, "=");
			int replaced = 0;
			for (char **q = r->cmd.env; q != NULL && *q != NULL; q++)
				if (strncmp(*q, *p, klen) == 0 && (*q)[klen] == '=')
					replaced = 1;
			if (replaced)
				continue;
			char *s = strdup(*p);
			if (s == NULL || sbx_strv_push(&out, &n, s) != 0)
				goto fail;
		}
	}
	for (char **q = r->cmd.env; q != NULL && *q != NULL; q++) {
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
	if (r->cmd.cwd != NULL && chdir(r->cmd.cwd) != 0) {
		send_rec(status_fd, 'E', 'c', errno);
		_exit(126);
	}
	int err = sbx_pathexec(r->cmd.argv, env);
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
	const char *want = r->cmd.user != NULL ? r->cmd.user : "0";
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
		const char *obj = rec.stage == 'c'   ? r->cmd.cwd
		                  : rec.stage == 'u' ? want
		                                     : r->cmd.argv[0];
		snprintf(s->msg, sizeof s->msg, "cannot %s %s: %s%s", what, obj, strerror(rec.err),
		         rec.stage == 'x' && r->is_shell && rec.err == ENOENT
		                 ? " (the image has no /bin/sh: send argv instead)"
		                 : "");
		break;
	}
	close(st[0]);
	return 0;
}
