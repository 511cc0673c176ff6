/* The supervisor against the adversarial harness behaviours (adversarial.md 1-18), tested from
 * outside: each case runs a tiny program from $SBX_HARNESS_DIR under $SBX_SUP_CMD (default: the
 * agent's `supervise`), then checks the receipt and scans /proc for any process carrying the
 * case's token. SBX_EXPECT_ESCAPE=1 is the negative control against a weakened supervisor: the
 * escape cases must then find survivors. SBX_TEST_AS_USER=1 reruns a subset with --user 65534. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "digest.h"
#include "fixture.h"
#include "json.h"
#include "sbx.h"

#define RUN_LIMIT 30.0 /* seconds any one supervisor command may take before the test kills it */
#define MAX_RUNS 4
#define MAX_PIDS 4096

static char tmproot[256];
static char harness_dir[PATH_MAX];
static char *sup_argv[32]; /* the command prefix, split on spaces */
static int sup_argc;
static char sup_buf[1024];
static int agent_form;  /* `sbx-agent supervise`: takes --key-hex and writes receipt.sig */
static int slow_runner; /* qemu: keep to a small subset */
static int expect_escape;
static int as_user;
static char key_hex[65];
static uint8_t key[32];
static unsigned seq;

struct run {
	char name[64];
	char dir[PATH_MAX];
	char ready[PATH_MAX];
	char out[PATH_MAX + 16];
	char err[PATH_MAX + 16];
	char token[64];
	pid_t pid;   /* the supervisor command; 0 once reaped */
	int wstatus; /* its wait status */
	double started, ended;
	pid_t ready_pid; /* from the ready line */
	char nonce[128]; /* SBX_SUPERVISOR as the harness saw it ("-" when absent) */
	char *line;      /* the receipt line from stdout */
	struct sbx_json *j;
};

static struct run runs[MAX_RUNS];
static int nruns;

struct opts {
	const char *timeout; /* default "25" */
	const char *grace;   /* default "1" */
	const char *log_max;
	const char *user;
	const char *cgroup;     /* memory cgroup folder to start the command in */
	const char *pre_marker; /* "stop" or "expire" written before launch */
	const char *pre_reason;
};

/* Reads a whole file into a NUL-terminated buffer; NULL when it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (n + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	if (len != NULL)
		*len = n;
	return buf;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	int ok = write(fd, text, n) == (ssize_t)n;
	return close(fd) == 0 && ok ? 0 : -1;
}

/* ---- /proc: processes carrying a token ------------------------------------------------- */

/* A process of the run: its argv[0] is a harness program and one argument is the token. The
 * supervisor's own argv holds the token too, but never as a harness's argv[0]. */
static int carries(pid_t pid, const char *token, char *cmd, size_t cmdlen)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0; /* zombies and kernel threads have none */
	buf[n] = 0;
	if (strncmp(buf, harness_dir, strlen(harness_dir)) != 0)
		return 0;
	int found = 0;
	for (char *a = buf; a < buf + n; a += strlen(a) + 1)
		if (strcmp(a, token) == 0)
			found = 1;
	if (found && cmd != NULL) {
		for (ssize_t i = 0; i < n - 1; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
		snprintf(cmd, cmdlen, "%.*s", (int)(cmdlen - 1), buf);
	}
	return found;
}

static int scan_token(const char *token, pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end != 0 || pid <= 0 || pid == getpid())
			continue;
		if (carries((pid_t)pid, token, NULL, 0)) {
			if (n < max)
				pids[n] = (pid_t)pid;
			n++;
		}
	}
	closedir(d);
	return n < max ? n : max;
}

/* Descendants of this process (a child subreaper, so orphans of a supervisor that ended come
 * here), outside the subtrees of supervisors still running. Fills pids, returns how many. */
/* 1 when pid runs sbx-agent (natively or under qemu-*-static), or is gone or exiting. */
static int machinery_or_gone(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	size_t len;
	char *c = slurp(path, &len);
	/* Gone, or exiting (its memory, and so its argv, already released): not a survivor. */
	if (c == NULL || len == 0) {
		free(c);
		return 1;
	}
	int yes = 0;
	for (size_t i = 0; c != NULL && i < len; i += strlen(c + i) + 1)
		yes |= strstr(c + i, "sbx-agent") != NULL;
	free(c);
	return yes;
}

static int scan_descendants(pid_t *pids, int max)
{
	static pid_t *ppid_of;
	static long npid;
	if (ppid_of == NULL) {
		char *s = slurp("/proc/sys/kernel/pid_max", NULL);
		npid = (s != NULL ? atol(s) : 4194304) + 1;
		free(s);
		ppid_of = calloc((size_t)npid, sizeof *ppid_of);
		assert_non_null(ppid_of);
	}
	memset(ppid_of, 0, (size_t)npid * sizeof *ppid_of);
	DIR *d = opendir("/proc");
	if (d == NULL)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end, path[64], buf[512];
		long pid = strtol(de->d_name, &end, 10);
		if (*end != 0 || pid <= 0 || pid >= npid)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		char *rp = strrchr(buf, ')'); /* "pid (comm) S ppid ..." */
		int ppid;
		char state;
		if (rp != NULL && sscanf(rp + 2, "%c %d", &state, &ppid) == 2)
			ppid_of[pid] = state == 'Z' ? -ppid : ppid; /* negative: a zombie */
	}
	closedir(d);
	int n = 0;
	pid_t self = getpid();
	/* few passes suffice: orphans are reparented to us, so trees stay shallow */
	static unsigned char *in;
	if (in == NULL)
		in = malloc((size_t)npid);
	memset(in, 0, (size_t)npid);
	in[self] = 1;
	for (int i = 0; i < nruns; i++) {
		if (runs[i].pid <= 0)
			continue;
		/* A running supervisor: its tree is its own business. Through `sbx run` the
		 * supervisor is detached (an orphan adopted by us, the subreaper): find it by
		 * its run folder's supervisor.pid. */
		in[runs[i].pid] = 2;
		char pf[PATH_MAX + 32];
		snprintf(pf, sizeof pf, "%s/supervisor.pid", runs[i].dir);
		/* A few bytes: a harness may put anything there (planted_session_files). */
		char txt[32] = "";
		int fd = open(pf, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t got = read(fd, txt, sizeof txt - 1);
			txt[got > 0 ? got : 0] = 0;
			close(fd);
		}
		long sp = atol(txt);
		if (sp > 0 && sp < npid)
			in[sp] = 2;
	}
	for (int changed = 1, pass = 0; changed && pass < 64; pass++) {
		changed = 0;
		for (long p = 1; p < npid; p++) {
			pid_t pp = ppid_of[p] < 0 ? -ppid_of[p] : ppid_of[p];
			if (in[p] || pp <= 0 || in[pp] != 1)
				continue;
			in[p] = 1;
			changed = 1;
			/* A zombie is no survivor, and neither is the machinery (an agent or its
			 * emulator winding down after writing the receipt). */
			if (n < max && ppid_of[p] > 0 && !machinery_or_gone((pid_t)p))
				pids[n++] = (pid_t)p;
		}
	}
	return n;
}

/* Kills this process's own children (orphans are reparented here) until the list stays empty:
 * one small file per round, so even a pid-hopping chain is caught (each hop lands here). */
