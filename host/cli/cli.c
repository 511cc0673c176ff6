/* The `sbx` command: parses arguments, opens a session through a runner, and prints results
 * as text or JSON; `sbx session` answers JSON requests line by line over one connection. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "hex.h"
#include "json.h"
#include "sbx.h"
#include "sbx_runner.h"
#include "utf8.h"

#include "cli.h"

static void usage(FILE *f)
{
	fputs("usage: sbx [--via 'ARGV with {agent}' |\n"
	      "           --runner local|qemu:ARCH|ns:NAME|podman:NAME|docker:NAME]\n"
	      "           [--agent PATH] [--agent-dir DIR] [--timeout S] [--json] COMMAND\n"
	      "commands:\n"
	      "  hello                       the agent's HELLO (version, arch, uid, caps, digest)\n"
	      "  ping                        one round trip\n"
	      "  kind PATH                   dir, file or absent\n"
	      "  stat PATH...                lstat: type mode uid gid size mtime [-> target]\n"
	      "  resolve PATH                physical path (cd -P; a missing tail is kept)\n"
	      "  lands-clear DIR KEEP_OUT... exit 0 when extracting into DIR stays clear\n"
	      "  exec [--user U] [--cwd D] [--env K=V]... [--env-clear] [--timeout S] [-i]\n"
	      "       -- ARGV...             run a program (no shell needed); -i streams stdin\n"
	      "  sh [same options] 'COMMAND' run a shell command line (/bin/sh -c)\n"
	      "  session                     JSON lines: one request per input line\n"
	      "  upload-dir [--readable] SRC TARGET       a local folder's contents into TARGET\n"
	      "  download-dir [--name N]... [--exclude P]... [--skip-unsafe] [--links data|keep]\n"
	      "       [--archive-copy F] SRC TARGET       a sandbox folder's contents into TARGET\n"
	      "  upload-path SRC TARGET                   restore a file or folder at TARGET\n"
	      "  download-path [--exclude P]... [--links data|keep] [--archive-copy F] SRC TARGET\n"
	      "                              prints dir, file or absent\n"
	      "  upload-archive [--keep-out D]... ARCHIVE dir|file TARGET\n"
	      "                              replay a kept archive; exit 1 when diverted\n"
	      "       (transfers also take --xfer-timeout S, default 600)\n"
	      "  run --run-dir DIR [--timeout S] [--grace S] [--log-max B] [--user U] [--cwd D]\n"
	      "      [--env K=V]... [--env-clear] [--key-file F] [--detach] -- ARGV...\n"
	      "                              run a harness under the supervisor; prints the\n"
	      "                              signed receipt; exits with the harness's status\n"
	      "  stop|expire|attach|receipt|rearm|close --run-dir DIR [...]\n"
	      "  output --run-dir DIR [--from B] [--follow] [--max-bytes B] [--wait S]\n"
	      "                              the run's log, raw: what exists now (or until the\n"
	      "                              run ends with --follow); exit 1 at a bound\n"
	      "  rollout --task DIR [--runner ns|podman] [--image DIR|TAR] [--verifier-image ..]\n"
	      "       [--user U] [--timeout S] [--verify-timeout S] [--out DIR]\n"
	      "                              one agent-rollout episode (two sandboxes)\n"
	      "  version | arches | selftest [--qemu] [ARCH...|all]\n"
	      "  sandbox create --image DIR [--name NAME] [--arch ARCH] [--privileged]\n"
	      "                              a namespace sandbox (root; state in $SBX_NS_DIR,\n"
	      "                              default /run/sbx/ns); prints its name;\n"
	      "                              --privileged: no boundary (every capability)\n"
	      "  sandbox create --runner podman|docker --image IMAGE|FILE.tar [--name NAME]\n"
	      "         [--arch ARCH] [--engine-arg WORD]...   a container; prints podman:NAME\n"
	      "  sandbox status NAME | rm NAME... | ls   (NAME may be podman:NAME, docker:NAME)\n"
	      "                              status exits 0 running, 1 stopped or absent\n"
	      "exit status: exec/sh: the command's (128+signal, 124 timed out, 126/127 not\n"
	      "started), 125 when sbx itself failed. Others: 0 ok, 1 false (lands-clear),\n"
	      "2 usage, 3 unavailable, 4 probe, 5 transfer, 6 protocol.\n",
	      f);
}

int class_exit(enum sbx_err_class c)
{
	switch (c) {
	case SBX_EUNAVAILABLE:
		return EX_UNAVAILABLE;
	case SBX_EPROBE:
		return EX_PROBE;
	case SBX_ETRANSFER:
		return EX_TRANSFER;
	case SBX_EPROTOCOL:
		return EX_PROTOCOL;
	default:
		return EX_USAGE;
	}
}

static const char *const cap_names[] = {"openat2", "pidfd",    "subreaper", "inotify",
                                        "pty",     "signalfd", "timerfd"};

/* ---- probes: hello ping kind stat resolve lands-clear, from argv or from JSON ---- */

