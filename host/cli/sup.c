/* sbx run / stop / expire / attach / output / receipt / rearm / close: the harness
 * supervision commands, and their JSON-lines forms. The receipt key lives in a host-side key
 * file (0600), created at the first run of a run folder, so a later `sbx receipt` from
 * another process can verify what the supervisor signed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hex.h"

#define KEY_LEN SBX_RUN_KEY_LEN

static const char *const sup_cmds[] = {"run",     "stop",  "expire", "attach", "output",
                                       "receipt", "rearm", "close",  NULL};

int cli_sup_known(const char *cmd)
{
	for (const char *const *c = sup_cmds; *c != NULL; c++)
		if (strcmp(*c, cmd) == 0)
			return 1;
	return 0;
}

/* The run key's file: --key-file, or the key store's for this channel and folder. */
static int key_path(const struct opts *o, const char *run_dir, const char *given, char *out,
                    size_t cap, struct sbx_err *e)
{
	if (given != NULL) {
		snprintf(out, cap, "%s", given);
		return 0;
	}
	return sbx_runkey_path(o->via      ? o->via
	                       : o->runner ? o->runner
	                                   : "local",
	                       run_dir, out, cap, e);
}

/* Prints a receipt: under --json {"ok":true,"verified":...,"receipt":"its exact bytes"} (as
 * the JSON-lines op answers), else the line escaped for the terminal (an honest receipt holds no
 * control byte, so it prints exactly). Says so on stderr when the signature does not verify;
 * returns 1 when it does. */
static int print_receipt(const struct opts *o, const struct sbx_receipt *r)
{
	size_t n = r->len;
	if (n > 0 && r->json[n - 1] == '\n')
		n--;
	if (o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		json_ok(&w);
		sbx_jw_kbool(&w, "verified", r->verified);
		sbx_jw_kstrn(&w, "receipt", r->json, r->len);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	} else {
		cli_write_esc(stdout, r->json, n, 0);
		fputc('\n', stdout);
		fflush(stdout);
	}
	if (!r->verified) {
		cli_fprintf(stderr,
		            "sbx: the receipt's signature does NOT verify: do not trust it\n");
		return 0;
	}
	return 1;
}

/* A JSON line on stdout whatever the mode (run --detach, attach): "ok" and the fields. */
static void print_fields(const char *run_dir, const struct sbx_run_status *st, int64_t pid)
{
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	json_ok(&w);
	sbx_jw_kstr(&w, "run_dir", run_dir);
	if (st == NULL) {
		sbx_jw_kint(&w, "supervisor_pid", pid);
	} else {
		sbx_jw_kstr(&w, "state", st->state);
		sbx_jw_kbool(&w, "supervisor_alive", st->alive);
		sbx_jw_kbool(&w, "has_receipt", st->has_receipt);
		sbx_jw_kint(&w, "activation", st->activation);
		sbx_jw_kint(&w, "log_bytes", st->log_size);
	}
	sbx_jw_obj_end(&w);
	print_json(&w);
	sbx_jw_free(&w);
}

#define OUTPUT_PIECE (256 * 1024)
#define OUTPUT_MAX_BYTES (1LL << 30)   /* --max-bytes default */
#define OUTPUT_WAIT 600.0              /* s: a read without --follow gives up after this */
#define JSON_OUTPUT_PIECE (512 * 1024) /* the most one JSON output op answers */

struct sup_args {
	const char *run_dir, *key_file, *reason;
	struct cmd_opts c; /* run: user cwd env env_clear timeout */
	double grace, wait;
	int64_t log_max, from, max_bytes;
	int detach, follow;
	int first; /* index of the first operand (the harness argv for run) */
};

