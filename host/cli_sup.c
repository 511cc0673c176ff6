/* sbx run / stop / expire / attach / output / receipt / rearm / close: the harness
 * supervision commands, and their JSON-lines forms. The receipt key lives in a host-side key
 * file (0600), created at the first run of a session folder, so a later `sbx receipt` from
 * another process can verify what the supervisor signed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "digest.h"

#define KEY_LEN 32

static const char *const sup_cmds[] = {"run",     "stop",  "expire", "attach", "output",
                                       "receipt", "rearm", "close",  NULL};

int cli_sup_known(const char *cmd)
{
	for (const char *const *c = sup_cmds; *c != NULL; c++)
		if (strcmp(*c, cmd) == 0)
			return 1;
	return 0;
}

/* Default key file: $SBX_KEY_DIR (or ~/.cache/sbx/keys) / a digest of the channel and the
 * session folder, so two sandboxes using the same folder name keep separate keys. */
static int key_path(const struct opts *o, const char *session, const char *given, char *out,
                    size_t cap, struct sbx_err *e)
{
	if (given != NULL) {
		snprintf(out, cap, "%s", given);
		return 0;
	}
	char dir[4096];
	const char *kd = getenv("SBX_KEY_DIR"), *home = getenv("HOME");
	if (kd != NULL && kd[0] != '\0')
		snprintf(dir, sizeof dir, "%s", kd);
	else if (home != NULL && home[0] != '\0')
		snprintf(dir, sizeof dir, "%s/.cache/sbx/keys", home);
	else
		snprintf(dir, sizeof dir, "/tmp/sbx-keys-%u", (unsigned)getuid());
	/* mkdir -p, private. */
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(dir, 0700);
			*p = '/';
		}
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUSAGE, errno, "key folder %s", dir);
	struct sbx_sha256 h;
	sbx_sha256_init(&h);
	const char *chan = o->via ? o->via : o->runner ? o->runner : "local";
	sbx_sha256_update(&h, chan, strlen(chan));
	sbx_sha256_update(&h, "\n", 1);
	sbx_sha256_update(&h, session, strlen(session));
	uint8_t d[SBX_SHA256_LEN];
	char hex[SBX_SHA256_HEX_LEN];
	sbx_sha256_final(&h, d);
	sbx_hex(d, 16, hex);
	if ((size_t)snprintf(out, cap, "%s/%s.key", dir, hex) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "key path too long");
	return 0;
}

/* Keeps a run's receipt key (0600, a fresh file). */
static int save_key(const char *path, const uint8_t key[KEY_LEN], struct sbx_err *e)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int ok = fd >= 0 && write(fd, key, KEY_LEN) == KEY_LEN;
	int err = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = 0;
		err = errno;
	}
	if (!ok) {
		unlink(path);
		return sbx_err_set(e, SBX_EUSAGE, err, "cannot write key file %s", path);
	}
	return 0;
}

/* Reads the key; with create, makes a new random one when the file is missing. */
static int load_key(const char *path, int create, uint8_t key[KEY_LEN], struct sbx_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, key, KEY_LEN);
		close(fd);
		if (n != KEY_LEN)
			return sbx_err_set(e, SBX_EUSAGE, 0, "key file %s is not %d bytes", path,
			                   KEY_LEN);
		return 0;
	}
	if (!create || errno != ENOENT)
		return sbx_err_set(e, SBX_EUSAGE, errno, "key file %s", path);
	if (getrandom(key, KEY_LEN, 0) != KEY_LEN)
		return sbx_err_set(e, SBX_EUSAGE, errno, "getrandom");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, key, KEY_LEN) != KEY_LEN) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_set(e, SBX_EUSAGE, err, "cannot write key file %s", path);
	}
	close(fd);
	return 0;
}