static void kill_children(void)
{
	char path[64], buf[65536];
	snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
	double end = fixture_now() + 10;
	for (int empty = 0; empty < 200 && fixture_now() < end;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		int any = 0;
		for (char *p = buf;;) {
			char *e;
			long pid = strtol(p, &e, 10);
			if (e == p)
				break;
			p = e;
			int sup = 0;
			for (int i = 0; i < nruns; i++)
				sup |= runs[i].pid == pid;
			if (!sup && kill((pid_t)pid, SIGKILL) == 0)
				any = 1;
		}
		pid_t w;
		while ((w = waitpid(-1, NULL, WNOHANG | __WALL)) > 0)
			for (int i = 0; i < nruns; i++)
				if (runs[i].pid == w)
					runs[i].pid = 0;
		empty = any ? 0 : empty + 1;
	}
}

/* SIGKILLs every process carrying the token and every stray descendant (reaping those that
 * are ours) until a few scans in a row find none. */
static void kill_strays(const char *token)
{
	static pid_t pids[MAX_PIDS];
	int quiet = 0;
	for (int round = 0; round < 5000 && quiet < 3; round++) {
		kill_children();
		int n = token != NULL ? scan_token(token, pids, MAX_PIDS) : 0;
		for (int i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		int m = scan_descendants(pids, MAX_PIDS);
		for (int i = 0; i < m; i++)
			kill(pids[i], SIGKILL);
		quiet = n == 0 && m == 0 ? quiet + 1 : 0;
	}
	kill_children();
}

static void kill_token(const char *token)
{
	kill_strays(token);
}

/* A survivor: a process carrying the token, or a descendant of ours outside any running
 * supervisor (what a supervisor left behind is reparented to us). Fails listing them. */
static void survivors_now(const char *token)
{
	static pid_t pids[MAX_PIDS], more[MAX_PIDS];
	int n = scan_token(token, pids, MAX_PIDS);
	int m = scan_descendants(more, MAX_PIDS);
	if (n == 0 && m == 0)
		return;
	char msg[2048] = "", cmd[256];
	size_t used = 0;
	for (int k = 0; k < n + m && k < 8 && used < sizeof msg; k++) {
		pid_t p = k < n ? pids[k] : more[k - n];
		if (!carries(p, token, cmd, sizeof cmd))
			snprintf(cmd, sizeof cmd, "(descendant without the token or gone)");
		used += (size_t)snprintf(msg + used, sizeof msg - used, " [%d] %s;", (int)p, cmd);
	}
	kill_strays(token);
	fail_msg("%d process(es) of token %s and %d stray descendant(s) survived:%s", n, token, m,
	         msg);
}

/* Scans five times over 200 ms. */
static void assert_no_survivors(const char *token)
{
	for (int i = 0; i < 5; i++) {
		survivors_now(token);
		fixture_pause_ms(50);
	}
}

/* One scan, for loops of many short runs. */
static void assert_none_now(const char *token)
{
	survivors_now(token);
}

static int is_zombie_of(pid_t pid, const char *comm)
{
	char path[64], want[64], *s;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((s = slurp(path, NULL)) == NULL)
		return 0;
	snprintf(want, sizeof want, "(%s) Z", comm);
	char *rp = strrchr(s, ')');
	int z = *comm != 0 ? strstr(s, want) != NULL : rp != NULL && rp[1] == ' ' && rp[2] == 'Z';
	free(s);
	return z;
}

/* Live children of this process outside the running supervisors (orphans come here). */
static int live_children(void)
{
	char path[64], buf[65536];
	snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	int live = 0;
	for (char *p = buf;;) {
		char *e;
		long pid = strtol(p, &e, 10);
		if (e == p)
			break;
		p = e;
		int sup = 0;
		for (int i = 0; i < nruns; i++)
			sup |= runs[i].pid == pid;
		if (!sup && !is_zombie_of((pid_t)pid, ""))
			live++;
	}
	return live;
}

/* Negative control: something of the run must have survived (a pid hopper is caught as a
 * child of ours, where each hop lands); then nothing will. */
static void assert_escaped(const char *token)
{
	static pid_t pids[MAX_PIDS];
	int seen = 0;
	for (int i = 0; i < 200 && seen == 0; i++) {
		seen = live_children();
		if (seen == 0 && i % 20 == 0)
			seen = scan_token(token, pids, MAX_PIDS) + scan_descendants(pids, MAX_PIDS);
		if (seen == 0)
			fixture_pause_ms(1);
	}
	kill_strays(token);
	if (seen == 0)
		fail_msg("negative control: nothing of token %s survived the weak supervisor",
		         token);
}

/* ---- running the supervisor command ----------------------------------------------------- */

static struct run *run_new(const char *name)
{
	assert_true(nruns < MAX_RUNS);
	struct run *r = &runs[nruns++];
	memset(r, 0, sizeof *r);
	seq++;
	snprintf(r->name, sizeof r->name, "%s", name);
	snprintf(r->dir, sizeof r->dir, "%s/%s-%u", tmproot, name, seq);
	snprintf(r->ready, sizeof r->ready, "%s/r/%s-%u", tmproot, name, seq);
	snprintf(r->out, sizeof r->out, "%s/%s-%u.out", tmproot, name, seq);
	snprintf(r->err, sizeof r->err, "%s/%s-%u.err", tmproot, name, seq);
	snprintf(r->token, sizeof r->token, "sbxtok-%d-%u-%08lx", (int)getpid(), seq,
	         (unsigned long)(random() & 0xffffffffL));
	assert_int_equal(mkdir(r->dir, 0755), 0);
	return r;
}

static void marker(struct run *r, const char *name, const char *content)
{
	char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
	snprintf(tmp, sizeof tmp, "%s/.x.tmp", r->dir);
	snprintf(path, sizeof path, "%s/%s", r->dir, name);
	assert_int_equal(write_file(tmp, content), 0);
	assert_int_equal(rename(tmp, path), 0);
}

/* Starts the supervisor command on harness PROG (a name in harness_dir, or an absolute path)
 * with argv PROG TOKEN READY ARGS...; `ready` 0 passes "-" (no ready line). */
static void run_start(struct run *r, const struct opts *o, int ready, const char *prog, ...)
{
	char *argv[64], hpath[PATH_MAX + 64];
	int n = 0;
	for (int i = 0; i < sup_argc; i++)
		argv[n++] = sup_argv[i];
	argv[n++] = "--run-dir";
	argv[n++] = r->dir;
	argv[n++] = "--timeout";
	argv[n++] = (char *)(o->timeout != NULL ? o->timeout : "25");
	argv[n++] = "--grace";
	argv[n++] = (char *)(o->grace != NULL ? o->grace : "1");
	if (o->log_max != NULL) {
		argv[n++] = "--log-max";
		argv[n++] = (char *)o->log_max;
	}
	if (o->user != NULL) {
		argv[n++] = "--user";
		argv[n++] = (char *)o->user;
	}
	if (agent_form) {
		argv[n++] = "--key-hex";
		argv[n++] = key_hex;
	}
	argv[n++] = "--";
	if (prog[0] == '/')
		snprintf(hpath, sizeof hpath, "%s", prog);
	else
		snprintf(hpath, sizeof hpath, "%s%s", harness_dir, prog);
	argv[n++] = hpath;
	argv[n++] = r->token;
	argv[n++] = ready ? r->ready : "-";
	va_list ap;
	va_start(ap, prog);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 62)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;

	if (o->pre_marker != NULL)
		marker(r, o->pre_marker, o->pre_reason != NULL ? o->pre_reason : "");
	r->started = fixture_now();
	pid_t p = fork();
	if (p < 0)
		fail_msg("%s: fork: %s", r->name, strerror(errno));
	if (p == 0) {
		if (o->cgroup != NULL) {
			char procs[PATH_MAX + 16];
			snprintf(procs, sizeof procs, "%s/cgroup.procs", o->cgroup);
			if (write_file(procs, "0\n") != 0)
				_exit(120);
		}
		int in = open("/dev/null", O_RDONLY);
		int out = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(r->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0 || err < 0)
			_exit(121);
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		_exit(122);
	}
	r->pid = p;
}

