/* Supervision requests from the host. The supervisor is started by forking twice, so it is in
 * its own session, no child of the serve loop, and holds none of the channel's descriptors:
 * losing the channel (the serve loop exits) leaves it running with its deadline. Everything
 * else goes through files in the run folder, reached the one safe way of agent/rundir.h:
 * whatever a harness put there, a request never blocks and never reads without bound. */
#include "supctl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "proto.h"
#include "rundir.h"
#include "supervise.h"
#include "sys.h"

#define READ_MAX (512 * 1024)

static void reply_sbx_err(struct sbx_msgw *w, const struct sbx_err *e)
{
	sbx_msgw_error(w, e->cls, e->errnum, e->msg);
}

/* The run folder named in a request, opened and checked as the supervisor does
 * (agent/rundir.h); -1 with a reply written. */
static int open_run_dir(const uint8_t *req, size_t len, struct sbx_msgw *w, char *path, size_t cap)
{
	struct sbx_field f;
	if (sbx_msg_find(req, len, SBX_T_RUN_DIR, &f) != 1 || sbx_field_str(&f, path, cap) != 0 ||
	    path[0] == '\0') {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "request without a run folder");
		return -1;
	}
	struct sbx_err e;
	int fd = sbx_rundir_open(path, 0, &e);
	if (fd < 0)
		reply_sbx_err(w, &e);
	return fd;
}

/* Closes every descriptor but 0, 1, 2 and points those at /dev/null. */
static void detach_fds(void)
{
	sbx_close_from(3, 0);
	int n = open("/dev/null", O_RDWR);
	if (n >= 0) {
		dup2(n, 0);
		dup2(n, 1);
		dup2(n, 2);
		if (n > 2)
			close(n);
	}
}

void sbx_supctl_run(const uint8_t *req, size_t len, const uint8_t *key, size_t key_len,
                    struct sbx_msgw *w)
{
	char dir[4096];
	struct sbx_field f;
	if (sbx_msg_find(req, len, SBX_T_RUN_DIR, &f) != 1 ||
	    sbx_field_str(&f, dir, sizeof dir) != 0 || dir[0] != '/') {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "run needs an absolute run folder");
		return;
	}
	struct sbx_err e;
	int dfd = sbx_rundir_open(dir, 1, &e);
	if (dfd < 0) {
		reply_sbx_err(w, &e);
		return;
	}
	int busy = sbx_rundir_alive(dfd), done = sbx_rundir_exists(dfd, "receipt.json"),
	    closing = sbx_rundir_exists(dfd, "closing");
	close(dfd);
	if (busy || done || closing) {
		sbx_msgw_error(w, SBX_EUSAGE, 0,
		               busy      ? "a run is active in this run folder"
		               : closing ? "the run folder is closing: no new activation"
		                         : "this run folder holds a finished run: rearm it first");
		return;
	}

	struct sbx_sup_opts o;
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.grace_ms = -1;
	struct sbx_msgr r;
	sbx_msgr_init(&r, req, len);
	int rc, bad = 0;
	while (!bad && (rc = sbx_msgr_next(&r, &f)) == 1) {
		int64_t v = 0;
		int taken = sbx_cmd_take(&o.cmd, &f);
		bad = taken < 0;
		if (taken != 0)
			continue;
		switch (f.tag) {
		case SBX_T_KEY:
			bad = 1; /* a key never comes over the channel */
			break;
		case SBX_T_GRACE_MS:
		case SBX_T_LOG_MAX:
			bad = sbx_field_i64(&f, &v) != 0 || v < 0;
			if (f.tag == SBX_T_GRACE_MS)
				o.grace_ms = v;
			else
				o.log_max = v;
			break;
		default:
			break;
		}
	}
	if (bad || rc < 0 || o.cmd.argc == 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0,
		               bad || rc < 0 ? "malformed run request" : "run needs argv");
		goto out;
	}
	if (key_len > sizeof o.key) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "receipt key too long");
		goto out;
	}
	memcpy(o.key, key, key_len);
	o.key_len = key_len;

	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		sbx_msgw_error(w, SBX_ETRANSFER, errno, "pipe");
		goto out;
	}
	pid_t child = fork();
	if (child < 0) {
		close(p[0]), close(p[1]);
		sbx_msgw_error(w, SBX_ETRANSFER, errno, "fork");
		goto out;
	}
	if (child == 0) {
		/* First child: a new session, then the supervisor as its child, then leave. */
		setsid();
		pid_t sup = fork();
		if (sup == 0) {
			int wfd = p[1];
			(void)wfd;
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			signal(SIGPIPE, SIG_IGN);
			detach_fds();
			_exit(sbx_supervise(&o) & 0xff);
		}
		ssize_t k = write(p[1], &sup, sizeof sup);
		(void)k;
		_exit(sup < 0 ? 1 : 0);
	}
	close(p[1]);
	pid_t sup = -1;
	ssize_t k = read(p[0], &sup, sizeof sup);
	close(p[0]);
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (k != (ssize_t)sizeof sup || sup <= 0) {
		sbx_msgw_error(w, SBX_ETRANSFER, 0, "could not start the supervisor");
		goto out;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_i64(w, SBX_T_PID, sup);
out:
	/* The key lives on only in the supervisor. */
	memset(o.key, 0, sizeof o.key);
	sbx_cmd_free(&o.cmd);
}

