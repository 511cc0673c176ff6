/* sbx run / stop / expire / attach / output / receipt / rearm / close: the harness
 * supervision commands, one row each, from argv or from JSON lines. The receipt key lives in
 * a host-side key file (0600), created at the first run of a run folder, so a later `sbx
 * receipt` from another process can verify what the supervisor signed; a JSON-lines client
 * keeps it itself (run answers "key", the others take it as "key"). */
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
#define OUTPUT_PIECE (256 * 1024)
#define OUTPUT_MAX_BYTES (1LL << 30)   /* --max-bytes default */
#define OUTPUT_WAIT 600.0              /* s: a read without --follow gives up after this */
#define JSON_OUTPUT_PIECE (512 * 1024) /* the most one JSON output answers */
#define STOP_WAIT 30.0                 /* s: stop and expire from argv wait this for the receipt */

struct sup_call {
	struct cli_call c;
	const char *run_dir, *key_file, *reason;
	struct cmd_opts co; /* run: user cwd env env_clear timeout */
	double grace, wait;
	int64_t log_max, from, max_bytes;
	int detach, follow;
	char *const *argv;  /* run: the harness */
	const char **jargv; /* the same from JSON */
	uint8_t key[64];
	size_t key_len;         /* 0: no key (receipts are then not verified) */
	char kp[4096];          /* argv: the key file */
	struct sbx_run_opts ro; /* run: what it started (kept while the op runs) */
	/* results */
	int64_t pid;
	struct sbx_run_status st;
	int placed;
	struct sbx_receipt r;
	int have_receipt;
	char *data; /* output as JSON: one piece */
	size_t len;
	int64_t size;
};

static int is(const struct cli_call *c, const char *name)
{
	return strcmp(c->cmd->name, name) == 0;
}

static void sup_init(struct sup_call *a)
{
	a->grace = -1;
	a->wait = -1;
	a->max_bytes = OUTPUT_MAX_BYTES;
	a->placed = 1;
}

static void sup_done(struct cli_call *c)
{
	struct sup_call *a = (struct sup_call *)c;
	cmd_opts_free(&a->co);
	free(a->jargv);
	free(a->data);
	if (a->have_receipt)
		sbx_receipt_free(&a->r);
}

/* The run key's file: --key-file, or the key store's for this channel and folder. */
static int key_path(struct sup_call *a, struct sbx_err *e)
{
	const struct opts *o = a->c.o;
	if (a->key_file != NULL) {
		snprintf(a->kp, sizeof a->kp, "%s", a->key_file);
		return 0;
	}
	return sbx_runkey_path(o->via      ? o->via
	                       : o->runner ? o->runner
	                                   : "local",
	                       a->run_dir, a->kp, sizeof a->kp, e);
}

/* ---- parse ---- */