struct probe {
	const char *op; /* the JSON op name: hello ping kind remote_kind stat resolve lands_clear */
	const char *path;
	const char *const *list; /* stat: paths; lands_clear: keep_out */
	size_t n;
};

static void hello_out(struct sbx_session *s, struct sbx_jw *w, int human)
{
	const struct sbx_hello *h = sbx_session_hello(s);
	char hex[65];
	sbx_hex(h->sha256, 32, hex);
	sbx_jw_kint(w, "protocol", h->proto);
	sbx_jw_kstr(w, "agent_version", h->agent_version);
	sbx_jw_kstr(w, "arch", h->arch);
	sbx_jw_kint(w, "uid", h->uid);
	sbx_jw_kint(w, "euid", h->euid);
	sbx_jw_kint(w, "gid", h->gid);
	sbx_jw_kint(w, "egid", h->egid);
	sbx_jw_kint(w, "pid", h->pid);
	sbx_jw_kstr(w, "kernel", h->kernel);
	sbx_jw_key(w, "caps");
	sbx_jw_arr_begin(w);
	for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
		if (h->caps & (1 << i))
			sbx_jw_str(w, cap_names[i]);
	sbx_jw_arr_end(w);
	sbx_jw_kint(w, "cgroup", h->cgroup);
	sbx_jw_kstr(w, "sha256", hex);
	sbx_jw_kstr(w, "channel", sbx_session_channel(s));
	if (!human)
		return;
	cli_printf("agent %s (%s) protocol %d kernel %s\nuid %lld euid %lld gid %lld egid %lld "
	           "pid %lld cgroup v%d\ncaps:",
	           h->agent_version, h->arch, h->proto, h->kernel, (long long)h->uid,
	           (long long)h->euid, (long long)h->gid, (long long)h->egid, (long long)h->pid,
	           h->cgroup);
	for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
		if (h->caps & (1 << i))
			cli_printf(" %s", cap_names[i]);
	cli_printf("\nsha256 %s\nchannel %s\n", hex, sbx_session_channel(s));
}

static void stat_out(struct sbx_jw *w, const struct sbx_stat *st, int human)
{
	char mode[8];
	snprintf(mode, sizeof mode, "%04o", (unsigned)st->mode);
	sbx_jw_obj_begin(w);
	sbx_jw_kstr(w, "path", st->path);
	if (st->err != 0) {
		const char *msg = st->message ? st->message : strerror(st->err);
		sbx_jw_kint(w, "errno", st->err);
		sbx_jw_kstr(w, "message", msg);
		if (human)
			cli_printf("%s: %s\n", st->path, msg);
	} else {
		sbx_jw_kstr(w, "type", st->type);
		sbx_jw_kstr(w, "mode", mode);
		sbx_jw_kint(w, "uid", st->uid);
		sbx_jw_kint(w, "gid", st->gid);
		sbx_jw_kint(w, "size", st->size);
		sbx_jw_kint(w, "mtime_ns", st->mtime_ns);
		if (st->target != NULL)
			sbx_jw_kstr(w, "target", st->target);
		if (human)
			cli_printf("%s %s %s %lld %lld %lld %lld%s%s\n", st->path, st->type, mode,
			           (long long)st->uid, (long long)st->gid, (long long)st->size,
			           (long long)(st->mtime_ns / 1000000000), st->target ? " -> " : "",
			           st->target ? st->target : "");
	}
	sbx_jw_obj_end(w);
}

/* Runs one probe: its JSON fields (after "ok") into w, and its text on stdout when human.
 * Returns the exit status (0, or 1 for a lands-clear that is not clear), or -1 with *e. */
