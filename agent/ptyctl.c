/* Terminal session requests of the serve loop (ptyctl.h). */
#include "ptyctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto.h"
#include "ptyhold.h"
#include "sys.h"
#include "xfer.h"

/* The holder of the session the request names: a connected socket, or -1 with w answered. */
static int connect_holder(const char *id, struct sbx_msgw *w)
{
	char root[200];
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!sbx_pty_id_ok(id)) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "a pty session id is 16 lowercase hex digits");
		return -1;
	}
	if (sbx_pty_root(root, sizeof root, 0) != 0 ||
	    (size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/%s/s", root, id) >=
	            sizeof a.sun_path) {
		sbx_msgw_error(w, SBX_EUSAGE, ENOENT, "no such pty session");
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sbx_msgw_error(w, SBX_ETRANSFER, errno, "socket");
		return -1;
	}
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int err = errno;
		close(fd);
		sbx_msgw_error(w, SBX_EUSAGE, err == ECONNREFUSED ? ENOENT : err,
		               "no such pty session (or its holder is gone)");
		return -1;
	}
	return fd;
}

/* One request to the holder and its answer into w (at most SBX_PTY_MSG_MAX bytes). */
static int ask(int fd, const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                  (uint8_t)len};
	uint32_t n;
	if (len > SBX_PTY_MSG_MAX || send(fd, hdr, 4, MSG_NOSIGNAL) != 4 ||
	    send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len || sbx_pty_recv_all(fd, hdr, 4) != 0 ||
	    (n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3]) >
	            SBX_PTY_MSG_MAX ||
	    n > w->cap - w->len) {
		sbx_msgw_error(w, SBX_ETRANSFER, errno, "the pty session's holder did not answer");
		return -1;
	}
	if (sbx_pty_recv_all(fd, w->buf + w->len, n) != 0) {
		sbx_msgw_error(w, SBX_ETRANSFER, errno, "the pty session's holder did not answer");
		return -1;
	}
	w->len += n;
	return 0;
}

static int id_of(const uint8_t *req, size_t len, char id[SBX_PTY_ID_LEN + 1])
{
	struct sbx_field f;
	id[0] = '\0';
	return sbx_msg_find(req, len, SBX_T_PTY_ID, &f) == 1 &&
	                       sbx_field_str(&f, id, SBX_PTY_ID_LEN + 1) == 0
	               ? 0
	               : -1;
}

void sbx_ptyctl_spawn(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	struct sbx_pty_spec sp;
	struct sbx_err e;
	char id[SBX_PTY_ID_LEN + 1];
	pid_t pid;
	if (sbx_pty_parse(req, len, &sp, &e) != 0 || sbx_pty_spawn(&sp, id, &pid, &e) != 0) {
		sbx_msgw_error(w, e.cls, e.errnum, e.msg);
		if (e.cls != SBX_EUSAGE)
			sbx_pty_spec_free(&sp);
		return;
	}
	sbx_pty_spec_free(&sp);
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_str(w, SBX_T_PTY_ID, id);
	sbx_msgw_i64(w, SBX_T_PID, pid);
}

void sbx_ptyctl_forward(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	char id[SBX_PTY_ID_LEN + 1];
	if (id_of(req, len, id) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "the request names no pty session");
		return;
	}
	int fd = connect_holder(id, w);
	if (fd < 0)
		return;
	ask(fd, req, len, w);
	close(fd);
}

void sbx_ptyctl_list(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	(void)req, (void)len;
	char root[200];
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	if (sbx_pty_root(root, sizeof root, 0) != 0)
		return;
	DIR *d = opendir(root);
	if (d == NULL)
		return;
	uint8_t q[32], *one = malloc(SBX_PTY_MSG_MAX);
	struct sbx_msgw qw;
	sbx_msgw_init(&qw, q, sizeof q);
	sbx_msgw_i64(&qw, SBX_T_OP, SBX_OP_PTY_STATUS);
	struct dirent *de;
	int n = 0;
	while (one != NULL && (de = readdir(d)) != NULL && n < SBX_PTY_MAX) {
		if (!sbx_pty_id_ok(de->d_name))
			continue;
		struct sbx_msgw ow;
		sbx_msgw_init(&ow, one, SBX_PTY_MSG_MAX);
		int fd = connect_holder(de->d_name, &ow);
		if (fd < 0)
			continue;
		int rc = ask(fd, q, qw.len, &ow);
		close(fd);
		struct sbx_field f;
		int64_t st = -1;
		if (rc != 0 || sbx_msg_find(one, ow.len, SBX_T_STATUS, &f) != 1 ||
		    sbx_field_i64(&f, &st) != 0 || st != 0)
			continue;
		sbx_msgw_bytes(w, SBX_T_SESSION, one, ow.len);
		n++;
	}
	free(one);
	closedir(d);
}

