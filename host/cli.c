/* The `sbx` command: parses arguments, opens a session through a runner, and prints results
 * as text or JSON; `sbx session` answers JSON requests line by line over one connection. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "digest.h"
#include "json.h"
#include "proto.h"
#include "runner.h"
#include "sbx.h"

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
	      "  run --session DIR [--timeout S] [--grace S] [--log-max B] [--user U] [--cwd D]\n"
	      "      [--env K=V]... [--env-clear] [--key-file F] [--detach] -- ARGV...\n"
	      "                              run a harness under the supervisor; prints the\n"
	      "                              signed receipt; exits with the harness's status\n"
	      "  stop|expire|attach|output|receipt|rearm|close --session DIR [...]\n"
	      "  rollout --task DIR [--runner ns|podman] [--image DIR|TAR] [--verifier-image ..]\n"
	      "       [--user U] [--timeout S] [--verify-timeout S] [--out DIR]\n"
	      "                              one agent-rollout episode (two sandboxes)\n"
	      "  version | arches | selftest [--qemu] [ARCH...|all]\n"
	      "  sandbox create --image DIR [--name NAME] [--arch ARCH]\n"
	      "                              a namespace sandbox (root; state in $SBX_NS_DIR,\n"
	      "                              default /run/sbx/ns); prints its name\n"
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

void print_json(struct sbx_jw *w)
{
	size_t len;
	const char *t = sbx_jw_text(w, &len);
	if (w->failed) {
		fputs("{\"ok\":false,\"error\":{\"class\":\"usage\",\"message\":\"out of "
		      "memory\"}}\n",
		      stdout);
	} else {
		fwrite(t, 1, len, stdout);
		fputc('\n', stdout);
	}
	fflush(stdout);
	sbx_jw_reset(w);
}

void json_err(struct sbx_jw *w, const struct sbx_err *e)
{
	sbx_jw_key(w, "ok");
	sbx_jw_bool(w, 0);
	sbx_jw_key(w, "error");
	sbx_jw_obj_begin(w);
	sbx_jw_key(w, "class");
	sbx_jw_str(w, sbx_err_class_name(e->cls));
	sbx_jw_key(w, "errno");
	sbx_jw_int(w, e->errnum);
	sbx_jw_key(w, "message");
	sbx_jw_str(w, e->msg);
	sbx_jw_obj_end(w);
}

/* Reports a failure: a JSON object or a line on stderr. Returns the exit status. */
int fail(const struct opts *o, const struct sbx_err *e, int status)
{
	if (o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		json_err(&w, e);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	} else {
		fprintf(stderr, "sbx: %s: %s\n", sbx_err_class_name(e->cls), e->msg);
	}
	return status;
}

static const char *const cap_names[] = {"openat2", "pidfd",    "subreaper", "inotify",
                                        "pty",     "signalfd", "timerfd"};

static void json_hello(struct sbx_jw *w, const struct sbx_hello *h)
{
	char hex[65];
	sbx_hex(h->sha256, 32, hex);
	sbx_jw_key(w, "protocol");
	sbx_jw_int(w, h->proto);
	sbx_jw_key(w, "agent_version");
	sbx_jw_str(w, h->agent_version);
	sbx_jw_key(w, "arch");
	sbx_jw_str(w, h->arch);
	sbx_jw_key(w, "uid");
	sbx_jw_int(w, h->uid);
	sbx_jw_key(w, "euid");
	sbx_jw_int(w, h->euid);
	sbx_jw_key(w, "gid");
	sbx_jw_int(w, h->gid);
	sbx_jw_key(w, "egid");
	sbx_jw_int(w, h->egid);
	sbx_jw_key(w, "pid");
	sbx_jw_int(w, h->pid);
	sbx_jw_key(w, "kernel");
	sbx_jw_str(w, h->kernel);
	sbx_jw_key(w, "caps");
	sbx_jw_arr_begin(w);
	for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
		if (h->caps & (1 << i))
			sbx_jw_str(w, cap_names[i]);
	sbx_jw_arr_end(w);
	sbx_jw_key(w, "cgroup");
	sbx_jw_int(w, h->cgroup);
	sbx_jw_key(w, "sha256");
	sbx_jw_str(w, hex);
}