static int probe_run(struct sbx_session *s, const struct probe *p, struct sbx_jw *w, int human,
                     struct sbx_err *e)
{
	const char *op = p->op;
	if (strcmp(op, "hello") == 0) {
		hello_out(s, w, human);
		return 0;
	}
	if (strcmp(op, "ping") == 0) {
		double rtt;
		if (sbx_ping(s, &rtt, e) != 0)
			return -1;
		sbx_jw_kdouble(w, "rtt_us", rtt * 1e6);
		if (human)
			cli_printf("pong in %.1f us\n", rtt * 1e6);
		return 0;
	}
	if (strcmp(op, "kind") == 0 || strcmp(op, "remote_kind") == 0) {
		enum sbx_kind k;
		if (sbx_kind(s, p->path, &k, e) != 0)
			return -1;
		sbx_jw_key(w, "kind");
		if (k == SBX_KIND_ABSENT && op[0] == 'r')
			sbx_jw_null(w);
		else
			sbx_jw_str(w, sbx_kind_name(k));
		if (human)
			cli_printf("%s\n", sbx_kind_name(k));
		return 0;
	}
	if (strcmp(op, "resolve") == 0) {
		char *phys;
		if (sbx_resolve(s, p->path, &phys, e) != 0)
			return -1;
		sbx_jw_kstr(w, "physical", phys);
		if (human)
			cli_printf("%s\n", phys);
		free(phys);
		return 0;
	}
	if (strcmp(op, "stat") == 0) {
		struct sbx_stat *st;
		if (sbx_stat(s, p->list, p->n, &st, e) != 0)
			return -1;
		sbx_jw_key(w, "entries");
		sbx_jw_arr_begin(w);
		for (size_t i = 0; i < p->n; i++)
			stat_out(w, &st[i], human);
		sbx_jw_arr_end(w);
		sbx_stat_free(st, p->n);
		return 0;
	}
	/* lands_clear */
	int clear;
	char *phys, *warn;
	if (sbx_lands_clear(s, p->path, p->list, p->n, &clear, &phys, &warn, e) != 0)
		return -1;
	sbx_jw_kbool(w, "clear", clear);
	sbx_jw_kstr(w, "physical", phys ? phys : "");
	if (warn != NULL)
		sbx_jw_kstr(w, "warning", warn);
	if (human)
		cli_printf("%s%s%s\n", clear ? "clear" : "not clear", warn ? ": " : "",
		           warn ? warn : "");
	free(phys);
	free(warn);
	return clear ? 0 : EX_FALSE;
}

/* ---- exec output ---- */

/* An exec's output under --json, per channel: the first CAPTURE_MEM bytes in memory, the rest
 * in an unlinked temporary file, CAPTURE_MAX in all (what comes after is dropped and the
 * result says "stdout_truncated"). The JSON then goes out in pieces, so a 64 MiB output costs
 * about CAPTURE_MEM per channel of memory, not a document's worth. */
#define CAPTURE_MAX (64u << 20)
#define CAPTURE_MEM (1u << 20)
#define CAPTURE_PIECE (48u << 10) /* a multiple of 3, so base64 pieces join */

struct spool {
	uint8_t *mem;
	size_t len, cap; /* len: bytes captured in all */
	int fd;          /* -1 until the output outgrows mem */
	int truncated;
};

struct capture {
	struct spool ch[3];
};

static void capture_init(struct capture *c)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < 3; i++)
		c->ch[i].fd = -1;
}

static void capture_free(struct capture *c)
{
	for (int i = 0; i < 3; i++) {
		free(c->ch[i].mem);
		if (c->ch[i].fd >= 0)
			close(c->ch[i].fd);
	}
}

static int spool_file(void)
{
	const char *dir = getenv("TMPDIR");
	if (dir == NULL || dir[0] == '\0')
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT))
		return fd;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/sbx-exec-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int capture_sink(void *ctx, int chan, const void *p, size_t n)
{
	struct capture *c = ctx;
	if (chan < 1 || chan > 2)
		return 0;
	struct spool *sp = &c->ch[chan];
	if (n > CAPTURE_MAX - sp->len) {
		sp->truncated = 1;
		n = CAPTURE_MAX - sp->len;
	}
	const uint8_t *b = p;
	if (sp->len < CAPTURE_MEM) {
		size_t take = n < CAPTURE_MEM - sp->len ? n : CAPTURE_MEM - sp->len;
		if (sp->len + take > sp->cap) {
			size_t cap = sp->cap ? sp->cap : 4096;
			while (cap < sp->len + take)
				cap *= 2;
			uint8_t *d = realloc(sp->mem, cap);
			if (d == NULL)
				return -1;
			sp->mem = d;
			sp->cap = cap;
		}
		memcpy(sp->mem + sp->len, b, take);
		sp->len += take;
		b += take;
		n -= take;
	}
	if (n == 0)
		return 0;
	if (sp->fd < 0 && (sp->fd = spool_file()) < 0) {
		sp->truncated = 1; /* nowhere to keep it: said in the result, not fatal */
		return 0;
	}
	size_t off = sp->len - CAPTURE_MEM;
	while (n > 0) {
		ssize_t w = pwrite(sp->fd, b, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			sp->truncated = 1;
			return 0;
		}
		b += w;
		n -= (size_t)w;
		off += (size_t)w;
		sp->len += (size_t)w;
	}
	return 0;
}

