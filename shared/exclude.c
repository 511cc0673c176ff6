/* GNU tar's unanchored, slash-matching --exclude, sans-I/O. */
#include "exclude.h"

#include <stddef.h>
#include <string.h>

/* Matches one character class at p against c; returns the pattern past the class, or NULL
 * when c is not in it (or the class is unterminated, which then matches '[' literally). */
static const char *class_match(const char *p, unsigned char c, int *ok)
{
	const char *q = p + 1;
	int neg = *q == '!' || *q == '^';
	if (neg)
		q++;
	int hit = 0, first = 1;
	while (*q != '\0' && (*q != ']' || first)) {
		first = 0;
		unsigned char lo = (unsigned char)*q, hi = lo;
		if (*q == '\\' && q[1] != '\0')
			lo = hi = (unsigned char)*++q;
		if (q[1] == '-' && q[2] != '\0' && q[2] != ']') {
			hi = (unsigned char)q[2];
			if (hi == '\\' && q[3] != '\0')
				hi = (unsigned char)q[3], q++;
			q += 2;
		}
		if (c >= lo && c <= hi)
			hit = 1;
		q++;
	}
	if (*q != ']') {
		*ok = c == '[';
		return p + 1;
	}
	*ok = hit != neg;
	return q + 1;
}

/* Whether pattern p matches a leading part of t that ends at the end of t or at a '/'. */
static int match_leading(const char *p, const char *t)
{
	const char *star_p = NULL, *star_t = NULL;
	for (;;) {
		if (*p == '\0') {
			if (*t == '\0' || *t == '/')
				return 1;
		} else if (*p == '*') {
			while (*p == '*')
				p++;
			star_p = p;
			star_t = t;
			continue;
		} else if (*t != '\0') {
			int ok;
			const char *next;
			if (*p == '?') {
				ok = 1, next = p + 1;
			} else if (*p == '[') {
				next = class_match(p, (unsigned char)*t, &ok);
			} else if (*p == '\\' && p[1] != '\0') {
				ok = p[1] == *t, next = p + 2;
			} else {
				ok = *p == *t, next = p + 1;
			}
			if (ok) {
				p = next;
				t++;
				continue;
			}
		}
		/* Mismatch (or the pattern ended inside a component): let the last star eat one
		 * more character. */
		if (star_p == NULL || *star_t == '\0')
			return 0;
		p = star_p;
		t = ++star_t;
	}
}

int sbx_exclude_match(const char *pattern, const char *name)
{
	if (pattern[0] == '\0')
		return 0;
	/* Judge the name as tar does when it packs ".": with "./" in front. */
	const char *n = name;
	while (n[0] == '.' && n[1] == '/')
		n += 2;
	size_t len = strlen(n);
	char buf[4096 + 3];
	if (len + 3 > sizeof buf) {
		/* Very long names: the top-anchored candidate is lost; every component start is
		 * still tried on the name itself. */
		for (const char *s = n;; s++) {
			if ((s == n || (s[-1] == '/' && *s != '/')) && match_leading(pattern, s))
				return 1;
			if (*s == '\0')
				return 0;
		}
	}
	memcpy(buf, "./", 2);
	memcpy(buf + 2, n, len + 1);
	for (const char *s = buf;; s++) {
		if ((s == buf || (s[-1] == '/' && *s != '/' && *s != '\0')) &&
		    match_leading(pattern, s))
			return 1;
		if (*s == '\0')
			return 0;
	}
}
