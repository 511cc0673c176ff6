/* libFuzzer target for member names and link targets: any bytes, several output sizes, and
 * the invariants placement relies on (relative, no "..", "." or empty components, no trailing
 * slash, idempotent; refused means out is ""). The input is split at its first NUL into a
 * member name and a link target for sbx_member_link_inside. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "member.h"

static void check_comps(const char *out)
{
	if (out[0] == '\0' || out[0] == '/')
		__builtin_trap();
	for (const char *c = out;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			__builtin_trap();
		if (c[n] == '\0')
			break;
		c += n + 1;
	}
}

static void check(const char *in, size_t inlen, size_t cap)
{
	char *out = malloc(cap ? cap : 1);
	char *again = malloc(inlen + 1);
	if (out == NULL || again == NULL)
		goto out;
	const char *why = NULL;
	if (sbx_member_name(in, out, cap, &why) != 0) {
		if (why == NULL || (cap > 0 && out[0] != '\0'))
			__builtin_trap();
		goto out;
	}
	size_t n = strlen(out);
	if (n >= cap || n > inlen)
		__builtin_trap();
	check_comps(out);
	if (strstr(out, "//") != NULL || out[n - 1] == '/')
		__builtin_trap();
	if (sbx_member_name(out, again, inlen + 1, &why) != 0 || strcmp(out, again) != 0)
		__builtin_trap();
	if (sbx_member_is_root(in))
		__builtin_trap();
out:
	free(again);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 2);
	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	in[size + 1] = '\0';
	size_t len = strlen(in);
	const char *target = in + len + 1; /* "" when there is no NUL in the input */
	const size_t caps[] = {0, 1, 2, 3, 8, len / 2, len, len + 1};
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
		check(in, len, caps[i]);
	/* A name the normalizer refuses only as empty is the root, and vice versa for
	 * non-empty relative names. */
	char *tmp = malloc(len + 1);
	if (tmp != NULL) {
		const char *why = NULL;
		int r = sbx_member_name(in, tmp, len + 1, &why);
		int root = sbx_member_is_root(in);
		if (root && (r == 0 || strcmp(why, "empty name") != 0))
			__builtin_trap();
		int inside = sbx_member_link_inside(in, target);
		/* Inside needs a member name that normalizes, a relative non-empty target. */
		if (inside && (r != 0 || target[0] == '\0' || target[0] == '/'))
			__builtin_trap();
		free(tmp);
	}
	free(in);
	return 0;
}
