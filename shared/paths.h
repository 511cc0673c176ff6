/* Lexical path helpers: canonical absolute paths and component-wise containment, computed from
 * the text alone. Sans-I/O like the frame codec: no syscalls, no allocation, so the agent's
 * probes, the host and the fuzzer share one definition of "the same path". */
#ifndef SBX_PATHS_H
#define SBX_PATHS_H

#include <stddef.h>

/* Writes the lexical canonical form of the absolute path `in` to out (cap bytes, with a NUL):
 * repeated slashes collapse, "." components go, ".." removes the component before it ("/.."
 * stays "/"), and a trailing slash goes except on "/" itself. Symlinks are not consulted, so
 * "/link/.." is "/" whatever link points to. in and out may be the same buffer.
 * Returns 0, or -1 when in is NULL, empty or relative, or the result does not fit; out then
 * holds "" (when cap > 0). Only the result must fit: "/long/.." needs 2 bytes. */
int sbx_path_normalize(const char *in, char *out, size_t cap);

/* 1 when inner equals outer or lies below it component-wise ("/a/b/c" is within "/a/b",
 * "/a/bc" is not; everything absolute is within "/"), else 0. Both must already be normalized
 * absolute paths; a relative one is within nothing and contains nothing. */
int sbx_path_within(const char *inner, const char *outer);

/* Walks a list of folders such as SBX_SANDBOX_DIRS (absolute paths, one space apart): writes
 * the next folder joined with name into out ("/tmp" and "x" give "/tmp/x", "/" gives "/x";
 * an empty name gives the folder itself) and moves *at past it. 1, or 0 at the end of the
 * list; a folder whose result does not fit in cap is skipped. */
int sbx_dir_next(const char **at, const char *name, char *out, size_t cap);

#endif