/* ---- the relay child ---- */

struct pend {
	uint8_t b[5 + SBX_PTY_CHUNK];
	size_t len, off;
};

static int put_res(int fd, const uint8_t *m, size_t n)
{
	return write(fd, m, n) == (ssize_t)n ? 0 : -1;
}

/* Relays until the holder's END or EVICT, its loss, or the job's pipes closing (a detach). */
_Noreturn static void relay(int sock, int in, int out, int err, int res)
{
	static struct pend hf; /* a frame from the holder, being read then written on */
	static uint8_t ib[SBX_PTY_CHUNK];
	size_t ilen = 0, ioff = 0, need = 5;
	int in_eof = 0, wr_fd = -1;
	uint8_t rbuf[SBX_XFER_RES_MAX];
	struct sbx_msgw w;
	sbx_msgw_init(&w, rbuf, sizeof rbuf);
	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
	fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
	for (;;) {
		/* Phase: reading a frame (hf.len < need) or writing its body on (wr_fd). */
		struct pollfd p[3];
		int n = 0, is = -1, ii = -1, io = -1;
		short sev = 0;
		if (wr_fd < 0)
			sev |= POLLIN;
		if (ioff < ilen)
			sev |= POLLOUT;
		p[is = n++] = (struct pollfd){sock, sev, 0};
		if (ioff >= ilen && !in_eof)
			p[ii = n++] = (struct pollfd){in, POLLIN, 0};
		if (wr_fd >= 0)
			p[io = n++] = (struct pollfd){wr_fd, POLLOUT, 0};
		int iw = -1; /* the job's stdout, watched for its reader's end (a detach) */
		struct pollfd q[4];
		memcpy(q, p, sizeof p);
		if (wr_fd != out)
			q[iw = n++] = (struct pollfd){out, 0, 0};
		if (poll(q, (nfds_t)n, -1) < 0 && errno != EINTR)
			_exit(1);
		memcpy(p, q, sizeof p);
		if (iw >= 0 && (q[iw].revents & POLLERR)) {
			sbx_msgw_i64(&w, SBX_T_STATUS, 0);
			sbx_msgw_i64(&w, SBX_T_CANCELLED, 1);
			put_res(res, w.buf, w.len);
			_exit(0);
		}
		if (io >= 0 && p[io].revents) {
			ssize_t k = write(wr_fd, hf.b + hf.off, hf.len - hf.off);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				/* the job's output closed: detached (a CANCEL, or the session
				 * ended) */
				sbx_msgw_i64(&w, SBX_T_STATUS, 0);
				sbx_msgw_i64(&w, SBX_T_CANCELLED, 1);
				put_res(res, w.buf, w.len);
				_exit(0);
			}
			if (k > 0 && (hf.off += (size_t)k) == hf.len) {
				wr_fd = -1;
				hf.len = hf.off = 0;
				need = 5;
			}
		}
		if (ii >= 0 && p[ii].revents) {
			ssize_t k = read(in, ib, sizeof ib);
			if (k > 0)
				ilen = (size_t)k, ioff = 0;
			else if (k == 0 || (errno != EAGAIN && errno != EINTR))
				in_eof = 1; /* a detach closes it too: the program's input stays
				               open */
		}
		if (p[is].revents & POLLOUT && ioff < ilen) {
			ssize_t k = send(sock, ib + ioff, ilen - ioff, MSG_NOSIGNAL);
			if (k > 0)
				ioff += (size_t)k;
		}
		if (wr_fd < 0 && (p[is].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = recv(sock, hf.b + hf.len, need - hf.len, 0);
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k <= 0) {
				sbx_msgw_error(&w, SBX_ETRANSFER, 0,
				               "the pty session's holder went away (the session "
				               "was closed)");
				put_res(res, w.buf, w.len);
				_exit(0);
			}
			hf.len += (size_t)k;
			if (hf.len < need)
				continue;
			uint32_t blen = (uint32_t)hf.b[1] << 24 | (uint32_t)hf.b[2] << 16 |
			                (uint32_t)hf.b[3] << 8 | hf.b[4];
			if (blen > SBX_PTY_CHUNK)
				_exit(1);
			if (need == 5 && blen > 0) {
				need = 5 + blen;
				continue;
			}
			int kind = hf.b[0];
			if (kind == SBX_PTY_FR_OUT || kind == SBX_PTY_FR_ERR) {
				wr_fd = kind == SBX_PTY_FR_OUT ? out : err;
				hf.off = 5;
				if (hf.len == 5) {
					wr_fd = -1;
					hf.len = hf.off = 0;
					need = 5;
				}
				continue;
			}
			sbx_msgw_i64(&w, SBX_T_STATUS, 0);
			if (kind == SBX_PTY_FR_EVICT) {
				sbx_msgw_i64(&w, SBX_T_EVICTED, 1);
			} else if (kind == SBX_PTY_FR_END && w.len + blen <= w.cap) {
				memcpy(w.buf + w.len, hf.b + 5, blen);
				w.len += blen;
			} else {
				_exit(1);
			}
			put_res(res, w.buf, w.len);
			_exit(0);
		}
	}
}

