/* The terminal session's holder (ptyhold.h): one poll loop over the program's output, its
 * socket, the client's stream connection and SIGCHLD. Output is read only as far as the
 * attached client has taken it (so a flooding program waits on its terminal instead of
 * outrunning the window of a client that is reading), and freely while nobody is attached. */
#include "ptyhold.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "hex.h"
#include "killtree.h"
#include "launch.h"
#include "msg.h"
#include "ring.h"
#include "runas.h"
#include "strv.h"
#include "sys.h"

#define CLAIM_WAIT_NS (10 * 1000000000LL)
#define IDLE_AFTER_EXIT_NS (3600 * 1000000000LL)
#define EVICT_WAIT_NS (1000000000LL)

int sbx_pty_id_ok(const char *id)
{
	size_t i = 0;
	for (; id[i] != '\0'; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return i == SBX_PTY_ID_LEN;
}

int sbx_pty_root(char *buf, size_t cap, int create)
{
	char dirs[] = SBX_SANDBOX_DIRS;
	for (char *save = NULL, *d = strtok_r(dirs, " ", &save); d != NULL;
	     d = strtok_r(NULL, " ", &save)) {
		if ((size_t)snprintf(buf, cap, "%s/%s", d, SBX_PTY_DIR) >= cap)
			continue;
		if (create)
			mkdir(buf, 0700);
		struct stat st;
		if (lstat(buf, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		    (st.st_mode & 077) == 0)
			return 0;
	}
	return -1;
}

void sbx_pty_spec_free(struct sbx_pty_spec *sp)
{
	sbx_cmd_free(&sp->cmd);
}

int sbx_pty_parse(const uint8_t *req, size_t len, struct sbx_pty_spec *sp, struct sbx_err *e)
{
	memset(sp, 0, sizeof *sp);
	sp->rows = 24;
	sp->cols = 80;
	sp->retain = SBX_PTY_RETAIN_DEFAULT;
	struct sbx_msgr r;
	struct sbx_field f;
	char *shell = NULL;
	int rc, bad = 0;
	sbx_msgr_init(&r, req, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		int taken = sbx_cmd_take(&sp->cmd, &f);
		if (taken < 0) {
			bad = 1;
			break;
		}
		if (taken > 0)
			continue;
		int64_t v = 0;
		switch (f.tag) {
		case SBX_T_SHELL:
			free(shell);
			shell = sbx_field_strdup(&f);
			bad = shell == NULL;
			break;
		case SBX_T_ROWS:
		case SBX_T_COLS:
			bad = sbx_field_i64(&f, &v) != 0 || v < 1 || v > 65535;
			*(f.tag == SBX_T_ROWS ? &sp->rows : &sp->cols) = (int)v;
			break;
		case SBX_T_PIPE:
			bad = sbx_field_i64(&f, &v) != 0;
			sp->pipe = v != 0;
			break;
		case SBX_T_RETAIN:
			bad = sbx_field_i64(&f, &v) != 0 || v < SBX_PTY_RETAIN_MIN ||
			      v > SBX_PTY_RETAIN_MAX;
			sp->retain = (size_t)v;
			break;
		default:
			break;
		}
		if (bad)
			break;
	}
	if (rc < 0 || bad || (shell != NULL && sp->cmd.argc > 0)) {
		free(shell);
		sbx_pty_spec_free(sp);
		return sbx_err_set(e, SBX_EUSAGE, 0, "malformed pty request");
	}
	/* A shell string runs under /bin/sh -c; neither starts the shell itself. */
	const char *words[3] = {"/bin/sh", "-c", shell};
	size_t n = shell != NULL ? 3 : sp->cmd.argc == 0 ? 1 : 0;
	for (size_t i = 0; i < n; i++) {
		char *w = i == 2 ? shell : strdup(words[i]);
		if (w == NULL || sbx_strv_push(&sp->cmd.argv, &sp->cmd.argc, w) != 0) {
			if (i != 2)
				free(shell);
			free(w);
			sbx_pty_spec_free(sp);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "pty request");
		}
	}
	if (shell != NULL && n == 0)
		free(shell);
	return 0;
}

/* ---- the holder ---- */

struct conn {
	int fd;         /* -1: none */
	uint64_t at[2]; /* the next offset to send, per channel */
	uint8_t *ob;    /* a frame being written */
	size_t olen, ooff;
	uint8_t ib[4096]; /* input not yet taken by the program */
	size_t ilen, ioff;
	int in_eof;
	int evicted; /* only the EVICT frame goes out, then it closes */
	int ended;   /* the END frame is queued: close once written */
	int64_t evict_ns;
};

struct hold {
	char id[SBX_PTY_ID_LEN + 1];
	char dir[256];
	int lfd, sig_fd;
	int pipe;
	int fd_out[2]; /* the program's output (pty master; stdout, stderr pipes); -1 at EOF */
	int fd_in;     /* the program's input (the master again; the stdin pipe) */
	int master;
	pid_t pid;
	int exited, status;
	int64_t exit_ns;
	int swept; /* every process of the session is gone */
	struct sbx_ring ring[2];
	struct sbx_kt kt;
	uint8_t ticket[SBX_PTY_TICKET_LEN];
	int claimed; /* a ticket was given and not yet taken up by a stream */
	uint64_t claim_at[2];
	int64_t claim_ns;
	struct conn live, old;
	int closing;
	size_t retain;
};

/* musl's ioctl takes an int request, and ppc64le's TIOCSWINSZ is above INT_MAX; the kernel
 * reads the request as 32 bits either way. */
static int set_winsize(int fd, const struct winsize *ws)
{
	return ioctl(fd, (int)TIOCSWINSZ, ws);
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->ob);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

static int held(const struct hold *h)
{
	return h->live.fd >= 0 || (h->claimed && sbx_now_ns() - h->claim_ns < CLAIM_WAIT_NS);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void exit_fields(const struct hold *h, struct sbx_msgw *w)
{
	sbx_msgw_i64(w, SBX_T_EXITED, h->exited);
	if (!h->exited)
		return;
	if (WIFSIGNALED(h->status)) {
		sbx_msgw_i64(w, SBX_T_OUTCOME, 1);
		sbx_msgw_i64(w, SBX_T_SIGNAL, WTERMSIG(h->status));
		sbx_msgw_i64(w, SBX_T_CODE, 128 + WTERMSIG(h->status));
	} else {
		sbx_msgw_i64(w, SBX_T_OUTCOME, 0);
		sbx_msgw_i64(w, SBX_T_CODE, WEXITSTATUS(h->status));
	}
}

static void status_fields(const struct hold *h, struct sbx_msgw *w)
{
	sbx_msgw_str(w, SBX_T_PTY_ID, h->id);
	sbx_msgw_i64(w, SBX_T_PIPE, h->pipe);
	sbx_msgw_i64(w, SBX_T_PID, h->pid);
	sbx_msgw_i64(w, SBX_T_RETAIN, (int64_t)h->retain);
	sbx_msgw_i64(w, SBX_T_HEAD, (int64_t)h->ring[0].head);
	sbx_msgw_i64(w, SBX_T_BASE, (int64_t)sbx_ring_base(&h->ring[0]));
	sbx_msgw_i64(w, SBX_T_HEAD_ERR, (int64_t)h->ring[1].head);
	sbx_msgw_i64(w, SBX_T_BASE_ERR, (int64_t)sbx_ring_base(&h->ring[1]));
	sbx_msgw_i64(w, SBX_T_HELD, held(h));
	exit_fields(h, w);
}

/* Sends one framed message on a blocking control connection. */
static int send_msg(int fd, const uint8_t *m, size_t len)
{
	uint8_t hdr[4];
	put_u32(hdr, (uint32_t)len);
	if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4)
		return -1;
	return send(fd, m, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

int sbx_pty_recv_all(int fd, uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = recv(fd, p, n, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int sig_by_name(const char *name)
{
	static const struct {
		const char *n;
		int s;
	} t[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
	         {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
	         {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
	         {"PIPE", SIGPIPE}};
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (strcmp(name, t[i].n) == 0)
			return t[i].s;
	return 0;
}

static void evict(struct hold *h)
{
	conn_close(&h->old);
	if (h->live.fd < 0)
		return;
	h->old = h->live;
	memset(&h->live, 0, sizeof h->live);
	h->live.fd = -1;
	h->old.evicted = 1;
	h->old.evict_ns = sbx_now_ns();
	shutdown(h->old.fd, SHUT_RD);
}

/* One request on a fresh connection: answered, and the connection closed, or (STREAM) kept as
 * the live one. */
static void on_request(struct hold *h, int fd)
{
	struct timeval tv = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	uint8_t hdr[4];
	static uint8_t req[SBX_PTY_MSG_MAX], resp[SBX_PTY_MSG_MAX];
	if (sbx_pty_recv_all(fd, hdr, 4) != 0) {
		close(fd);
		return;
	}
	uint32_t len =
	        (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	if (len > sizeof req || sbx_pty_recv_all(fd, req, len) != 0) {
		close(fd);
		return;
	}
	struct sbx_msgw w;
	sbx_msgw_init(&w, resp, sizeof resp);
	struct sbx_field f;
	int64_t op = 0, v;
	if (sbx_msg_find(req, len, SBX_T_OP, &f) == 1)
		sbx_field_i64(&f, &op);
	int keep = 0;
	switch (op) {
	case SBX_OP_PTY_ATTACH: {
		int64_t take = 0, since[2] = {0, 0};
		if (sbx_msg_find(req, len, SBX_T_TAKEOVER, &f) == 1)
			sbx_field_i64(&f, &take);
		if (sbx_msg_find(req, len, SBX_T_SINCE, &f) == 1)
			sbx_field_i64(&f, &since[0]);
		if (sbx_msg_find(req, len, SBX_T_SINCE_ERR, &f) == 1)
			sbx_field_i64(&f, &since[1]);
		if (held(h) && !take) {
			sbx_msgw_error(
			        &w, SBX_EUSAGE, EBUSY,
			        "the session is held by another client (attach with takeover)");
			break;
		}
		if (getrandom(h->ticket, sizeof h->ticket, 0) != (ssize_t)sizeof h->ticket) {
			sbx_msgw_error(&w, SBX_ETRANSFER, errno, "getrandom");
			break;
		}
		evict(h);
		h->claimed = 1;
		h->claim_ns = sbx_now_ns();
		sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		sbx_msgw_bytes(&w, SBX_T_TICKET, h->ticket, sizeof h->ticket);
		for (int c = 0; c < 2; c++) {
			uint64_t at = since[c] < 0 ? 0 : (uint64_t)since[c], lost;
			size_t n;
			sbx_ring_peek(&h->ring[c], &at, 0, &n, &lost);
			h->claim_at[c] = at;
			sbx_msgw_i64(&w, c == 0 ? SBX_T_START : SBX_T_START_ERR, (int64_t)at);
			sbx_msgw_i64(&w, c == 0 ? SBX_T_LOST : SBX_T_LOST_ERR, (int64_t)lost);
		}
		status_fields(h, &w);
		break;
	}
	case SBX_OP_PTY_STREAM:
		if (!h->claimed || sbx_msg_find(req, len, SBX_T_TICKET, &f) != 1 ||
		    f.len != sizeof h->ticket || memcmp(f.val, h->ticket, sizeof h->ticket) != 0) {
			sbx_msgw_error(&w, SBX_ETRANSFER, EBUSY,
			               "that claim is not current (the session was taken over)");
			break;
		}
		h->claimed = 0;
		sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		keep = 1;
		break;
	case SBX_OP_PTY_DETACH:
		if (sbx_msg_find(req, len, SBX_T_TICKET, &f) == 1 && f.len == sizeof h->ticket &&
		    memcmp(f.val, h->ticket, sizeof h->ticket) == 0) {
			h->claimed = 0;
			conn_close(&h->live);
			memset(h->ticket, 0, sizeof h->ticket);
		}
		sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		break;
	case SBX_OP_PTY_RESIZE: {
		int64_t rows = 0, cols = 0;
		if (sbx_msg_find(req, len, SBX_T_ROWS, &f) == 1)
			sbx_field_i64(&f, &rows);
		if (sbx_msg_find(req, len, SBX_T_COLS, &f) == 1)
			sbx_field_i64(&f, &cols);
		if (h->pipe) {
			sbx_msgw_error(&w, SBX_EUSAGE, 0,
			               "a pipe-mode session has no terminal size");
			break;
		}
		if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535) {
			sbx_msgw_error(&w, SBX_EUSAGE, 0, "rows and cols are 1..65535");
			break;
		}
		/* The kernel sends SIGWINCH to the terminal's foreground process group. */
		struct winsize ws = {.ws_row = (unsigned short)rows,
		                     .ws_col = (unsigned short)cols};
		if (set_winsize(h->master, &ws) != 0)
			sbx_msgw_error(&w, SBX_ETRANSFER, errno, "TIOCSWINSZ");
		else
			sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		break;
	}
	case SBX_OP_PTY_SIGNAL: {
		char name[32] = "";
		int sig = 0;
		if (sbx_msg_find(req, len, SBX_T_NAME, &f) == 1 &&
		    sbx_field_str(&f, name, sizeof name) == 0)
			sig = sig_by_name(name);
		if (sig == 0)
			sbx_msgw_error(&w, SBX_EUSAGE, 0, "unknown signal name");
		else if (h->exited)
			sbx_msgw_error(&w, SBX_EUSAGE, ESRCH, "the session's program has ended");
		else if (kill(-h->pid, sig) != 0)
			sbx_msgw_error(&w, SBX_ETRANSFER, errno, "kill");
		else
			sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		break;
	}
	case SBX_OP_PTY_STATUS:
		sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		status_fields(h, &w);
		break;
	case SBX_OP_PTY_CLOSE:
		h->closing = 1;
		sbx_msgw_i64(&w, SBX_T_STATUS, 0);
		break;
	default:
		(void)v;
		sbx_msgw_error(&w, SBX_EUSAGE, 0, "unknown holder request");
		break;
	}
	if (send_msg(fd, resp, w.len) != 0)
		keep = 0;
	if (!keep) {
		close(fd);
		return;
	}
	evict(h); /* a claim taken up ends any earlier stream */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	conn_close(&h->live);
	h->live.fd = fd;
	h->live.at[0] = h->claim_at[0];
	h->live.at[1] = h->claim_at[1];
	h->live.ob = malloc(5 + SBX_PTY_CHUNK);
	if (h->live.ob == NULL)
		conn_close(&h->live);
}

/* Reads what the program wrote on channel c, as far as the live client leaves room. */
static void take_output(struct hold *h, int c)
{
	static uint8_t buf[SBX_PTY_CHUNK];
	size_t room = sizeof buf;
	if (h->live.fd >= 0) {
		size_t r = sbx_ring_room(&h->ring[c], h->live.at[c]);
		if (r < room)
			room = r;
	}
	if (room == 0)
		return;
	ssize_t n = read(h->fd_out[c], buf, room);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) { /* EOF; EIO on a master whose every slave closed */
		if (h->fd_out[c] != h->master)
			close(h->fd_out[c]);
		h->fd_out[c] = -1;
		return;
	}
	sbx_ring_write(&h->ring[c], buf, (size_t)n);
}

/* Moves the live client's frames on: the rest of one being written, else the next. */
static void pump_conn(struct hold *h, struct conn *c)
{
	for (;;) {
		if (c->ooff < c->olen) {
			ssize_t n = send(c->fd, c->ob + c->ooff, c->olen - c->ooff, MSG_NOSIGNAL);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n <= 0) {
				conn_close(c);
				return;
			}
			c->ooff += (size_t)n;
			continue;
		}
		if (c->ended) {
			conn_close(c);
			return;
		}
		c->ooff = c->olen = 0;
		if (c->evicted) {
			c->ob[0] = SBX_PTY_FR_EVICT;
			put_u32(c->ob + 1, 0);
			c->olen = 5;
			c->ended = 1;
			continue;
		}
		int sent = 0;
		for (int ch = 0; ch < 2 && !sent; ch++) {
			uint64_t lost;
			size_t n;
			const uint8_t *p =
			        sbx_ring_peek(&h->ring[ch], &c->at[ch], SBX_PTY_CHUNK, &n, &lost);
			if (n == 0)
				continue;
			c->ob[0] = ch == 0 ? SBX_PTY_FR_OUT : SBX_PTY_FR_ERR;
			put_u32(c->ob + 1, (uint32_t)n);
			memcpy(c->ob + 5, p, n);
			c->olen = 5 + n;
			c->at[ch] += n;
			sent = 1;
		}
		if (sent)
			continue;
		/* Everything sent: once the program ended and its output did, the END frame. */
		if (h->swept && h->fd_out[0] < 0 && h->fd_out[1] < 0) {
			struct sbx_msgw w;
			sbx_msgw_init(&w, c->ob + 5, SBX_PTY_CHUNK);
			exit_fields(h, &w);
			c->ob[0] = SBX_PTY_FR_END;
			put_u32(c->ob + 1, (uint32_t)w.len);
			c->olen = 5 + w.len;
			c->ended = 1;
			continue;
		}
		return;
	}
}

/* The client's keystrokes on to the program. */
static void pump_input(struct hold *h)
{
	struct conn *c = &h->live;
	for (;;) {
		if (c->ioff < c->ilen) {
			if (h->fd_in < 0) {
				c->ioff = c->ilen; /* the program no longer reads: dropped */
				continue;
			}
			ssize_t n = write(h->fd_in, c->ib + c->ioff, c->ilen - c->ioff);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n < 0) {
				c->ioff = c->ilen;
				continue;
			}
			c->ioff += (size_t)n;
			continue;
		}
		if (c->in_eof)
			return;
		c->ioff = c->ilen = 0;
		ssize_t n = recv(c->fd, c->ib, sizeof c->ib, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			c->in_eof = 1;
			/* End of input: a pipe-mode program's stdin closes; a terminal has none. */
			if (h->pipe && h->fd_in >= 0) {
				close(h->fd_in);
				h->fd_in = -1;
			}
			return;
		}
		c->ilen = (size_t)n;
	}
}

static void reap(struct hold *h)
{
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == h->pid && !h->exited) {
			h->exited = 1;
			h->status = st;
			h->exit_ns = sbx_now_ns();
		}
}

/* The program ended (or the session is closing): every process of the session is killed, as
 * the supervisor kills: descendants (the holder is their subreaper) and the marker's bearers. */
static void sweep(struct hold *h)
{
	int found = sbx_killtree(&h->kt, SIGKILL, 0, NULL, NULL, NULL);
	if (!h->exited)
		kill(-h->pid, SIGKILL);
	reap(h);
	if (found <= 0 && h->exited && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
		h->swept = 1;
}

static int hold_loop(struct hold *h)
{
	for (;;) {
		int64_t now = sbx_now_ns();
		if (h->exited && !h->swept)
			sweep(h);
		if (h->closing) {
			sweep(h);
			if (h->swept)
				return 0;
		}
		if (h->exited && !held(h) && now - h->exit_ns > IDLE_AFTER_EXIT_NS)
			return 0;
		if (h->old.fd >= 0 && now - h->old.evict_ns > EVICT_WAIT_NS)
			conn_close(&h->old);
		if (h->claimed && !held(h))
			h->claimed = 0;
		if (h->live.fd >= 0)
			pump_conn(h, &h->live);
		if (h->live.fd >= 0)
			pump_input(h);
		if (h->old.fd >= 0)
			pump_conn(h, &h->old);

		struct pollfd p[7];
		int n = 0, ip_l = -1, ip_s = -1, ip_o[2] = {-1, -1}, ip_c = -1, ip_in = -1,
		    ip_old = -1;
		p[ip_l = n++] = (struct pollfd){h->lfd, POLLIN, 0};
		p[ip_s = n++] = (struct pollfd){h->sig_fd, POLLIN, 0};
		for (int c = 0; c < 2; c++)
			if (h->fd_out[c] >= 0 &&
			    (h->live.fd < 0 || sbx_ring_room(&h->ring[c], h->live.at[c]) > 0))
				p[ip_o[c] = n++] = (struct pollfd){h->fd_out[c], POLLIN, 0};
		if (h->live.fd >= 0) {
			short ev = 0;
			if (h->live.ooff < h->live.olen)
				ev |= POLLOUT;
			if (h->live.ioff >= h->live.ilen && !h->live.in_eof)
				ev |= POLLIN;
			p[ip_c = n++] = (struct pollfd){h->live.fd, ev, 0};
			if (h->live.ioff < h->live.ilen && h->fd_in >= 0)
				p[ip_in = n++] = (struct pollfd){h->fd_in, POLLOUT, 0};
		}
		if (h->old.fd >= 0)
			p[ip_old = n++] = (struct pollfd){h->old.fd, POLLOUT, 0};
		int timeout = h->closing || (h->exited && !h->swept) ? 5 : 1000;
		if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR)
			return 1;
		(void)ip_in, (void)ip_old;
		/* The client's end closed (its relay gone: a detach, or its connection lost): the
		 * session is no longer held. */
		if (ip_c >= 0 && (p[ip_c].revents & (POLLHUP | POLLERR)))
			conn_close(&h->live);
		if (p[ip_s].revents) {
			struct signalfd_siginfo si;
			while (read(h->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
				;
			reap(h);
		}
		for (int c = 0; c < 2; c++)
			if (ip_o[c] >= 0 && p[ip_o[c]].revents)
				take_output(h, c);
		if (p[ip_l].revents & POLLIN) {
			int fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				on_request(h, fd);
		}
		/* A pty master whose program is gone and swept reads EIO at the end: a master
		 * that nobody holds open reports POLLHUP, handled by take_output's EOF. */
	}
}

static int listen_at(const char *dir)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/s", dir) >= sizeof a.sun_path)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void rm_dir(const char *dir)
{
	char s[300];
	snprintf(s, sizeof s, "%s/s", dir);
	unlink(s);
	rmdir(dir);
}

/* In the holder: the program started, its outcome on rfd (0 and the pid, or the error). */
static int hold_main(const struct sbx_pty_spec *sp, struct hold *h, int rfd)
{
	struct sbx_err e = {0};
	int slave = -1, in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	h->fd_in = h->master = h->fd_out[0] = h->fd_out[1] = -1;
	uint8_t *b0 = malloc(sp->retain), *b1 = malloc(sp->pipe ? sp->retain : 1);
	if (b0 == NULL || b1 == NULL) {
		sbx_err_set(&e, SBX_ETRANSFER, ENOMEM, "pty window");
		goto fail;
	}
	sbx_ring_init(&h->ring[0], b0, sp->retain);
	sbx_ring_init(&h->ring[1], b1, sp->pipe ? sp->retain : 1);
	h->retain = sp->retain;
	h->pipe = sp->pipe;
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGCHLD);
	sigprocmask(SIG_BLOCK, &m, NULL);
	h->sig_fd = signalfd(-1, &m, SFD_NONBLOCK | SFD_CLOEXEC);
	h->lfd = listen_at(h->dir);
	if (h->sig_fd < 0 || h->lfd < 0) {
		sbx_err_set(&e, SBX_ETRANSFER, errno, "pty holder socket");
		goto fail;
	}
	int fd[3];
	if (!sp->pipe) {
		h->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		char *name = h->master >= 0 && grantpt(h->master) == 0 && unlockpt(h->master) == 0
		                     ? ptsname(h->master)
		                     : NULL;
		if (name == NULL || (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
			sbx_err_set(&e, SBX_ETRANSFER, errno,
			            "cannot open a pty (is /dev/pts mounted?)");
			goto fail;
		}
		struct winsize ws = {.ws_row = (unsigned short)sp->rows,
		                     .ws_col = (unsigned short)sp->cols};
		set_winsize(slave, &ws);
		fd[0] = fd[1] = fd[2] = slave;
		h->fd_out[0] = h->fd_in = h->master;
	} else {
		if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
		    pipe2(err, O_CLOEXEC) != 0) {
			sbx_err_set(&e, SBX_ETRANSFER, errno, "pty pipes");
			goto fail;
		}
		fd[0] = in[0], fd[1] = out[1], fd[2] = err[1];
		h->fd_in = in[1], h->fd_out[0] = out[0], h->fd_out[1] = err[0];
	}
	struct sbx_runas as;
	const char *want = sp->cmd.user != NULL ? sp->cmd.user : "0";
	if (sbx_runas_lookup(want, &as, &e) != 0)
		goto fail;
	int need = sbx_runas_needed(&as);
	char **env = sbx_launch_env(sp->cmd.env, sp->cmd.env_clear, h->kt.marker);
	if (env == NULL) {
		sbx_err_set(&e, SBX_ETRANSFER, ENOMEM, "pty environment");
		goto fail;
	}
	struct sbx_launch l = {.argv = sp->cmd.argv,
	                       .env = env,
	                       .cwd = sp->cmd.cwd,
	                       .as = need > 0 ? &as : NULL,
	                       .fd = {fd[0], fd[1], fd[2]},
	                       .flags =
	                               SBX_LAUNCH_USER_FALLBACK | (sp->pipe ? 0 : SBX_LAUNCH_CTTY)};
	struct sbx_launch_result res;
	int rc = sbx_launch(&l, &res, &e);
	free(env);
	if (rc != 0)
		goto fail;
	if (res.failed) {
		char why[200];
		sbx_launch_why(&res, want, sp->cmd.cwd, sp->cmd.argv[0], why, sizeof why);
		waitpid(res.pid, NULL, 0);
		sbx_err_set(&e, SBX_ETRANSFER, res.err, "%s", why);
		e.errnum = res.err;
		goto fail;
	}
	h->pid = res.pid;
	if (slave >= 0)
		close(slave);
	if (sp->pipe)
		close(in[0]), close(out[1]), close(err[1]);
	for (int c = 0; c < 2; c++)
		if (h->fd_out[c] >= 0)
			fcntl(h->fd_out[c], F_SETFL, fcntl(h->fd_out[c], F_GETFL) | O_NONBLOCK);
	if (h->fd_in >= 0)
		fcntl(h->fd_in, F_SETFL, fcntl(h->fd_in, F_GETFL) | O_NONBLOCK);
	struct {
		int32_t rc, err;
		int32_t pid;
		char msg[256];
	} r = {0, 0, h->pid, ""};
	ssize_t k = write(rfd, &r, sizeof r);
	(void)k;
	close(rfd);
	int code = hold_loop(h);
	rm_dir(h->dir);
	return code;
fail:;
	struct {
		int32_t rc, err;
		int32_t pid;
		char msg[256];
	} f = {-1, e.errnum, 0, ""};
	snprintf(f.msg, sizeof f.msg, "%s", e.msg);
	k = write(rfd, &f, sizeof f);
	(void)k;
	rm_dir(h->dir);
	return 1;
}

int sbx_pty_spawn(const struct sbx_pty_spec *sp, char id[SBX_PTY_ID_LEN + 1], pid_t *pid,
                  struct sbx_err *e)
{
	char root[200];
	uint8_t rnd[SBX_PTY_ID_LEN / 2];
	if (sbx_pty_root(root, sizeof root, 1) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "no folder for pty sessions");
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "getrandom");
	static struct hold h;
	memset(&h, 0, sizeof h);
	h.live.fd = h.old.fd = -1;
	sbx_hex(rnd, sizeof rnd, h.id);
	snprintf(h.dir, sizeof h.dir, "%s/%s", root, h.id);
	if (mkdir(h.dir, 0700) != 0)
		return sbx_err_set(e, SBX_ETRANSFER, errno, "mkdir %s", h.dir);
	snprintf(h.kt.marker, sizeof h.kt.marker, "SBX_PTY=%s", h.id);
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		rmdir(h.dir);
		return sbx_err_set(e, SBX_ETRANSFER, errno, "pipe");
	}
	pid_t child = fork();
	if (child < 0) {
		close(p[0]), close(p[1]);
		rmdir(h.dir);
		return sbx_err_set(e, SBX_ETRANSFER, errno, "fork");
	}
	if (child == 0) {
		/* A new session, then the holder as its child, so it outlives the serve loop. */
		setsid();
		pid_t d = fork();
		if (d == 0) {
			close(p[0]);
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			signal(SIGPIPE, SIG_IGN);
			signal(SIGHUP, SIG_IGN);
			prctl(PR_SET_CHILD_SUBREAPER, 1);
			prctl(PR_SET_DUMPABLE, 0);
			/* Nothing of the connection stays open here: only the status pipe, as 3. */
			int keep = 3;
			if (p[1] != keep) {
				dup2(p[1], keep);
				fcntl(keep, F_SETFD, FD_CLOEXEC);
			}
			sbx_close_from(keep + 1, 0);
			int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (nul >= 0) {
				dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
				close(nul);
			}
			h.kt.self = getpid();
			_exit(hold_main(sp, &h, keep) & 0xff);
		}
		_exit(d < 0 ? 1 : 0);
	}
	close(p[1]);
	struct {
		int32_t rc, err;
		int32_t pid;
		char msg[256];
	} r = {-1, 0, 0, "the pty holder did not start"};
	ssize_t k;
	do
		k = read(p[0], &r, sizeof r);
	while (k < 0 && errno == EINTR);
	close(p[0]);
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (k != (ssize_t)sizeof r || r.rc != 0) {
		r.msg[sizeof r.msg - 1] = '\0';
		if (k != (ssize_t)sizeof r)
			snprintf(r.msg, sizeof r.msg, "the pty holder did not start");
		sbx_err_set(e, SBX_ETRANSFER, 0, "%s", r.msg);
		e->errnum = r.err;
		return -1;
	}
	memcpy(id, h.id, SBX_PTY_ID_LEN + 1);
	*pid = r.pid;
	return 0;
}
