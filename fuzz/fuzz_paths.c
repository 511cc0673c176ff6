/* libFuzzer target for the lexical path normalizer: any bytes, several output sizes, and the
 * invariants every caller relies on (canonical, idempotent, absolute, fits or refused). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"

static void check(const char *in, size_t inlen, size_t cap)
{
	char out[4096 + 2];
	char again[4096 + 2];
	if (cap > sizeof out)
		cap = sizeof out;
	if (sbx_path_normalize(in, out, cap) != 0) {
		/* Refused: relative, or the result does not fit; out holds "". A result never
		 * outgrows its input, so an absolute input with room for itself is never refused.
		 */
		if (cap > 0 && out[0] != '\0')
			__builtin_trap();
		if (in[0] == '/' && cap > inlen)
			__builtin_trap();
		return;
	}
	size_t n = strlen(out);
	if (n >= cap || n > inlen || n == 0 || out[0] != '/')
		__builtin_trap();
	if (strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../"))
		__builtin_trap();
	if (n > 1 && out[n - 1] == '/')
		__builtin_trap();
	/* A "." or ".." as the last component is the same defect without the trailing slash. */
	if ((n >= 2 && strcmp(out + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(out + n - 3, "/..") == 0))
		__builtin_trap();
	if (sbx_path_normalize(out, again, sizeof again) != 0 || strcmp(out, again) != 0)
		__builtin_trap();
	if (sbx_path_within(out, "/") != 1 || sbx_path_within(out, out) != 1)
		__builtin_trap();
	/* In place gives the same answer as into a separate buffer. */
	char *copy = malloc(inlen + 1);
	if (copy == NULL)
		return;
	memcpy(copy, in, inlen + 1);
	if (sbx_path_normalize(copy, copy, inlen + 1) != 0 || strcmp(copy, out) != 0)
		__builtin_trap();
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	size_t len = strlen(in); /* an embedded NUL ends the path, as it would in C */
	const size_t caps[] = {0, 1, 2, 3, 8, len / 2, len, len + 1, sizeof(char[4096 + 2])};
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
		check(in, len, caps[i]);
	free(in);
	return 0;
}