/* Up to max bytes of the capture from off into buf; 0 at the end, -1 on a read error. */
static ssize_t spool_read(const struct spool *sp, size_t off, uint8_t *buf, size_t max)
{
	if (off >= sp->len)
		return 0;
	if (max > sp->len - off)
		max = sp->len - off;
	if (off < CAPTURE_MEM) {
		size_t n = max < CAPTURE_MEM - off ? max : CAPTURE_MEM - off;
		memcpy(buf, sp->mem + off, n);
		return (ssize_t)n;
	}
	ssize_t r;
	do
		r = pread(sp->fd, buf, max, (off_t)(off - CAPTURE_MEM));
	while (r < 0 && errno == EINTR);
	return r;
}

/* "stdout": the text (U+FFFD for bytes that are not UTF-8), then "stdout_b64" when it was not
 * all valid UTF-8, then "stdout_truncated". Piece by piece, each written out at once. */
static void json_spool(struct sbx_jw *w, const char *name, struct spool *sp)
{
	uint8_t buf[CAPTURE_PIECE + 4];
	char key[24];
	size_t off = 0, have = 0;
	int valid = 1;
	sbx_jw_key(w, name);
	sbx_jw_str_begin(w);
	for (;;) {
		ssize_t r = spool_read(sp, off, buf + have, CAPTURE_PIECE);
		if (r < 0)
			sp->truncated = 1;
		if (r <= 0)
			break;
		off += (size_t)r;
		have += (size_t)r;
		/* A piece ends on a whole character, so none turns into U+FFFD at a seam. */
		size_t keep = sbx_utf8_cut_tail(buf, have);
		valid &= sbx_utf8_valid(buf, have - keep);
		sbx_jw_str_add(w, buf, have - keep);
		memmove(buf, buf + have - keep, keep);
		have = keep;
		cli_json_out(w);
	}
	if (have > 0) {
		valid = 0; /* a sequence cut by the end of the output */
		sbx_jw_str_add(w, buf, have);
	}
	sbx_jw_str_end(w);
	if (!valid) {
		snprintf(key, sizeof key, "%s_b64", name);
		sbx_jw_key(w, key);
		sbx_jw_str_begin(w);
		for (off = 0;;) {
			/* Whole pieces (a multiple of 3), so no padding falls inside. */
			ssize_t r = 0;
			for (have = 0; have < CAPTURE_PIECE; have += (size_t)r) {
				r = spool_read(sp, off + have, buf + have, CAPTURE_PIECE - have);
				if (r < 0)
					sp->truncated = 1;
				if (r <= 0)
					break;
			}
			if (have == 0)
				break;
			off += have;
			sbx_jw_b64_add(w, buf, have);
			cli_json_out(w);
		}
		sbx_jw_str_end(w);
	}
	if (sp->truncated) {
		snprintf(key, sizeof key, "%s_truncated", name);
		sbx_jw_kbool(w, key, 1);
	}
}

static int passthrough_sink(void *ctx, int chan, const void *p, size_t n)
{
	(void)ctx;
	int fd = chan == SBX_STDERR ? 2 : 1;
	const char *b = p;
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1; /* our reader is gone: cancel the command */
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The result's fields (after "ok"); with a capture, its output, streamed to stdout. */
static void json_exec(struct sbx_jw *w, const struct sbx_exec_result *r, struct capture *c)
{
	sbx_jw_kstr(w, "outcome", sbx_outcome_name(r->outcome));
	sbx_jw_kint(w, "code", r->code);
	if (r->outcome == SBX_OUT_SIGNALED)
		sbx_jw_kint(w, "signal", r->signal);
	if (r->outcome == SBX_OUT_NOT_STARTED) {
		sbx_jw_kint(w, "errno", r->err);
		sbx_jw_kstr(w, "message", r->message);
	}
	sbx_jw_kbool(w, "user_fallback", r->user_fallback);
	if (r->user_fallback)
		sbx_jw_kstr(w, "note", r->note);
	sbx_jw_kdouble(w, "seconds", r->seconds);
	json_spool(w, "stdout", &c->ch[1]);
	json_spool(w, "stderr", &c->ch[2]);
}

/* ---- commands over a session ---- */

/* brief: one probe and done (a podman container's PID is then not asked for the direct socket). */
static int open_session(const struct opts *o, int brief, struct sbx_session **s, struct sbx_err *e)
{
	char spec[4200];
	if ((size_t)snprintf(spec, sizeof spec, "%s%s", o->via ? "via:" : "",
	                     o->via      ? o->via
	                     : o->runner ? o->runner
	                                 : "local") >= sizeof spec)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "--via or --runner too long");
	struct sbx_open_opts oo = {.agent_dir = o->agent_dir,
	                           .agent = o->agent,
	                           .timeout_s = o->timeout,
	                           .brief = brief};
	return sbx_open(spec, &oo, s, e);
}

