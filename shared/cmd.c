/* The command fields of EXEC and SUP_RUN (see cmd.h). */
#include "cmd.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "strv.h"

static int is_assignment(const char *s)
{
	return s[0] != '=' && strchr(s, '=') != NULL;
}

struct sbx_cmd sbx_cmd_of(char *const *argv, char *const *env, int env_clear, const char *cwd,
                          const char *user, double timeout_s)
{
	int64_t ms = 0;
	if (timeout_s > (double)SBX_CMD_TIMEOUT_MAX_MS / 1000)
		ms = SBX_CMD_TIMEOUT_MAX_MS + 1;
	else if (timeout_s > 0)
		ms = (int64_t)(timeout_s * 1000 + 0.5);
	/* The casts drop the API's const to fill the one type; nothing writes through them. */
	return (struct sbx_cmd){.argv = (char **)argv,
	                        .env = (char **)env,
	                        .env_clear = env_clear,
	                        .cwd = (char *)cwd,
	                        .user = (char *)user,
	                        .timeout_ms = ms};
}

int sbx_cmd_check(const struct sbx_cmd *c, struct sbx_err *e)
{
	if (c->timeout_ms < 0 || c->timeout_ms > SBX_CMD_TIMEOUT_MAX_MS)
		return sbx_err_set(e, SBX_EUSAGE, 0, "a timeout is at most a year (%lld s)",
		                   SBX_CMD_TIMEOUT_MAX_MS / 1000);
	for (char **a = c->env; a != NULL && *a != NULL; a++)
		if (!is_assignment(*a))
			return sbx_err_set(e, SBX_EUSAGE, 0, "environment entry '%s' is not K=V",
			                   *a);
	return 0;
}

static size_t list_bytes(char **l)
{
	size_t n = 0;
	for (; l != NULL && *l != NULL; l++)
		n += 6 + strlen(*l);
	return n;
}

size_t sbx_cmd_size(const struct sbx_cmd *c)
{
	return list_bytes(c->argv) + list_bytes(c->env) + (c->cwd ? 6 + strlen(c->cwd) : 0) +
	       (c->user ? 6 + strlen(c->user) : 0) + 2 * 14;
}

void sbx_cmd_write(struct sbx_msgw *w, const struct sbx_cmd *c)
{
	for (char **a = c->argv; a != NULL && *a != NULL; a++)
		sbx_msgw_str(w, SBX_T_ARGV, *a);
	for (char **a = c->env; a != NULL && *a != NULL; a++)
		sbx_msgw_str(w, SBX_T_ENV, *a);
	if (c->env_clear)
		sbx_msgw_i64(w, SBX_T_ENV_CLEAR, 1);
	if (c->cwd != NULL)
		sbx_msgw_str(w, SBX_T_CWD, c->cwd);
	if (c->user != NULL)
		sbx_msgw_str(w, SBX_T_USER, c->user);
	if (c->timeout_ms > 0)
		sbx_msgw_i64(w, SBX_T_TIMEOUT_MS, c->timeout_ms);
}

int sbx_cmd_take(struct sbx_cmd *c, const struct sbx_field *f)
{
	char *s;
	int64_t v;
	switch (f->tag) {
	case SBX_T_ARGV:
		return (s = sbx_field_strdup(f)) != NULL &&
		                       sbx_strv_push(&c->argv, &c->argc, s) == 0
		               ? 1
		               : -1;
	case SBX_T_ENV:
		if ((s = sbx_field_strdup(f)) == NULL)
			return -1;
		if (!is_assignment(s)) {
			free(s);
			return -1;
		}
		return sbx_strv_push(&c->env, &c->envc, s) == 0 ? 1 : -1;
	case SBX_T_CWD:
	case SBX_T_USER:
		if ((s = sbx_field_strdup(f)) == NULL)
			return -1;
		char **slot = f->tag == SBX_T_CWD ? &c->cwd : &c->user;
		free(*slot);
		*slot = s;
		return 1;
	case SBX_T_ENV_CLEAR:
		if (sbx_field_i64(f, &v) != 0 || v < 0)
			return -1;
		c->env_clear = v != 0;
		return 1;
	case SBX_T_TIMEOUT_MS:
		if (sbx_field_i64(f, &v) != 0 || v < 0 || v > SBX_CMD_TIMEOUT_MAX_MS)
			return -1;
		c->timeout_ms = v;
		return 1;
	default:
		return 0;
	}
}

void sbx_cmd_free(struct sbx_cmd *c)
{
	sbx_strv_free(c->argv);
	sbx_strv_free(c->env);
	free(c->cwd);
	free(c->user);
	memset(c, 0, sizeof *c);
}
