/* Archive member names and symlink targets, checked from the text alone. Sans-I/O: no
 * syscalls, no allocation, so tree_put.c, the host and the fuzzer share one definition of
 * "a name that stays under the root". */
#ifndef SBX_MEMBER_H
#define SBX_MEMBER_H

#include <stddef.h>

/* Normalizes an archive member name into out (cap bytes, with a NUL): leading "./" runs and a
 * trailing "/" go, "//" and "/./" collapse. Returns 0, or -1 with *why (when why is not NULL)
 * set to a short static reason and out set to "" (when cap > 0) for: NULL or empty input,
 * a name that is empty or "." after normalization ("empty name"), an absolute name ("/x",
 * "//x"), any ".." component, even "a/../b" ("'..' is not allowed"), a result that does not
 * fit in cap ("name too long"). The input is a C string, so it holds no NUL. The result is
 * never longer than the input, so cap = strlen(in) + 1 always fits. in and out may not
 * overlap. */
int sbx_member_name(const char *in, char *out, size_t cap, const char **why);

/* 1 when the name is a spelling of the root itself (".", "./", ".//./"): not empty, not
 * absolute, and every component "" or "."; else 0. A directory entry with such a name is
 * skipped by placement; any other member with it is refused. */
int sbx_member_is_root(const char *name);

/* For symlink targets in "data" mode: 1 when target, resolved lexically from the directory of
 * member (a member name as in the archive) inside the root, stays inside the root; else 0.
 * Refused (0): an empty or absolute target, one that climbs above the root, a member name
 * that is absolute, empty or holds "..", and a ".." after any ordinary component of the
 * target ("a/.."): when "a" is itself a symlink the kernel's ".." is not the lexical one
 * ("cur" -> ".", then "cur/.." is the root's parent), so only leading ".." runs, which climb
 * from the link's own real directory, are judged. */
int sbx_member_link_inside(const char *member, const char *target);

#endif
