/* GNU tar's default --exclude, for download_dir: unanchored (a pattern may match starting at
 * any component), wildcards that match '/', and a match of a leading directory excluding what
 * is below it. Names are relative to the folder being packed, as `tar -C DIR -cf - .` sees
 * them with a "./" in front: so "node_modules" matches anywhere, "./cache" only at the top. */
#ifndef SBX_EXCLUDE_H
#define SBX_EXCLUDE_H

/* 1 when the member name (relative, no leading "./" needed) is excluded by pattern. Patterns:
 * '*' any run of characters including '/', '?' one character, '[...]' a class ("!" or "^"
 * negates, ranges), '\' escapes the next character. */
int sbx_exclude_match(const char *pattern, const char *name);

#endif
