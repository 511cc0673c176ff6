/* Running a local program to completion with a deadline and bounded captured output. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"
#include "sys.h"

extern char **environ;

static double now_s(void)
{
	return (double)sbx_now_ns() / 1e9;
}

void sbx_proc_result_free(struct sbx_proc_result *r)
{
	free(r->output);
	r->output = NULL;
	r->len = 0;
}

/* Appends up to what fits below cap; the rest is counted as truncation. */
static void take(struct sbx_proc_result *r, size_t cap, const char *buf, size_t n)
{
	size_t room = cap - r->len;
	if (n > room) {
		r->truncated = 1;
		n = room;
	}
	memcpy(r->output + r->len, buf, n);
	r->len += n;
}

int sbx_proc_capture(char *const argv[], double timeout_s, size_t out_cap,
                     struct sbx_proc_result *r, struct sbx_err *e)
{
	return sbx_proc_capture_in(argv, NULL, timeout_s, out_cap, r, e);
}

int sbx_proc_capture_in(char *const argv[], const char *cwd, double timeout_s, size_t out_cap,
                        struct sbx_proc_result *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	r->output = malloc(out_cap + 1);
	if (r->output == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "output buffer");
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		sbx_proc_result_free(r);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	if (cwd != NULL)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	posix_spawnattr_init(&at);
	/* Its own process group, so a timeout kills everything it started. */
	posix_spawnattr_setpgroup(&at, 0);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
	double t0 = now_s();
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		sbx_proc_result_free(r);
		return sbx_err_set(e, SBX_EUNAVAILABLE, rc, "cannot start %s", argv[0]);
	}

	int timed_out = 0;
	for (;;) {
		double left = timeout_s - (now_s() - t0);
		if (left <= 0) {
			timed_out = 1;
			break;
		}
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		int n = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			continue;
		char buf[4096];
		ssize_t got = read(p[0], buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break; /* EOF: every writer is gone */
		take(r, out_cap, buf, (size_t)got);
	}
	close(p[0]);
	if (timed_out)
		kill(-pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->seconds = now_s() - t0;
	r->output[r->len] = '\0';
	if (timed_out) {
		r->how = SBX_PROC_TIMED_OUT;
	} else if (WIFSIGNALED(st)) {
		r->how = SBX_PROC_SIGNALED;
		r->code = WTERMSIG(st);
	} else {
		r->how = SBX_PROC_EXITED;
		r->code = WEXITSTATUS(st);
	}
	return 0;
}