static void json_stat(struct sbx_jw *w, const struct sbx_stat *st)
{
	sbx_jw_obj_begin(w);
	sbx_jw_key(w, "path");
	sbx_jw_str(w, st->path);
	if (st->err != 0) {
		sbx_jw_key(w, "errno");
		sbx_jw_int(w, st->err);
		sbx_jw_key(w, "message");
		sbx_jw_str(w, st->message ? st->message : strerror(st->err));
	} else {
		char mode[8];
		snprintf(mode, sizeof mode, "%04o", (unsigned)st->mode);
		sbx_jw_key(w, "type");
		sbx_jw_str(w, st->type);
		sbx_jw_key(w, "mode");
		sbx_jw_str(w, mode);
		sbx_jw_key(w, "uid");
		sbx_jw_int(w, st->uid);
		sbx_jw_key(w, "gid");
		sbx_jw_int(w, st->gid);
		sbx_jw_key(w, "size");
		sbx_jw_int(w, st->size);
		sbx_jw_key(w, "mtime_ns");
		sbx_jw_int(w, st->mtime_ns);
		if (st->target != NULL) {
			sbx_jw_key(w, "target");
			sbx_jw_str(w, st->target);
		}
	}
	sbx_jw_obj_end(w);
}

/* ---- exec output ---- */

struct capture {
	char *data[3];
	size_t len[3], cap[3];
	int truncated[3];
	size_t limit;
};

static int capture_sink(void *ctx, int chan, const void *p, size_t n)
{
	struct capture *c = ctx;
	if (chan < 1 || chan > 2)
		return 0;
	size_t room = c->limit - c->len[chan];
	if (n > room) {
		c->truncated[chan] = 1;
		n = room;
	}
	if (c->len[chan] + n > c->cap[chan]) {
		size_t cap = c->cap[chan] ? c->cap[chan] : 4096;
		while (cap < c->len[chan] + n)
			cap *= 2;
		char *d = realloc(c->data[chan], cap);
		if (d == NULL)
			return -1;
		c->data[chan] = d;
		c->cap[chan] = cap;
	}
	memcpy(c->data[chan] + c->len[chan], p, n);
	c->len[chan] += n;
	return 0;
}

