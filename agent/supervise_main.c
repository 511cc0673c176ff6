/* `sbx-agent supervise`: the supervisor's command line (agent/supervise.h). Options into a
 * struct sbx_sup_opts, the receipt key from --key-hex (wiped from /proc/PID/cmdline) or a
 * descriptor, then one activation in the foreground; or --rearm. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "rundir.h"
#include "supervise.h"

/* Why, then the usage; 125: never a status a harness could have produced by itself. */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sbx-agent supervise: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nusage: sbx-agent supervise --run-dir DIR [--timeout S] [--grace S] "
	      "[--log-max BYTES] [--user U] [--cwd D] [--env K=V]... [--env-clear] "
	      "[--key-hex HEX | --key-fd FD] -- ARGV...\n"
	      "       sbx-agent supervise --rearm --run-dir DIR\n",
	      stderr);
	return 125;
}

static int parse_seconds(const char *s, int64_t *ms)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || !(v >= 0 && v <= 31536000.0))
		return -1;
	*ms = (int64_t)(v * 1000.0 + 0.5);
	return 0;
}

/* The key's hex text, trailing blanks and line ends allowed. */
static int parse_hex_key(const char *hex, size_t n, struct sbx_sup_opts *o)
{
	while (n > 0 && (hex[n - 1] == '\n' || hex[n - 1] == '\r' || hex[n - 1] == ' '))
		n--;
	ssize_t k = sbx_unhex(hex, n, o->key, sizeof o->key);
	if (k <= 0)
		return -1;
	o->key_len = (size_t)k;
	return 0;
}

/* At most 160 bytes of key text from the descriptor named by v, which is closed. */
static int read_key_fd(const char *v, struct sbx_sup_opts *o)
{
	char buf[160], *end;
	long fd = strtol(v, &end, 10);
	if (*end != '\0' || end == v || fd < 0 || fd >= 65536)
		return -1;
	size_t n = 0;
	ssize_t r = 0;
	while (n < sizeof buf && (r = read((int)fd, buf + n, sizeof buf - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	close((int)fd);
	int rc = r < 0 || n == 0 ? -1 : parse_hex_key(buf, n, o);
	memset(buf, 0, sizeof buf);
	return rc;
}

/* Fills o (env gets the --env entries); the index of the harness argv, or -1 once the usage
 * is printed. */
static int parse(int argc, char **argv, struct sbx_sup_opts *o, char **env, int *rearm)
{
	size_t nenv = 0;
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--") == 0)
			return i + 1;
		if (strcmp(a, "--rearm") == 0) {
			*rearm = 1;
			continue;
		}
		if (strcmp(a, "--env-clear") == 0) {
			o->cmd.env_clear = 1;
			continue;
		}
		if (v == NULL)
			return usage("%s needs a value", a), -1;
		i++;
		char *end;
		if (strcmp(a, "--run-dir") == 0) {
			o->dir = v;
		} else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--grace") == 0) {
			if (parse_seconds(v, a[2] == 't' ? &o->cmd.timeout_ms : &o->grace_ms) != 0)
				return usage("bad number of seconds: %s", v), -1;
		} else if (strcmp(a, "--log-max") == 0) {
			o->log_max = strtoll(v, &end, 10);
			if (*end != '\0' || end == v || o->log_max <= 0)
				return usage("bad --log-max: %s", v), -1;
		} else if (strcmp(a, "--user") == 0) {
			o->cmd.user = v;
		} else if (strcmp(a, "--cwd") == 0) {
			o->cmd.cwd = v;
		} else if (strcmp(a, "--env") == 0) {
			if (strchr(v, '=') == NULL || v[0] == '=')
				return usage("--env needs K=V: %s", v), -1;
			env[nenv++] = v;
		} else if (strcmp(a, "--key-hex") == 0) {
			if (parse_hex_key(v, strlen(v), o) != 0)
				return usage("bad --key-hex"), -1;
			memset(v, '*', strlen(v)); /* out of /proc/PID/cmdline */
		} else if (strcmp(a, "--key-fd") == 0) {
			if (read_key_fd(v, o) != 0)
				return usage("--key-fd %s: expected hex key text", v), -1;
		} else {
			return usage("unknown option %s", a), -1;
		}
	}
	return i;
}

int sbx_supervise_main(int argc, char **argv)
{
	struct sbx_sup_opts o;
	memset(&o, 0, sizeof o);
	o.grace_ms = -1;
	int rearm = 0, status = 125;
	char **env = calloc((size_t)argc + 1, sizeof *env);
	if (env == NULL)
		return 125;
	int i = parse(argc, argv, &o, env, &rearm);
	if (i < 0) {
		/* printed */
	} else if (o.dir == NULL) {
		usage("--run-dir DIR is required");
	} else if (rearm) {
		struct sbx_err e;
		status = sbx_rundir_rearm(o.dir, &e) == 0 ? 0 : 1;
		if (status != 0)
			fprintf(stderr, "sbx-agent supervise: %s\n", e.msg);
	} else if (i >= argc) {
		usage("no harness argv after --");
	} else {
		o.cmd.argv = argv + i;
		o.cmd.env = env[0] != NULL ? env : NULL;
		o.foreground = 1;
		status = sbx_supervise(&o);
	}
	memset(o.key, 0, sizeof o.key);
	free(env);
	return status;
}