static int run_running(struct run *r)
{
	if (r->pid == 0)
		return 0;
	pid_t w = waitpid(r->pid, &r->wstatus, WNOHANG);
	if (w == r->pid) {
		r->pid = 0;
		r->ended = fixture_now();
		return 0;
	}
	return 1;
}

static const char *run_stderr(struct run *r)
{
	static char text[1024];
	char *s = slurp(r->err, NULL);
	snprintf(text, sizeof text, "%s", s != NULL ? s : "");
	free(s);
	return text;
}

/* Waits for the supervisor command to end; kills it and fails after `limit` seconds. */
static void run_wait(struct run *r, double limit)
{
	while (run_running(r)) {
		if (fixture_now() - r->started > limit) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &r->wstatus, 0);
			r->pid = 0;
			fail_msg("%s: supervisor still running after %.0f s; stderr: %s", r->name,
			         limit, run_stderr(r));
		}
		fixture_pause_ms(5);
	}
}

/* Waits for the harness's ready line ("PID NONCE"). */
static void wait_ready(struct run *r, double limit)
{
	double t0 = fixture_now();
	for (;;) {
		char *s = slurp(r->ready, NULL);
		if (s != NULL) {
			int pid = 0;
			char nonce[128] = "";
			if (sscanf(s, "%d %127s", &pid, nonce) == 2) {
				r->ready_pid = pid;
				snprintf(r->nonce, sizeof r->nonce, "%s", nonce);
				free(s);
				return;
			}
			free(s);
		}
		if (!run_running(r))
			fail_msg("%s: supervisor ended (wait status %#x) before the harness was "
			         "ready; "
			         "stdout+stderr: %s %s",
			         r->name, r->wstatus, slurp(r->out, NULL), run_stderr(r));
		if (fixture_now() - t0 > limit)
			fail_msg("%s: harness not ready after %.0f s", r->name, limit);
		fixture_pause_ms(5);
	}
}

/* clang-format off */
static const char *const receipt_keys[] = {
	"version", "run_dir", "activation", "nonce", "trigger", "timed_out", "cancelled",
	"expired_before_launch", "stopped_before_launch", "launched", "exit", "status", "errno",
	"error", "started_at_ns", "ended_at_ns", "duration_ns", "kill_rounds",
	"termination_witnessed", "residual", "oom", "log_bytes", "log_dropped", "expire_reason",
	"pid",
	"subreaper",
};
/* clang-format on */

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = 0;
}

/* Parses the receipt line and checks what every receipt owes: one line on stdout, the same
 * bytes in receipt.json, the keys in order, the signature, the exit status matching. */
static void run_finish(struct run *r)
{
	assert_true(WIFEXITED(r->wstatus) || WIFSIGNALED(r->wstatus));
	if (!WIFEXITED(r->wstatus))
		fail_msg("%s: supervisor killed by signal %d; stderr: %s", r->name,
		         WTERMSIG(r->wstatus), run_stderr(r));
	size_t len;
	r->line = slurp(r->out, &len);
	assert_non_null(r->line);
	if (len == 0 || r->line[len - 1] != '\n' || memchr(r->line, '\n', len) != r->line + len - 1)
		fail_msg("%s: stdout is not one line (exit %d): '%s'; stderr: %s", r->name,
		         WEXITSTATUS(r->wstatus), r->line, run_stderr(r));
	struct sbx_err e;
	if (sbx_json_parse(r->line, len, &r->j, &e) != 0)
		fail_msg("%s: receipt is not JSON (%s): %s", r->name, e.msg, r->line);
	if (r->j->type != SBX_JSON_OBJECT)
		fail_msg("%s: receipt is not an object", r->name);
	size_t nk = sizeof receipt_keys / sizeof receipt_keys[0];
	if (sbx_json_len(r->j) != nk)
		fail_msg("%s: receipt has %zu keys, want %zu: %s", r->name, sbx_json_len(r->j), nk,
		         r->line);
	for (size_t i = 0; i < nk; i++) {
		const struct sbx_json *k = sbx_json_at(r->j, i);
		if (strcmp(k->key, receipt_keys[i]) != 0)
			fail_msg("%s: receipt key %zu is '%s', want '%s'", r->name, i, k->key,
			         receipt_keys[i]);
	}
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/receipt.json", r->dir);
	size_t flen;
	char *file = slurp(path, &flen);
	if (file == NULL)
		fail_msg("%s: no receipt.json", r->name);
	int same = (flen == len && memcmp(file, r->line, len) == 0) ||
	           (flen == len - 1 && memcmp(file, r->line, flen) == 0);
	if (!same)
		fail_msg("%s: receipt.json differs from the stdout line:\n%s\n%s", r->name, file,
		         r->line);
	if (agent_form) {
		uint8_t mac[SBX_SHA256_LEN];
		char hex[SBX_SHA256_HEX_LEN];
		sbx_hmac_sha256(key, sizeof key, file, flen, mac);
		sbx_hex(mac, sizeof mac, hex);
		snprintf(path, sizeof path, "%s/receipt.sig", r->dir);
		char *sig = slurp(path, NULL);
		if (sig == NULL)
			fail_msg("%s: no receipt.sig", r->name);
		trim(sig);
		if (strcmp(sig, hex) != 0)
			fail_msg("%s: receipt.sig %s does not verify (want %s)", r->name, sig, hex);
		free(sig);
	}
	free(file);
	int64_t status;
	assert_int_equal(sbx_json_int(sbx_json_get(r->j, "status"), &status), 0);
	if (status != WEXITSTATUS(r->wstatus))
		fail_msg("%s: receipt status %lld but the command exited %d", r->name,
		         (long long)status, WEXITSTATUS(r->wstatus));
}

static int64_t jint(struct run *r, const char *k)
{
	int64_t v;
	if (sbx_json_int(sbx_json_get(r->j, k), &v) != 0)
		fail_msg("%s: receipt '%s' is not an integer: %s", r->name, k, r->line);
	return v;
}

static int jbool(struct run *r, const char *k)
{
	int v;
	if (sbx_json_bool(sbx_json_get(r->j, k), &v) != 0)
		fail_msg("%s: receipt '%s' is not a boolean: %s", r->name, k, r->line);
	return v;
}

static const char *jstr(struct run *r, const char *k)
{
	const char *s = sbx_json_str(sbx_json_get(r->j, k), NULL);
	return s != NULL ? s : "(not a string)";
}

#define want_bool(r, k, v)                                                                         \
	do {                                                                                       \
		if (jbool(r, k) != (v))                                                            \
			fail_msg("%s: receipt %s should be %s: %s", (r)->name, k,                  \
			         (v) ? "true" : "false", (r)->line);                               \
	} while (0)

/* The outcome: trigger, exit ('c' code, 's' signal, 'n' null) and status; timed_out and
 * cancelled follow from the trigger; termination witnessed, nothing residual. */
