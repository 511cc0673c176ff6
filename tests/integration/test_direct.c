/* The direct socket (host/direct.c, agent/direct.c): a real agent in its own pid namespace
 * (`unshare --pid --fork`) moves a session to its unix socket; everything the agent must
 * refuse is refused without a byte (a peer inside its pid namespace, even with the token; a
 * wrong token), a refusal leaves the session on the exec channel, and the socket is taken once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "msg.h"
#include "proto.h"
#include "sbx.h"
#include "session.h"

#define WAIT_MS 5000 /* every wait of this file on a socket or a pipe */

/* The pid namespace of a process, as (dev, ino); 0 when it cannot be read. */
static int pidns_of(pid_t pid, struct stat *st)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)pid);
	return stat(p, st) == 0;
}

/* The one child of the channel process (unshare): the agent, as this namespace sees it. */
static pid_t child_of(pid_t pid)
{
	char p[96];
	snprintf(p, sizeof p, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(p, "r");
		int c = 0;
		if (f != NULL) {
			if (fscanf(f, "%d", &c) != 1)
				c = 0;
			fclose(f);
		}
		if (c > 0)
			return (pid_t)c;
		fixture_pause_ms(10);
	}
	return 0;
}

/* Opens a session on a real agent: in a pid namespace of its own (own_ns) or in this one.
 * *agent is the agent's pid here. */
static struct sbx_session *open_agent(int own_ns, pid_t *agent)
{
	char path[PATH_MAX];
	fixture_agent_path(path, sizeof path);
	char *own[] = {"unshare", "--pid", "--fork", "{agent}", "serve", NULL};
	char *same[] = {"{agent}", "serve", NULL};
	struct sbx_session *s;
	struct sbx_err e;
	if (sbx_session_open(&s, own_ns ? own : same, path, 30, &e) != 0)
		fail_msg("open: %s", e.msg);
	sbx_session_set_timeout(s, WAIT_MS / 1000.0);
	struct stat mine, its;
	assert_true(pidns_of(getpid(), &mine));
	if (own_ns) {
		*agent = child_of(s->pid);
		assert_true(*agent > 0);
		assert_true(pidns_of(*agent, &its));
		/* Really somewhere else: the agent is not in this pid namespace. */
		assert_false(its.st_ino == mine.st_ino && its.st_dev == mine.st_dev);
		/* Its HELLO reports the pid it has in there: 1, the namespace's first process. */
		assert_int_equal(sbx_session_hello(s)->pid, 1);
	} else {
		*agent = s->pid;
		assert_true(pidns_of(*agent, &its));
		assert_true(its.st_ino == mine.st_ino && its.st_dev == mine.st_dev);
	}
	return s;
}

/* Closes the session and checks the agent went by itself: the channel process exits before
 * sbx_session_close would kill it (2 s), and the agent is gone soon after. */
static void close_and_gone(struct sbx_session *s, pid_t agent)
{
	double t0 = fixture_now();
	sbx_session_close(s);
	assert_true(fixture_now() - t0 < 1.9);
	int gone = 0;
	for (int i = 0; i < 200 && !gone; i++) {
		gone = kill(agent, 0) != 0 && errno == ESRCH;
		if (!gone)
			fixture_pause_ms(10);
	}
	assert_true(gone);
}

static void probe(struct sbx_session *s, const char *path, enum sbx_kind want)
{
	enum sbx_kind k = SBX_KIND_FILE; /* neither answer probed for */
	struct sbx_err e;
	if (sbx_kind(s, path, &k, &e) != 0)
		fail_msg("kind %s: %s", path, e.msg);
	assert_int_equal(k, want);
}

/* ---- the direct socket's folders in /tmp ---- */

#define MAX_SEEN 256

struct names {
	char n[MAX_SEEN][NAME_MAX + 1];
	size_t len;
};

static void direct_dirs(struct names *out)
{
	out->len = 0;
	DIR *d = opendir("/tmp");
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".sbx-direct-", 12) == 0 && out->len < MAX_SEEN)
			snprintf(out->n[out->len++], sizeof out->n[0], "%s", de->d_name);
	closedir(d);
}

