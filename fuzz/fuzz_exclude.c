/* libFuzzer target for the --exclude matcher: input "PATTERN\0NAME" (or split in half).
 * Patterns come from the host and names from the sandbox, so both are hostile here. The
 * answer must be GNU tar's: for names as packed (no empty, "." or ".." component) it is
 * compared with a reference built the way GNU tar 1.34 decides, from glibc's own fnmatch
 * (FNM_LEADING_DIR, the C locale) and gnulib's exclude logic (the literal-name path for
 * patterns without wildcards, a try at the whole name and after every '/'). Also: no crash,
 * no hang (libFuzzer's -timeout), the same answer twice and through a set of two patterns,
 * "*" excludes every non-empty name, and an excluded clean name stays excluded with anything
 * below it. */
#include <fnmatch.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exclude.h"

/* gnulib's fnmatch_pattern_has_wildcards (EXCLUDE_WILDCARDS, no FNM_NOESCAPE). */
static int has_wildcards(const char *s)
{
	for (;;) {
		switch (*s++) {
		case '\\':
			s += *s != 0;
			break;
		case '?':
		case '*':
		case '[':
			return 1;
		case 0:
			return 0;
		}
	}
}

/* GNU tar's answer for "./NAME", as gnulib's excluded_file_name gives it. */
static int reference(const char *pattern, const char *name)
{
	size_t n = strlen(name);
	char *f = malloc(n + 3);
	memcpy(f, "./", 2);
	memcpy(f + 2, name, n + 1);
	int m = 0;
	if (has_wildcards(pattern)) {
		m = fnmatch(pattern, f, FNM_LEADING_DIR) == 0;
		for (const char *p = f; *p != 0 && !m; p++)
			if (*p == '/' && p[1] != '/')
				m = fnmatch(pattern, p + 1, FNM_LEADING_DIR) == 0;
	} else {
		char *u = strdup(pattern), *w = u;
		for (const char *q = pattern; *q != 0; q++) {
			if (*q == '\\' && q[1] != 0)
				q++;
			*w++ = *q;
		}
		*w = 0;
		char *buf = malloc(n + 3);
		for (const char *s = f; s != NULL && !m;
		     s = strchr(s, '/') ? strchr(s, '/') + 1 : NULL) {
			strcpy(buf, s);
			for (;;) {
				if (strcmp(buf, u) == 0) {
					m = 1;
					break;
				}
				char *p = strrchr(buf, '/');
				if (p == NULL)
					break;
				*p = 0;
			}
		}
		free(buf);
		free(u);
	}
	free(f);
	return m;
}

/* Relative, no empty, "." or ".." component: the names the pack asks about. */
static int clean(const char *name)
{
	if (name[0] == 0)
		return 0;
	for (const char *c = name;;) {
		size_t cl = strcspn(c, "/");
		if (cl == 0 || (cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (c[cl] == 0)
			return 1;
		c += cl + 1;
	}
}

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
	if (a < 0 || a != sbx_exclude_match(pattern, name))
		__builtin_trap();
	const char *two[3] = {"", pattern, NULL}; /* "" matches nothing */
	struct sbx_exclude *x;
	if (sbx_exclude_new(&x, two, NULL) != 0 || sbx_exclude_test(x, name) != a ||
	    sbx_exclude_test(x, name) != a)
		__builtin_trap();
	sbx_exclude_free(x);
	if (name[0] != '\0' && !sbx_exclude_match("*", name))
		__builtin_trap();
	if (clean(name)) {
		if (a != reference(pattern, name))
			__builtin_trap();
		if (a) {
			size_t nl = strlen(name);
			char *below = malloc(nl + 3);
			memcpy(below, name, nl);
			memcpy(below + nl, "/x", 3);
			if (!sbx_exclude_match(pattern, below))
				__builtin_trap();
			free(below);
		}
	}
	free(buf);
	return 0;
}