static void expect_outcome(struct run *r, const char *trigger, char kind, int val, int status)
{
	if (strcmp(jstr(r, "trigger"), trigger) != 0)
		fail_msg("%s: trigger %s, want %s: %s", r->name, jstr(r, "trigger"), trigger,
		         r->line);
	const struct sbx_json *x = sbx_json_get(r->j, "exit");
	assert_non_null(x);
	if (kind == 'n') {
		if (x->type != SBX_JSON_NULL)
			fail_msg("%s: exit should be null: %s", r->name, r->line);
	} else {
		int64_t v;
		const char *k = kind == 'c' ? "code" : "signal";
		if (x->type != SBX_JSON_OBJECT || sbx_json_len(x) != 1 ||
		    sbx_json_int(sbx_json_get(x, k), &v) != 0 || v != val)
			fail_msg("%s: exit should be {\"%s\":%d}: %s", r->name, k, val, r->line);
	}
	if (jint(r, "status") != status)
		fail_msg("%s: status %lld, want %d: %s", r->name, (long long)jint(r, "status"),
		         status, r->line);
	int timed = strcmp(trigger, "deadline") == 0 || strcmp(trigger, "expire") == 0;
	want_bool(r, "timed_out", timed);
	want_bool(r, "cancelled", strcmp(trigger, "stop") == 0);
	want_bool(r, "launched", kind != 'n');
	want_bool(r, "termination_witnessed", 1);
	const struct sbx_json *res = sbx_json_get(r->j, "residual");
	if (res == NULL || res->type != SBX_JSON_ARRAY || sbx_json_len(res) != 0)
		fail_msg("%s: residual should be []: %s", r->name, r->line);
	if (r->nonce[0] != 0 && strcmp(r->nonce, jstr(r, "nonce")) != 0)
		fail_msg("%s: harness saw SBX_SUPERVISOR=%s, receipt nonce %s", r->name, r->nonce,
		         jstr(r, "nonce"));
}

static void check_user(struct run *r)
{
	struct stat st;
	if (!as_user)
		return;
	assert_int_equal(stat(r->ready, &st), 0);
	if (st.st_uid != 65534)
		fail_msg("%s: harness ran as uid %d, not 65534", r->name, (int)st.st_uid);
}

static void run_stop_and_wait(struct run *r)
{
	marker(r, "stop", "");
	run_wait(r, RUN_LIMIT);
}

static int teardown_case(void **state)
{
	(void)state;
	for (int i = 0; i < nruns; i++) {
		struct run *r = &runs[i];
		if (r->pid > 0) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, NULL, 0);
		}
		kill_token(r->token);
		sbx_json_free(r->j);
		free(r->line);
	}
	nruns = 0;
	return 0;
}

static const char *user(void)
{
	return as_user ? "65534" : NULL;
}

#define ONLY_DEFAULT()                                                                             \
	do {                                                                                       \
		if (expect_escape || as_user)                                                      \
			skip();                                                                    \
	} while (0)

/* ---- 1-3: exit codes, signals, could not start ------------------------------------------ */

static void exit_codes(void **state)
{
	(void)state;
	if (expect_escape)
		skip();
	int subset = slow_runner || as_user;
	for (int n = 0; n < 256; n++) {
		if (subset && !(n < 3 || n == 42 || n == 124 || n == 125 || n == 126 || n == 127 ||
		                n == 128 || n == 137 || n == 255))
			continue;
		char arg[8];
		snprintf(arg, sizeof arg, "%d", n);
		struct opts o = {.user = user()};
		struct run *r = run_new("exit");
		int ready = n % 51 == 0 || as_user; /* some runs also check the nonce */
		run_start(r, &o, ready, "exit_code", arg, NULL);
		run_wait(r, RUN_LIMIT);
		if (ready) {
			wait_ready(r, 1);
			check_user(r);
		}
		run_finish(r);
		expect_outcome(r, "exit", 'c', n, n);
		assert_none_now(r->token);
		teardown_case(NULL);
	}
}

static void signals(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	static const int sigs[] = {SIGTERM, SIGHUP, SIGSEGV, SIGKILL, SIGINT, SIGABRT};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		char arg[8];
		snprintf(arg, sizeof arg, "%d", sigs[i]);
		struct opts o = {0};
		struct run *r = run_new("signal");
		run_start(r, &o, 1, "self_signal", arg, NULL);
		run_wait(r, RUN_LIMIT);
		wait_ready(r, 1);
		run_finish(r);
		expect_outcome(r, "exit", 's', sigs[i], 128 + sigs[i]);
		assert_none_now(r->token);
		teardown_case(NULL);
	}
}

static void cannot_start(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	char missing[PATH_MAX + 16], noexec[PATH_MAX + 16];
	snprintf(missing, sizeof missing, "%s/no-such-harness", tmproot);
	snprintf(noexec, sizeof noexec, "%s/not-executable", tmproot);
	assert_int_equal(write_file(noexec, "#!/bin/sh\nexit 0\n"), 0);
	chmod(noexec, 0644);
	struct {
		const char *path;
		int status;
		int err;
	} cases[] = {{missing, 127, ENOENT}, {noexec, 126, EACCES}, {tmproot, 126, EACCES}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct opts o = {0};
		struct run *r = run_new("nostart");
		run_start(r, &o, 1, cases[i].path, NULL);
		run_wait(r, RUN_LIMIT);
		run_finish(r);
		expect_outcome(r, "not_started", 'n', 0, cases[i].status);
		if (jint(r, "errno") != cases[i].err)
			fail_msg("%s: errno %lld, want %d: %s", r->name,
			         (long long)jint(r, "errno"), cases[i].err, r->line);
		if (sbx_json_get(r->j, "error")->type != SBX_JSON_STRING)
			fail_msg("%s: error should say why: %s", r->name, r->line);
		teardown_case(NULL);
	}
}

/* ---- 4-5: stop and expire, before launch and while running; the deadline --------------- */