static int parse(int argc, char **argv, struct sup_args *a, int want_argv, struct sbx_err *e)
{
	memset(a, 0, sizeof *a);
	a->grace = -1;
	a->wait = -1;
	a->max_bytes = OUTPUT_MAX_BYTES;
	int i = 0;
	for (; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--") == 0) {
			i++;
			break;
		}
		if (s[0] != '-')
			break;
		if (strcmp(s, "--detach") == 0) {
			a->detach = 1;
			continue;
		}
		if (strcmp(s, "--follow") == 0 || strcmp(s, "-f") == 0) {
			a->follow = 1;
			continue;
		}
		int r = cmd_opt_arg(&a->c, argc, argv, &i, e);
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		if (i + 1 >= argc)
			return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs a value", s);
		const char *v = argv[++i];
		char *end = NULL;
		if (strcmp(s, "--run-dir") == 0)
			a->run_dir = v;
		else if (strcmp(s, "--key-file") == 0)
			a->key_file = v;
		else if (strcmp(s, "--reason") == 0)
			a->reason = v;
		else if (strcmp(s, "--grace") == 0)
			a->grace = strtod(v, &end);
		else if (strcmp(s, "--wait") == 0)
			a->wait = strtod(v, &end);
		else if (strcmp(s, "--log-max") == 0)
			a->log_max = strtoll(v, &end, 10);
		else if (strcmp(s, "--from") == 0)
			a->from = strtoll(v, &end, 10);
		else if (strcmp(s, "--max-bytes") == 0)
			a->max_bytes = strtoll(v, &end, 10);
		else
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown option %s", s);
		if (end != NULL && (*end != '\0' || end == v))
			return sbx_err_set(e, SBX_EUSAGE, 0, "bad number for %s: %s", s, v);
	}
	a->first = i;
	if (a->run_dir == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--run-dir DIR is required");
	if (a->from < 0 || a->max_bytes < 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--from and --max-bytes are >= 0");
	if (want_argv && i >= argc)
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs -- ARGV...");
	if (!want_argv && i < argc)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unexpected operand %s", argv[i]);
	return 0;
}

static int status_of(const struct sbx_receipt *r)
{
	return r->status & 0xff;
}

/* The run's options, from argv or JSON, as the library takes them. */
static void run_opts_from(struct sbx_run_opts *ro, const char *run_dir, char *const *argv,
                          const struct cmd_opts *c, double grace, int64_t log_max)
{
	sbx_run_opts_init(ro);
	ro->run_dir = run_dir;
	ro->argv = argv;
	ro->env = c->env;
	ro->env_clear = c->env_clear;
	ro->cwd = c->cwd;
	ro->user = c->user;
	ro->timeout_s = c->timeout;
	ro->grace_s = grace;
	ro->log_max = log_max;
}

static int cmd_run(const struct opts *o, struct sbx_session *s, struct sup_args *a, char **argv,
                   struct sbx_err *e)
{
	char kp[4096];
	uint8_t key[KEY_LEN];
	if (key_path(o, a->run_dir, a->key_file, kp, sizeof kp, e) != 0)
		return fail(o, e, EX_USAGE);
	/* A new run gets a new key (sbx_run_start derives it): the old file goes first. */
	unlink(kp);
	struct sbx_run_opts ro;
	run_opts_from(&ro, a->run_dir, argv, &a->c, a->grace, a->log_max);
	int64_t pid;
	if (sbx_run_start(s, &ro, &pid, key, e) != 0)
		return fail(o, e, EX_EXEC_SBX);
	if (sbx_runkey_save(kp, key, e) != 0)
		return fail(o, e, EX_USAGE);
	if (a->detach) {
		print_fields(a->run_dir, NULL, pid);
		return 0;
	}
	struct sbx_receipt r;
	/* The receipt comes at the deadline plus the grace plus kill rounds at the latest. */
	double t = a->c.timeout;
	double limit = t > 0 ? t + (a->grace >= 0 ? a->grace : 5) + 30 : 0;
	if (sbx_run_wait(s, a->run_dir, key, KEY_LEN, limit, &r, e) != 0)
		return fail(o, e, EX_EXEC_SBX);
	int ok = print_receipt(o, &r);
	int st = ok ? status_of(&r) : EX_EXEC_SBX;
	sbx_receipt_free(&r);
	return st;
}

/* sbx output: the log from --from. Without --follow it reads what the log held at the first
 * answer and stops; with it, until the run is done. Either way at most --max-bytes, never an
 * answer longer than asked, and no longer than --wait seconds (default 600 without --follow,
 * none with it). The log's bytes go out raw, like exec's output. */
static int cmd_output(const struct opts *o, struct sbx_session *s, struct sup_args *a,
                      struct sbx_err *e)
{
	double wait = a->wait >= 0 ? a->wait : a->follow ? 0 : OUTPUT_WAIT;
	double deadline = wait > 0 ? sbx_now_ns() / 1e9 + wait : 0;
	int64_t off = a->from, end = -1, sent = 0;
	const char *stopped = NULL;
	for (;;) {
		int64_t ask = OUTPUT_PIECE;
		if (end >= 0 && end - off < ask)
			ask = end - off;
		if (a->max_bytes - sent < ask)
			ask = a->max_bytes - sent;
		if (ask <= 0) {
			stopped = end >= 0 && off >= end ? NULL : "the --max-bytes bound";
			break;
		}
		if (deadline > 0 && sbx_now_ns() / 1e9 > deadline) {
			stopped = "the --wait deadline";
			break;
		}
		char *data;
		size_t len;
		int64_t size;
		if (sbx_run_read(s, a->run_dir, "output.log", off, (size_t)ask, &data, &len, &size,
		                 e) != 0)
			return fail(o, e,
			            class_exit(e->cls)); /* never more than asked: checked there */
		if (end < 0 && !a->follow)
			end = size > off ? size : off; /* what exists now, and no more */
		fwrite(data, 1, len, stdout);
		free(data);
		off += (int64_t)len;
		sent += (int64_t)len;
		if (len > 0)
			continue;
		if (!a->follow)
			break;
		fflush(stdout);
		struct sbx_run_status st;
		if (sbx_run_status(s, a->run_dir, &st, e) != 0)
			return fail(o, e, class_exit(e->cls));
		if (st.has_receipt && !st.alive && st.log_size <= off)
			break;
		struct timespec t = {0, 50000000};
		nanosleep(&t, NULL);
	}
	fflush(stdout);
	if (stopped != NULL) {
		cli_fprintf(stderr, "sbx: output: stopped at byte %lld by %s\n", (long long)off,
		            stopped);
		return EX_FALSE;
	}
	return 0;
}

static int sup_one(const struct opts *o, struct sbx_session *s, const char *cmd, int argc,
                   char **argv, struct sup_args *a, struct sbx_err *e)
{
	int is_run = strcmp(cmd, "run") == 0;
	if (parse(argc, argv, a, is_run, e) != 0)
		return fail(o, e, is_run ? EX_EXEC_SBX : EX_USAGE);
	if (is_run)
		return cmd_run(o, s, a, argv + a->first, e);
	if (strcmp(cmd, "output") == 0)
		return cmd_output(o, s, a, e);
	if (strcmp(cmd, "attach") == 0) {
		struct sbx_run_status st;
		if (sbx_run_status(s, a->run_dir, &st, e) != 0)
			return fail(o, e, class_exit(e->cls));
		print_fields(a->run_dir, &st, 0);
		return 0;
	}
	if (strcmp(cmd, "rearm") == 0 || strcmp(cmd, "close") == 0) {
		int rc = cmd[0] == 'r' ? sbx_run_rearm(s, a->run_dir, e)
		                       : sbx_run_close(s, a->run_dir, e);
		return rc != 0 ? fail(o, e, class_exit(e->cls)) : 0;
	}
	char kp[4096];
	uint8_t key[KEY_LEN];
	struct sbx_err ke;
	int have_key = key_path(o, a->run_dir, a->key_file, kp, sizeof kp, &ke) == 0 &&
	               sbx_runkey_load(kp, key, &ke) == 0;
	struct sbx_receipt r;
	if (strcmp(cmd, "receipt") == 0) {
		if (sbx_run_receipt(s, a->run_dir, key, have_key ? KEY_LEN : 0, &r, e) != 0)
			return fail(o, e, class_exit(e->cls));
		if (!have_key)
			cli_fprintf(stderr, "sbx: no key for this run_dir on this host (%s)\n", kp);
		int ok = print_receipt(o, &r);
		sbx_receipt_free(&r);
		return ok ? 0 : EX_FALSE;
	}
	/* stop / expire: place the marker, then wait for the signed receipt. */
	int placed = 1;
	int rc = cmd[0] == 's' ? sbx_run_stop(s, a->run_dir, e)
	                       : sbx_run_expire(s, a->run_dir, a->reason, &placed, e);
	if (rc != 0)
		return fail(o, e, class_exit(e->cls));
	if (!placed)
		cli_fprintf(stderr,
		            "sbx: expire not placed: the run already finished or was expired\n");
	double wait = a->wait >= 0 ? a->wait : 30;
	if (wait <= 0)
		return placed ? 0 : EX_FALSE;
	if (sbx_run_wait(s, a->run_dir, key, have_key ? KEY_LEN : 0, wait, &r, e) != 0)
		return fail(o, e, class_exit(e->cls));
	int ok = print_receipt(o, &r);
	sbx_receipt_free(&r);
	return ok && placed ? 0 : EX_FALSE;
}

int cli_sup(const struct opts *o, struct sbx_session *s, const char *cmd, int argc, char **argv)
{
	struct sup_args a;
	struct sbx_err e;
	int st = sup_one(o, s, cmd, argc, argv, &a, &e);
	cmd_opts_free(&a.c);
	return st;
}

static int json_run(struct sbx_session *s, const char *run_dir, const struct sbx_json *req,
                    const uint8_t *key, size_t key_len, struct sbx_jw *w, struct sbx_err *e)
{
	size_t n;
	const char **argv = jstrs(sbx_json_get(req, "argv"), &n, e);
	if (argv == NULL || n == 0) {
		free(argv);
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs \"argv\": an array of strings");
	}
	struct cmd_opts c = {0};
	double grace = -1;
	int64_t log_max = 0;
	const struct sbx_json *x;
	int rc = -1;
	if (cmd_opts_json(&c, req, e) != 0)
		goto out;
	if ((x = sbx_json_get(req, "grace")) != NULL && sbx_json_double(x, &grace) != 0) {
		sbx_err_set(e, SBX_EUSAGE, 0, "grace is a number of seconds");
		goto out;
	}
	if ((x = sbx_json_get(req, "log_max")) != NULL &&
	    (sbx_json_int(x, &log_max) != 0 || log_max < 0)) {
		sbx_err_set(e, SBX_EUSAGE, 0, "log_max is a number of bytes");
		goto out;
	}
	if (key_len != 0) {
		sbx_err_set(e, SBX_EUSAGE, 0,
		            "run takes no \"key\": it answers with the run's key, derived in the "
		            "sandbox's keeper");
		goto out;
	}
	(void)key;
	struct sbx_run_opts ro;
	run_opts_from(&ro, run_dir, (char *const *)argv, &c, grace, log_max);
	int64_t pid;
	uint8_t rkey[SBX_RUN_KEY_LEN];
	char khex[2 * SBX_RUN_KEY_LEN + 1];
	if (sbx_run_start(s, &ro, &pid, rkey, e) != 0)
		goto out;
	sbx_hex(rkey, sizeof rkey, khex);
	json_ok(w);
	sbx_jw_kint(w, "supervisor_pid", pid);
	sbx_jw_kstr(w, "key", khex);
	rc = 0;
out:
	cmd_opts_free(&c);
	free(argv);
	return rc;
}