/* Prints a receipt line (its exact bytes) and reports a bad signature. */
static int print_receipt(const struct sbx_receipt *r)
{
	fwrite(r->json, 1, r->len, stdout);
	if (r->len == 0 || r->json[r->len - 1] != '\n')
		fputc('\n', stdout);
	fflush(stdout);
	if (!r->verified) {
		fprintf(stderr, "sbx: the receipt's signature does NOT verify: do not trust it\n");
		return 0;
	}
	return 1;
}

struct sup_args {
	const char *session, *key_file, *reason, *user, *cwd;
	double timeout, grace, wait;
	int64_t log_max, from;
	int env_clear, detach, follow;
	char *env[256];
	int nenv;
	int first; /* index of the first operand (the harness argv for run) */
};

static int parse(int argc, char **argv, struct sup_args *a, int want_argv, struct sbx_err *e)
{
	memset(a, 0, sizeof *a);
	a->grace = -1;
	a->wait = 30;
	int i = 0;
	for (; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--") == 0) {
			i++;
			break;
		}
		if (s[0] != '-')
			break;
		if (strcmp(s, "--env-clear") == 0) {
			a->env_clear = 1;
			continue;
		}
		if (strcmp(s, "--detach") == 0) {
			a->detach = 1;
			continue;
		}
		if (strcmp(s, "--follow") == 0 || strcmp(s, "-f") == 0) {
			a->follow = 1;
			continue;
		}
		if (i + 1 >= argc)
			return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs a value", s);
		const char *v = argv[++i];
		char *end = NULL;
		if (strcmp(s, "--session") == 0)
			a->session = v;
		else if (strcmp(s, "--key-file") == 0)
			a->key_file = v;
		else if (strcmp(s, "--reason") == 0)
			a->reason = v;
		else if (strcmp(s, "--user") == 0 || strcmp(s, "-u") == 0)
			a->user = v;
		else if (strcmp(s, "--cwd") == 0 || strcmp(s, "-w") == 0)
			a->cwd = v;
		else if (strcmp(s, "--env") == 0 || strcmp(s, "-e") == 0) {
			if (a->nenv >= 255 || strchr(v, '=') == NULL)
				return sbx_err_set(e, SBX_EUSAGE, 0, "bad --env %s", v);
			a->env[a->nenv++] = (char *)v;
		} else if (strcmp(s, "--timeout") == 0)
			a->timeout = strtod(v, &end);
		else if (strcmp(s, "--grace") == 0)
			a->grace = strtod(v, &end);
		else if (strcmp(s, "--wait") == 0)
			a->wait = strtod(v, &end);
		else if (strcmp(s, "--log-max") == 0)
			a->log_max = strtoll(v, &end, 10);
		else if (strcmp(s, "--from") == 0)
			a->from = strtoll(v, &end, 10);
		else
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown option %s", s);
		if (end != NULL && (*end != '\0' || end == v))
			return sbx_err_set(e, SBX_EUSAGE, 0, "bad number for %s: %s", s, v);
	}
	a->env[a->nenv] = NULL;
	a->first = i;
	if (a->session == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "--session DIR is required");
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

static int cmd_run(const struct opts *o, struct sbx_session *s, struct sup_args *a, char **argv,
                   struct sbx_err *e)
{
	char kp[4096];
	uint8_t key[KEY_LEN];
	if (key_path(o, a->session, a->key_file, kp, sizeof kp, e) != 0)
		return fail(o, e, EX_USAGE);
	/* A new run gets a new key (sbx_run_start derives it): the old file goes first. */
	unlink(kp);
	struct sbx_run_opts ro;
	sbx_run_opts_init(&ro);
	ro.session = a->session;
	ro.argv = argv;
	ro.env = a->env;
	ro.env_clear = a->env_clear;
	ro.cwd = a->cwd;
	ro.user = a->user;
	ro.timeout_s = a->timeout;
	ro.grace_s = a->grace;
	ro.log_max = a->log_max;
	int64_t pid;
	int rc = sbx_run_start(s, &ro, &pid, key, e);
	if (rc != 0)
		return fail(o, e, EX_EXEC_SBX);
	if (save_key(kp, key, e) != 0)
		return fail(o, e, EX_USAGE);
	if (a->detach) {
		printf("{\"ok\":true,\"session\":\"%s\",\"supervisor_pid\":%lld}\n", a->session,
		       (long long)pid);
		return 0;
	}
	struct sbx_receipt r;
	/* The receipt comes at the deadline plus the grace plus kill rounds at the latest. */
	double limit = a->timeout > 0 ? a->timeout + (a->grace >= 0 ? a->grace : 5) + 30 : 0;
	if (sbx_run_wait(s, a->session, key, KEY_LEN, limit, &r, e) != 0)
		return fail(o, e, EX_EXEC_SBX);
	int ok = print_receipt(&r);
	int st = ok ? status_of(&r) : EX_EXEC_SBX;
	sbx_receipt_free(&r);
	return st;
}