static void stop_before_launch(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	struct opts o = {.pre_marker = "stop"};
	struct run *r = run_new("stop-early");
	run_start(r, &o, 1, "exit_code", "0", NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	if (access(r->ready, F_OK) == 0)
		fail_msg("stop before launch: the harness started anyway");
	want_bool(r, "stopped_before_launch", 1);
	want_bool(r, "expired_before_launch", 0);
	want_bool(r, "launched", 0);
	want_bool(r, "cancelled", 1);
	want_bool(r, "timed_out", 0);
	want_bool(r, "termination_witnessed", 1);
	assert_string_equal(jstr(r, "trigger"), "stop");
	assert_int_equal(sbx_json_get(r->j, "exit")->type, SBX_JSON_NULL);
}

static void expire_before_launch(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	struct opts o = {.pre_marker = "expire", .pre_reason = "budget spent"};
	struct run *r = run_new("expire-early");
	run_start(r, &o, 1, "exit_code", "0", NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	if (access(r->ready, F_OK) == 0)
		fail_msg("expire before launch: the harness started anyway");
	want_bool(r, "expired_before_launch", 1);
	want_bool(r, "stopped_before_launch", 0);
	want_bool(r, "launched", 0);
	want_bool(r, "timed_out", 1);
	want_bool(r, "cancelled", 0);
	want_bool(r, "termination_witnessed", 1);
	assert_string_equal(jstr(r, "trigger"), "expire");
	assert_string_equal(jstr(r, "expire_reason"), "budget spent");
	assert_int_equal(jint(r, "status"), 124);
	assert_int_equal(sbx_json_get(r->j, "exit")->type, SBX_JSON_NULL);
}

static void expire_running(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	struct opts o = {0};
	struct run *r = run_new("expire");
	run_start(r, &o, 1, "trap_term", "7", "0", NULL);
	wait_ready(r, 10);
	marker(r, "expire", "grader said so");
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	expect_outcome(r, "expire", 'c', 7, 7); /* exited by itself in the grace: kept */
	assert_string_equal(jstr(r, "expire_reason"), "grader said so");
	want_bool(r, "expired_before_launch", 0);
	assert_no_survivors(r->token);
}

static void deadline(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	static const char *const modes[] = {"ignore", "block"};
	for (int i = 0; i < 2; i++) {
		struct opts o = {.timeout = "1", .grace = "0.5"};
		struct run *r = run_new("deadline");
		run_start(r, &o, 1, "ignore_term", modes[i], NULL);
		wait_ready(r, 10);
		run_wait(r, RUN_LIMIT);
		run_finish(r);
		expect_outcome(r, "deadline", 's', SIGKILL, 124);
		double took = r->ended - r->started;
		if (took < 1.4 || took > 6)
			fail_msg("%s %s: took %.2f s for a 1 s deadline and 0.5 s grace", r->name,
			         modes[i], took);
		if (jint(r, "kill_rounds") < 1)
			fail_msg("%s: kill_rounds should count the SIGKILL: %s", r->name, r->line);
		assert_no_survivors(r->token);
		teardown_case(NULL);
	}
}

/* ---- 6-8: the grace, ignored and blocked TERM, a stopped harness ------------------------ */

static void trap_term_checkpoints(void **state)
{
	(void)state;
	if (expect_escape)
		skip();
	struct opts o = {.grace = "3", .user = user()};
	struct run *r = run_new("trap");
	run_start(r, &o, 1, "trap_term", "42", "300", NULL);
	wait_ready(r, 10);
	check_user(r);
	double t0 = fixture_now();
	run_stop_and_wait(r);
	run_finish(r);
	expect_outcome(r, "stop", 'c', 42, 42);
	char ckpt[PATH_MAX + 16];
	snprintf(ckpt, sizeof ckpt, "%s.ckpt", r->ready);
	if (access(ckpt, F_OK) != 0)
		fail_msg("the harness never wrote its checkpoint");
	if (fixture_now() - t0 > 2.5)
		fail_msg("a harness that exits within the grace was waited on for %.1f s",
		         fixture_now() - t0);
	assert_no_survivors(r->token);
}

static void ignore_and_block_term(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	static const char *const modes[] = {"ignore", "block"};
	for (int i = 0; i < 2; i++) {
		struct opts o = {.grace = "0.5"};
		struct run *r = run_new("ignore");
		run_start(r, &o, 1, "ignore_term", modes[i], NULL);
		wait_ready(r, 10);
		double t0 = fixture_now();
		run_stop_and_wait(r);
		double took = fixture_now() - t0;
		run_finish(r);
		expect_outcome(r, "stop", 's', SIGKILL, 128 + SIGKILL);
		if (took < 0.45)
			fail_msg("%s: SIGKILL came %.2f s after stop, before the 0.5 s grace",
			         modes[i], took);
		assert_no_survivors(r->token);
		teardown_case(NULL);
	}
}

static void stopped_harness(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	struct opts o = {.grace = "0.5"};
	struct run *r = run_new("sigstop");
	run_start(r, &o, 1, "self_stop", NULL);
	wait_ready(r, 10);
	fixture_pause_ms(50);
	run_stop_and_wait(r);
	run_finish(r);
	expect_outcome(r, "stop", 's', SIGKILL, 128 + SIGKILL);
	assert_no_survivors(r->token);
}

/* ---- 9-12: escapees ------------------------------------------------------------------------ */

/* Runs `escape MODE stay` and stops it, or `escape MODE exit` and lets it end. */
static void escape_case(const char *mode, int stay, int user_too)
{
	if (as_user && !user_too)
		skip();
	struct opts o = {.grace = "0.5", .user = user()};
	struct run *r = run_new(mode);
	run_start(r, &o, 1, "escape", mode, stay ? "stay" : "exit", NULL);
	wait_ready(r, 10);
	check_user(r);
	if (stay) {
		fixture_pause_ms(50);
		run_stop_and_wait(r);
	} else {
		run_wait(r, RUN_LIMIT);
	}
	if (expect_escape) {
		assert_escaped(r->token);
		return;
	}
	run_finish(r);
	if (stay)
		expect_outcome(r, "stop", 's', SIGTERM, 128 + SIGTERM);
	else
		expect_outcome(r, "exit", 'c', 0, 0);
	assert_no_survivors(r->token);
}

static void double_fork(void **state)
{
	(void)state;
	/* `( cmd & ) &` and the script ends: the orphan is still in the group, so only a
	 * supervisor that cleans up after a natural exit (or tracks orphans) catches it */
	if (expect_escape) { /* the weak build still kills the group, which holds this orphan */
		print_message("  skipped: an in-group orphan is not an escape from a group kill\n");
		skip();
	}
	escape_case("doublefork", 0, 0);
}

static void setsid_escapee(void **state)
{
	(void)state;
	escape_case("setsid", 1, 1);
}

static void setpgid_child(void **state)
{
	(void)state;
	escape_case("setpgid", 1, 0);
}

static void empty_env_descendant(void **state)
{
	(void)state;
	/* Under QEMU user mode there is no child subreaper (QEMU refuses the prctl; the receipt
	 * says "subreaper":false): an orphan that also dropped the marker is out of reach there,
	 * as docs/supervision.md says. */
	if (slow_runner)
		skip();
	escape_case("emptyenv", 1, 0);
}

static void exit0_leaves_workers(void **state)
{
	(void)state;
	escape_case(slow_runner ? "setsid" : "all", 0, 0);
}

static void fork_storm(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	if (slow_runner)
		skip();
	struct opts o = {.grace = "0.5"};
	struct run *r = run_new("storm");
	run_start(r, &o, 1, "storm", "tree", "8", NULL); /* 511 processes */
	wait_ready(r, 10);
	fixture_pause_ms(30); /* stop while it still grows */
	run_stop_and_wait(r);
	run_finish(r);
	expect_outcome(r, "stop", 's', SIGTERM, 128 + SIGTERM);
	assert_no_survivors(r->token);
}

static void pid_hopping(void **state)
{
	(void)state;
	/* Not in the negative control: a hop chain sometimes dies on its own under the weak
	 * build, so "it escaped" would be a flaky assertion there. */
	if (as_user || slow_runner || expect_escape)
		skip();
	struct opts o = {.grace = "0.5"};
	struct run *r = run_new("hop");
	run_start(r, &o, 1, "storm", "hop", NULL);
	wait_ready(r, 10);
	fixture_pause_ms(300);
	run_stop_and_wait(r);
	if (expect_escape) {
		assert_escaped(r->token);
		return;
	}
	run_finish(r);
	expect_outcome(r, "stop", 's', SIGTERM, 128 + SIGTERM);
	assert_no_survivors(r->token);
}

/* ---- 13: ten thousand zombies --------------------------------------------------------------- */

static long status_kib(pid_t pid, const char *field)
{
	char path[64], *s, *p;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if ((s = slurp(path, NULL)) == NULL)
		return -1;
	long v = -1;
	if ((p = strstr(s, field)) != NULL)
		v = strtol(p + strlen(field) + 1, NULL, 10);
	free(s);
	return v;
}

static void ten_thousand_zombies(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	if (slow_runner)
		skip();
	struct opts o = {.grace = "0.5"};
	struct run *r = run_new("zombies");
	run_start(r, &o, 1, "zombies", "10000", NULL);
	wait_ready(r, 20);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/supervisor.pid", r->dir);
	char *s = slurp(path, NULL);
	if (s == NULL)
		fail_msg("no supervisor.pid while running");
	pid_t sup = (pid_t)atoi(s);
	free(s);
	assert_true(sup > 0);
	/* the zombies, as the kernel lists them under their parent */
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)r->ready_pid,
	         (int)r->ready_pid);
	char *kids = slurp(path, NULL);
	assert_non_null(kids);
	static pid_t zpids[12000];
	int nz = 0;
	for (char *p = kids; nz < 12000;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		zpids[nz++] = (pid_t)v;
		p = end;
	}
	free(kids);
	if (nz < 9900)
		fail_msg("only %d zombies made", nz);
	long rss = status_kib(sup, "VmRSS:");
	marker(r, "stop", "");
	long hwm = 0;
	while (run_running(r)) { /* the peak while it reaps them */
		long h = status_kib(sup, "VmHWM:");
		if (h > hwm)
			hwm = h;
		if (fixture_now() - r->started > RUN_LIMIT)
			run_wait(r, RUN_LIMIT);
		fixture_pause_ms(2);
	}
	print_message("  supervisor pid %d: VmRSS %ld KiB with %d zombies, VmHWM %ld KiB\n",
	              (int)sup, rss, nz, hwm);
	if (rss > 16384 || hwm > 16384)
		fail_msg("supervisor memory not bounded: VmRSS %ld KiB, VmHWM %ld KiB", rss, hwm);
	run_finish(r);
	expect_outcome(r, "stop", 's', SIGTERM, 128 + SIGTERM);
	int left = 0;
	for (int i = 0; i < nz; i++)
		left += is_zombie_of(zpids[i], "zombies");
	if (left > 0)
		fail_msg("%d of %d zombies never reaped", left, nz);
	assert_no_survivors(r->token);
}

