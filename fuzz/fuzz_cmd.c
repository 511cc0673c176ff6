/* libFuzzer target for the command fields the agent reads from EXEC and SUP_RUN
 * (shared/cmd.h): any bytes as a request payload; whatever is taken is well formed (argv and
 * env NULL-terminated at their counts, every env entry K=V, the timeout in range), and what
 * is taken writes back to the same fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "proto.h"

static void trap_unless(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_cmd c;
	memset(&c, 0, sizeof c);
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, data, size);
	int rc;
	while ((rc = sbx_msgr_next(&r, &f)) == 1)
		if (sbx_cmd_take(&c, &f) < 0)
			break;
	trap_unless(c.argc == 0 || c.argv[c.argc] == NULL);
	trap_unless(c.envc == 0 || c.env[c.envc] == NULL);
	for (size_t i = 0; i < c.envc; i++)
		trap_unless(c.env[i][0] != '=' && strchr(c.env[i], '=') != NULL);
	trap_unless(c.timeout_ms >= 0 && c.timeout_ms <= SBX_CMD_TIMEOUT_MAX_MS);
	struct sbx_err e;
	trap_unless(sbx_cmd_check(&c, &e) == 0);
	size_t cap = sbx_cmd_size(&c);
	uint8_t *buf = malloc(cap ? cap : 1);
	if (buf != NULL) {
		struct sbx_msgw w;
		sbx_msgw_init(&w, buf, cap);
		sbx_cmd_write(&w, &c);
		trap_unless(!w.overflow);
		struct sbx_cmd d;
		memset(&d, 0, sizeof d);
		sbx_msgr_init(&r, buf, w.len);
		while (sbx_msgr_next(&r, &f) == 1)
			trap_unless(sbx_cmd_take(&d, &f) == 1);
		trap_unless(d.argc == c.argc && d.envc == c.envc && d.env_clear == c.env_clear &&
		            d.timeout_ms == c.timeout_ms && (d.cwd == NULL) == (c.cwd == NULL) &&
		            (d.user == NULL) == (c.user == NULL));
		for (size_t i = 0; i < c.argc; i++)
			trap_unless(strcmp(c.argv[i], d.argv[i]) == 0);
		sbx_cmd_free(&d);
		free(buf);
	}
	sbx_cmd_free(&c);
	return 0;
}