static int sup_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	int want_argv = is(c, "run");
	sup_init(a);
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
		int r = cmd_opt_arg(&a->co, argc, argv, &i, e);
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
	if (a->run_dir == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--run-dir DIR is required");
	if (a->from < 0 || a->max_bytes < 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--from and --max-bytes are >= 0");
	if (want_argv && i >= argc)
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs -- ARGV...");
	if (!want_argv && i < argc)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unexpected operand %s", argv[i]);
	a->argv = argv + i;
	if (is(c, "stop") || is(c, "expire")) {
		if (a->wait < 0)
			a->wait = STOP_WAIT;
	}
	if (is(c, "stop") || is(c, "expire") || is(c, "receipt")) {
		/* No key file: the receipt is shown, not verified (receipt says so). */
		struct sbx_err ke;
		if (key_path(a, &ke) == 0 && sbx_runkey_load(a->kp, a->key, &ke) == 0)
			a->key_len = KEY_LEN;
	}
	/* run --detach and attach answer a JSON line whatever the mode. */
	if ((is(c, "run") && a->detach) || is(c, "attach"))
		c->json = 1;
	return 0;
}

static int sup_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	const struct sbx_json *x;
	sup_init(a);
	a->wait = 0;
	if ((a->run_dir = jstr(req, "run_dir")) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"run_dir\"", c->op);
	/* Key: given as hex in the request ("key"), or none (then receipts are not verified). */
	size_t kl;
	const struct sbx_json *kj = sbx_json_get(req, "key");
	const char *khex = kj ? sbx_json_str(kj, &kl) : NULL;
	if (kj != NULL) {
		ssize_t n = khex != NULL ? sbx_unhex(khex, kl, a->key, sizeof a->key) : -1;
		if (n < 0)
			return sbx_err_set(e, SBX_EUSAGE, 0, "key is up to 64 bytes of hex");
		a->key_len = (size_t)n;
	}
	a->reason = jstr(req, "reason");
	if (jdouble(req, "wait", &a->wait, e) != 0)
		return -1;
	if ((x = sbx_json_get(req, "from")) != NULL &&
	    (sbx_json_int(x, &a->from) != 0 || a->from < 0))
		return sbx_err_set(e, SBX_EUSAGE, 0, "from is a byte offset");
	if (!is(c, "run"))
		return 0;
	size_t n;
	if ((a->jargv = jstrs(sbx_json_get(req, "argv"), &n, e)) == NULL || n == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "run needs \"argv\": an array of strings");
	a->argv = (char *const *)a->jargv;
	if (cmd_opts_json(&a->co, req, e) != 0)
		return -1;
	if (jdouble(req, "grace", &a->grace, e) != 0)
		return -1;
	if ((x = sbx_json_get(req, "log_max")) != NULL &&
	    (sbx_json_int(x, &a->log_max) != 0 || a->log_max < 0))
		return sbx_err_set(e, SBX_EUSAGE, 0, "log_max is a number of bytes");
	if (a->key_len != 0)
		return sbx_err_set(
		        e, SBX_EUSAGE, 0,
		        "run takes no \"key\": it answers with the run's key, derived in "
		        "the sandbox's keeper");
	a->detach = 1; /* a request never waits for the harness */
	return 0;
}

/* ---- run ---- */

static int status_of(const struct sbx_receipt *r)
{
	return r->status & 0xff;
}

static void run_opts(struct sup_call *a)
{
	struct sbx_run_opts *ro = &a->ro;
	sbx_run_opts_init(ro);
	ro->run_dir = a->run_dir;
	ro->argv = a->argv;
	ro->env = a->co.env;
	ro->env_clear = a->co.env_clear;
	ro->cwd = a->co.cwd;
	ro->user = a->co.user;
	ro->timeout_s = a->co.timeout;
	ro->grace_s = a->grace;
	ro->log_max = a->log_max;
}

static int run_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	run_opts(a);
	if (!c->lines) {
		c->fail_status = EX_USAGE;
		if (key_path(a, e) != 0)
			return -1;
		/* A new run gets a new key (sbx_run_start derives it): the old file goes first. */
		unlink(a->kp);
	}
	c->fail_status = 0;
	if (sbx_run_start(c->s, &a->ro, &a->pid, a->key, e) != 0)
		return -1;
	a->key_len = KEY_LEN;
	c->fail_status = EX_USAGE;
	if (!c->lines && sbx_runkey_save(a->kp, a->key, e) != 0)
		return -1;
	c->fail_status = 0;
	if (a->detach)
		return 0;
	/* The receipt comes at the deadline plus the grace plus kill rounds at the latest. */
	double t = a->co.timeout;
	double limit = t > 0 ? t + (a->grace >= 0 ? a->grace : 5) + 30 : 0;
	if (sbx_run_wait(c->s, a->run_dir, a->key, KEY_LEN, limit, &a->r, e) != 0)
		return -1;
	a->have_receipt = 1;
	c->status = a->r.verified ? status_of(&a->r) : EX_EXEC_SBX;
	return 0;
}

