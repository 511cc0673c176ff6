/* Moving a finished staging tree into place and removing trees, by directory fds only: every
 * name is one component relative to a directory fd held open, nothing is opened through a
 * symlink, and nothing is followed. Shared by the agent (uploads) and libsbx (downloads). */
#ifndef SBX_TREEMOVE_H
#define SBX_TREEMOVE_H

#include <stddef.h>

#include "err.h"

/* Removes name (a file, a symlink, or a directory with everything under it) from dirfd.
 * Never follows a symlink: a link is unlinked, its target untouched. A directory the caller
 * may not enter (mode 0000, not root) is opened up to 0700 first when the caller owns it.
 * Absent is success. -1 with *e (SBX_ETRANSFER) on the first failure. */
int sbx_rmtree_at(int dirfd, const char *name, struct sbx_err *e);

/* Merges the contents of the directory src_fd into the directory dst_fd, as tar extracting
 * into an existing folder would: a name absent in dst is moved in (rename); a directory
 * present as a real directory on both sides is merged recursively, then takes the staged
 * directory's owner (when with_owner), mode and mtime; a non-directory replaces a
 * non-directory atomically (rename); a staged directory replaces a non-directory (a file or a
 * symlink: exchanged, then the old one removed). A staged non-directory over an existing
 * directory is a conflict. All conflicts are found by a first pass that changes nothing;
 * the second pass moves. src_fd's tree is left empty (its directories remain). -1 with *e:
 * SBX_ETRANSFER naming the path and the rule. */
int sbx_tree_merge(int src_fd, int dst_fd, int with_owner, struct sbx_err *e);

/* A fresh private (0700) directory "PREFIX-XXXXXX" inside dirfd; its name goes to name
 * (cap bytes) and an O_DIRECTORY fd of it is returned, or -1 with *e. */
int sbx_mkstage(int dirfd, const char *prefix, char *name, size_t cap, struct sbx_err *e);

#endif