void sbx_supctl_signal(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[4096], kind[16] = "", reason[1024] = "";
	struct sbx_field sf;
	struct sbx_err e;
	/* A marker may come before the run (expire before launch): make the folder, with the
	 * same checks as a run. */
	if (sbx_msg_find(req, len, SBX_T_RUN_DIR, &sf) == 1 &&
	    sbx_field_str(&sf, dir, sizeof dir) == 0 && dir[0] == '/' && access(dir, F_OK) != 0) {
		int fd = sbx_rundir_open(dir, 1, &e);
		if (fd < 0) {
			reply_sbx_err(w, &e);
			return;
		}
		close(fd);
	}
	int dfd = open_run_dir(req, len, w, dir, sizeof dir);
	if (dfd < 0)
		return;
	struct sbx_field f;
	if (sbx_msg_find(req, len, SBX_T_NAME, &f) == 1)
		sbx_field_str(&f, kind, sizeof kind);
	if (sbx_msg_find(req, len, SBX_T_MESSAGE, &f) == 1)
		sbx_field_str(&f, reason, sizeof reason);
	if (strcmp(kind, "stop") != 0 && strcmp(kind, "expire") != 0) {
		close(dfd);
		sbx_msgw_error(w, SBX_EUSAGE, 0, "signal is stop or expire");
		return;
	}
	/* expire is refused once the activation finished or was already expired (the
	 * reference's expire returns False then); stop is always accepted. */
	int already = kind[0] == 'e' &&
	              (sbx_rundir_exists(dfd, "expire") || sbx_rundir_exists(dfd, "receipt.json"));
	if (!already && sbx_rundir_write(dfd, kind, reason, strlen(reason), &e) != 0) {
		close(dfd);
		reply_sbx_err(w, &e);
		return;
	}
	close(dfd);
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_i64(w, SBX_T_CLEAR, !already); /* 1: this request placed the marker */
}

/* The states a supervisor writes; anything else at `state` (a FIFO, a huge file, bytes a
 * harness put there) is answered as "invalid", never passed on. */
static const char *state_of(int dfd)
{
	static const char *const known[] = {"launching", "running", "terminating", "killing",
	                                    "done"};
	char buf[32];
	struct sbx_err e;
	if (!sbx_rundir_exists(dfd, "state"))
		return "none";
	ssize_t n = sbx_rundir_read(dfd, "state", buf, sizeof buf, &e);
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	for (size_t i = 0; n > 0 && i < sizeof known / sizeof known[0]; i++)
		if (strcmp(buf, known[i]) == 0)
			return known[i];
	return "invalid";
}