/* A request's run (sbx session): detached, and its key answered, never saved. */
static struct sbx_op *run_start(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	run_opts(a);
	return cli_op_deadline(c, sbx_run_start_async(c->s, &a->ro, e), 0);
}

static int run_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	if (sbx_run_start_result(op, &a->pid, a->key, e) != 0)
		return -1;
	a->key_len = KEY_LEN;
	return 0;
}

/* A receipt: under JSON "verified" and "receipt" (its exact bytes), else the line escaped for
 * the terminal (an honest receipt holds no control byte, so it prints exactly). Says so on
 * stderr when the signature does not verify. */
static void receipt_print(struct cli_call *c, const struct sbx_receipt *r)
{
	size_t n = r->len;
	if (n > 0 && r->json[n - 1] == '\n')
		n--;
	if (c->json) {
		sbx_jw_kbool(c->w, "verified", r->verified);
		sbx_jw_kstrn(c->w, "receipt", r->json, r->len);
	} else {
		cli_write_esc(stdout, r->json, n, 0);
		fputc('\n', stdout);
		fflush(stdout);
	}
	if (!r->verified && !c->lines)
		cli_fprintf(stderr,
		            "sbx: the receipt's signature does NOT verify: do not trust it\n");
}

static void run_print(struct cli_call *c)
{
	struct sup_call *a = (struct sup_call *)c;
	if (!a->detach) {
		receipt_print(c, &a->r);
		return;
	}
	sbx_jw_kint(c->w, "supervisor_pid", a->pid);
	sbx_jw_kstr(c->w, "run_dir", a->run_dir);
	if (c->lines) {
		/* The argv form keeps the key in its key file; a JSON-lines client is given it. */
		char khex[2 * KEY_LEN + 1];
		sbx_hex(a->key, KEY_LEN, khex);
		sbx_jw_kstr(c->w, "key", khex);
	}
}

/* ---- stop, expire, receipt: a receipt, verified with the key when there is one ---- */

/* After the stop or the expire was placed: its status, and the receipt when asked to wait
 * (a blocking wait, in sbx session too, that moves the session's other ops). */
static int stop_after(struct sup_call *a, struct sbx_err *e)
{
	struct cli_call *c = &a->c;
	if (!a->placed && !c->lines)
		cli_fprintf(stderr,
		            "sbx: expire not placed: the run already finished or was expired\n");
	c->status = a->placed ? 0 : EX_FALSE;
	if (a->wait <= 0)
		return 0;
	if (sbx_run_wait(c->s, a->run_dir, a->key, a->key_len, a->wait, &a->r, e) != 0)
		return -1;
	a->have_receipt = 1;
	if (!a->r.verified)
		c->status = EX_FALSE;
	return 0;
}

static int stop_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	int rc = is(c, "stop") ? sbx_run_stop(c->s, a->run_dir, e)
	                       : sbx_run_expire(c->s, a->run_dir, a->reason, &a->placed, e);
	return rc != 0 ? -1 : stop_after(a, e);
}

static struct sbx_op *stop_start(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	return cli_op_deadline(c,
	                       is(c, "stop") ? sbx_run_stop_async(c->s, a->run_dir, e)
	                                     : sbx_run_expire_async(c->s, a->run_dir, a->reason, e),
	                       0);
}

static int stop_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	int rc = is(c, "stop") ? sbx_op_status(op, e) : sbx_run_expire_result(op, &a->placed, e);
	return rc != 0 ? -1 : stop_after(a, e);
}

static void stop_print(struct cli_call *c)
{
	struct sup_call *a = (struct sup_call *)c;
	if (c->json)
		sbx_jw_kbool(c->w, "placed", a->placed);
	if (a->have_receipt)
		receipt_print(c, &a->r);
}

static int receipt_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	int got = a->wait > 0
	                  ? sbx_run_wait(c->s, a->run_dir, a->key, a->key_len, a->wait, &a->r, e)
	                  : sbx_run_receipt(c->s, a->run_dir, a->key, a->key_len, &a->r, e);
	if (got != 0)
		return -1;
	a->have_receipt = 1;
	if (a->key_len == 0 && !c->lines)
		cli_fprintf(stderr, "sbx: no key for this run_dir on this host (%s)\n", a->kp);
	c->status = a->r.verified ? 0 : EX_FALSE;
	return 0;
}