static int passthrough_sink(void *ctx, int chan, const void *p, size_t n)
{
	(void)ctx;
	int fd = chan == SBX_CH_STDERR ? 2 : 1;
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

/* 1 when bytes are valid UTF-8 (so a JSON string carries them exactly). */
static int utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

static void json_exec(struct sbx_jw *w, const struct sbx_exec_result *r, const struct capture *c)
{
	sbx_jw_key(w, "ok");
	sbx_jw_bool(w, 1);
	sbx_jw_key(w, "outcome");
	sbx_jw_str(w, sbx_outcome_name(r->outcome));
	sbx_jw_key(w, "code");
	sbx_jw_int(w, r->code);
	if (r->outcome == SBX_OUT_SIGNALED) {
		sbx_jw_key(w, "signal");
		sbx_jw_int(w, r->signal);
	}
	if (r->outcome == SBX_OUT_NOT_STARTED) {
		sbx_jw_key(w, "errno");
		sbx_jw_int(w, r->err);
		sbx_jw_key(w, "message");
		sbx_jw_str(w, r->message);
	}
	sbx_jw_key(w, "user_fallback");
	sbx_jw_bool(w, r->user_fallback);
	if (r->user_fallback) {
		sbx_jw_key(w, "note");
		sbx_jw_str(w, r->note);
	}
	sbx_jw_key(w, "seconds");
	sbx_jw_double(w, r->seconds);
	for (int ch = 1; ch <= 2 && c != NULL; ch++) {
		const char *name = ch == 1 ? "stdout" : "stderr";
		sbx_jw_key(w, name);
		sbx_jw_strn(w, c->data[ch] ? c->data[ch] : "", c->len[ch]);
		if (!utf8_valid((const unsigned char *)(c->data[ch] ? c->data[ch] : ""),
		                c->len[ch])) {
			char key[16];
			snprintf(key, sizeof key, "%s_b64", name);
			sbx_jw_key(w, key);
			sbx_jw_b64(w, c->data[ch], c->len[ch]);
		}
		if (c->truncated[ch]) {
			char key[24];
			snprintf(key, sizeof key, "%s_truncated", name);
			sbx_jw_key(w, key);
			sbx_jw_bool(w, 1);
		}
	}
}

static int exec_status(const struct sbx_exec_result *r)
{
	return r->code;
}

/* ---- commands over a session ---- */

/* brief: one probe and done (a podman container's PID is then not asked for the direct socket). */
static int open_session(const struct opts *o, int brief, struct sbx_session **s, struct sbx_err *e)
{
	char dir[PATH_MAX];
	struct sbx_runner r;
	if (o->agent_dir != NULL)
		snprintf(dir, sizeof dir, "%s", o->agent_dir);
	else if (sbx_agent_dir(dir, sizeof dir, e) != 0)
		return -1;
	int rc = o->via != NULL
	                 ? sbx_runner_from_via(o->via, o->agent, &r, e)
	                 : sbx_runner_from_spec_ex(o->runner ? o->runner : "local", dir, o->agent,
	                                           brief ? 0 : SBX_RUNNER_DIRECT_ASK, &r, e);
	if (rc != 0)
		return -1;
	/* podman/docker runners hand over the session their injection check opened. */
	if ((*s = sbx_runner_take_session(&r)) != NULL) {
		if (o->timeout > 0)
			sbx_session_set_timeout(*s, o->timeout);
	} else {
		rc = sbx_session_open(s, r.argv, r.agent, o->timeout, e);
	}
	sbx_runner_free(&r);
	if (rc == 0) {
		/* Trust is started, not waited for: only supervision needs it, and it says why
		 * when it is missing. */
		char spec[4200];
		snprintf(spec, sizeof spec, "%s%s", o->via ? "via:" : "",
		         o->via      ? o->via
		         : o->runner ? o->runner
		                     : "local");
		struct sbx_err te;
		sbx_session_trust_for(*s, spec, &te);
	}
	return rc;
}

struct exec_args {
	struct sbx_exec_opts x;
	char *env[256];
	int nenv;
	int stream_stdin;
};

/* Parses exec/sh options up to "--" (exec) or the command string (sh). Returns the index of
 * the first operand, or -1. */
static int parse_exec_opts(int argc, char **argv, int i, struct exec_args *a, struct sbx_err *e)
{
	sbx_exec_opts_init(&a->x);
	a->nenv = 0;
	a->stream_stdin = 0;
	for (; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--") == 0)
			return i + 1;
		if (s[0] != '-' || strcmp(s, "-") == 0)
			return i;
		if (strcmp(s, "-i") == 0 || strcmp(s, "--stdin") == 0) {
			a->stream_stdin = 1;
			continue;
		}
		if (strcmp(s, "--env-clear") == 0) {
			a->x.env_clear = 1;
			continue;
		}
		if (i + 1 >= argc)
			return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs a value", s);
		const char *v = argv[++i];
		if (strcmp(s, "--user") == 0 || strcmp(s, "-u") == 0) {
			a->x.user = v;
		} else if (strcmp(s, "--cwd") == 0 || strcmp(s, "-w") == 0) {
			a->x.cwd = v;
		} else if (strcmp(s, "--env") == 0 || strcmp(s, "-e") == 0) {
			if (a->nenv >= 255)
				return sbx_err_set(e, SBX_EUSAGE, 0, "too many --env");
			a->env[a->nenv++] = (char *)v;
		} else if (strcmp(s, "--timeout") == 0) {
			char *end;
			a->x.timeout_s = strtod(v, &end);
			if (*end != '\0' || a->x.timeout_s < 0)
				return sbx_err_set(e, SBX_EUSAGE, 0, "bad --timeout %s", v);
		} else {
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown exec option %s", s);
		}
	}
	return i;
}

static int cmd_exec(const struct opts *o, struct sbx_session *s, int is_sh, int argc, char **argv)
{
	struct exec_args a;
	struct sbx_err e;
	int i = parse_exec_opts(argc, argv, 0, &a, &e);
	if (i < 0)
		return fail(o, &e, EX_EXEC_SBX);
	if (i >= argc || (is_sh && argc - i != 1)) {
		sbx_err_set(&e, SBX_EUSAGE, 0,
		            is_sh ? "sh takes one command string" : "exec needs -- ARGV...");
		return fail(o, &e, EX_EXEC_SBX);
	}
	a.env[a.nenv] = NULL;
	a.x.env = a.env;
	if (is_sh)
		a.x.shell = argv[i];
	else
		a.x.argv = argv + i;
	if (a.stream_stdin)
		a.x.stdin_fd = 0;
	struct capture cap = {.limit = 64u << 20};
	a.x.on_output = o->json ? capture_sink : passthrough_sink;
	a.x.ctx = &cap;
	struct sbx_exec_result r;
	int rc = sbx_exec(s, &a.x, &r, &e);
	int status;
	if (rc != 0) {
		status = fail(o, &e, EX_EXEC_SBX);
	} else {
		if (o->json) {
			struct sbx_jw w;
			sbx_jw_init(&w);
			sbx_jw_obj_begin(&w);
			json_exec(&w, &r, &cap);
			sbx_jw_obj_end(&w);
			print_json(&w);
			sbx_jw_free(&w);
		} else {
			if (r.outcome == SBX_OUT_NOT_STARTED)
				fprintf(stderr, "sbx: %s\n", r.message);
			if (r.outcome == SBX_OUT_TIMED_OUT)
				fprintf(stderr, "sbx: timed out after %g s; process group killed\n",
				        a.x.timeout_s);
			if (r.user_fallback)
				fprintf(stderr, "sbx: note: %s\n", r.note);
		}
		status = exec_status(&r);
	}
	for (int c = 0; c < 3; c++)
		free(cap.data[c]);
	return status;
}

static int cmd_simple(const struct opts *o, struct sbx_session *s, const char *cmd, int argc,
                      char **argv)
{
	struct sbx_err e;
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	int status = 0;
	if (strcmp(cmd, "hello") == 0) {
		const struct sbx_hello *h = sbx_session_hello(s);
		if (o->json) {
			sbx_jw_key(&w, "ok");
			sbx_jw_bool(&w, 1);
			json_hello(&w, h);
			sbx_jw_key(&w, "channel");
			sbx_jw_str(&w, sbx_session_channel(s));
		} else {
			char hex[65];
			sbx_hex(h->sha256, 32, hex);
			printf("agent %s (%s) protocol %d kernel %s\nuid %lld euid %lld gid %lld "
			       "egid "
			       "%lld pid %lld cgroup v%d\ncaps:",
			       h->agent_version, h->arch, h->proto, h->kernel, (long long)h->uid,
			       (long long)h->euid, (long long)h->gid, (long long)h->egid,
			       (long long)h->pid, h->cgroup);
			for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
				if (h->caps & (1 << i))
					printf(" %s", cap_names[i]);
			printf("\nsha256 %s\nchannel %s\n", hex, sbx_session_channel(s));
		}
	} else if (strcmp(cmd, "ping") == 0) {
		double rtt;
		if (sbx_ping(s, &rtt, &e) != 0)
			goto err;
		if (o->json) {
			sbx_jw_key(&w, "ok");
			sbx_jw_bool(&w, 1);
			sbx_jw_key(&w, "rtt_us");
			sbx_jw_double(&w, rtt * 1e6);
		} else {
			printf("pong in %.1f us\n", rtt * 1e6);
		}
	} else if (strcmp(cmd, "kind") == 0) {
		enum sbx_kind k;
		if (argc != 1) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "kind takes one PATH");
			goto err;
		}
		if (sbx_kind(s, argv[0], &k, &e) != 0)
			goto err;
		if (o->json) {
			sbx_jw_key(&w, "ok");
			sbx_jw_bool(&w, 1);
			sbx_jw_key(&w, "kind");
			sbx_jw_str(&w, sbx_kind_name(k));
		} else {
			printf("%s\n", sbx_kind_name(k));
		}
	} else if (strcmp(cmd, "stat") == 0) {
		struct sbx_stat *st;
		if (argc < 1) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "stat takes PATH...");
			goto err;
		}
		if (sbx_stat(s, (const char *const *)argv, (size_t)argc, &st, &e) != 0)
			goto err;
		sbx_jw_key(&w, "ok");
		sbx_jw_bool(&w, 1);
		sbx_jw_key(&w, "entries");
		sbx_jw_arr_begin(&w);
		for (int i = 0; i < argc; i++) {
			if (o->json) {
				json_stat(&w, &st[i]);
			} else if (st[i].err != 0) {
				printf("%s: %s\n", st[i].path, st[i].message ? st[i].message : "?");
			} else {
				printf("%s %s %04o %lld %lld %lld %lld%s%s\n", st[i].path,
				       st[i].type, (unsigned)st[i].mode, (long long)st[i].uid,
				       (long long)st[i].gid, (long long)st[i].size,
				       (long long)(st[i].mtime_ns / 1000000000),
				       st[i].target ? " -> " : "",
				       st[i].target ? st[i].target : "");
			}
		}
		sbx_jw_arr_end(&w);
		sbx_stat_free(st, (size_t)argc);
	} else if (strcmp(cmd, "resolve") == 0) {
		char *p;
		if (argc != 1) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "resolve takes one PATH");
			goto err;
		}
		if (sbx_resolve(s, argv[0], &p, &e) != 0)
			goto err;
		if (o->json) {
			sbx_jw_key(&w, "ok");
			sbx_jw_bool(&w, 1);
			sbx_jw_key(&w, "physical");
			sbx_jw_str(&w, p);
		} else {
			printf("%s\n", p);
		}
		free(p);
	} else if (strcmp(cmd, "lands-clear") == 0) {
		int clear;
		char *phys, *warn;
		if (argc < 1) {
			sbx_err_set(&e, SBX_EUSAGE, 0, "lands-clear takes DIR KEEP_OUT...");
			goto err;
		}
		if (sbx_lands_clear(s, argv[0], (const char *const *)argv + 1, (size_t)argc - 1,
		                    &clear, &phys, &warn, &e) != 0)
			goto err;
		if (o->json) {
			sbx_jw_key(&w, "ok");
			sbx_jw_bool(&w, 1);
			sbx_jw_key(&w, "clear");
			sbx_jw_bool(&w, clear);
			sbx_jw_key(&w, "physical");
			sbx_jw_str(&w, phys ? phys : "");
			if (warn != NULL) {
				sbx_jw_key(&w, "warning");
				sbx_jw_str(&w, warn);
			}
		} else {
			printf("%s%s%s\n", clear ? "clear" : "not clear", warn ? ": " : "",
			       warn ? warn : "");
		}
		status = clear ? 0 : EX_FALSE;
		free(phys);
		free(warn);
	} else {
		sbx_err_set(&e, SBX_EUSAGE, 0, "unknown command '%s'", cmd);
		goto err;
	}
	sbx_jw_obj_end(&w);
	if (o->json)
		print_json(&w);
	sbx_jw_free(&w);
	return status;