/* ---- 15-16: a flood, a forged receipt ------------------------------------------------------ */

static void flood(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	const long long total = slow_runner ? 8 << 20 : 32 << 20, max = 1 << 20;
	char bytes[32];
	snprintf(bytes, sizeof bytes, "%lld", total);
	struct opts o = {.log_max = "1048576"};
	struct run *r = run_new("flood");
	run_start(r, &o, 1, "flood", bytes, NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	expect_outcome(r, "exit", 'c', 0, 0);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/output.log", r->dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	long long kept = jint(r, "log_bytes"), dropped = jint(r, "log_dropped");
	if (st.st_size > max + 65536 || kept > max + 65536)
		fail_msg("output.log holds %lld bytes (receipt %lld) for --log-max %lld",
		         (long long)st.st_size, kept, max);
	if (dropped <= 0 || kept + dropped < total)
		fail_msg("log_bytes %lld + log_dropped %lld should account for %lld bytes", kept,
		         dropped, total);
	teardown_case(NULL);

	/* without end: the deadline still ends it */
	struct opts o2 = {.timeout = "1", .grace = "0.5", .log_max = "1048576"};
	r = run_new("flood-forever");
	run_start(r, &o2, 1, "flood", "0", NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	expect_outcome(r, "deadline", 's', SIGTERM, 124);
	assert_no_survivors(r->token);
}

static void forged_receipt(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	struct opts o = {0};
	struct run *r = run_new("forge");
	run_start(r, &o, 1, "fake_receipt", r->dir, "3", NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r); /* the real receipt.sig verifies over the real receipt.json */
	expect_outcome(r, "exit", 'c', 3, 3);
	if (strcmp(jstr(r, "run_dir"), "forged") == 0 || strcmp(jstr(r, "nonce"), "forged") == 0)
		fail_msg("the forged receipt was kept: %s", r->line);
	/* and what the harness forged (it left a copy beside its ready line) does not verify */
	char path[PATH_MAX + 32];
	size_t flen;
	snprintf(path, sizeof path, "%s.json", r->ready);
	char *forged = slurp(path, &flen);
	snprintf(path, sizeof path, "%s.sig", r->ready);
	char *forged_sig = slurp(path, NULL);
	assert_non_null(forged);
	assert_non_null(forged_sig);
	trim(forged_sig);
	uint8_t mac[SBX_SHA256_LEN];
	char hex[SBX_SHA256_HEX_LEN];
	sbx_hmac_sha256(key, sizeof key, forged, flen, mac);
	sbx_hex(mac, sizeof mac, hex);
	assert_string_not_equal(hex, forged_sig);
	free(forged);
	free(forged_sig);
	fixture_pause_ms(50);
	snprintf(path, sizeof path, "%s/receipt.json", r->dir);
	char *after = slurp(path, NULL);
	assert_non_null(after);
	if (strstr(after, "forged") != NULL)
		fail_msg("a forger outlived the supervisor and rewrote receipt.json");
	free(after);
	snprintf(path, sizeof path, "%s.victim", r->ready);
	char *victim = slurp(path, NULL);
	assert_non_null(victim);
	if (strcmp(victim, "victim\n") != 0)
		fail_msg("the supervisor wrote through a planted symlink: %s", victim);
	free(victim);
	assert_no_survivors(r->token);
}

/* ---- who the command runs as, the run folder's files planted by the harness -------- */

static char sbx_cli[PATH_MAX + 16]; /* the host's sbx, for requests through the serve loop */

/* The sbx beside this test's folder (build/host/tests/.. ), or SBX_SUP_CMD's when it is one. */
static const char *sbx_path(void)
{
	if (sbx_cli[0] != 0)
		return sbx_cli;
	size_t n = strlen(sup_argv[0]);
	if (n >= 4 && strcmp(sup_argv[0] + n - 4, "/sbx") == 0) {
		snprintf(sbx_cli, sizeof sbx_cli, "%s", sup_argv[0]);
		return sbx_cli;
	}
	char self[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(k > 0);
	self[k] = 0;
	char *slash = strrchr(self, '/');
	assert_non_null(slash);
	*slash = 0;
	snprintf(sbx_cli, sizeof sbx_cli, "%s/../sbx", self);
	return sbx_cli;
}

/* `sbx --runner local CMD --run-dir DIR`: its output (malloc'd) and exit code; fails when it
 * is still running after 10 s (a serve loop blocked on a planted file never answers). */
static char *sbx_request(const char *cmd, const char *dir, int *code)
{
	char *argv[] = {(char *)sbx_path(), "--runner",  "local", (char *)cmd,
	                "--run-dir",        (char *)dir, NULL};
	struct sbx_proc_result pr;
	struct sbx_err e;
	if (sbx_proc_capture(argv, 10, 65536, &pr, &e) != 0)
		fail_msg("sbx %s: %s", cmd, e.msg);
	if (pr.how == SBX_PROC_TIMED_OUT)
		fail_msg("sbx %s --run-dir %s: no answer within 10 s (the serve loop is blocked); "
		         "output so far: %s",
		         cmd, dir, pr.output);
	*code = pr.how == SBX_PROC_EXITED ? pr.code : 128 + pr.code;
	char *out = pr.output;
	pr.output = NULL;
	sbx_proc_result_free(&pr);
	return out;
}

/* A harness running as the folder's owner puts a FIFO, a listening socket, a symlink to a
 * FIFO or a 1 TiB sparse file at the files the serve loop reads (adversarial case 16's
 * attacker, review §3.2): attach, output and receipt through the serve loop still answer
 * within 10 s, with "invalid" for the state or a clear error; then the run ends as usual and
 * its real receipt verifies. Shown to fail against the previous agent (supctl.c opened these
 * files without O_NONBLOCK and before any type check): `sbx attach` with a FIFO at `state` got
 * no answer within 10 s. */
static void planted_session_files(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	if (slow_runner)
		skip();
	static const char *const kinds[] = {"fifo", "socket", "symlink", "huge"};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		const char *k = kinds[i];
		int huge = strcmp(k, "huge") == 0;
		struct opts o = {.grace = "0.5"};
		struct run *r = run_new(k);
		/* supervisor.pid too when nothing polls liveness meanwhile (not under `sbx run`,
		 * whose wait would rightly take a run without it for dead). */
		const char *pid = agent_form ? "supervisor.pid" : NULL;
		if (huge) /* output.log's size is the host's to bound (it reads what is there) */
			run_start(r, &o, 1, "plant", r->dir, k, "state", "activation",
			          "receipt.json", "receipt.sig", pid, NULL);
		else
			run_start(r, &o, 1, "plant", r->dir, k, "state", "activation", "output.log",
			          "receipt.json", "receipt.sig", pid, NULL);
		wait_ready(r, 10);
		int code;
		char *out = sbx_request("attach", r->dir, &code);
		/* A huge receipt.json is a regular file: has_receipt is true, the read refuses it.
		 */
		if (code != 0 || strstr(out, "\"state\":\"invalid\"") == NULL ||
		    strstr(out, huge ? "\"has_receipt\":true" : "\"has_receipt\":false") == NULL ||
		    strstr(out, "\"activation\":0") == NULL)
			fail_msg("%s: attach (exit %d) should say state invalid, activation 0: %s",
			         k, code, out);
		free(out);
		out = sbx_request("output", r->dir, &code);
		if (!huge && (code == 0 || strstr(out, "not a regular file") == NULL))
			fail_msg("%s: output should fail with 'not a regular file' (exit %d): %s",
			         k, code, out);
		free(out);
		out = sbx_request("receipt", r->dir, &code);
		if (code == 0 || (!huge && strstr(out, "receipt.json is") == NULL) ||
		    (huge && strstr(out, "larger than") == NULL))
			fail_msg("%s: receipt should fail saying why (exit %d): %s", k, code, out);
		free(out);
		run_stop_and_wait(r);
		run_finish(r);
		expect_outcome(r, "stop", 's', SIGTERM, 128 + SIGTERM);
		assert_no_survivors(r->token);
		teardown_case(NULL);
	}
}

/* The Uid, Gid and Groups lines a command printed: uid everywhere, gid = uid, no groups. */
static void want_ids(const char *what, const char *text, unsigned uid)
{
	char want[128];
	snprintf(want, sizeof want, "Uid:\t%u\t%u\t%u\t%u\n", uid, uid, uid, uid);
	if (strstr(text, want) == NULL)
		fail_msg("%s: not uid %u: %s", what, uid, text);
	snprintf(want, sizeof want, "Gid:\t%u\t%u\t%u\t%u\n", uid, uid, uid, uid);
	if (strstr(text, want) == NULL)
		fail_msg("%s: gid should be the uid %u: %s", what, uid, text);
	const char *g = strstr(text, "Groups:");
	if (g == NULL)
		fail_msg("%s: no Groups line: %s", what, text);
	for (g += 7; *g == ' ' || *g == '\t'; g++)
		;
	if (*g != '\n')
		fail_msg("%s: supplementary groups should be none: %s", what, text);
}

/* A numeric uid without a passwd entry runs with gid = uid and no supplementary groups, under
 * `run` (every runner) and `exec` alike: one lookup and one switch (agent/runas.c). Shown to
 * fail against the previous agent: exec gave Gid 0 and Groups 0 (root's group), run Gid 4321
 * with Groups 4321. */
/* Whether other users can reach path: every folder above it searchable by them (a build in a
 * clone under a 0700 folder is not, and a uid of its own cannot run the harness there). */
static int reachable_by_others(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *slash = strrchr(p, '/'); slash != NULL && slash != p; slash = strrchr(p, '/')) {
		*slash = '\0';
		struct stat st;
		if (stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
			return 0;
	}
	return 1;
}

static void uid_without_entry(void **state)
{
	(void)state;
	if (expect_escape || getuid() != 0)
		skip();
	if (!reachable_by_others(harness_dir)) {
		fprintf(stderr, "note: skipped: %s is not reachable by other users\n", harness_dir);
		skip();
	}
	unsigned uid = 4321;
	while (getpwuid((uid_t)uid) != NULL)
		uid++;
	char u[16];
	snprintf(u, sizeof u, "%u", uid);
	struct opts o = {.user = u};
	struct run *r = run_new("ids");
	run_start(r, &o, 0, "ids", NULL);
	run_wait(r, RUN_LIMIT);
	run_finish(r);
	expect_outcome(r, "exit", 'c', 0, 0);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/output.log", r->dir);
	char *log = slurp(path, NULL);
	assert_non_null(log);
	want_ids("run", log, uid);
	free(log);
	if (!agent_form)
		return; /* exec once, in the default pass */
	char *argv[] = {(char *)sbx_path(),  "--runner", "local", "exec", "--user", u, "--", "cat",
	                "/proc/self/status", NULL};
	struct sbx_proc_result pr;
	struct sbx_err e;
	if (sbx_proc_capture(argv, 20, 65536, &pr, &e) != 0)
		fail_msg("sbx exec: %s", e.msg);
	if (pr.how != SBX_PROC_EXITED || pr.code != 0)
		fail_msg("sbx exec --user %s failed: %s", u, pr.output);
	want_ids("exec", pr.output, uid);
	sbx_proc_result_free(&pr);
}

/* ---- 17: OOM inside a 64 MiB memory cgroup (v1) -------------------------------------------- */

static int cgroup_dir(char *out, size_t len)
{
	char *s = slurp("/proc/self/cgroup", NULL), *p;
	if (s == NULL)
		return -1;
	char rel[PATH_MAX] = "";
	for (p = strtok(s, "\n"); p != NULL; p = strtok(NULL, "\n")) {
		char *m = strstr(p, ":memory:");
		if (m != NULL)
			snprintf(rel, sizeof rel, "%s", m + 8);
	}
	free(s);
	const char *bases[] = {rel, ""};
	for (int i = 0; i < 2; i++) {
		snprintf(out, len, "/sys/fs/cgroup/memory%s%ssbx-test-%d",
		         strcmp(bases[i], "/") == 0 ? "" : bases[i], "/", (int)getpid());
		if (mkdir(out, 0755) == 0)
			return 0;
	}
	return -1;
}

static void oom(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	if (slow_runner)
		skip();
	char cg[PATH_MAX], f[PATH_MAX + 64];
	if (getuid() != 0 || access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) != 0 ||
	    cgroup_dir(cg, sizeof cg) != 0) {
		print_message("  skipped: needs root and a writable cgroup v1 memory controller\n");
		skip();
	}
	snprintf(f, sizeof f, "%s/memory.limit_in_bytes", cg);
	int ok = write_file(f, "67108864\n") == 0;
	snprintf(f, sizeof f, "%s/memory.memsw.limit_in_bytes", cg);
	if (access(f, F_OK) == 0)
		ok = ok && write_file(f, "67108864\n") == 0;
	if (!ok) {
		rmdir(cg);
		print_message("  skipped: cannot set a memory limit in %s\n", cg);
		skip();
	}
	struct opts o = {.cgroup = cg, .grace = "0.5"};
	struct run *r = run_new("oom");
	run_start(r, &o, 1, "memhog", "1024", NULL);
	double t0 = fixture_now();
	while (run_running(r) && fixture_now() - t0 < RUN_LIMIT)
		fixture_pause_ms(5);
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, &r->wstatus, 0);
		r->pid = 0;
	}
	kill_token(r->token);
	for (int i = 0; i < 100 && rmdir(cg) != 0; i++)
		fixture_pause_ms(20);
	if (access(cg, F_OK) == 0)
		print_message("  could not remove cgroup %s\n", cg);
	if (fixture_now() - t0 >= RUN_LIMIT)
		fail_msg("the memory hog was never killed");
	run_finish(r);
	expect_outcome(r, "exit", 's', SIGKILL, 128 + SIGKILL);
	const struct sbx_json *m = sbx_json_get(r->j, "oom");
	int64_t kills = 0;
	const char *attr = sbx_json_str(sbx_json_get(m, "attributed"), NULL);
	if (m == NULL || sbx_json_int(sbx_json_get(m, "kills"), &kills) != 0 || kills <= 0 ||
	    attr == NULL ||
	    (strcmp(attr, "harness") != 0 && strcmp(attr, "descendant") != 0 &&
	     strcmp(attr, "suspected") != 0))
		fail_msg("the receipt does not say OOM: %s", r->line);
}

