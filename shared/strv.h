/* NULL-terminated string vectors built from request fields (argv, env, names, excludes). */
#ifndef SBX_STRV_H
#define SBX_STRV_H

#include <stddef.h>

/* Appends s (taking it) to the vector *list of *n entries, keeping it NULL-terminated.
 * Returns 0, or -1 when memory runs out; s is freed then. */
int sbx_strv_push(char ***list, size_t *n, char *s);

/* Frees every entry and the vector; NULL is fine. */
void sbx_strv_free(char **l);

#endif
