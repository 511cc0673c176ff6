/* The sandbox's keeper (agent/keeper.h): its answers, its socket, and the daemon that holds the
 * secret in sandboxes sbx did not make. */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "frame.h"
#include "proto.h"
#include "resident.h"
#include "supctl.h"
#include "sys.h"

/* A request on the keeper socket is at most one frame's payload; an answer is small. */
#define KEEPER_MSG_MAX SBX_FRAME_MAX_PAYLOAD
#define REPLY_MAX 8192

static int nonce_of(const uint8_t *req, size_t len, const uint8_t **nonce)
{
	struct sbx_field f;
	if (sbx_msg_find(req, len, SBX_T_NONCE, &f) != 1 || f.len != SBX_NONCE_LEN)
		return -1;
	*nonce = f.val;
	return 0;
}

/* The run request's MAC: its last field, over every byte before that field. */
static int check_mac(const struct sbx_keeper *k, const uint8_t *req, size_t len)
{
	struct sbx_msgr r;
	struct sbx_field f;
	size_t start = 0, mac_at = 0;
	const uint8_t *mac = NULL;
	int rc;
	sbx_msgr_init(&r, req, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (mac != NULL)
			return -1; /* a field after the MAC is not covered by it */
		if (f.tag == SBX_T_MAC && f.len == SBX_MAC_LEN) {
			mac = f.val;
			mac_at = start;
		}
		start = r.pos;
	}
	if (rc != 0 || mac == NULL)
		return -1;
	uint8_t want[SBX_MAC_LEN];
	sbx_trust_run_mac(k->secret, req, mac_at, want);
	return sbx_trust_equal(want, mac) ? 0 : -1;
}

static int nonce_used(struct sbx_keeper *k, const uint8_t nonce[SBX_NONCE_LEN])
{
	unsigned n = k->nused < SBX_KEEPER_NONCES ? k->nused : SBX_KEEPER_NONCES;
	for (unsigned i = 0; i < n; i++)
		if (memcmp(k->used[i], nonce, SBX_NONCE_LEN) == 0)
			return 1;
	memcpy(k->used[k->nused % SBX_KEEPER_NONCES], nonce, SBX_NONCE_LEN);
	k->nused++;
	return 0;
}

/* A run request's checks, in the keeper's own process: its MAC, then its nonce (recorded).
 * 0 with the run's key, or -1 with the refusal in w. */
static int run_check(struct sbx_keeper *k, const uint8_t *req, size_t len, struct sbx_msgw *w,
                     uint8_t key[SBX_MAC_LEN])
{
	const uint8_t *nonce;
	if (nonce_of(req, len, &nonce) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "keeper: request without a 16-byte nonce");
		return -1;
	}
	if (check_mac(k, req, len) != 0) {
		sbx_msgw_error(
		        w, SBX_ETRANSFER, EPERM,
		        "keeper: the run request's MAC does not verify (changed on its way?)");
		return -1;
	}
	if (nonce_used(k, nonce)) {
		sbx_msgw_error(w, SBX_ETRANSFER, EALREADY,
		               "keeper: this run request was already used");
		return -1;
	}
	sbx_trust_run_key(k->secret, nonce, key);
	return 0;
}

/* Everything but the launch: SETUP and AUTH answered, a SUP_RUN checked. 1 when w holds the
 * answer; 0 when it is a run to launch with key. */