static void exec_opts_from(struct sbx_exec_opts *x, const struct cmd_opts *c)
{
	x->user = c->user;
	x->cwd = c->cwd;
	x->env = c->env;
	x->env_clear = c->env_clear;
	x->timeout_s = c->timeout;
}

static int cmd_exec(const struct opts *o, struct sbx_session *s, int is_sh, int argc, char **argv)
{
	struct cmd_opts c = {0};
	struct sbx_exec_opts x;
	struct sbx_err e;
	int stream_stdin = 0, i = 0, status;
	sbx_exec_opts_init(&x);
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0)
			break;
		if (strcmp(a, "-i") == 0 || strcmp(a, "--stdin") == 0) {
			stream_stdin = 1;
			continue;
		}
		int r = cmd_opt_arg(&c, argc, argv, &i, &e);
		if (r == 0)
			sbx_err_set(&e, SBX_EUSAGE, 0, "unknown exec option %s", a);
		if (r <= 0) {
			cmd_opts_free(&c);
			return fail(o, &e, EX_EXEC_SBX);
		}
	}
	if (i >= argc || (is_sh && argc - i != 1)) {
		cmd_opts_free(&c);
		sbx_err_set(&e, SBX_EUSAGE, 0,
		            is_sh ? "sh takes one command string" : "exec needs -- ARGV...");
		return fail(o, &e, EX_EXEC_SBX);
	}
	exec_opts_from(&x, &c);
	if (is_sh)
		x.shell = argv[i];
	else
		x.argv = argv + i;
	if (stream_stdin)
		x.stdin_fd = 0;
	struct capture cap;
	capture_init(&cap);
	x.on_output = o->json ? capture_sink : passthrough_sink;
	x.ctx = &cap;
	struct sbx_exec_result r;
	if (sbx_exec(s, &x, &r, &e) != 0) {
		status = fail(o, &e, EX_EXEC_SBX);
	} else {
		if (o->json) {
			struct sbx_jw w;
			sbx_jw_init(&w);
			sbx_jw_obj_begin(&w);
			json_ok(&w);
			json_exec(&w, &r, &cap);
			sbx_jw_obj_end(&w);
			print_json(&w);
			sbx_jw_free(&w);
		} else {
			if (r.outcome == SBX_OUT_NOT_STARTED)
				cli_fprintf(stderr, "sbx: %s\n", r.message);
			if (r.outcome == SBX_OUT_TIMED_OUT)
				cli_fprintf(stderr,
				            "sbx: timed out after %g s; process group killed\n",
				            x.timeout_s);
			if (r.user_fallback)
				cli_fprintf(stderr, "sbx: note: %s\n", r.note);
		}
		status = r.code;
	}
	capture_free(&cap);
	cmd_opts_free(&c);
	return status;
}

static int cmd_simple(const struct opts *o, struct sbx_session *s, const char *cmd, int argc,
                      char **argv)
{
	struct sbx_err e;
	struct probe p = {.op = cmd, .path = argv[0]};
	int want = strcmp(cmd, "hello") == 0 || strcmp(cmd, "ping") == 0 ? 0 : 1;
	if (strcmp(cmd, "stat") == 0) {
		p.list = (const char *const *)argv;
		p.n = (size_t)argc;
		want = argc < 1 ? 1 : argc;
	} else if (strcmp(cmd, "lands-clear") == 0) {
		p.op = "lands_clear";
		p.list = (const char *const *)argv + 1;
		p.n = argc > 0 ? (size_t)argc - 1 : 0;
		want = argc < 1 ? 1 : argc;
	}
	if (argc != want) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "%s takes %s", cmd,
		            strcmp(cmd, "stat") == 0          ? "PATH..."
		            : strcmp(cmd, "lands-clear") == 0 ? "DIR KEEP_OUT..."
		            : want == 0                       ? "no operand"
		                                              : "one PATH");
		return fail(o, &e, EX_USAGE);
	}
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_ok(&w);
	int status = probe_run(s, &p, &w, !o->json, &e);
	sbx_jw_obj_end(&w);
	if (status >= 0 && o->json)
		print_json(&w);
	sbx_jw_free(&w);
	return status < 0 ? fail(o, &e, class_exit(e.cls)) : status;
}

/* ---- session: JSON lines ---- */