static void receipt_row_print(struct cli_call *c)
{
	receipt_print(c, &((struct sup_call *)c)->r);
}

/* ---- attach, rearm, close ---- */

static int attach_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	return sbx_run_status(c->s, a->run_dir, &a->st, e);
}

static struct sbx_op *attach_start(struct cli_call *c, struct sbx_err *e)
{
	return cli_op_deadline(c, sbx_run_status_async(c->s, ((struct sup_call *)c)->run_dir, e),
	                       0);
}

static int attach_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	return sbx_run_status_result(op, &((struct sup_call *)c)->st, e);
}

static void attach_print(struct cli_call *c)
{
	struct sup_call *a = (struct sup_call *)c;
	struct sbx_jw *w = c->w;
	sbx_jw_kstr(w, "run_dir", a->run_dir);
	sbx_jw_kstr(w, "state", a->st.state);
	sbx_jw_kbool(w, "supervisor_alive", a->st.alive);
	sbx_jw_kbool(w, "has_receipt", a->st.has_receipt);
	sbx_jw_kint(w, "activation", a->st.activation);
	sbx_jw_kint(w, "log_bytes", a->st.log_size);
}

static int rearm_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	return is(c, "rearm") ? sbx_run_rearm(c->s, a->run_dir, e)
	                      : sbx_run_close(c->s, a->run_dir, e);
}

static void nothing_print(struct cli_call *c)
{
	(void)c;
}

/* ---- output ---- */

/* The log raw on stdout from --from. Without --follow it reads what the log held at the first
 * answer and stops; with it, until the run is done. Either way at most --max-bytes, never an
 * answer longer than asked, and no longer than --wait seconds (default 600 without --follow,
 * none with it). The log's bytes go out raw, like exec's output. */
static int output_stream(struct sup_call *a, struct sbx_err *e)
{
	struct sbx_session *s = a->c.s;
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
		/* Never more than asked: sbx_run_read checks it. */
		if (sbx_run_read(s, a->run_dir, "output.log", off, (size_t)ask, &data, &len, &size,
		                 e) != 0)
			return -1;
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
			return -1;
		if (st.has_receipt && !st.alive && st.log_size <= off)
			break;
		struct timespec t = {0, 50000000};
		nanosleep(&t, NULL);
	}
	fflush(stdout);
	if (stopped != NULL) {
		cli_fprintf(stderr, "sbx: output: stopped at byte %lld by %s\n", (long long)off,
		            stopped);
		a->c.status = EX_FALSE;
	}
	return 0;
}

/* As JSON: one piece from "from", at most JSON_OUTPUT_PIECE (and --max-bytes) bytes. */
static size_t output_ask(const struct sup_call *a)
{
	return a->max_bytes < JSON_OUTPUT_PIECE ? (size_t)a->max_bytes : JSON_OUTPUT_PIECE;
}

static int output_run(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	if (!c->json)
		return output_stream(a, e);
	return sbx_run_read(c->s, a->run_dir, "output.log", a->from, output_ask(a), &a->data,
	                    &a->len, &a->size, e);
}

static struct sbx_op *output_start(struct cli_call *c, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	return cli_op_deadline(
	        c, sbx_run_read_async(c->s, a->run_dir, "output.log", a->from, output_ask(a), e),
	        0);
}

static int output_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	struct sup_call *a = (struct sup_call *)c;
	return sbx_run_read_result(op, &a->data, &a->len, &a->size, e);
}

static void output_print(struct cli_call *c)
{
	struct sup_call *a = (struct sup_call *)c;
	if (!c->json)
		return;
	sbx_jw_kb64(c->w, "data_b64", a->data, a->len);
	sbx_jw_kint(c->w, "next", a->from + (int64_t)a->len);
	sbx_jw_kint(c->w, "size", a->size);
}