static int among(const struct names *set, const char *name)
{
	for (size_t i = 0; i < set->len; i++)
		if (strcmp(set->n[i], name) == 0)
			return 1;
	return 0;
}

/* ---- the protocol by hand ---- */

/* Sends DIRECT with tok; the socket's path the agent answers. */
static void offer(struct sbx_session *s, const uint8_t *tok, char *path, size_t cap)
{
	uint8_t buf[96];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DIRECT);
	sbx_msgw_bytes(&w, SBX_T_TOKEN, tok, SBX_DIRECT_TOKEN_LEN);
	struct sbx_op *p;
	struct sbx_err e;
	if (sbx_call(s, &w, &p, &e) != 0)
		fail_msg("DIRECT: %s", e.msg);
	struct sbx_field f;
	int found = sbx_msg_find(p->resp, p->resp_len, SBX_T_PATH, &f);
	int ok = found == 1 && sbx_field_str(&f, path, cap) == 0;
	sbx_op_free(p);
	assert_true(ok);
	/* Its shape, and a private folder holding a socket. */
	size_t n = strlen(path);
	assert_true(n > 2 && strcmp(path + n - 2, "/s") == 0);
	assert_non_null(strstr(path, "/.sbx-direct-"));
	char dir[128];
	snprintf(dir, sizeof dir, "%.*s", (int)(n - 2), path);
	struct stat st;
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
}

static int dial(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path)
		return -1;
	memcpy(a.sun_path, path, strlen(path) + 1);
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
		close(c);
		c = -1;
	}
	return c;
}

/* What the agent answers to tok on c: 'A' the ack, 'E' an end without a byte (EOF, or a reset
 * when it closed before reading), 'B' another byte, 'T' nothing in time, 'W' the token could
 * not be written. */
static char knock(int c, const uint8_t *tok)
{
	if (send(c, tok, SBX_DIRECT_TOKEN_LEN, MSG_NOSIGNAL) != SBX_DIRECT_TOKEN_LEN)
		return errno == EPIPE || errno == ECONNRESET ? 'E' : 'W';
	struct pollfd p = {c, POLLIN, 0};
	if (poll(&p, 1, WAIT_MS) != 1)
		return 'T';
	uint8_t b;
	ssize_t r = read(c, &b, 1);
	if (r == 1)
		return b == SBX_DIRECT_ACK ? 'A' : 'B';
	return r == 0 || errno == ECONNRESET ? 'E' : 'W';
}

/* The listener's pid as c's side of the socket sees it. */
static pid_t peer_pid(int c)
{
	struct ucred cr;
	socklen_t n = sizeof cr;
	return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0 ? cr.pid : -1;
}

/* Knocks with tok from a process inside agent's pid namespace. Returns knock's letter ('D'
 * the socket could not be reached, 'N' no way in); *seen_as: the listener's pid as the
 * knocker saw it. */
static char knock_from_inside(pid_t agent, const char *path, const uint8_t *tok, int *seen_as)
{
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		char p[64];
		snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)agent);
		int ns = open(p, O_RDONLY | O_CLOEXEC);
		char rep[1 + sizeof(int)] = {'N'};
		if (ns < 0 || setns(ns, CLONE_NEWPID) != 0) {
			(void)!write(fds[1], rep, sizeof rep);
			_exit(1);
		}
		pid_t g = fork(); /* the first process born into the agent's namespace */
		if (g == 0) {
			alarm(WAIT_MS / 1000 + 2);
			int c = dial(path);
			int who = c >= 0 ? peer_pid(c) : -1;
			rep[0] = c >= 0 ? knock(c, tok) : 'D';
			memcpy(rep + 1, &who, sizeof who);
			(void)!write(fds[1], rep, sizeof rep);
			_exit(0);
		}
		if (g < 0)
			(void)!write(fds[1], rep, sizeof rep);
		int st;
		if (g > 0)
			waitpid(g, &st, 0);
		_exit(0);
	}
	close(fds[1]);
	char rep[1 + sizeof(int)] = {'T'};
	struct pollfd p = {fds[0], POLLIN, 0};
	if (poll(&p, 1, WAIT_MS + 1000) == 1 &&
	    read(fds[0], rep, sizeof rep) != (ssize_t)sizeof rep)
		rep[0] = 'T';
	close(fds[0]);
	int st;
	waitpid(pid, &st, 0);
	memcpy(seen_as, rep + 1, sizeof *seen_as);
	return rep[0];
}