err:
	sbx_jw_free(&w);
	return fail(o, &e, class_exit(e.cls));
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
	sbx_exec_opts_init(&x);
	const char **argv = NULL, **env = NULL;
	char *envbuf[512];
	uint8_t *stdin_bytes = NULL;
	struct capture cap = {.limit = 64u << 20};
	int rc = -1;
	size_t n, ne = 0;
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
	x.cwd = jstr(req, "cwd");
	const struct sbx_json *u = sbx_json_get(req, "user");
	char ubuf[24];
	int64_t uid;
	if (u != NULL && sbx_json_int(u, &uid) == 0) {
		snprintf(ubuf, sizeof ubuf, "%lld", (long long)uid);
		x.user = ubuf;
	} else {
		x.user = jstr(req, "user");
	}
	const struct sbx_json *ev = sbx_json_get(req, "env");
	if (ev != NULL && ev->type == SBX_JSON_OBJECT) {
		for (size_t i = 0; i < ev->len && ne < 511; i++) {
			const struct sbx_json *m = &ev->kids[i];
			size_t l;
			const char *val = sbx_json_str(m, &l);
			if (val == NULL || strlen(val) != l || strlen(m->key) != m->keylen) {
				sbx_err_set(e, SBX_EUSAGE, 0, "env values must be strings");
				goto out;
			}
			size_t sz = m->keylen + l + 2;
			envbuf[ne] = malloc(sz);
			if (envbuf[ne] == NULL)
				goto out;
			snprintf(envbuf[ne++], sz, "%s=%s", m->key, val);
		}
		envbuf[ne] = NULL;
		x.env = envbuf;
	} else if (ev != NULL) {
		env = jstrs(ev, &n, e);
		if (env == NULL)
			goto out;
		x.env = (char *const *)env;
	}
	int b;
	const struct sbx_json *ec = sbx_json_get(req, "env_clear");
	if (ec != NULL && sbx_json_bool(ec, &b) == 0)
		x.env_clear = b;
	const struct sbx_json *t = sbx_json_get(req, "timeout");
	if (t != NULL && sbx_json_double(t, &x.timeout_s) != 0) {
		sbx_err_set(e, SBX_EUSAGE, 0, "timeout must be a number of seconds");
		goto out;
	}
	int64_t linger;
	const struct sbx_json *lg = sbx_json_get(req, "linger_ms");
	if (lg != NULL && sbx_json_int(lg, &linger) == 0)
		x.linger_ms = linger <= 0 ? -1 : (int)linger;
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
	json_exec(w, &r, &cap);
	rc = 0;