/* ---- 18: two runs in one sandbox ------------------------------------------------------------ */

static void two_runs(void **state)
{
	(void)state;
	ONLY_DEFAULT();
	static pid_t pids[MAX_PIDS];
	struct opts o = {.grace = "0.5"};
	struct run *a = run_new("two-a"), *b = run_new("two-b");
	const char *mode = slow_runner ? "setsid" : "all"; /* see empty_env_descendant */
	run_start(a, &o, 1, "escape", mode, "stay", NULL);
	run_start(b, &o, 1, "escape", mode, "stay", NULL);
	wait_ready(a, 10);
	wait_ready(b, 10);
	int before = scan_token(b->token, pids, MAX_PIDS);
	/* the harness and its four escapees (one under QEMU) */
	assert_true(before >= (slow_runner ? 2 : 5));
	run_stop_and_wait(a);
	run_finish(a);
	expect_outcome(a, "stop", 's', SIGTERM, 128 + SIGTERM);
	assert_no_survivors(a->token);
	if (!run_running(b))
		fail_msg("stopping one run ended the other");
	int after = scan_token(b->token, pids, MAX_PIDS);
	if (after != before)
		fail_msg("stopping one run killed %d of the other's %d processes", before - after,
		         before);
	run_stop_and_wait(b);
	run_finish(b);
	expect_outcome(b, "stop", 's', SIGTERM, 128 + SIGTERM);
	assert_no_survivors(b->token);
}

