/* Agent injection through an exec channel (runner/inject.h): the reuse check by HELLO's
 * SHA-256, the candidate folders, streaming the binary through `sh -c 'cat > ...'`, and
 * `uname -m` for the architecture. Runners supply the channel and, optionally, a native copy. */
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "boot.h"
#include "paths.h"
#include "proto.h"
#include "sys.h"

#define COPY_TIMEOUT 300.0
#define OUT_CAP (64 * 1024)

#define CANDIDATES SBX_SANDBOX_DIRS " /"

/* The copy is run once before it takes the final name, so a folder mounted noexec (or a
 * binary of the wrong architecture) never gets a file there that would only fail later. */
static const char stream_script[] =
        "t=\"$1.$$\" && cat > \"$t\" && chmod 0755 \"$t\" && \"$t\" --version >/dev/null 2>&1 "
        "&& mv -f \"$t\" \"$1\" || { rm -f \"$t\"; exit 1; }";

/* uname -m and the agents already there (for f in /tmp/.sbx-agent-* ...), in one exec. */
static void survey_script(char *out, size_t cap)
{
	char g[32];
	int n = snprintf(out, cap, "echo \"sbx-machine:$(uname -m)\"; for f in");
	for (const char *at = CANDIDATES; sbx_dir_next(&at, ".sbx-agent-*", g, sizeof g);)
		n += snprintf(out + n, cap - (size_t)n, " %s", g);
	snprintf(out + n, cap - (size_t)n,
	         "; do [ -f \"$f\" ] && echo \"sbx-found:$f\"; done; exit 0");
}