static int answer_or_check(struct sbx_keeper *k, const uint8_t *req, size_t len, struct sbx_msgw *w,
                           uint8_t key[SBX_MAC_LEN])
{
	struct sbx_field f;
	int64_t op = 0;
	if (sbx_msg_find(req, len, SBX_T_OP, &f) != 1 || sbx_field_i64(&f, &op) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "keeper: request without an operation");
		return 1;
	}
	if (op == SBX_OP_SETUP) {
		if (sbx_msg_find(req, len, SBX_T_SECRET, &f) != 1 || f.len != SBX_SECRET_LEN) {
			sbx_msgw_error(w, SBX_EUSAGE, 0, "keeper: setup needs a 32-byte secret");
		} else if (k->have) {
			/* The first setup wins, for good: a second one could be anybody's. */
			sbx_msgw_error(w, SBX_ETRANSFER, EEXIST,
			               "keeper: this sandbox has its secret");
		} else {
			memcpy(k->secret, f.val, SBX_SECRET_LEN);
			k->have = 1;
			sbx_msgw_i64(w, SBX_T_STATUS, 0);
		}
		return 1;
	}
	if (op != SBX_OP_AUTH && op != SBX_OP_SUP_RUN) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "keeper: unknown operation");
		return 1;
	}
	if (!k->have) {
		sbx_msgw_error(w, SBX_ETRANSFER, ENOKEY, "keeper: this sandbox holds no secret");
		return 1;
	}
	if (op == SBX_OP_SUP_RUN)
		return run_check(k, req, len, w, key) != 0;
	const uint8_t *nonce;
	if (nonce_of(req, len, &nonce) != 0) {
		sbx_msgw_error(w, SBX_EUSAGE, 0, "keeper: request without a 16-byte nonce");
		return 1;
	}
	uint8_t mac[SBX_MAC_LEN];
	sbx_trust_auth(k->secret, nonce, mac);
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
	sbx_msgw_bytes(w, SBX_T_MAC, mac, sizeof mac);
	return 1;
}

void sbx_keeper_answer(struct sbx_keeper *k, const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	uint8_t key[SBX_MAC_LEN];
	if (answer_or_check(k, req, len, w, key) == 0) {
		sbx_supctl_run(req, len, key, sizeof key, w);
		memset(key, 0, sizeof key);
	}
}

int sbx_keeper_listen(char *err, size_t cap)
{
	return sbx_sock_listen(SBX_KEEPER_DIR, SBX_KEEPER_SOCK, err, cap);
}

static int set_timeouts(int fd, int seconds)
{
	struct timeval tv = {seconds, 0};
	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
	                       setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0
	               ? 0
	               : -1;
}