/* ---- cases ---- */

static int arm(void **state)
{
	(void)state;
	alarm(20); /* a hang is a failure (every wait here is bounded far below this) */
	return 0;
}

static int disarm(void **state)
{
	(void)state;
	alarm(0);
	return 0;
}

static void direct_taken(void **state)
{
	(void)state;
	struct names before, after;
	direct_dirs(&before);
	pid_t agent;
	struct sbx_session *s = open_agent(1, &agent);
	assert_string_equal(sbx_session_channel(s), "exec");
	probe(s, "/", SBX_KIND_DIR);
	struct sbx_err e;
	if (sbx_session_direct(s, agent, &e) != 0)
		fail_msg("direct socket: %s (%s)", e.msg, sbx_session_stderr(s));
	assert_string_equal(sbx_session_channel(s), "direct");
	/* The exec channel carries no frame any more: its stdout stays silent. */
	int life_out = s->life_out;
	for (int i = 0; i < 200; i++) {
		probe(s, "/", SBX_KIND_DIR);
		probe(s, "/nonexistent-xyz", SBX_KIND_ABSENT);
	}
	struct pollfd p = {life_out, POLLIN, 0};
	assert_int_equal(poll(&p, 1, 0), 0);
	double rtt;
	assert_int_equal(sbx_ping(s, &rtt, &e), 0);
	/* Taken: the socket and its folder are gone (the agent removes them before it reads
	 * the socket's first frame, so after the probes they are). */
	direct_dirs(&after);
	for (size_t i = 0; i < after.len; i++)
		if (!among(&before, after.n[i]))
			fail_msg("/tmp/%s is still there", after.n[i]);
	close_and_gone(s, agent);
}

/* The refusal's half that may kill its process (a SIGPIPE from libsbx would), so it runs in
 * a child of its own: the session is opened, refused and probed there. Writes what went wrong
 * (nothing: "") to fd and exits 0 when all went as it should. */
__attribute__((noreturn)) static void refused_in_child(int fd)
{
	char m[512] = "";
	alarm(15);
	char path[PATH_MAX];
	struct sbx_err e;
	sbx_err_clear(&e);
	struct sbx_session *s = NULL;
	char *argv[] = {"{agent}", "serve", NULL};
	if (fixture_find_agent("x86_64", path, sizeof path, &e) != 0 ||
	    sbx_session_open(&s, argv, path, 30, &e) != 0) {
		snprintf(m, sizeof m, "open: %s", e.msg);
		goto out;
	}
	sbx_session_set_timeout(s, WAIT_MS / 1000.0);
	pid_t agent = s->pid; /* no unshare: the channel process is the agent */
	sbx_err_clear(&e);
	enum sbx_kind k = SBX_KIND_FILE, k2 = SBX_KIND_FILE;
	if (sbx_session_direct(s, agent, &e) != -1)
		snprintf(m, sizeof m,
		         "the direct socket was taken from the agent's own pid namespace");
	else if (e.cls != SBX_EUNAVAILABLE)
		snprintf(m, sizeof m, "refusal of class %s: %s", sbx_err_class_name(e.cls), e.msg);
	else if (s->broken) /* a refusal, not a broken session */
		snprintf(m, sizeof m, "the refused direct socket broke the session: %s", e.msg);
	else if (strcmp(sbx_session_channel(s), "exec") != 0)
		snprintf(m, sizeof m, "channel %s after a refusal", sbx_session_channel(s));
	else if (sbx_kind(s, "/", &k, &e) != 0 || sbx_kind(s, "/nonexistent-xyz", &k2, &e) != 0)
		snprintf(m, sizeof m, "kind after a refusal: %s", e.msg);
	else if (k != SBX_KIND_DIR || k2 != SBX_KIND_ABSENT)
		snprintf(m, sizeof m, "kind after a refusal: %d %d", (int)k, (int)k2);
	double t0 = fixture_now();
	sbx_session_close(s);
	if (m[0] == '\0' && fixture_now() - t0 >= 1.9)
		snprintf(m, sizeof m, "the agent did not end with its stdin");
	if (m[0] == '\0' && !(kill(agent, 0) != 0 && errno == ESRCH))
		snprintf(m, sizeof m, "the agent is still there after close");
out:
	(void)!write(fd, m, strlen(m));
	_exit(m[0] == '\0' ? 0 : 1);
}