const char *jstr(const struct sbx_json *req, const char *key)
{
	const struct sbx_json *v = sbx_json_get(req, key);
	size_t len;
	const char *s = v ? sbx_json_str(v, &len) : NULL;
	return s != NULL && strlen(s) == len ? s : NULL;
}

const char **jstrs(const struct sbx_json *arr, size_t *n, struct sbx_err *e)
{
	*n = 0;
	if (arr == NULL || arr->type != SBX_JSON_ARRAY) {
		sbx_err_set(e, SBX_EUSAGE, 0, "expected an array of strings");
		return NULL;
	}
	size_t len = sbx_json_len(arr);
	const char **v = calloc(len + 1, sizeof *v);
	if (v == NULL) {
		sbx_err_set(e, SBX_EUSAGE, ENOMEM, "array");
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		size_t l;
		v[i] = sbx_json_str(sbx_json_at(arr, i), &l);
		if (v[i] == NULL || strlen(v[i]) != l) {
			free(v);
			sbx_err_set(e, SBX_EUSAGE, 0, "expected strings without NUL bytes");
			return NULL;
		}
	}
	*n = len;
	return v;
}

static int session_exec(struct sbx_session *s, const struct sbx_json *req, int is_sh,
                        struct sbx_jw *w, struct sbx_err *e)
{
	struct sbx_exec_opts x;
	struct cmd_opts c = {0};
	sbx_exec_opts_init(&x);
	const char **argv = NULL;
	uint8_t *stdin_bytes = NULL;
	struct capture cap;
	capture_init(&cap);
	int rc = -1;
	size_t n;
	if (is_sh) {
		/* "command" is the reference's exec_as_root parameter; "cmd" ours. */
		x.shell = jstr(req, "cmd");
		if (x.shell == NULL)
			x.shell = jstr(req, "command");
		if (x.shell == NULL) {
			sbx_err_set(e, SBX_EUSAGE, 0, "sh needs \"cmd\" (or \"command\")");
			goto out;
		}
	} else {
		argv = jstrs(sbx_json_get(req, "argv"), &n, e);
		if (argv == NULL || n == 0) {
			if (argv != NULL)
				sbx_err_set(e, SBX_EUSAGE, 0, "exec needs a non-empty \"argv\"");
			goto out;
		}
		x.argv = (char *const *)argv;
	}
	if (cmd_opts_json(&c, req, e) != 0)
		goto out;
	exec_opts_from(&x, &c);
	int64_t linger;
	const struct sbx_json *lg = sbx_json_get(req, "linger_ms");
	if (lg != NULL && sbx_json_int(lg, &linger) == 0)
		x.linger_ms = linger <= 0 ? -1 : linger > 600000 ? 600000 : (int)linger;
	const struct sbx_json *in = sbx_json_get(req, "stdin");
	const struct sbx_json *in64 = sbx_json_get(req, "stdin_b64");
	if (in != NULL) {
		x.stdin_data = sbx_json_str(in, &x.stdin_len);
		if (x.stdin_data == NULL) {
			sbx_err_set(e, SBX_EUSAGE, 0, "stdin must be a string");
			goto out;
		}
	} else if (in64 != NULL) {
		size_t l;
		const char *s64 = sbx_json_str(in64, &l);
		if (s64 == NULL || sbx_b64_decode(s64, l, &stdin_bytes, &x.stdin_len) != 0) {
			sbx_err_set(e, SBX_EUSAGE, 0, "stdin_b64 is not base64");
			goto out;
		}
		x.stdin_data = stdin_bytes ? (const void *)stdin_bytes : (const void *)"";
	}
	x.on_output = capture_sink;
	x.ctx = &cap;
	struct sbx_exec_result r;
	if (sbx_exec(s, &x, &r, e) != 0)
		goto out;
	json_ok(w);
	json_exec(w, &r, &cap);
	rc = 0;
out:
	cmd_opts_free(&c);
	free(argv);
	free(stdin_bytes);
	capture_free(&cap);
	return rc;
}