out:
	if (x.env == envbuf)
		for (size_t i = 0; i < ne; i++)
			free(envbuf[i]);
	free(argv);
	free(env);
	free(stdin_bytes);
	for (int c = 0; c < 3; c++)
		free(cap.data[c]);
	return rc;
}

static int session_one(struct sbx_session *s, const struct sbx_json *req, struct sbx_jw *w,
                       struct sbx_err *e)
{
	const char *op = jstr(req, "op");
	if (op == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "request without \"op\"");
	if (strcmp(op, "hello") == 0) {
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		json_hello(w, sbx_session_hello(s));
		sbx_jw_key(w, "channel");
		sbx_jw_str(w, sbx_session_channel(s));
		return 0;
	}
	if (strcmp(op, "ping") == 0) {
		double rtt;
		if (sbx_ping(s, &rtt, e) != 0)
			return -1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "rtt_us");
		sbx_jw_double(w, rtt * 1e6);
		return 0;
	}
	if (strcmp(op, "kind") == 0 || strcmp(op, "resolve") == 0) {
		const char *path = jstr(req, "path");
		if (path == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"path\"", op);
		if (op[0] == 'k') {
			enum sbx_kind k;
			if (sbx_kind(s, path, &k, e) != 0)
				return -1;
			sbx_jw_key(w, "ok");
			sbx_jw_bool(w, 1);
			sbx_jw_key(w, "kind");
			sbx_jw_str(w, sbx_kind_name(k));
		} else {
			char *p;
			if (sbx_resolve(s, path, &p, e) != 0)
				return -1;
			sbx_jw_key(w, "ok");
			sbx_jw_bool(w, 1);
			sbx_jw_key(w, "physical");
			sbx_jw_str(w, p);
			free(p);
		}
		return 0;
	}
	if (strcmp(op, "stat") == 0) {
		size_t n;
		const char **paths = jstrs(sbx_json_get(req, "paths"), &n, e);
		if (paths == NULL)
			return -1;
		struct sbx_stat *st;
		int rc = sbx_stat(s, paths, n, &st, e);
		free(paths);
		if (rc != 0)
			return -1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "entries");
		sbx_jw_arr_begin(w);
		for (size_t i = 0; i < n; i++)
			json_stat(w, &st[i]);
		sbx_jw_arr_end(w);
		sbx_stat_free(st, n);
		return 0;
	}
	if (strcmp(op, "lands_clear") == 0) {
		const char *dir = jstr(req, "dir");
		size_t n = 0;
		const struct sbx_json *ko = sbx_json_get(req, "keep_out");
		const char **keep = ko ? jstrs(ko, &n, e) : calloc(1, sizeof *keep);
		if (dir == NULL || keep == NULL) {
			free(keep);
			return dir == NULL
			               ? sbx_err_set(e, SBX_EUSAGE, 0, "lands_clear needs \"dir\"")
			               : -1;
		}
		int clear;
		char *phys, *warn;
		int rc = sbx_lands_clear(s, dir, keep, n, &clear, &phys, &warn, e);
		free(keep);
		if (rc != 0)
			return -1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "clear");
		sbx_jw_bool(w, clear);
		sbx_jw_key(w, "physical");
		sbx_jw_str(w, phys ? phys : "");
		if (warn != NULL) {
			sbx_jw_key(w, "warning");
			sbx_jw_str(w, warn);
		}
		free(phys);
		free(warn);
		return 0;
	}
	if (strcmp(op, "exec") == 0 || strcmp(op, "sh") == 0)
		return session_exec(s, req, op[0] == 's', w, e);
	int rc;
	if (cli_xfer_session(s, op, req, w, e, &rc))
		return rc;
	if (strcmp(op, "remote_kind") == 0) {
		const char *path = jstr(req, "path");
		enum sbx_kind k;
		if (path == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "remote_kind needs \"path\"");
		if (sbx_kind(s, path, &k, e) != 0)
			return -1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "kind");
		if (k == SBX_KIND_ABSENT)
			sbx_jw_null(w);
		else
			sbx_jw_str(w, sbx_kind_name(k));
		return 0;
	}
	if (strcmp(op, "exec_as_root") == 0)
		return session_exec(s, req, 1, w, e);
	if (cli_sup_session(s, op, req, w, e, &rc))
		return rc;
	return sbx_err_set(e, SBX_EUSAGE, 0, "unknown op \"%s\"", op);
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
		} else {
			const struct sbx_json *id = sbx_json_get(req, "id");
			int64_t iv;
			size_t il;
			const char *is;
			if (id != NULL && sbx_json_int(id, &iv) == 0) {
				sbx_jw_key(&w, "id");
				sbx_jw_int(&w, iv);
			} else if (id != NULL && (is = sbx_json_str(id, &il)) != NULL) {
				sbx_jw_key(&w, "id");
				sbx_jw_strn(&w, is, il);
			}
			if (req->type != SBX_JSON_OBJECT) {
				sbx_err_set(&e, SBX_EUSAGE, 0, "a request is a JSON object");
				json_err(&w, &e);
			} else {
				/* A failure midway may have written fields: start the line
				 * again with only the id and the error. */
				if (session_one(s, req, &w, &e) != 0) {
					sbx_jw_free(&w);
					sbx_jw_init(&w);
					sbx_jw_obj_begin(&w);
					if (id != NULL && sbx_json_int(id, &iv) == 0) {
						sbx_jw_key(&w, "id");
						sbx_jw_int(&w, iv);
					} else if (id != NULL &&
					           (is = sbx_json_str(id, &il)) != NULL) {
						sbx_jw_key(&w, "id");
						sbx_jw_strn(&w, is, il);
					}
					json_err(&w, &e);
				}
			}
			sbx_json_free(req);
		}
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
		printf("%-8s %-20s %s\n", t[i].name, t[i].qemu, have ? path : "(not built)");
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
			printf("FAIL %-8s %s: %s\n", names[i], sbx_err_class_name(e.cls), e.msg);
			broken++;
			continue;
		}
		printf("%s %-8s %-6s %6.2f s\n", r.passed ? "ok  " : "FAIL", names[i],
		       r.via_qemu ? "qemu" : "native", r.proc.seconds);
		if (!r.passed) {
			fputs(r.proc.output, stdout);
			failed++;
		}
		sbx_proc_result_free(&r.proc);
	}
	printf("%u passed, %d failed\n", count - (unsigned)(failed + broken), failed + broken);
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
			fprintf(stderr, "sbx: %s needs a value\n", a);
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
				fprintf(stderr, "sbx: bad --timeout %s\n", v);
				return EX_USAGE;
			}
		} else {
			fprintf(stderr, "sbx: unknown option %s\n", a);
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
		fprintf(stderr, "sbx: --via and --runner exclude each other\n");
		return EX_USAGE;
	}
	const char *cmd = argv[i++];
	if (strcmp(cmd, "version") == 0) {
		printf("sbx %s\n", sbx_version());
		return 0;
	}
	if (strcmp(cmd, "arches") == 0 || strcmp(cmd, "selftest") == 0) {
		char dir[PATH_MAX];
		if (o.agent_dir != NULL) {
			snprintf(dir, sizeof dir, "%s", o.agent_dir);
		} else if (sbx_agent_dir(dir, sizeof dir, &e) != 0) {
			fprintf(stderr, "sbx: %s\n", e.msg);
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
		fprintf(stderr, "sbx: unknown command '%s'\n", cmd);
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