/* ---- setup ------------------------------------------------------------------------------------
 */

static int setup(void **state)
{
	(void)state;
	const char *adir = getenv("SBX_AGENT_DIR");
	const char *hdir = getenv("SBX_HARNESS_DIR");
	expect_escape = getenv("SBX_EXPECT_ESCAPE") != NULL &&
	                strcmp(getenv("SBX_EXPECT_ESCAPE"), "1") == 0;
	as_user =
	        getenv("SBX_TEST_AS_USER") != NULL && strcmp(getenv("SBX_TEST_AS_USER"), "1") == 0;
	if (hdir != NULL)
		snprintf(harness_dir, sizeof harness_dir, "%s", hdir);
	else if (adir != NULL)
		snprintf(harness_dir, sizeof harness_dir, "%s/../harness", adir);
	else {
		fprintf(stderr, "set SBX_HARNESS_DIR (or SBX_AGENT_DIR)\n");
		return -1;
	}
	char real[PATH_MAX];
	if (realpath(harness_dir, real) == NULL) {
		fprintf(stderr, "no harness programs in %s\n", harness_dir);
		return -1;
	}
	size_t rl = strlen(real);
	if (rl + 2 > sizeof harness_dir)
		return -1;
	memcpy(harness_dir, real, rl);
	memcpy(harness_dir + rl, "/", 2);
	const char *cmd = getenv("SBX_SUP_CMD");
	if (cmd != NULL && *cmd != 0) {
		snprintf(sup_buf, sizeof sup_buf, "%s", cmd);
	} else {
		const char *d = expect_escape ? getenv("SBX_WEAK_AGENT_DIR") : adir;
		if (d == NULL) {
			fprintf(stderr, "set SBX_SUP_CMD or %s\n",
			        expect_escape ? "SBX_WEAK_AGENT_DIR" : "SBX_AGENT_DIR");
			return -1;
		}
		snprintf(sup_buf, sizeof sup_buf, "%s/x86_64/sbx-agent supervise", d);
	}
	for (char *t = strtok(sup_buf, " "); t != NULL && sup_argc < 31; t = strtok(NULL, " "))
		sup_argv[sup_argc++] = t;
	for (int i = 0; i < sup_argc; i++) {
		if (strcmp(sup_argv[i], "supervise") == 0)
			agent_form = 1;
		if (strncmp(sup_argv[i], "qemu:", 5) == 0 || strstr(sup_argv[i], "qemu") != NULL)
			slow_runner = 1;
	}
	srandom((unsigned)(getpid() ^ (unsigned)time(NULL)));
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, key, sizeof key) != (ssize_t)sizeof key)
		return -1;
	close(fd);
	sbx_hex(key, sizeof key, key_hex);
	if (fixture_tmpdir(tmproot, sizeof tmproot, "supervise") != 0)
		return -1;
	char r[PATH_MAX + 8];
	snprintf(r, sizeof r, "%s/r", tmproot);
	/* the ready folder is where a harness running as uid 65534 may write */
	if (chmod(tmproot, 0711) != 0 || mkdir(r, 01777) != 0 || chmod(r, 01777) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	teardown_case(NULL);
	if (getenv("SBX_KEEP_TMP") == NULL)
		fixture_rmtree(tmproot);
	else
		fprintf(stderr, "kept %s\n", tmproot);
	return 0;
}

int main(void)
{
	/* orphans of a supervisor that ended come to this process, so nothing escapes the test */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		return 1;
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_teardown(exit_codes, teardown_case),
	        cmocka_unit_test_teardown(signals, teardown_case),
	        cmocka_unit_test_teardown(cannot_start, teardown_case),
	        cmocka_unit_test_teardown(stop_before_launch, teardown_case),
	        cmocka_unit_test_teardown(expire_before_launch, teardown_case),
	        cmocka_unit_test_teardown(expire_running, teardown_case),
	        cmocka_unit_test_teardown(deadline, teardown_case),
	        cmocka_unit_test_teardown(trap_term_checkpoints, teardown_case),
	        cmocka_unit_test_teardown(ignore_and_block_term, teardown_case),
	        cmocka_unit_test_teardown(stopped_harness, teardown_case),
	        cmocka_unit_test_teardown(double_fork, teardown_case),
	        cmocka_unit_test_teardown(setsid_escapee, teardown_case),
	        cmocka_unit_test_teardown(setpgid_child, teardown_case),
	        cmocka_unit_test_teardown(empty_env_descendant, teardown_case),
	        cmocka_unit_test_teardown(exit0_leaves_workers, teardown_case),
	        cmocka_unit_test_teardown(fork_storm, teardown_case),
	        cmocka_unit_test_teardown(pid_hopping, teardown_case),
	        cmocka_unit_test_teardown(ten_thousand_zombies, teardown_case),
	        cmocka_unit_test_teardown(flood, teardown_case),
	        cmocka_unit_test_teardown(forged_receipt, teardown_case),
	        cmocka_unit_test_teardown(planted_session_files, teardown_case),
	        cmocka_unit_test_teardown(uid_without_entry, teardown_case),
	        cmocka_unit_test_teardown(oom, teardown_case),
	        cmocka_unit_test_teardown(two_runs, teardown_case),
	};
	if (getenv("SBX_TEST_FILTER") != NULL) /* e.g. SBX_TEST_FILTER=exit_codes */
		cmocka_set_test_filter(getenv("SBX_TEST_FILTER"));
	return cmocka_run_group_tests_name("supervise", tests, setup, teardown);
}