/* A probe's request: 0 and *p filled (p->list malloc'd), 1 when op is not a probe, -1. */
static int probe_json(const char *op, const struct sbx_json *req, struct probe *p,
                      struct sbx_err *e)
{
	static const char *const ops[] = {"hello",   "ping", "kind",        "remote_kind",
	                                  "resolve", "stat", "lands_clear", NULL};
	memset(p, 0, sizeof *p);
	for (int i = 0; ops[i] != NULL; i++)
		if (strcmp(op, ops[i]) == 0)
			p->op = ops[i];
	if (p->op == NULL)
		return 1;
	if (strcmp(op, "stat") == 0) {
		p->list = jstrs(sbx_json_get(req, "paths"), &p->n, e);
		return p->list != NULL ? 0 : -1;
	}
	if (strcmp(op, "hello") == 0 || strcmp(op, "ping") == 0)
		return 0;
	const char *name = strcmp(op, "lands_clear") == 0 ? "dir" : "path";
	if ((p->path = jstr(req, name)) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"%s\"", op, name);
	if (strcmp(op, "lands_clear") == 0) {
		const struct sbx_json *ko = sbx_json_get(req, "keep_out");
		p->list = ko ? jstrs(ko, &p->n, e) : calloc(1, sizeof *p->list);
		if (p->list == NULL)
			return ko ? -1 : sbx_err_set(e, SBX_EUSAGE, ENOMEM, "keep_out");
	}
	return 0;
}

static int session_one(struct sbx_session *s, const struct sbx_json *req, struct sbx_jw *w,
                       struct sbx_err *e)
{
	const char *op = jstr(req, "op");
	if (op == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "request without \"op\"");
	struct probe p;
	int rc = probe_json(op, req, &p, e);
	if (rc <= 0) {
		if (rc == 0) {
			json_ok(w);
			rc = probe_run(s, &p, w, 0, e) < 0 ? -1 : 0;
		}
		free((void *)p.list);
		return rc;
	}
	if (strcmp(op, "exec") == 0 || strcmp(op, "sh") == 0 || strcmp(op, "exec_as_root") == 0)
		return session_exec(s, req, strcmp(op, "exec") != 0, w, e);
	if (cli_xfer_session(s, op, req, w, e, &rc))
		return rc;
	if (cli_sup_session(s, op, req, w, e, &rc))
		return rc;
	return sbx_err_set(e, SBX_EUSAGE, 0, "unknown op \"%s\"", op);
}

/* The request's "id", echoed first in its answer (an integer or a string). */
static void json_id(struct sbx_jw *w, const struct sbx_json *req)
{
	const struct sbx_json *id = sbx_json_get(req, "id");
	int64_t iv;
	size_t il;
	const char *is;
	if (id != NULL && sbx_json_int(id, &iv) == 0)
		sbx_jw_kint(w, "id", iv);
	else if (id != NULL && (is = sbx_json_str(id, &il)) != NULL)
		sbx_jw_kstrn(w, "id", is, il);
}

static int cmd_session(struct sbx_session *s)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	struct sbx_jw w;
	sbx_jw_init(&w);
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		struct sbx_json *req = NULL;
		struct sbx_err e;
		sbx_jw_obj_begin(&w);
		if (sbx_json_parse(line, (size_t)n, &req, &e) != 0) {
			json_err(&w, &e);
		} else if (req->type != SBX_JSON_OBJECT) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "a request is a JSON object");
			json_err(&w, &e);
		} else {
			json_id(&w, req);
			if (session_one(s, req, &w, &e) != 0) {
				/* A failure midway may have written fields: start the line again
				 * with only the id and the error. */
				sbx_jw_reset(&w);
				sbx_jw_obj_begin(&w);
				json_id(&w, req);
				json_err(&w, &e);
			}
		}
		sbx_json_free(req);
		sbx_jw_obj_end(&w);
		print_json(&w);
	}
	free(line);
	sbx_jw_free(&w);
	return 0;
}

/* ---- commands without a session ---- */

static int cmd_arches(const char *dir)
{
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	for (unsigned i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct sbx_err e;
		int have = sbx_agent_path(dir, t[i].name, path, sizeof path, &e) == 0;
		cli_printf("%-8s %-20s %s\n", t[i].name, t[i].qemu, have ? path : "(not built)");
	}
	return 0;
}

static int cmd_selftest(const char *dir, int force_qemu, int argc, char **argv)
{
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	const char *names[16];
	unsigned count = 0;
	if (argc == 0 || (argc == 1 && strcmp(argv[0], "all") == 0)) {
		for (unsigned i = 0; i < n; i++)
			names[count++] = t[i].name;
	} else {
		for (int i = 0; i < argc && count < 16; i++)
			names[count++] = argv[i];
	}
	int failed = 0, broken = 0;
	for (unsigned i = 0; i < count; i++) {
		struct sbx_selftest_result r;
		struct sbx_err e;
		if (sbx_agent_selftest(dir, names[i], force_qemu, &r, &e) != 0) {
			cli_printf("FAIL %-8s %s: %s\n", names[i], sbx_err_class_name(e.cls),
			           e.msg);
			broken++;
			continue;
		}
		cli_printf("%s %-8s %-6s %6.2f s\n", r.passed ? "ok  " : "FAIL", names[i],
		           r.via_qemu ? "qemu" : "native", r.proc.seconds);
		if (!r.passed) {
			cli_write_esc(stdout, r.proc.output, strlen(r.proc.output), SBX_ESC_LINES);
			failed++;
		}
		sbx_proc_result_free(&r.proc);
	}
	cli_printf("%u passed, %d failed\n", count - (unsigned)(failed + broken), failed + broken);
	return broken ? EX_UNAVAILABLE : failed ? EX_FALSE : 0;
}

