/* shell_assignments: bash reads back exactly the values given, whatever they hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx.h"

/* Runs script under bash and returns its stdout (malloc'd). */
static char *bash(const char *script, size_t *len)
{
	char path[] = "/tmp/sbx-shell-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
	close(fd);
	char cmd[64];
	snprintf(cmd, sizeof cmd, "bash %s", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char *out = malloc(65536);
	*len = fread(out, 1, 65535, p);
	out[*len] = '\0';
	assert_int_equal(pclose(p), 0);
	unlink(path);
	return out;
}

static void values_survive_bash(void **state)
{
	(void)state;
	const char *hostile = "it's \"quoted\" $HOME `id` $(id) \\ back\nnew line\t*?[a]";
	const char *words[] = {"plain", "", "two words", hostile, "'", NULL};
	const char *map[] = {"PATH", "/usr/bin:/bin", "ODD", "a'b=c", NULL};
	struct sbx_shval v[] = {
	        {"scalar", SBX_SHVAL_SCALAR, hostile, NULL},
	        {"empty", SBX_SHVAL_SCALAR, "", NULL},
	        {"arr", SBX_SHVAL_ARRAY, NULL, words},
	        {"env_words", SBX_SHVAL_MAP, NULL, map},
	};
	struct sbx_err e;
	char *src = sbx_shell_assignments(v, 4, &e);
	assert_non_null(src);
	size_t need = strlen(src) + 512;
	char *script = malloc(need);
	snprintf(script, need,
	         "set -eu\n%s"
	         "printf '%%s\\0' \"$scalar\" \"$empty\" \"${#arr[@]}\" \"${arr[@]}\" "
	         "\"${env_words[@]}\"\n",
	         src);
	size_t len;
	char *out = bash(script, &len);
	const char *want[] = {
	        hostile,    "", "5", "plain", "", "two words", hostile, "'", "PATH=/usr/bin:/bin",
	        "ODD=a'b=c"};
	size_t pos = 0;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		assert_true(pos < len);
		assert_string_equal(out + pos, want[i]);
		pos += strlen(out + pos) + 1;
	}
	assert_int_equal(pos, len);
	free(out);
	free(script);
	free(src);
}

static void bad_names_and_maps_are_refused(void **state)
{
	(void)state;
	struct sbx_err e;
	const char *bad[] = {"", "1abc", "a-b", "a b", "x;rm", NULL};
	for (int i = 0; bad[i] != NULL; i++) {
		struct sbx_shval v = {bad[i], SBX_SHVAL_SCALAR, "x", NULL};
		assert_null(sbx_shell_assignments(&v, 1, &e));
		assert_int_equal(e.cls, SBX_EUSAGE);
	}
	const char *odd[] = {"K", NULL};
	struct sbx_shval m = {"m", SBX_SHVAL_MAP, NULL, odd};
	assert_null(sbx_shell_assignments(&m, 1, &e));
	struct sbx_shval ok = {"_ok9", SBX_SHVAL_ARRAY, NULL, NULL};
	char *s = sbx_shell_assignments(&ok, 1, &e);
	assert_string_equal(s, "_ok9=()\n");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(values_survive_bash),
	        cmocka_unit_test(bad_names_and_maps_are_refused),
	};
	return cmocka_run_group_tests_name("shell_assignments", tests, NULL, NULL);
}