static int cmd_output(const struct opts *o, struct sbx_session *s, struct sup_args *a,
                      struct sbx_err *e)
{
	int64_t off = a->from;
	for (;;) {
		char *data;
		size_t len;
		int64_t size;
		if (sbx_run_read(s, a->session, "output.log", off, 256 * 1024, &data, &len, &size,
		                 e) != 0)
			return fail(o, e, class_exit(e->cls));
		fwrite(data, 1, len, stdout);
		free(data);
		off += (int64_t)len;
		if (len > 0)
			continue;
		if (!a->follow)
			break;
		fflush(stdout);
		struct sbx_run_status st;
		if (sbx_run_status(s, a->session, &st, e) != 0)
			return fail(o, e, class_exit(e->cls));
		if (st.has_receipt && !st.alive && st.log_size <= off)
			break;
		struct timespec t = {0, 50000000};
		nanosleep(&t, NULL);
	}
	fflush(stdout);
	return 0;
}

int cli_sup(const struct opts *o, struct sbx_session *s, const char *cmd, int argc, char **argv)
{
	struct sup_args a;
	struct sbx_err e;
	int is_run = strcmp(cmd, "run") == 0;
	if (parse(argc, argv, &a, is_run, &e) != 0)
		return fail(o, &e, is_run ? EX_EXEC_SBX : EX_USAGE);
	if (is_run)
		return cmd_run(o, s, &a, argv + a.first, &e);
	if (strcmp(cmd, "output") == 0)
		return cmd_output(o, s, &a, &e);
	if (strcmp(cmd, "attach") == 0) {
		struct sbx_run_status st;
		if (sbx_run_status(s, a.session, &st, &e) != 0)
			return fail(o, &e, class_exit(e.cls));
		printf("{\"session\":\"%s\",\"state\":\"%s\",\"supervisor_alive\":%s,\"has_"
		       "receipt\":%s,"
		       "\"activation\":%lld,\"log_bytes\":%lld}\n",
		       a.session, st.state, st.alive ? "true" : "false",
		       st.has_receipt ? "true" : "false", (long long)st.activation,
		       (long long)st.log_size);
		return 0;
	}
	if (strcmp(cmd, "rearm") == 0 || strcmp(cmd, "close") == 0) {
		int rc = cmd[0] == 'r' ? sbx_run_rearm(s, a.session, &e)
		                       : sbx_run_close(s, a.session, &e);
		return rc != 0 ? fail(o, &e, class_exit(e.cls)) : 0;
	}
	char kp[4096];
	uint8_t key[KEY_LEN];
	int have_key = key_path(o, a.session, a.key_file, kp, sizeof kp, &e) == 0 &&
	               load_key(kp, 0, key, &e) == 0;
	if (strcmp(cmd, "receipt") == 0) {
		struct sbx_receipt r;
		if (sbx_run_receipt(s, a.session, key, have_key ? KEY_LEN : 0, &r, &e) != 0)
			return fail(o, &e, class_exit(e.cls));
		if (!have_key)
			fprintf(stderr, "sbx: no key for this session on this host (%s)\n", kp);
		int ok = print_receipt(&r);
		sbx_receipt_free(&r);
		return ok ? 0 : EX_FALSE;
	}
	/* stop / expire: place the marker, then wait for the signed receipt. */
	int placed = 1;
	int rc = cmd[0] == 's' ? sbx_run_stop(s, a.session, &e)
	                       : sbx_run_expire(s, a.session, a.reason, &placed, &e);
	if (rc != 0)
		return fail(o, &e, class_exit(e.cls));
	if (!placed)
		fprintf(stderr,
		        "sbx: expire not placed: the run already finished or was expired\n");
	if (a.wait <= 0)
		return placed ? 0 : EX_FALSE;
	struct sbx_receipt r;
	if (sbx_run_wait(s, a.session, key, have_key ? KEY_LEN : 0, a.wait, &r, &e) != 0)
		return fail(o, &e, class_exit(e.cls));
	int ok = print_receipt(&r);
	sbx_receipt_free(&r);
	return ok && placed ? 0 : EX_FALSE;
}