static void same_pidns_refused(void **state)
{
	(void)state;
	struct names before, after;
	direct_dirs(&before);
	/* The agent really is in this pid namespace (the host's check passes, the agent's must
	 * not). */
	pid_t agent;
	struct sbx_session *s = open_agent(0, &agent);
	close_and_gone(s, agent);
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		refused_in_child(fds[1]);
	}
	close(fds[1]);
	char m[513] = "";
	size_t got = 0;
	for (;;) {
		struct pollfd p = {fds[0], POLLIN, 0};
		if (poll(&p, 1, 16000) != 1)
			break;
		ssize_t r = read(fds[0], m + got, sizeof m - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	m[got] = '\0';
	close(fds[0]);
	int st = 0;
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	if (WIFSIGNALED(st))
		fail_msg("sbx_session_direct's process was killed by signal %d (%s)%s%s",
		         WTERMSIG(st), strsignal(WTERMSIG(st)), got ? ": " : "", m);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got != 0)
		fail_msg("%s", got ? m : "the refusal's child failed");
	/* The offer's folder went with the agent. */
	direct_dirs(&after);
	for (size_t i = 0; i < after.len; i++)
		if (!among(&before, after.n[i]))
			fail_msg("/tmp/%s is still there", after.n[i]);
}

static void inside_peer_with_token_refused(void **state)
{
	(void)state;
	pid_t agent;
	struct sbx_session *s = open_agent(1, &agent);
	uint8_t tok[SBX_DIRECT_TOKEN_LEN];
	for (size_t i = 0; i < sizeof tok; i++)
		tok[i] = (uint8_t)(0xa5 ^ (i * 7));
	char path[128];
	offer(s, tok, path, sizeof path);
	/* From inside the agent's namespace, with the right token: closed without a byte. */
	int seen_as = -1;
	char got = knock_from_inside(agent, path, tok, &seen_as);
	if (got != 'E' && got != 'A')
		fail_msg("the inside knock went wrong: '%c' (see knock, knock_from_inside)", got);
	assert_int_equal(seen_as, 1); /* the knocker was inside: the agent is its pid 1 */
	if (got == 'A')
		fail_msg("a process inside the agent's pid namespace took the direct socket");
	/* The session is still on the exec channel... */
	probe(s, "/", SBX_KIND_DIR);
	/* ...the listener is still there, and from outside the same token is taken. */
	int c = dial(path);
	assert_true(c >= 0);
	assert_int_equal(peer_pid(c), agent);
	assert_int_equal(knock(c, tok), 'A');
	/* The exec channel's stdin is now only the lifeline: its end ends the agent. */
	close_and_gone(s, agent);
	close(c);
}

static void wrong_token_refused(void **state)
{
	(void)state;
	pid_t agent;
	struct sbx_session *s = open_agent(1, &agent);
	uint8_t tok[SBX_DIRECT_TOKEN_LEN], bad[SBX_DIRECT_TOKEN_LEN];
	for (size_t i = 0; i < sizeof tok; i++)
		tok[i] = (uint8_t)(i * 13 + 1);
	memcpy(bad, tok, sizeof bad);
	bad[SBX_DIRECT_TOKEN_LEN - 1] ^= 1; /* one bit off, in the last byte */
	char path[128];
	offer(s, tok, path, sizeof path);
	int c = dial(path);
	assert_true(c >= 0);
	assert_int_equal(peer_pid(c), agent);
	assert_int_equal(knock(c, bad), 'E');
	close(c);
	/* Refused: the session goes on over the exec channel, and the agent keeps listening: the
	 * right token is taken. */
	probe(s, "/", SBX_KIND_DIR);
	c = dial(path);
	assert_true(c >= 0);
	assert_int_equal(knock(c, tok), 'A');
	close_and_gone(s, agent);
	close(c);
}

