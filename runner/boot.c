/* Injection in one exec (runner/boot.h): the script run inside and the I/O that drives the
 * dialog (runner/boot_dialog.c) on a session's channel before the agent's HELLO. */
#include "boot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "channel.h"
#include "proto.h"

/* Stdout carries the dialog's lines only; every other output goes to stderr or nowhere.
 * A file is written as NAME.PID first, run once with --version (a noexec folder or a
 * truncated copy never takes the final name), then renamed. `true >F` tests a folder without
 * reading stdin (a failed redirection of a regular built-in does not end the shell). */
static const char script[] =
        "echo \"sbx-machine:$(uname -m)\"\n"
        "read -r n z || exit 1\n"
        "case \"$n\" in .sbx-agent-*) ;; *) exit 1 ;; esac\n"
        "for d in " SBX_SANDBOX_DIRS " ''; do\n"
        "  p=\"$d/$n\"\n"
        "  if [ -f \"$p\" ] && \"$p\" --version >/dev/null 2>&1; then\n"
        "    echo \"sbx-exec:$p\"; exec \"$p\" serve\n"
        "  fi\n"
        "done\n"
        "echo sbx-send\n"
        "r=\n"
        "for d in " SBX_SANDBOX_DIRS " ''; do\n"
        "  f=\"$d/$n.$$\"\n"
        "  if [ -z \"$r\" ]; then\n"
        "    true 2>/dev/null >\"$f\" || continue\n"
        "    r=\"$f\"\n"
        "    if ! head -c \"$z\" >\"$f\" || [ \"$(wc -c <\"$f\")\" -ne \"$z\" ]; then\n"
        "      rm -f \"$f\"; echo sbx-fail:short; exit 1\n"
        "    fi\n"
        "  elif ! cat \"$r\" 2>/dev/null >\"$f\"; then\n"
        "    rm -f \"$f\"; continue\n"
        "  fi\n"
        "  if chmod 0755 \"$f\" && \"$f\" --version >/dev/null 2>&1 && mv -f \"$f\" \"$d/$n\"; "
        "then\n"
        "    [ \"$r\" = \"$f\" ] || rm -f \"$r\"\n"
        "    echo \"sbx-exec:$d/$n\"; exec \"$d/$n\" serve\n"
        "  fi\n"
        "  [ \"$r\" = \"$f\" ] || rm -f \"$f\"\n"
        "done\n"
        "[ -z \"$r\" ] || rm -f \"$r\"\n"
        "echo sbx-fail:nowhere\n"
        "exit 1\n";

#define MAX_LINE 512

/* ---- the I/O ---- */

struct agent_file {
	char path[PATH_MAX];
	uint8_t sha[SBX_SHA256_LEN];
	uint8_t *bytes;
	size_t size;
};

static int load_agent(const char *agent_dir, const char *arch, struct agent_file *a,
                      struct sbx_err *e)
{
	if (sbx_agent_path(agent_dir, arch, a->path, sizeof a->path, e) != 0)
		return -1;
	int fd = open(a->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_set(e, SBX_EUSAGE, err, "agent %s", a->path);
	}
	a->size = (size_t)st.st_size;
	a->bytes = malloc(a->size);
	size_t got = 0;
	while (a->bytes != NULL && got < a->size) {
		ssize_t r = read(fd, a->bytes + got, a->size - got);
		if (r <= 0 && !(r < 0 && errno == EINTR))
			break;
		got += r > 0 ? (size_t)r : 0;
	}
	close(fd);
	if (a->bytes == NULL || got != a->size)
		return sbx_err_set(e, SBX_EUSAGE, errno, "agent %s", a->path);
	sbx_sha256(a->bytes, a->size, a->sha);
	return 0;
}