int main(int argc, char **argv)
{
	/* A vanished channel or reader is an error value, never a silent death. */
	signal(SIGPIPE, SIG_IGN);
	struct opts o = {0};
	struct sbx_err e;
	int i = 1;
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];
		if (strcmp(a, "--json") == 0) {
			o.json = 1;
			i++;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			cli_fprintf(stderr, "sbx: %s needs a value\n", a);
			return EX_USAGE;
		}
		const char *v = argv[i + 1];
		if (strcmp(a, "--via") == 0) {
			o.via = v;
		} else if (strcmp(a, "--runner") == 0) {
			o.runner = v;
		} else if (strcmp(a, "--agent") == 0) {
			o.agent = v;
		} else if (strcmp(a, "--agent-dir") == 0) {
			o.agent_dir = v;
		} else if (strcmp(a, "--timeout") == 0) {
			o.timeout = strtod(v, NULL);
			if (o.timeout <= 0) {
				cli_fprintf(stderr, "sbx: bad --timeout %s\n", v);
				return EX_USAGE;
			}
		} else {
			cli_fprintf(stderr, "sbx: unknown option %s\n", a);
			usage(stderr);
			return EX_USAGE;
		}
		i += 2;
	}
	if (i >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	if (o.via != NULL && o.runner != NULL) {
		cli_fprintf(stderr, "sbx: --via and --runner exclude each other\n");
		return EX_USAGE;
	}
	const char *cmd = argv[i++];
	if (strcmp(cmd, "version") == 0) {
		cli_printf("sbx %s\n", sbx_version());
		return 0;
	}
	if (strcmp(cmd, "arches") == 0 || strcmp(cmd, "selftest") == 0) {
		char dir[PATH_MAX];
		if (o.agent_dir != NULL) {
			snprintf(dir, sizeof dir, "%s", o.agent_dir);
		} else if (sbx_agent_dir(dir, sizeof dir, &e) != 0) {
			cli_fprintf(stderr, "sbx: %s\n", e.msg);
			return EX_UNAVAILABLE;
		}
		if (cmd[0] == 'a')
			return cmd_arches(dir);
		int force_qemu = 0;
		if (i < argc && strcmp(argv[i], "--qemu") == 0) {
			force_qemu = 1;
			i++;
		}
		return cmd_selftest(dir, force_qemu, argc - i, argv + i);
	}
	if (cli_sandbox_known(cmd))
		return cli_sandbox(&o, argc - i, argv + i);
	if (strcmp(cmd, "rollout") == 0)
		return cli_rollout(&o, argc - i, argv + i);
	int is_exec = strcmp(cmd, "exec") == 0 || strcmp(cmd, "sh") == 0 || strcmp(cmd, "run") == 0;
	static const char *const known[] = {"hello",       "ping", "kind", "stat",    "resolve",
	                                    "lands-clear", "exec", "sh",   "session", NULL};
	int ok = cli_sup_known(cmd) || cli_xfer_known(cmd);
	for (const char *const *k = known; *k != NULL; k++)
		ok |= strcmp(cmd, *k) == 0;
	if (!ok) {
		cli_fprintf(stderr, "sbx: unknown command '%s'\n", cmd);
		usage(stderr);
		return EX_USAGE;
	}
	struct sbx_session *s;
	int brief = !is_exec && !cli_sup_known(cmd) && !cli_xfer_known(cmd) &&
	            strcmp(cmd, "session") != 0;
	if (open_session(&o, brief, &s, &e) != 0)
		return fail(&o, &e, is_exec ? EX_EXEC_SBX : class_exit(e.cls));
	int status;
	if (cli_sup_known(cmd))
		status = cli_sup(&o, s, cmd, argc - i, argv + i);
	else if (cli_xfer_known(cmd))
		status = cli_xfer(&o, s, cmd, argc - i, argv + i);
	else if (is_exec)
		status = cmd_exec(&o, s, cmd[0] == 's', argc - i, argv + i);
	else if (strcmp(cmd, "session") == 0)
		status = cmd_session(s);
	else
		status = cmd_simple(&o, s, cmd, argc - i, argv + i);
	sbx_session_close(s);
	return status;
}