/* A DIRECT request sent by hand (the token: first_byte, then zeros) is refused as usage, and
 * the session goes on. */
static void agent_refuses(struct sbx_session *s, uint8_t first_byte)
{
	uint8_t tok[SBX_DIRECT_TOKEN_LEN] = {first_byte};
	uint8_t buf[96];
	struct sbx_msgw w;
	struct sbx_err e;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DIRECT);
	sbx_msgw_bytes(&w, SBX_T_TOKEN, tok, sizeof tok);
	struct sbx_op *p = NULL;
	sbx_err_clear(&e);
	assert_int_equal(sbx_call(s, &w, &p, &e), -1);
	assert_null(p);
	assert_int_equal(e.cls, SBX_EUSAGE);
	assert_false(s->broken);
}

static void not_twice(void **state)
{
	(void)state;
	pid_t agent;
	struct sbx_session *s = open_agent(1, &agent);
	struct sbx_err e;
	if (sbx_session_direct(s, agent, &e) != 0)
		fail_msg("direct socket: %s", e.msg);
	assert_string_equal(sbx_session_channel(s), "direct");
	/* The host refuses a second one... */
	sbx_err_clear(&e);
	assert_int_equal(sbx_session_direct(s, agent, &e), -1);
	assert_int_equal(e.cls, SBX_EUSAGE);
	assert_false(s->broken);
	assert_string_equal(sbx_session_channel(s), "direct");
	probe(s, "/", SBX_KIND_DIR);
	/* ...and so does the agent, asked over the direct socket. */
	agent_refuses(s, 1);
	probe(s, "/", SBX_KIND_DIR);
	probe(s, "/nonexistent-xyz", SBX_KIND_ABSENT);
	close_and_gone(s, agent);
}

static void busy_refused(void **state)
{
	(void)state;
	pid_t agent;
	struct sbx_session *s = open_agent(1, &agent);
	struct sbx_exec_opts o;
	sbx_exec_opts_init(&o);
	char *argv[] = {"/bin/sleep", "0.5", NULL};
	o.argv = argv;
	struct sbx_op *x;
	struct sbx_err e;
	if ((x = sbx_exec_async(s, &o, &e)) == NULL)
		fail_msg("exec: %s", e.msg);
	/* A command in flight: the host does not even ask... */
	sbx_err_clear(&e);
	assert_int_equal(sbx_session_direct(s, agent, &e), -1);
	assert_int_equal(e.cls, SBX_EUSAGE);
	assert_false(s->broken);
	assert_string_equal(sbx_session_channel(s), "exec");
	/* ...and the agent, asked anyway, refuses while its job runs. */
	agent_refuses(s, 2);
	assert_int_equal(sbx_op_done(x), 0); /* the refusal came while it ran */
	struct sbx_exec_result r;
	if (sbx_op_wait(x, &e) != 0 || sbx_exec_result(x, &r, &e) != 0)
		fail_msg("exec wait: %s", e.msg);
	sbx_op_free(x);
	assert_int_equal(r.outcome, SBX_OUT_EXITED);
	assert_int_equal(r.code, 0);
	/* Quiet again: now the direct socket is taken. */
	if (sbx_session_direct(s, agent, &e) != 0)
		fail_msg("direct socket: %s", e.msg);
	assert_string_equal(sbx_session_channel(s), "direct");
	probe(s, "/", SBX_KIND_DIR);
	close_and_gone(s, agent);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(direct_taken, arm, disarm),
	        cmocka_unit_test_setup_teardown(inside_peer_with_token_refused, arm, disarm),
	        cmocka_unit_test_setup_teardown(wrong_token_refused, arm, disarm),
	        cmocka_unit_test_setup_teardown(not_twice, arm, disarm),
	        cmocka_unit_test_setup_teardown(busy_refused, arm, disarm),
	        cmocka_unit_test_setup_teardown(same_pidns_refused, arm, disarm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