/* One line, a byte at a time: nothing past its newline is taken from the channel. */
static int read_line(int fd, char *buf, size_t cap, size_t *len, int64_t deadline_ns,
                     struct sbx_err *e)
{
	*len = 0;
	for (;;) {
		if (sbx_now_ns() >= deadline_ns)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "agent delivery: no agent before the deadline");
		char c;
		ssize_t r = read(fd, &c, 1);
		if (r == 1) {
			if (c == '\n')
				return 0;
			if (*len + 1 >= cap)
				return sbx_err_set(e, SBX_EUNAVAILABLE, 0,
				                   "agent delivery: a line too long");
			buf[(*len)++] = c;
		} else if (r == 0) {
			return sbx_err_set(e, SBX_EUNAVAILABLE, 0,
			                   "agent delivery: the channel ended (no shell?)");
		} else if (errno == EAGAIN) {
			if (sbx_fd_wait(fd, POLLIN, deadline_ns, "agent delivery", e) != 0)
				return -1;
		} else if (errno != EINTR) {
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "agent delivery: read");
		}
	}
}

static int write_all(int fd, const void *p, size_t n, int64_t deadline_ns, struct sbx_err *e)
{
	const uint8_t *b = p;
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w > 0) {
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			if (sbx_fd_wait(fd, POLLOUT, deadline_ns, "agent delivery", e) != 0)
				return -1;
		} else if (!(w < 0 && errno == EINTR)) {
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "agent delivery: write");
		}
	}
	return 0;
}

struct run_ctx {
	const char *agent_dir;
	struct sbx_boot_dialog d;
	struct agent_file agent;
};

static int run(void *ctx, int to_fd, int from_fd, int64_t deadline_ns, struct sbx_err *e)
{
	struct run_ctx *c = ctx;
	char line[MAX_LINE], reply[64];
	for (;;) {
		size_t len;
		if (read_line(from_fd, line, sizeof line, &len, deadline_ns, e) != 0)
			return -1;
		switch (sbx_boot_line(&c->d, line, len, e)) {
		case SBX_BOOT_MORE:
			break;
		case SBX_BOOT_MACHINE: {
			if (load_agent(c->agent_dir, c->d.arch, &c->agent, e) != 0)
				return -1;
			size_t n = sbx_boot_reply(c->agent.sha, c->agent.size, reply, sizeof reply);
			if (write_all(to_fd, reply, n, deadline_ns, e) != 0)
				return -1;
			break;
		}
		case SBX_BOOT_SEND:
			if (write_all(to_fd, c->agent.bytes, c->agent.size, deadline_ns, e) != 0)
				return -1;
			break;
		case SBX_BOOT_RUNS:
			return 0;
		case SBX_BOOT_FAIL:
			return -1;
		}
	}
}

int sbx_boot_open(const struct sbx_inject_target *t, const char *agent_dir, double timeout_s,
                  struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e)
{
	*s = NULL;
	memset(res, 0, sizeof *res);
	const char *cmd[] = {"sh", "-c", script, "sh", NULL};
	char **argv = sbx_inject_command(t, cmd);
	struct run_ctx *c = calloc(1, sizeof *c);
	if (argv == NULL || c == NULL) {
		sbx_inject_free_words(argv);
		free(c);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "%s", t->what);
	}
	c->agent_dir = agent_dir;
	sbx_boot_init(&c->d);
	struct sbx_boot boot = {run, c};
	int rc = sbx_session_open_boot(s, argv, "", timeout_s, &boot, e);
	sbx_inject_free_words(argv);
	if (rc == 0 && memcmp(sbx_session_hello(*s)->sha256, c->agent.sha, SBX_SHA256_LEN) != 0) {
		sbx_session_close(*s);
		*s = NULL;
		rc = sbx_err_set(e, SBX_EUNAVAILABLE, 0,
		                 "%s: the agent at %s is not this build's (SHA-256 differs)",
		                 t->what, c->d.path);
	}
	if (rc == 0) {
		snprintf(res->path, sizeof res->path, "%s", c->d.path);
		res->how = c->d.sent ? SBX_INJECT_STREAMED : SBX_INJECT_REUSED;
		res->tries = 1;
	}
	free(c->agent.bytes);
	free(c);
	return rc;
}
