/* Moving a finished staging tree into place and removing trees, by directory fds only: every
 * name is one component relative to a directory fd held open, nothing is opened through a
 * symlink, and nothing is followed. Shared by the agent (uploads) and libsbx (downloads). */
#ifndef SBX_TREEMOVE_H
#define SBX_TREEMOVE_H

#include <stddef.h>

#include "err.h"

/* Removes name (a file, a symlink, or a directory with everything under it) from dirfd.
 * Never follows a symlink: a link is unlinked, its target untouched. Iterative: at most three
 * fds open whatever the depth, memory one small record per level of the current path. A
 * directory the caller may not enter or change (mode 0000 or 0500, not root) is opened up to
 * 0700 first when the caller owns it. Absent is success. -1 with *e (SBX_ETRANSFER) on the
 * first failure, naming the folder that could not be removed. */
int sbx_rmtree_at(int dirfd, const char *name, struct sbx_err *e);

/* Removes everything inside the directory fd (which stays open), as sbx_rmtree_at does. */
int sbx_rmtree_in(int fd, struct sbx_err *e);

#define SBX_MERGE_OWNER 1   /* merged folders take the staged folder's owner too */
#define SBX_MERGE_PRIVATE 2 /* refuse any folder merged into that sbx_dir_private refuses */

/* Merges the contents of the directory src_fd into the directory dst_fd, as tar extracting
 * into an existing folder would: a name absent in dst is moved in (rename); a directory
 * present as a real directory on both sides is merged recursively, then takes the staged
 * directory's owner (SBX_MERGE_OWNER), mode and mtime; a non-directory replaces a
 * non-directory atomically (rename); a staged directory replaces a non-directory (a file or a
 * symlink: exchanged, then the old one removed). A staged non-directory over an existing
 * directory is a conflict, and so is a name of dst that is src_fd itself (a stage inside its
 * target). All conflicts are found by a first pass that changes nothing; the second pass
 * moves. src_fd is left empty. Memory does not grow with the width of a folder; one fd pair
 * per level of overlap, at most 4096 levels. -1 with *e: SBX_ETRANSFER naming the path and
 * the rule, SBX_EUSAGE for a folder SBX_MERGE_PRIVATE refuses. */
int sbx_tree_merge(int src_fd, int dst_fd, int flags, struct sbx_err *e);

/* 0 when the directory fd is written only by the caller or root: refused (-1, SBX_EUSAGE,
 * "WHAT is writable by ..." naming the owner and mode) is a folder that is group- or
 * other-writable without the sticky bit, or owned by another user who is not root. Any of
 * those could rename what a commit puts there, or put something else under its name. */
int sbx_dir_private(int fd, const char *what, struct sbx_err *e);

/* Renames from (in from_dir) to to (in to_dir), only while from is the very object fd holds
 * (device and inode), and checks that what is then at to is that object. noreplace: to must
 * not exist (RENAME_NOREPLACE where the kernel has it). -1 with *e (SBX_ETRANSFER, naming
 * what): nothing moved when from was not the object or the rename failed; moved but not the
 * object (a process that may write to_dir raced the rename) says so. */
int sbx_move_verified(int from_dir, const char *from, int to_dir, const char *to, int fd,
                      int noreplace, const char *what, struct sbx_err *e);

/* A fresh private (0700) directory "PREFIX-XXXXXX" inside dirfd; its name goes to name
 * (cap bytes) and an O_DIRECTORY fd of it is returned, or -1 with *e. */
int sbx_mkstage(int dirfd, const char *prefix, char *name, size_t cap, struct sbx_err *e);

#endif