char *sbx_shell_quote(const char *s)
{
	size_t n = 3;
	for (const char *p = s; *p != '\0'; p++)
		n += *p == '\'' ? 4 : 1;
	char *out = malloc(n), *o = out;
	if (out == NULL)
		return NULL;
	*o++ = '\'';
	for (const char *p = s; *p != '\0'; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

int sbx_inject_sha256_file(const char *path, uint8_t out[SBX_SHA256_LEN], struct sbx_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "open %s", path);
	struct sbx_sha256 h;
	sbx_sha256_init(&h);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		sbx_sha256_update(&h, buf, (size_t)n);
	int err = errno;
	close(fd);
	if (n < 0)
		return sbx_err_set(e, SBX_EUSAGE, err, "read %s", path);
	sbx_sha256_final(&h, out);
	return 0;
}

void sbx_inject_free_words(char **w)
{
	for (char **p = w; p != NULL && *p != NULL; p++)
		free(*p);
	free(w);
}

char **sbx_inject_command(const struct sbx_inject_target *t, const char *const *cmd)
{
	size_t nr = 0, nc = 0;
	while (t->run[nr] != NULL)
		nr++;
	while (cmd[nc] != NULL)
		nc++;
	char **out = calloc(nr + nc + 1, sizeof *out);
	if (out == NULL)
		return NULL;
	int ok = 1;
	size_t k = 0;
	for (size_t i = 0; ok && i < nr; i++)
		ok = (out[k++] = strdup(t->run[i])) != NULL;
	if (ok && t->joined) {
		size_t len = 1;
		char *q[16] = {0};
		for (size_t i = 0; ok && i < nc && i < 16; i++) {
			ok = (q[i] = sbx_shell_quote(cmd[i])) != NULL;
			len += ok ? strlen(q[i]) + 1 : 0;
		}
		char *line = ok ? malloc(len) : NULL;
		if (line != NULL) {
			line[0] = '\0';
			for (size_t i = 0; i < nc && i < 16; i++) {
				if (i > 0)
					strcat(line, " ");
				strcat(line, q[i]);
			}
		}
		for (size_t i = 0; i < 16; i++)
			free(q[i]);
		ok = (out[k++] = line) != NULL;
	} else {
		for (size_t i = 0; ok && i < nc; i++)
			ok = (out[k++] = strdup(cmd[i])) != NULL;
	}
	if (!ok) {
		sbx_inject_free_words(out);
		return NULL;
	}
	return out;
}

const char *sbx_last_line(const struct sbx_proc_result *r, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (r->output == NULL)
		return buf;
	size_t end = r->len;
	while (end > 0 && (r->output[end - 1] == '\n' || r->output[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start > 0 && r->output[start - 1] != '\n')
		start--;
	size_t n = end - start < cap - 1 ? end - start : cap - 1;
	memcpy(buf, r->output + start, n);
	buf[n] = '\0';
	return buf;
}

int sbx_inject_survey(const struct sbx_inject_target *t, double timeout_s, char *arch, size_t cap,
                      char *found, size_t found_cap, struct sbx_err *e)
{
	/* Markers, because the channel's own messages (ssh's warnings, kubectl's notices)
	 * share the captured output. */
	char script[512];
	survey_script(script, sizeof script);
	const char *cmd[] = {"sh", "-c", script, NULL};
	char **argv = sbx_inject_command(t, cmd);
	if (argv == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "%s", t->what);
	struct sbx_proc_result r;
	int rc = sbx_proc_capture(argv, timeout_s, OUT_CAP, &r, e);
	sbx_inject_free_words(argv);
	if (rc != 0)
		return -1;
	char machine[64] = "";
	size_t used = 0;
	if (found_cap > 0)
		found[0] = '\0';
	for (const char *p = r.output; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, "\r\n");
		if (n > 12 && strncmp(p, "sbx-machine:", 12) == 0)
			snprintf(machine, sizeof machine, "%.*s", (int)(n - 12), p + 12);
		else if (n > 10 && strncmp(p, "sbx-found:", 10) == 0 && used + n - 9 < found_cap) {
			memcpy(found + used, p + 10, n - 10);
			used += n - 10;
			found[used++] = '\n';
			found[used] = '\0';
		}
		p += n;
		p += strspn(p, "\r\n");
	}
	if (r.how != SBX_PROC_EXITED || r.code != 0 || machine[0] == '\0') {
		char line[200];
		sbx_last_line(&r, line, sizeof line);
		sbx_err_set(e, SBX_EUNAVAILABLE, 0,
		            "%s: `sh -c 'uname -m'` failed (injection needs sh, uname and cat "
		            "inside; or name an agent already there with --agent): %s",
		            t->what,
		            line[0]                       ? line
		            : r.how == SBX_PROC_TIMED_OUT ? "timed out"
		                                          : "no output");
		sbx_proc_result_free(&r);
		return -1;
	}
	sbx_proc_result_free(&r);
	const struct sbx_arch *a = sbx_arch_by_machine(machine);
	if (a == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s: no agent for machine '%s'", t->what,
		                   machine);
	snprintf(arch, cap, "%s", a->name);
	return 0;
}

static int listed(const char *list, const char *path)
{
	size_t n = strlen(path);
	for (const char *p = list; *p != '\0';) {
		size_t len = strcspn(p, "\n");
		if (len == n && strncmp(p, path, n) == 0)
			return 1;
		p += len;
		if (*p == '\n')
			p++;
	}
	return 0;
}

/* Opens a session to path; 1 when it answered with the expected digest, 0 when not (the
 * session is closed, whatever the reason: a missing or foreign file is simply not ours). */
static int try_open(const struct sbx_inject_target *t, const char *path, double timeout_s,
                    const uint8_t want[SBX_SHA256_LEN], struct sbx_session **s)
{
	struct sbx_err e;
	*s = NULL;
	char *quoted = t->joined ? sbx_shell_quote(path) : NULL;
	if (t->joined && quoted == NULL)
		return 0;
	int rc = sbx_session_open(s, t->tmpl, t->joined ? quoted : path, timeout_s, &e);
	free(quoted);
	if (rc != 0) {
		*s = NULL;
		return 0;
	}
	if (memcmp(sbx_session_hello(*s)->sha256, want, SBX_SHA256_LEN) == 0)
		return 1;
	sbx_session_close(*s);
	*s = NULL;
	return 0;
}

static double now_s(void)
{
	return (double)sbx_now_ns() / 1e9;
}

/* RUN... sh -c 'cat > tmp && chmod 0755 tmp && mv -f tmp final' sh DST with the agent on
 * stdin. 0 when it exited 0 within COPY_TIMEOUT. */
static int stream_copy(const struct sbx_inject_target *t, const char *local, const char *dst)
{
	const char *cmd[] = {"sh", "-c", stream_script, "sh", dst, NULL};
	char **argv = sbx_inject_command(t, cmd);
	if (argv == NULL)
		return -1;
	int fd = open(local, O_RDONLY | O_CLOEXEC);
	pid_t pid = fd < 0 ? -1 : fork();
	if (pid == 0) {
		setpgid(0, 0);
		int null = open("/dev/null", O_WRONLY);
		if (dup2(fd, 0) < 0 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	sbx_inject_free_words(argv);
	if (fd >= 0)
		close(fd);
	if (pid < 0)
		return -1;
	double end = now_s() + COPY_TIMEOUT;
	int st;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return -1;
		if (now_s() > end) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int sbx_inject_open(const struct sbx_inject_target *t, const char *local, double timeout_s,
                    struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e)
{
	struct sbx_inject_result dummy;
	if (res == NULL)
		res = &dummy;
	memset(res, 0, sizeof *res);
	*s = NULL;
	uint8_t want[SBX_SHA256_LEN];
	if (sbx_inject_sha256_file(local, want, e) != 0)
		return -1;
	char fname[SBX_AGENT_NAME_LEN];
	sbx_agent_name(want, fname);

	if (t->found != NULL) {
		/* A survey said what is there: try only those, in the candidates' order. */
		char dst[256];
		for (const char *at = CANDIDATES; sbx_dir_next(&at, fname, dst, sizeof dst);) {
			if (!listed(t->found, dst))
				continue;
			res->tries++;
			if (try_open(t, dst, timeout_s, want, s) == 1) {
				snprintf(res->path, sizeof res->path, "%s", dst);
				res->how = SBX_INJECT_REUSED;
				return 0;
			}
		}
	} else {
		char first[256];
		if (t->first != NULL && t->first[0] != '\0')
			snprintf(first, sizeof first, "%s", t->first);
		else {
			const char *at = CANDIDATES;
			sbx_dir_next(&at, fname, first, sizeof first);
		}
		int guess = !t->no_guess || (t->first != NULL && t->first[0] != '\0');
		res->tries += guess;
		if (guess && try_open(t, first, timeout_s, want, s) == 1) {
			snprintf(res->path, sizeof res->path, "%s", first);
			res->how = SBX_INJECT_REUSED;
			return 0;
		}
	}
	char dst[256];
	for (const char *at = CANDIDATES; sbx_dir_next(&at, fname, dst, sizeof dst);) {
		enum sbx_inject_how how = SBX_INJECT_COPIED;
		if (t->copy == NULL || t->copy(t->copy_ctx, local, dst) != 0) {
			if (stream_copy(t, local, dst) != 0)
				continue; /* not writable here (or no shell either) */
			how = SBX_INJECT_STREAMED;
		}
		res->tries++;
		if (try_open(t, dst, timeout_s, want, s) == 1) {
			snprintf(res->path, sizeof res->path, "%s", dst);
			res->how = how;
			return 0;
		}
	}
	return sbx_err_set(e, SBX_EUNAVAILABLE, 0,
	                   "could not inject the agent into %s: no place among " CANDIDATES
	                   " was writable and executable",
	                   t->what);
}
