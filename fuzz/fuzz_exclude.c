/* libFuzzer target for the --exclude matcher: input "PATTERN\0NAME" (or split in half).
 * Invariants: no crash or hang on any pattern, the same answer twice, "*" excludes every
 * non-empty name, and a clean name (as packed) that is excluded stays excluded with anything
 * appended below it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exclude.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2048)
		return 0;
	char *buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	size_t plen = strlen(buf);
	const char *pattern = buf;
	const char *name = plen < size ? buf + plen + 1 : buf + size / 2;
	if (plen >= size)
		buf[size / 2] = '\0', name = buf + size / 2 + (size > 0);
	int a = sbx_exclude_match(pattern, name);
	if (a != sbx_exclude_match(pattern, name))
		__builtin_trap();
	if (name[0] != '\0' && !sbx_exclude_match("*", name))
		__builtin_trap();
	/* Names as they are packed: relative, no empty, "." or ".." components. */
	int clean = name[0] != '\0' && name[0] != '/';
	for (const char *c = name; clean && *c != '\0';
	     c = strchr(c, '/') ? strchr(c, '/') + 1 : "") {
		size_t cl = strcspn(c, "/");
		if (cl == 0 || (cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
			clean = 0;
	}
	if (a && clean) {
		size_t nl = strlen(name);
		char *below = malloc(nl + 3);
		memcpy(below, name, nl);
		memcpy(below + nl, "/x", 3);
		if (!sbx_exclude_match(pattern, below))
			__builtin_trap();
		free(below);
	}
	free(buf);
	return 0;
}