int cli_sup_session(struct sbx_session *s, const char *op, const struct sbx_json *req,
                    struct sbx_jw *w, struct sbx_err *e, int *rc)
{
	if (!cli_sup_known(op))
		return 0;
	*rc = -1;
	const struct sbx_json *sj = sbx_json_get(req, "session");
	size_t sl;
	const char *session = sj ? sbx_json_str(sj, &sl) : NULL;
	if (session == NULL || strlen(session) != sl) {
		sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"session\"", op);
		return 1;
	}
	/* Key: given as hex in the request ("key"), or none (then receipts are not verified);
	 * "run" answers with it instead. */
	uint8_t key[64];
	size_t key_len = 0;
	const struct sbx_json *kj = sbx_json_get(req, "key");
	size_t kl;
	const char *khex = kj ? sbx_json_str(kj, &kl) : NULL;
	if (khex != NULL) {
		if (kl % 2 != 0 || kl / 2 > sizeof key) {
			sbx_err_set(e, SBX_EUSAGE, 0, "key is up to 64 bytes of hex");
			return 1;
		}
		for (size_t i = 0; i < kl / 2; i++) {
			unsigned v;
			if (sscanf(khex + 2 * i, "%2x", &v) != 1) {
				sbx_err_set(e, SBX_EUSAGE, 0, "key is not hex");
				return 1;
			}
			key[i] = (uint8_t)v;
		}
		key_len = kl / 2;
	}
	double d;
	const struct sbx_json *x;
	if (strcmp(op, "run") == 0) {
		struct sbx_run_opts ro;
		sbx_run_opts_init(&ro);
		ro.session = session;
		x = sbx_json_get(req, "argv");
		size_t n = x && x->type == SBX_JSON_ARRAY ? sbx_json_len(x) : 0;
		char **argv = calloc(n + 1, sizeof *argv);
		for (size_t i = 0; argv != NULL && i < n; i++) {
			size_t l;
			argv[i] = (char *)sbx_json_str(sbx_json_at(x, i), &l);
			if (argv[i] == NULL || strlen(argv[i]) != l) {
				free(argv);
				argv = NULL;
			}
		}
		if (argv == NULL || n == 0) {
			free(argv);
			sbx_err_set(e, SBX_EUSAGE, 0, "run needs \"argv\": an array of strings");
			return 1;
		}
		ro.argv = argv;
		const struct sbx_json *u = sbx_json_get(req, "user");
		size_t ul;
		ro.user = u ? sbx_json_str(u, &ul) : NULL;
		const struct sbx_json *c = sbx_json_get(req, "cwd");
		size_t cl;
		ro.cwd = c ? sbx_json_str(c, &cl) : NULL;
		if ((x = sbx_json_get(req, "timeout")) != NULL && sbx_json_double(x, &d) == 0)
			ro.timeout_s = d;
		if ((x = sbx_json_get(req, "grace")) != NULL && sbx_json_double(x, &d) == 0)
			ro.grace_s = d;
		int64_t pid;
		uint8_t rkey[SBX_RUN_KEY_LEN];
		int r = key_len != 0 ? sbx_err_set(e, SBX_EUSAGE, 0,
		                                   "run takes no \"key\": it answers with the "
		                                   "run's key, derived in the sandbox's keeper")
		                     : sbx_run_start(s, &ro, &pid, rkey, e);
		free(argv);
		if (r != 0)
			return 1;
		char khex[2 * SBX_RUN_KEY_LEN + 1];
		sbx_hex(rkey, sizeof rkey, khex);
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "supervisor_pid");
		sbx_jw_int(w, pid);
		sbx_jw_key(w, "key");
		sbx_jw_str(w, khex);
		*rc = 0;
		return 1;
	}
	if (strcmp(op, "stop") == 0 || strcmp(op, "expire") == 0) {
		int placed = 1;
		const struct sbx_json *rj = sbx_json_get(req, "reason");
		size_t rl;
		const char *reason = rj ? sbx_json_str(rj, &rl) : NULL;
		int r = op[0] == 's' ? sbx_run_stop(s, session, e)
		                     : sbx_run_expire(s, session, reason, &placed, e);
		if (r != 0)
			return 1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "placed");
		sbx_jw_bool(w, placed);
		*rc = 0;
		return 1;
	}
	if (strcmp(op, "attach") == 0) {
		struct sbx_run_status st;
		if (sbx_run_status(s, session, &st, e) != 0)
			return 1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "state");
		sbx_jw_str(w, st.state);
		sbx_jw_key(w, "supervisor_alive");
		sbx_jw_bool(w, st.alive);
		sbx_jw_key(w, "has_receipt");
		sbx_jw_bool(w, st.has_receipt);
		sbx_jw_key(w, "activation");
		sbx_jw_int(w, st.activation);
		sbx_jw_key(w, "log_bytes");
		sbx_jw_int(w, st.log_size);
		*rc = 0;
		return 1;
	}
	if (strcmp(op, "output") == 0) {
		int64_t from = 0;
		if ((x = sbx_json_get(req, "from")) != NULL)
			sbx_json_int(x, &from);
		char *data;
		size_t len;
		int64_t size;
		if (sbx_run_read(s, session, "output.log", from, 512 * 1024, &data, &len, &size,
		                 e) != 0)
			return 1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "data_b64");
		sbx_jw_b64(w, data, len);
		sbx_jw_key(w, "next");
		sbx_jw_int(w, from + (int64_t)len);
		sbx_jw_key(w, "size");
		sbx_jw_int(w, size);
		free(data);
		*rc = 0;
		return 1;
	}
	if (strcmp(op, "receipt") == 0) {
		struct sbx_receipt r;
		double wait = 0;
		if ((x = sbx_json_get(req, "wait")) != NULL)
			sbx_json_double(x, &wait);
		int got = wait > 0 ? sbx_run_wait(s, session, key, key_len, wait, &r, e)
		                   : sbx_run_receipt(s, session, key, key_len, &r, e);
		if (got != 0)
			return 1;
		sbx_jw_key(w, "ok");
		sbx_jw_bool(w, 1);
		sbx_jw_key(w, "verified");
		sbx_jw_bool(w, r.verified);
		sbx_jw_key(w, "receipt");
		sbx_jw_strn(w, r.json, r.len);
		sbx_receipt_free(&r);
		*rc = 0;
		return 1;
	}
	int r = strcmp(op, "rearm") == 0 ? sbx_run_rearm(s, session, e)
	                                 : sbx_run_close(s, session, e);
	if (r != 0)
		return 1;
	sbx_jw_key(w, "ok");
	sbx_jw_bool(w, 1);
	*rc = 0;
	return 1;
}
