/* Member names and link targets as text: the refusals every placement starts with. Pure
 * string work, fuzzed directly (fuzz/fuzz_member.c). */
#include "member.h"

#include <string.h>

static int refuse(char *out, size_t cap, const char **why, const char *reason)
{
	if (cap > 0)
		out[0] = '\0';
	if (why != NULL)
		*why = reason;
	return -1;
}

/* Next component of s from *i: sets *start and returns its length (0 at the end); skips
 * slashes before it. */
static size_t next_comp(const char *s, size_t *i, size_t *start)
{
	while (s[*i] == '/')
		(*i)++;
	*start = *i;
	while (s[*i] != '/' && s[*i] != '\0')
		(*i)++;
	return *i - *start;
}

static int is_dot(const char *c, size_t n)
{
	return n == 1 && c[0] == '.';
}

static int is_dotdot(const char *c, size_t n)
{
	return n == 2 && c[0] == '.' && c[1] == '.';
}

int sbx_member_name(const char *in, char *out, size_t cap, const char **why)
{
	if (in == NULL || in[0] == '\0')
		return refuse(out, cap, why, "empty name");
	if (in[0] == '/')
		return refuse(out, cap, why, "absolute name");
	size_t olen = 0;
	size_t i = 0;
	for (;;) {
		size_t start;
		size_t n = next_comp(in, &i, &start);
		if (n == 0)
			break;
		if (is_dot(in + start, n))
			continue;
		if (is_dotdot(in + start, n))
			return refuse(out, cap, why, "'..' is not allowed");
		size_t need = olen + (olen > 0) + n + 1;
		if (need > cap)
			return refuse(out, cap, why, "name too long");
		if (olen > 0)
			out[olen++] = '/';
		memcpy(out + olen, in + start, n);
		olen += n;
	}
	if (olen == 0)
		return refuse(out, cap, why, "empty name");
	out[olen] = '\0';
	return 0;
}

int sbx_member_is_root(const char *name)
{
	if (name == NULL || name[0] == '\0' || name[0] == '/')
		return 0;
	size_t i = 0;
	for (;;) {
		size_t start;
		size_t n = next_comp(name, &i, &start);
		if (n == 0)
			return 1;
		if (!is_dot(name + start, n))
			return 0;
	}
}

int sbx_member_link_inside(const char *member, const char *target)
{
	if (member == NULL || target == NULL || member[0] == '/' || target[0] == '\0' ||
	    target[0] == '/')
		return 0;
	/* Depth of the link's own directory: its member name's components minus one. */
	size_t comps = 0;
	size_t i = 0;
	for (;;) {
		size_t start;
		size_t n = next_comp(member, &i, &start);
		if (n == 0)
			break;
		if (is_dotdot(member + start, n))
			return 0;
		if (!is_dot(member + start, n))
			comps++;
	}
	if (comps == 0)
		return 0;
	size_t depth = comps - 1;
	int descended = 0;
	i = 0;
	for (;;) {
		size_t start;
		size_t n = next_comp(target, &i, &start);
		if (n == 0)
			break;
		if (is_dot(target + start, n))
			continue;
		if (is_dotdot(target + start, n)) {
			if (descended || depth == 0)
				return 0;
			depth--;
		} else {
			descended = 1;
		}
	}
	return 1;
}
