/* Lexical path canonicalisation and containment. Pure string work, so it is fuzzed directly
 * (fuzz/fuzz_paths.c) and both sides of the protocol agree on what a path names. */
#include "paths.h"

#include <stdio.h>
#include <string.h>

int sbx_path_normalize(const char *in, char *out, size_t cap)
{
	/* in is read before out is written: they may be the same buffer. */
	if (in == NULL || in[0] != '/' || cap < 2) {
		if (cap > 0)
			out[0] = '\0';
		return -1;
	}
	/* The output never outruns the input read so far (each kept component was preceded by at
	 * least one slash in the input too), so copying forward with memmove is safe in place.
	 * Components that do not fit are only counted (unstored): a later ".." may remove them,
	 * and only a result that does not fit is refused. */
	size_t olen = 1;
	size_t unstored = 0;
	size_t i = 0;
	for (;;) {
		while (in[i] == '/')
			i++;
		if (in[i] == '\0')
			break;
		size_t start = i;
		while (in[i] != '/' && in[i] != '\0')
			i++;
		size_t clen = i - start;
		if (clen == 1 && in[start] == '.')
			continue;
		if (clen == 2 && in[start] == '.' && in[start + 1] == '.') {
			if (unstored > 0) {
				unstored--;
				continue;
			}
			while (olen > 1 && out[olen - 1] != '/')
				olen--;
			if (olen > 1)
				olen--; /* the slash before the removed component */
			continue;
		}
		size_t sep = olen > 1 ? 1 : 0;
		if (unstored > 0 || olen + sep + clen + 1 > cap) {
			unstored++;
			continue;
		}
		memmove(out + olen + sep, in + start, clen);
		if (sep)
			out[olen] = '/';
		olen += sep + clen;
	}
	if (unstored > 0) {
		out[0] = '\0';
		return -1;
	}
	out[0] = '/';
	out[olen] = '\0';
	return 0;
}

int sbx_path_within(const char *inner, const char *outer)
{
	if (inner == NULL || outer == NULL || inner[0] != '/' || outer[0] != '/')
		return 0;
	if (outer[1] == '\0')
		return 1;
	size_t n = strlen(outer);
	return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

int sbx_dir_next(const char **at, const char *name, char *out, size_t cap)
{
	for (;;) {
		const char *p = *at;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (n == 0)
			return 0;
		*at = p + n;
		/* "/" joined with a name is "/name", not "//name". */
		size_t dn = n == 1 && p[0] == '/' && name[0] != '\0' ? 0 : n;
		int len = snprintf(out, cap, "%.*s%s%s", (int)dn, p, name[0] != '\0' ? "/" : "",
		                   name);
		if (len >= 0 && (size_t)len < cap)
			return 1;
	}
}