static int json_sup(struct sbx_session *s, const char *op, const struct sbx_json *req,
                    struct sbx_jw *w, struct sbx_err *e)
{
	const char *run_dir = jstr(req, "run_dir");
	if (run_dir == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"run_dir\"", op);
	/* Key: given as hex in the request ("key"), or none (then receipts are not verified). */
	uint8_t key[64];
	size_t key_len = 0, kl;
	const struct sbx_json *kj = sbx_json_get(req, "key");
	const char *khex = kj ? sbx_json_str(kj, &kl) : NULL;
	if (kj != NULL) {
		ssize_t n = khex != NULL ? sbx_unhex(khex, kl, key, sizeof key) : -1;
		if (n < 0)
			return sbx_err_set(e, SBX_EUSAGE, 0, "key is up to 64 bytes of hex");
		key_len = (size_t)n;
	}
	double d = 0;
	const struct sbx_json *x;
	if (strcmp(op, "run") == 0)
		return json_run(s, run_dir, req, key, key_len, w, e);
	if (strcmp(op, "stop") == 0 || strcmp(op, "expire") == 0) {
		int placed = 1;
		const char *reason = jstr(req, "reason");
		int r = op[0] == 's' ? sbx_run_stop(s, run_dir, e)
		                     : sbx_run_expire(s, run_dir, reason, &placed, e);
		if (r != 0)
			return -1;
		json_ok(w);
		sbx_jw_kbool(w, "placed", placed);
		return 0;
	}
	if (strcmp(op, "attach") == 0) {
		struct sbx_run_status st;
		if (sbx_run_status(s, run_dir, &st, e) != 0)
			return -1;
		json_ok(w);
		sbx_jw_kstr(w, "state", st.state);
		sbx_jw_kbool(w, "supervisor_alive", st.alive);
		sbx_jw_kbool(w, "has_receipt", st.has_receipt);
		sbx_jw_kint(w, "activation", st.activation);
		sbx_jw_kint(w, "log_bytes", st.log_size);
		return 0;
	}
	if (strcmp(op, "output") == 0) {
		int64_t from = 0;
		if ((x = sbx_json_get(req, "from")) != NULL &&
		    (sbx_json_int(x, &from) != 0 || from < 0))
			return sbx_err_set(e, SBX_EUSAGE, 0, "from is a byte offset");
		char *data;
		size_t len;
		int64_t size;
		if (sbx_run_read(s, run_dir, "output.log", from, JSON_OUTPUT_PIECE, &data, &len,
		                 &size, e) != 0)
			return -1; /* never more than asked: sbx_run_read checks it */
		json_ok(w);
		sbx_jw_key(w, "data_b64");
		sbx_jw_b64(w, data, len);
		sbx_jw_kint(w, "next", from + (int64_t)len);
		sbx_jw_kint(w, "size", size);
		free(data);
		return 0;
	}
	if (strcmp(op, "receipt") == 0) {
		struct sbx_receipt r;
		if ((x = sbx_json_get(req, "wait")) != NULL && sbx_json_double(x, &d) != 0)
			return sbx_err_set(e, SBX_EUSAGE, 0, "wait is a number of seconds");
		int got = d > 0 ? sbx_run_wait(s, run_dir, key, key_len, d, &r, e)
		                : sbx_run_receipt(s, run_dir, key, key_len, &r, e);
		if (got != 0)
			return -1;
		json_ok(w);
		sbx_jw_kbool(w, "verified", r.verified);
		sbx_jw_kstrn(w, "receipt", r.json, r.len);
		sbx_receipt_free(&r);
		return 0;
	}
	int r = strcmp(op, "rearm") == 0 ? sbx_run_rearm(s, run_dir, e)
	                                 : sbx_run_close(s, run_dir, e);
	if (r != 0)
		return -1;
	json_ok(w);
	return 0;
}

int cli_sup_session(struct sbx_session *s, const char *op, const struct sbx_json *req,
                    struct sbx_jw *w, struct sbx_err *e, int *rc)
{
	if (!cli_sup_known(op))
		return 0;
	*rc = json_sup(s, op, req, w, e);
	return 1;
}
