/* GNU tar's default --exclude, for download_dir: a pattern is matched as GNU tar 1.34 matches
 * it (gnulib's exclude with EXCLUDE_WILDCARDS and FNM_LEADING_DIR, glibc's fnmatch in the C
 * locale): unanchored (it may match starting at any component), wildcards that match '/', and
 * a match of a leading directory excluding what is below it. Names are relative to the folder
 * being packed, as `tar -C DIR -cf - .` sees them with a "./" in front: so "node_modules"
 * matches anywhere, "./cache" only at the top.
 *
 * Patterns: '*' any run of bytes, '/' included; '?' one byte; '[...]' a bracket expression
 * ('!' or '^' negates; ranges by byte value; the classes [:alnum:] [:alpha:] [:blank:]
 * [:cntrl:] [:digit:] [:graph:] [:lower:] [:print:] [:punct:] [:space:] [:upper:] [:xdigit:]
 * of the C locale, [=c=] and [.c.] for one byte c; fnmatch's corner cases included); '\'
 * makes the next byte literal. A pattern without '*', '?' or '[' is a literal name. No
 * extended patterns (GNU tar does not set FNM_EXTMATCH), no case folding, no special leading
 * dot.
 *
 * Matching never recurses and takes time linear in the name for a given pattern: an automaton
 * over the pattern's positions, built once per pattern (about 512 bytes per '[' in it). */
#ifndef SBX_EXCLUDE_H
#define SBX_EXCLUDE_H

#include "err.h"

#define SBX_EXCLUDE_PATTERN_MAX 4096     /* bytes in one pattern */
#define SBX_EXCLUDE_TOTAL_MAX (64 << 10) /* bytes in all the patterns of one set */

struct sbx_exclude;

/* Builds the set of patterns (NULL-terminated; NULL or empty: nothing is excluded). -1 with
 * *e (SBX_EUSAGE) when a pattern or the set is longer than the bounds above, SBX_ETRANSFER
 * when out of memory. */
int sbx_exclude_new(struct sbx_exclude **out, const char *const *patterns, struct sbx_err *e);

/* 1 when the member name (relative, no leading "./" needed; names as packed: no empty
 * component) is excluded by a pattern of the set. The set's scratch space is used: one caller
 * at a time. */
int sbx_exclude_test(struct sbx_exclude *x, const char *name);

void sbx_exclude_free(struct sbx_exclude *x);

/* One pattern against one name (built for the call): 1 or 0; -1 for a pattern longer than
 * SBX_EXCLUDE_PATTERN_MAX. */
int sbx_exclude_match(const char *pattern, const char *name);

#endif