/* ---- the rows ---- */

#define SUP_ROW(NAME, RUN, PRINT)                                                                  \
	.name = NAME, .op = NAME, .need = CLI_FULL, .size = sizeof(struct sup_call),               \
	.parse_argv = sup_argv, .parse_json = sup_json, .run = RUN, .print = PRINT,                \
	.done = sup_done
#define KEY_FIELD "\"key\" (hex, as run answered it: the receipt is verified)"

const struct cli_cmd cli_run = {
        SUP_ROW("run", run_run, run_print),
        .start = run_start,
        .finish = run_finish,
        .own_status = 1,
        .synopsis = "--run-dir DIR [--timeout S] [--grace S] [--log-max B] [--user U] "
                    "[--cwd D] [--env K=V]... [--env-clear] [--key-file F] [--detach] "
                    "-- ARGV...",
        .summary = "run a harness under the supervisor; prints the signed receipt",
        .details = "Exits with the harness's status (125 when sbx failed or the receipt does "
                   "not verify). --detach answers {run_dir, supervisor_pid} at once. The key "
                   "goes to the key file (--key-file, else the key store's).",
        .fields = "\"run_dir\", \"argv\", \"user\", \"cwd\", \"env\", \"env_clear\", "
                  "\"timeout\", \"grace\", \"log_max\" (never waits; answers \"key\")",
};

const struct cli_cmd cli_stop = {
        SUP_ROW("stop", stop_run, stop_print),
        .start = stop_start,
        .finish = stop_finish,
        .synopsis = "--run-dir DIR [--wait S] [--key-file F]",
        .summary = "stop the run, then wait (default 30 s) for its receipt",
        .fields = "\"run_dir\", \"wait\" (default 0: no wait), " KEY_FIELD,
};

const struct cli_cmd cli_expire = {
        SUP_ROW("expire", stop_run, stop_print),
        .start = stop_start,
        .finish = stop_finish,
        .synopsis = "--run-dir DIR [--reason R] [--wait S] [--key-file F]",
        .summary = "expire the run (exit 1 when already over), then wait for its receipt",
        .fields = "\"run_dir\", \"reason\", \"wait\" (default 0), " KEY_FIELD,
};

const struct cli_cmd cli_attach = {
        SUP_ROW("attach", attach_run, attach_print),
        .start = attach_start,
        .finish = attach_finish,
        .synopsis = "--run-dir DIR",
        .summary = "the run's state, as a JSON line",
        .fields = "\"run_dir\"",
};

const struct cli_cmd cli_output = {
        SUP_ROW("output", output_run, output_print),
        .start = output_start,
        .finish = output_finish,
        .synopsis = "--run-dir DIR [--from B] [--follow] [--max-bytes B] [--wait S]",
        .summary = "the run's log, raw; exit 1 at a bound",
        .details = "What exists now, or until the run ends with --follow. Under --json: one "
                   "piece from B (at most 512 KiB) as data_b64, next and size.",
        .fields = "\"run_dir\", \"from\"",
};

const struct cli_cmd cli_receipt = {
        SUP_ROW("receipt", receipt_run, receipt_row_print),
        .synopsis = "--run-dir DIR [--wait S] [--key-file F]",
        .summary = "the run's signed receipt; exit 1 when it does not verify",
        .fields = "\"run_dir\", \"wait\", " KEY_FIELD,
};

const struct cli_cmd cli_rearm = {
        SUP_ROW("rearm", rearm_run, nothing_print),
        .synopsis = "--run-dir DIR",
        .summary = "begin the run folder's next activation",
        .fields = "\"run_dir\"",
};

const struct cli_cmd cli_close = {
        SUP_ROW("close", rearm_run, nothing_print),
        .synopsis = "--run-dir DIR",
        .summary = "no later activation in the run folder",
        .fields = "\"run_dir\"",
};