static int xfer_all(int fd, uint8_t *p, size_t n, int out)
{
	while (n > 0) {
		ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL) : read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One message: [u32 length][bytes]; *buf malloc'd (at most max bytes). */
static int read_msg(int fd, uint8_t **buf, size_t *len, size_t max)
{
	uint8_t h[4];
	if (xfer_all(fd, h, 4, 0) != 0)
		return -1;
	size_t n = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	if (n > max) {
		errno = EMSGSIZE;
		return -1;
	}
	*buf = malloc(n ? n : 1);
	if (*buf == NULL || xfer_all(fd, *buf, n, 0) != 0) {
		free(*buf);
		*buf = NULL;
		return -1;
	}
	*len = n;
	return 0;
}

static int write_msg(int fd, const uint8_t *p, size_t n)
{
	uint8_t h[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
	return xfer_all(fd, h, 4, 1) == 0 && xfer_all(fd, (uint8_t *)p, n, 1) == 0 ? 0 : -1;
}

int sbx_keeper_call(const uint8_t *req, size_t len, struct sbx_msgw *w)
{
	int fd = sbx_sock_connect(SBX_KEEPER_DIR, SBX_KEEPER_SOCK);
	if (fd < 0)
		return -1;
	uint8_t *ans = NULL;
	size_t n = 0;
	int rc = set_timeouts(fd, 5) == 0 && write_msg(fd, req, len) == 0 &&
	                         read_msg(fd, &ans, &n, REPLY_MAX) == 0
	                 ? 0
	                 : -1;
	int err = errno;
	close(fd);
	if (rc == 0 && n <= w->cap) {
		memcpy(w->buf, ans, n);
		w->len = n;
		w->overflow = 0;
	} else if (rc == 0) {
		rc = -1;
		err = EMSGSIZE;
	}
	free(ans);
	errno = err;
	return rc;
}

#define CONN_NS (2 * 1000000000LL)

void sbx_keeper_conns_init(struct sbx_keeper_conns *cs, int home)
{
	memset(cs, 0, sizeof *cs);
	cs->home = home;
	for (int i = 0; i < SBX_KEEPER_CONNS; i++)
		cs->c[i].fd = -1;
}

static void conn_close(struct sbx_keeper_conns *cs, int i)
{
	if (cs->c[i].fd >= 0)
		close(cs->c[i].fd);
	free(cs->c[i].buf);
	cs->c[i].fd = -1;
	cs->c[i].buf = NULL;
	cs->c[i].have = cs->c[i].want = 0;
}

void sbx_keeper_conns_poll(struct sbx_keeper_conns *cs, int lfd, struct pollfd *pfd, int *timeout)
{
	int64_t now = sbx_now_ns();
	int free_slot = 0;
	for (int i = 0; i < SBX_KEEPER_CONNS; i++) {
		if (cs->c[i].fd >= 0 && now >= cs->c[i].until)
			conn_close(cs, i); /* too slow: dropped unanswered */
		pfd[1 + i] = (struct pollfd){cs->c[i].fd, POLLIN, 0};
		if (cs->c[i].fd < 0) {
			free_slot = 1;
			continue;
		}
		int ms = (int)((cs->c[i].until - now) / 1000000) + 1;
		if (*timeout < 0 || ms < *timeout)
			*timeout = ms;
	}
	/* Full: the backlog waits in the kernel. */
	pfd[0] = (struct pollfd){free_slot ? lfd : -1, POLLIN, 0};
}

/* A whole request: answered here, or checked here and launched by a child that answers. */
static void dispatch(struct sbx_keeper *k, int fd, int home, const uint8_t *req, size_t len)
{
	uint8_t reply[REPLY_MAX], key[SBX_MAC_LEN];
	struct sbx_msgw w;
	sbx_msgw_init(&w, reply, sizeof reply);
	if (answer_or_check(k, req, len, &w, key) == 0) {
		pid_t p = fork();
		if (p != 0) {
			memset(key, 0, sizeof key);
			if (p > 0)
				return;
			sbx_msgw_error(&w, SBX_ETRANSFER, errno, "keeper: fork");
		} else {
			/* Only the connection stays open: the supervisor inherits nothing. */
			if (home >= 0 && fchdir(home) != 0) {
				/* stays where the keeper is */
			}
			if (fd != 3) {
				dup2(fd, 3);
				fd = 3;
			}
			sbx_close_from(4, 0);
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			signal(SIGCHLD, SIG_DFL);
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			set_timeouts(fd, 2);
			sbx_supctl_run(req, len, key, sizeof key, &w);
			memset(key, 0, sizeof key);
			write_msg(fd, reply, w.len);
			_exit(0);
		}
	}
	if (w.overflow)
		sbx_msgw_error(&w, SBX_EUSAGE, 0, "keeper: answer too large");
	/* Small, into an empty socket buffer: it does not block. */
	write_msg(fd, reply, w.len);
}

/* Reads what has come of a request: 1 whole, 0 more to come, -1 drop the connection. */
static int conn_read(struct sbx_keeper_conn *c)
{
	for (;;) {
		int head = c->buf == NULL;
		if (!head && c->have == c->want)
			return 1;
		uint8_t *dst = head ? c->hdr + c->have : c->buf + c->have;
		ssize_t n = read(c->fd, dst, head ? 4 - c->have : c->want - c->have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		c->have += (size_t)n;
		if (head && c->have == 4) {
			c->want = (size_t)c->hdr[0] << 24 | (size_t)c->hdr[1] << 16 |
			          (size_t)c->hdr[2] << 8 | c->hdr[3];
			if (c->want > KEEPER_MSG_MAX ||
			    (c->buf = malloc(c->want ? c->want : 1)) == NULL)
				return -1;
			c->have = 0;
		}
	}
}

void sbx_keeper_conns_ready(struct sbx_keeper *k, struct sbx_keeper_conns *cs, int lfd,
                            const struct pollfd *pfd)
{
	for (int i = 0; i < SBX_KEEPER_CONNS; i++) {
		if (cs->c[i].fd < 0 || pfd[1 + i].revents == 0)
			continue;
		int r = conn_read(&cs->c[i]);
		if (r == 1)
			dispatch(k, cs->c[i].fd, cs->home, cs->c[i].buf, cs->c[i].want);
		if (r != 0)
			conn_close(cs, i);
	}
	if (pfd[0].fd >= 0 && (pfd[0].revents & POLLIN)) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		for (int i = 0; c >= 0 && i < SBX_KEEPER_CONNS; i++)
			if (cs->c[i].fd < 0) {
				cs->c[i].fd = c;
				cs->c[i].until = sbx_now_ns() + CONN_NS;
				c = -1;
			}
		if (c >= 0)
			close(c);
	}
}

/* The daemon's loop: the connections, and its children (runs being launched) reaped. */
static void keeper_loop(struct sbx_keeper *k, int lfd, int home)
{
	struct sbx_keeper_conns cs;
	sbx_keeper_conns_init(&cs, home);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		struct pollfd pfd[1 + SBX_KEEPER_CONNS];
		int timeout = 1000;
		sbx_keeper_conns_poll(&cs, lfd, pfd, &timeout);
		if (poll(pfd, 1 + SBX_KEEPER_CONNS, timeout) > 0)
			sbx_keeper_conns_ready(k, &cs, lfd, pfd);
	}
}

int sbx_keeper_spawn(const uint8_t secret[SBX_SECRET_LEN], char *err, size_t cap)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		snprintf(err, cap, "keeper: pipe: %s", strerror(errno));
		return -1;
	}
	pid_t child = fork();
	if (child < 0) {
		close(p[0]), close(p[1]);
		snprintf(err, cap, "keeper: fork: %s", strerror(errno));
		return -1;
	}
	if (child == 0) {
		setsid();
		pid_t d = fork();
		if (d != 0)
			_exit(d < 0 ? 1 : 0);
		/* The daemon: nobody's child but init's, no descriptor of its creator's but the
		 * ready pipe, its memory closed to ptrace. */
		prctl(PR_SET_DUMPABLE, 0);
		prctl(PR_SET_NAME, "sbx-keeper");
		close(p[0]);
		if (p[1] != 3) {
			dup2(p[1], 3);
			close(p[1]);
		}
		/* Runs start where the session that started the daemon was (fd 4). */
		int home = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (home >= 0 && home != 4) {
			dup2(home, 4);
			close(home);
		}
		home = home >= 0 ? 4 : -1;
		sbx_close_from(5, 0);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0), dup2(null, 1), dup2(null, 2);
			close(null);
		}
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		if (chdir("/") != 0) {
			/* stays where it was */
		}
		struct sbx_keeper k;
		memset(&k, 0, sizeof k);
		memcpy(k.secret, secret, SBX_SECRET_LEN);
		k.have = 1;
		char msg[160] = "";
		int lfd = sbx_keeper_listen(msg, sizeof msg);
		uint8_t ok = lfd >= 0;
		ssize_t w = write(3, &ok, 1);
		(void)w;
		close(3);
		if (lfd < 0)
			_exit(1);
		keeper_loop(&k, lfd, home);
		_exit(0);
	}
	close(p[1]);
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	uint8_t ok = 0;
	struct pollfd pf = {p[0], POLLIN, 0};
	int ready = poll(&pf, 1, 5000) > 0 && read(p[0], &ok, 1) == 1 && ok == 1;
	close(p[0]);
	if (!ready) {
		snprintf(err, cap, "keeper: the daemon could not listen on its socket");
		return -1;
	}
	return 0;
}