int sbx_ptyctl_stream(const uint8_t *req, size_t len, struct sbx_pty_relay *c, struct sbx_err *e)
{
	char id[SBX_PTY_ID_LEN + 1];
	uint8_t ans[4096];
	struct sbx_msgw w;
	sbx_msgw_init(&w, ans, sizeof ans);
	if (id_of(req, len, id) != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the request names no pty session");
	int fd = connect_holder(id, &w);
	if (fd >= 0 && ask(fd, req, len, &w) != 0) {
		close(fd);
		fd = -1;
	}
	struct sbx_field f;
	int64_t st = -1, err = 0;
	if (sbx_msg_find(ans, w.len, SBX_T_STATUS, &f) == 1)
		sbx_field_i64(&f, &st);
	if (st != 0) {
		char msg[200] = "the pty session's holder refused the stream";
		if (sbx_msg_find(ans, w.len, SBX_T_MESSAGE, &f) == 1)
			sbx_field_str(&f, msg, sizeof msg);
		if (sbx_msg_find(ans, w.len, SBX_T_ERRNO, &f) == 1)
			sbx_field_i64(&f, &err);
		if (fd >= 0)
			close(fd);
		sbx_err_set(e, st > 0 && st <= SBX_EUSAGE ? (enum sbx_err_class)st : SBX_ETRANSFER,
		            0, "%s", msg);
		e->errnum = (int)err;
		return -1;
	}
	int pin[2], pout[2], perr[2], pres[2];
	if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0 ||
	    pipe2(perr, O_CLOEXEC) != 0 || pipe2(pres, O_CLOEXEC) != 0) {
		close(fd);
		return sbx_err_set(e, SBX_ETRANSFER, errno, "pty stream pipes");
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(fd);
		return sbx_err_set(e, SBX_ETRANSFER, errno, "fork");
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_IGN);
		close(pin[1]), close(pout[0]), close(perr[0]), close(pres[0]);
		/* Only its own fds: the connection's must not stay open in here. */
		int keep[5] = {fd, pin[0], pout[1], perr[1], pres[1]};
		for (int i = 0; i < 5; i++) {
			int k = fcntl(keep[i], F_DUPFD_CLOEXEC, 10);
			keep[i] = k;
		}
		for (int i = 0; i < 5; i++)
			dup2(keep[i], 3 + i);
		sbx_close_from(8, 0);
		relay(3, 4, 5, 6, 7);
	}
	close(fd);
	close(pin[0]), close(pout[1]), close(perr[1]), close(pres[1]);
	c->pid = pid;
	c->fd_in = pin[1];
	c->fd_out = pout[0];
	c->fd_err = perr[0];
	c->fd_res = pres[0];
	return 0;
}
