/* The exec operation's request and its start: the command's fields (shared/cmd.h) and its
 * own (SHELL, STDIN, LINGER_MS), then the pipes and the launch (agent/launch.h), falling back
 * to the agent's user where the sandbox cannot switch users. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "proto.h"
#include "runas.h"
#include "launch.h"
#include "strv.h"

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
	const char *want = r->cmd.user != NULL ? r->cmd.user : "0";
	if (sbx_runas_lookup(want, &as, e) != 0)
		return -1;
	int need = sbx_runas_needed(&as);
	if (need < 0) {
		/* Like the reference's exec_as_root: run as the default user, and say so. */
		s->user_fallback = 1;
		snprintf(s->note, sizeof s->note,
		         "cannot switch to user %s (uid %u): the agent runs as uid %u; ran as uid "
		         "%u",
		         want, (unsigned)as.uid, (unsigned)geteuid(), (unsigned)geteuid());
	}

	char **env = sbx_launch_env(r->cmd.env, r->cmd.env_clear, NULL);
	if (env == NULL)
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "exec environment");
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
	int ok = pipe2(out, O_CLOEXEC) == 0 && pipe2(errp, O_CLOEXEC) == 0;
	if (ok && r->stdin_stream)
		ok = pipe2(in, O_CLOEXEC) == 0;
	else if (ok)
		ok = (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
	if (!ok) {
		int err = errno;
		close_pair(in), close_pair(out), close_pair(errp);
		free(env);
		return sbx_err_set(e, SBX_ETRANSFER, err, "exec pipes");
	}
	struct sbx_launch sp = {.argv = r->cmd.argv,
	                        .env = env,
	                        .cwd = r->cmd.cwd,
	                        .as = need > 0 ? &as : NULL,
	                        .fd = {in[0], out[1], errp[1]},
	                        .flags = SBX_LAUNCH_USER_FALLBACK};
	struct sbx_launch_result res;
	int rc = sbx_launch(&sp, &res, e);
	free(env);
	close(in[0]), close(out[1]), close(errp[1]);
	in[0] = out[1] = errp[1] = -1;
	if (rc != 0) {
		close_pair(in), close_pair(out), close_pair(errp);
		return -1;
	}
	s->pid = res.pid;
	s->fd_in = in[1];
	s->fd_out = out[0];
	s->fd_err = errp[0];
	if (res.fell_back != 0) {
		s->user_fallback = 1;
		snprintf(s->note, sizeof s->note, "cannot switch to user %s: %s; ran as uid %u",
		         want, strerror(res.fell_back), (unsigned)geteuid());
	}
	if (res.failed) {
		s->not_started = 1;
		s->err = res.err;
		s->code = res.code;
		char why[200];
		sbx_launch_why(&res, want, r->cmd.cwd, r->cmd.argv[0], why, sizeof why);
		snprintf(s->msg, sizeof s->msg, "%s%s", why,
		         res.stage == 'x' && r->is_shell && res.err == ENOENT
		                 ? " (the image has no /bin/sh: send argv instead)"
		                 : "");
	}
	return 0;
}
