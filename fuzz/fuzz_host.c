/* libFuzzer target for everything the host reads from an agent: the input is the byte stream
 * an agent sends (HELLO, then answers), fed through a socketpair into the real session code
 * (host/session.c and the operations on it), and every operation of libsbx is called once in
 * a fixed order, so stream ids are known (1 kind, 2 stat, ... 12 the ping: the numbers in
 * run_ops) and seeds can answer each. What the host writes is read and dropped by a thread.
 * Checked: no crash, no leak, no sanitizer report, and sane results (an answer never yields
 * more than was asked). Seeds: fuzz/gen_host_seeds.py. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "sbx.h"
#include "session.h" /* sbx_session_open_fd: a session over a socket we made */
#include "treemove.h"

static char work[64];
static int work_fd = -1;

/* The agent's side: what the host writes is read (headers parsed to learn which streams it has
 * opened; payloads dropped), and the input is sent frame by frame, each one only once the host
 * has opened its stream (or has stopped reading), as an agent answers what it was asked. */
struct agent_side {
	int fd;
	const uint8_t *data;
	size_t size;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t opened; /* the highest stream id the host has sent a REQUEST or PING on */
	int host_gone;
};

static int read_full(int fd, uint8_t *b, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void *reader(void *arg)
{
	struct agent_side *a = arg;
	uint8_t h[16], skip[65536];
	while (read_full(a->fd, h, sizeof h) == 0) {
		uint32_t stream = be32(h + 4), len = be32(h + 8);
		if ((h[2] == SBX_F_REQUEST || h[2] == SBX_F_PING) && stream > 0) {
			pthread_mutex_lock(&a->mu);
			if (stream > a->opened)
				a->opened = stream;
			pthread_cond_broadcast(&a->cv);
			pthread_mutex_unlock(&a->mu);
		}
		while (len > 0) {
			size_t k = len < sizeof skip ? len : sizeof skip;
			if (read_full(a->fd, skip, k) != 0)
				goto out;
			len -= (uint32_t)k;
		}
	}
out:
	pthread_mutex_lock(&a->mu);
	a->host_gone = 1;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void *feeder(void *arg)
{
	struct agent_side *a = arg;
	size_t off = 0;
	while (off < a->size) {
		size_t n = a->size - off;
		uint32_t stream = 0;
		if (n >= 16 && a->data[off] == 0x53 && a->data[off + 1] == 0x42) {
			uint32_t len = be32(a->data + off + 8);
			stream = be32(a->data + off + 4);
			if (len <= n - 16)
				n = 16 + len;
		}
		/* At most 50 ms: an answer on a stream the host never opens goes out anyway. */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 50000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&a->mu);
		while (stream > a->opened && !a->host_gone &&
		       pthread_cond_timedwait(&a->cv, &a->mu, &until) == 0)
			;
		int gone = a->host_gone;
		pthread_mutex_unlock(&a->mu);
		if (gone)
			break;
		send_all(a->fd, a->data + off, n);
		off += n;
	}
	shutdown(a->fd, SHUT_WR); /* EOF after the input: every later call fails at once */
	return NULL;
}

static int sink(void *ctx, int chan, const void *data, size_t len)
{
	(void)data;
	size_t *total = ctx;
	if (chan != 1 && chan != 2)
		__builtin_trap(); /* the session passes only the channels a command has */
	*total += len;
	return 0;
}

#ifdef FUZZ_HOST_TRACE
#define TRACE(what) fprintf(stderr, "%s: %s\n", what, e.msg)
#else
#define TRACE(what) (void)0
#endif

static void forward(struct sbx_session *s, struct sbx_op *fw)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)sbx_forward_port(fw, 0)),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (c >= 0 && connect(c, (struct sockaddr *)&in, sizeof in) != 0 && errno != EINPROGRESS)
		__builtin_trap(); /* the listener was bound before sbx_forward_async returned */
	for (int round = 0; round < 2; round++) {
		int64_t end = sbx_now_ns() + 300000000LL;
		while (!sbx_op_done(fw) && sbx_now_ns() < end)
			sbx_session_wait(s, end, NULL);
		sbx_op_cancel(fw);
	}
	size_t open;
	sbx_forward_counts(fw, &open, NULL);
	if (sbx_op_done(fw) && open != 0)
		__builtin_trap(); /* an ended forward holds no connection */
	sbx_op_free(fw);
	if (c >= 0)
		close(c);
}

