/* The options of "a command to run", read once for argv and once for JSON, shared by exec/sh
 * and run (and their JSON-lines ops): user, cwd, env, env_clear, timeout. Two readers of the
 * same options had drifted apart (JSON run dropped env and a numeric user). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD_MAX_ENV 1024

static int add_env(struct cmd_opts *c, const char *k, size_t kl, const char *v, size_t vl,
                   struct sbx_err *e)
{
	if (c->nenv >= CMD_MAX_ENV)
		return sbx_err_set(e, SBX_EUSAGE, 0, "more than %d env entries", CMD_MAX_ENV);
	if (kl == 0 || memchr(k, '=', kl) != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "an env entry is K=V with a non-empty K");
	char **t = realloc(c->env, (c->nenv + 2) * sizeof *t);
	if (t == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "env");
	c->env = t;
	char *s = malloc(kl + vl + 2);
	if (s == NULL)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "env");
	memcpy(s, k, kl);
	s[kl] = '=';
	memcpy(s + kl + 1, v, vl);
	s[kl + 1 + vl] = '\0';
	c->env[c->nenv++] = s;
	c->env[c->nenv] = NULL;
	return 0;
}

/* "K=V" as one string. */
static int add_kv(struct cmd_opts *c, const char *kv, struct sbx_err *e)
{
	const char *eq = strchr(kv, '=');
	if (eq == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "bad env entry '%s' (K=V)", kv);
	return add_env(c, kv, (size_t)(eq - kv), eq + 1, strlen(eq + 1), e);
}

static int is(const char *s, const char *long_name, const char *short_name)
{
	return strcmp(s, long_name) == 0 || strcmp(s, short_name) == 0;
}

int cmd_opt_arg(struct cmd_opts *c, int argc, char **argv, int *i, struct sbx_err *e)
{
	const char *s = argv[*i];
	if (strcmp(s, "--env-clear") == 0) {
		c->env_clear = 1;
		return 1;
	}
	int user = is(s, "--user", "-u"), cwd = is(s, "--cwd", "-w"), env = is(s, "--env", "-e");
	if (!user && !cwd && !env && strcmp(s, "--timeout") != 0)
		return 0;
	if (*i + 1 >= argc)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs a value", s);
	const char *v = argv[++*i];
	if (user) {
		c->user = v;
	} else if (cwd) {
		c->cwd = v;
	} else if (env) {
		if (add_kv(c, v, e) != 0)
			return -1;
	} else {
		char *end;
		c->timeout = strtod(v, &end);
		if (end == v || *end != '\0' || !(c->timeout >= 0))
			return sbx_err_set(e, SBX_EUSAGE, 0, "bad --timeout %s", v);
	}
	return 1;
}

int cmd_opts_json(struct cmd_opts *c, const struct sbx_json *req, struct sbx_err *e)
{
	const struct sbx_json *x;
	if ((x = sbx_json_get(req, "user")) != NULL) {
		int64_t uid;
		if (sbx_json_int(x, &uid) == 0) {
			if (uid < 0 || uid > 0xffffffffLL)
				return sbx_err_set(e, SBX_EUSAGE, 0,
				                   "user: a uid is 0..4294967295");
			snprintf(c->uid, sizeof c->uid, "%lld", (long long)uid);
			c->user = c->uid;
		} else if ((c->user = jstr(req, "user")) == NULL) {
			return sbx_err_set(e, SBX_EUSAGE, 0, "user is a name or a uid");
		}
	}
	if ((x = sbx_json_get(req, "cwd")) != NULL && (c->cwd = jstr(req, "cwd")) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "cwd is a string without NUL");
	if ((x = sbx_json_get(req, "env")) != NULL && x->type == SBX_JSON_OBJECT) {
		for (size_t i = 0; i < x->len; i++) {
			const struct sbx_json *m = &x->kids[i];
			size_t l;
			const char *val = sbx_json_str(m, &l);
			if (val == NULL || strlen(val) != l || strlen(m->key) != m->keylen)
				return sbx_err_set(e, SBX_EUSAGE, 0,
				                   "env values are strings without NUL");
			if (add_env(c, m->key, m->keylen, val, l, e) != 0)
				return -1;
		}
	} else if (x != NULL) {
		size_t n;
		const char **v = jstrs(x, &n, e);
		if (v == NULL)
			return -1;
		for (size_t i = 0; i < n; i++) {
			if (add_kv(c, v[i], e) != 0) {
				free(v);
				return -1;
			}
		}
		free(v);
	}
	if ((x = sbx_json_get(req, "env_clear")) != NULL && sbx_json_bool(x, &c->env_clear) != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "env_clear is true or false");
	if ((x = sbx_json_get(req, "timeout")) != NULL &&
	    (sbx_json_double(x, &c->timeout) != 0 || c->timeout < 0))
		return sbx_err_set(e, SBX_EUSAGE, 0, "timeout is a number of seconds");
	return 0;
}

void cmd_opts_free(struct cmd_opts *c)
{
	for (size_t i = 0; i < c->nenv; i++)
		free(c->env[i]);
	free(c->env);
	memset(c, 0, sizeof *c);
}