void sbx_supctl_status(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[4096];
	int dfd = open_run_dir(req, len, w, dir, sizeof dir);
	if (dfd < 0)
		return;
	struct sbx_err e;
	/* 0 before the first run, and when it is not a number (rearm refuses that). */
	int64_t activation = 0;
	if (!sbx_rundir_exists(dfd, "activation") ||
	    sbx_rundir_activation(dfd, &activation, &e) != 0)
		activation = 0;
	int64_t size = sbx_rundir_size(dfd, "output.log");
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_str(w, SBX_T_STATE, state_of(dfd));
	sbx_msgw_i64(w, SBX_T_ALIVE, sbx_rundir_alive(dfd));
	sbx_msgw_i64(w, SBX_T_HAS_RECEIPT, sbx_rundir_is_file(dfd, "receipt.json"));
	sbx_msgw_i64(w, SBX_T_ACTIVATION, activation);
	sbx_msgw_i64(w, SBX_T_SIZE, size > 0 ? size : 0);
	close(dfd);
}

void sbx_supctl_read(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[4096], name[32] = "";
	int dfd = open_run_dir(req, len, w, dir, sizeof dir);
	if (dfd < 0)
		return;
	struct sbx_field f;
	int64_t off = 0, want = READ_MAX;
	if (sbx_msg_find(req, len, SBX_T_NAME, &f) == 1)
		sbx_field_str(&f, name, sizeof name);
	if (sbx_msg_find(req, len, SBX_T_OFFSET, &f) == 1)
		sbx_field_i64(&f, &off);
	if (sbx_msg_find(req, len, SBX_T_LENGTH, &f) == 1)
		sbx_field_i64(&f, &want);
	if ((strcmp(name, "output.log") != 0 && strcmp(name, "receipt.json") != 0 &&
	     strcmp(name, "receipt.sig") != 0) ||
	    off < 0 || want < 0) {
		close(dfd);
		sbx_msgw_error(w, SBX_EUSAGE, 0,
		               "read output.log, receipt.json or receipt.sig from offset >= 0");
		return;
	}
	if (want > READ_MAX)
		want = READ_MAX;
	struct stat st;
	struct sbx_err e;
	int fd = sbx_rundir_open_file(dfd, name, &st, &e);
	close(dfd);
	if (fd < 0) {
		reply_sbx_err(w, &e);
		return;
	}
	/* Never more than the size it answers with, even when the file grows meanwhile: the host
	 * refuses an answer larger than the file says it is. */
	if (want > st.st_size - off)
		want = st.st_size > off ? st.st_size - off : 0;
	char *buf = malloc((size_t)want + 1);
	ssize_t n = buf ? pread(fd, buf, (size_t)want, off) : -1;
	close(fd);
	if (n < 0) {
		free(buf);
		sbx_msgw_error(w, SBX_ETRANSFER, errno, name);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_i64(w, SBX_T_SIZE, st.st_size);
	sbx_msgw_bytes(w, SBX_T_BYTES, buf, (size_t)n);
	free(buf);
}

void sbx_supctl_rearm(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[4096];
	int dfd = open_run_dir(req, len, w, dir, sizeof dir);
	if (dfd < 0)
		return;
	close(dfd);
	struct sbx_err e;
	if (sbx_rundir_rearm(dir, &e) != 0) {
		reply_sbx_err(w, &e);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

void sbx_supctl_close(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char dir[4096];
	int dfd = open_run_dir(req, len, w, dir, sizeof dir);
	if (dfd < 0)
		return;
	struct sbx_err e;
	int rc =
	        sbx_rundir_exists(dfd, "closing") ? 0 : sbx_rundir_write(dfd, "closing", "", 0, &e);
	close(dfd);
	if (rc != 0) {
		reply_sbx_err(w, &e);
		return;
	}
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}