static void run_ops(struct sbx_session *s)
{
	struct sbx_err e;
	enum sbx_kind k;
	if (sbx_kind(s, "/a", &k, &e) == 0 && k != SBX_KIND_ABSENT && k != SBX_KIND_FILE &&
	    k != SBX_KIND_DIR) /* stream 1 */
		__builtin_trap();
	TRACE("kind");
	const char *paths[] = {"/a", "/b"};
	struct sbx_stat *st;
	if (sbx_stat(s, paths, 2, &st, &e) == 0) { /* stream 2 */
		for (int i = 0; i < 2; i++)
			if (strcmp(st[i].path, paths[i]) != 0)
				__builtin_trap();
		sbx_stat_free(st, 2);
	}
	TRACE("stat");
	char *phys;
	if (sbx_resolve(s, "/a", &phys, &e) == 0) /* 3 */
		free(phys);
	int clear;
	char *physical, *warning;
	const char *keep[] = {"/tests"};
	if (sbx_lands_clear(s, "/a", keep, 1, &clear, &physical, &warning, &e) == 0) { /* 4 */
		free(physical);
		free(warning);
	}
	struct sbx_exec_opts o;
	sbx_exec_opts_init(&o);
	char *argv[] = {"true", NULL};
	o.argv = argv;
	size_t out = 0;
	o.on_output = sink;
	o.ctx = &out;
	struct sbx_exec_result r;
	sbx_exec(s, &o, &r, &e); /* 5 */
	TRACE("exec");
	struct sbx_run_status rs;
	sbx_run_status(s, "/s", &rs, &e); /* 6 */
	char *data;
	size_t len;
	int64_t size;
	if (sbx_run_read(s, "/s", "output.log", 0, 100, &data, &len, &size, &e) == 0) { /* 7 */
		if (len > 100)
			__builtin_trap();
		free(data);
	}
	struct sbx_receipt rc;
	uint8_t key[32] = {0};
	if (sbx_run_receipt(s, "/s", key, sizeof key, &rc, &e) == 0) /* 8 and 9 */
		sbx_receipt_free(&rc);
	TRACE("receipt");
	/* A download into a fresh folder, removed after (10: KIND, 11: DOWNLOAD). */
	struct sbx_xfer_opts xo;
	sbx_xfer_opts_init(&xo);
	xo.timeout_s = 2;
	struct sbx_xfer_stats xs;
	char target[128];
	snprintf(target, sizeof target, "%s/t", work);
	e.msg[0] = '\0';
	sbx_download_path(s, "/a", target, &xo, &k, &xs, &e);
	TRACE("download");
	sbx_rmtree_at(work_fd, "t", NULL);
	/* 12: FWD_LISTEN, only for an agent whose HELLO has FWD (then 13 is the inward
	 * connection and 14 the ping). Its connections (ids with bit 31) go
	 * to 127.0.0.1:9, where nothing listens (a refused connect: a RESET back); the inward
	 * listener is connected to once (an OPEN to the agent). Stepped until the input ends
	 * (EOF breaks the session) or 300 ms, then cancelled. */
	const char *outs[] = {"18080:127.0.0.1:9"}, *ins[] = {"0:127.0.0.1:80"};
	struct sbx_forward_opts fo = {.out = outs, .n_out = 1, .in = ins, .n_in = 1};
	struct sbx_op *fw = sbx_forward_async(s, &fo, &e);
	TRACE("forward");
	if (fw != NULL)
		forward(s, fw);
	/* Last: its payload is the time, which a seed cannot echo (a mismatch breaks the
	 * session). */
	double rtt;
	sbx_ping(s, &rtt, &e); /* 12, or 14 after a forward */
	TRACE("ping");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	signal(SIGPIPE, SIG_IGN);
	snprintf(work, sizeof work, "/tmp/sbx-fuzz-host-XXXXXX");
	if (mkdtemp(work) == NULL)
		abort();
	work_fd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return 0;
	struct agent_side a = {.fd = sv[1], .data = data, .size = size};
	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	pthread_t tf, tr;
	pthread_create(&tr, NULL, reader, &a);
	pthread_create(&tf, NULL, feeder, &a);
	struct sbx_session *s;
	struct sbx_err e;
	if (sbx_session_open_fd(&s, sv[0], 0.5, &e) == 0) {
		run_ops(s);
		sbx_session_close(s);
	} else {
		TRACE("open");
	}
	pthread_join(tr, NULL); /* the host's end is closed: the reader sees EOF */
	pthread_join(tf, NULL);
	close(sv[1]);
	pthread_mutex_destroy(&a.mu);
	pthread_cond_destroy(&a.cv);
	return 0;
}
