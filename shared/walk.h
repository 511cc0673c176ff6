/* The safe walk: the one way sbx opens a folder by a relative path under a folder fd, never
 * following a symlink anywhere on the way (a symlink in place of a component is refused and
 * named, whatever it points to). openat2 with RESOLVE_BENEATH|NO_SYMLINKS|NO_MAGICLINKS where
 * the kernel has it; else, and where openat2 cannot say more (a component to create, a path
 * past PATH_MAX, a refusal to name), one O_NOFOLLOW|O_DIRECTORY open per component. Archive
 * placement (shared/tree_put.c) and an upload's target (agent/xfer.c) walk through here.
 *
 * Built with -DSBX_WEAK_PLACEMENT (the negative control, Makefile: build/agent-weak-put/) the
 * walk follows symlinks: the hostile-archive tests must then see archives escape. */
#ifndef SBX_WALK_H
#define SBX_WALK_H

#include "err.h"

struct sbx_walk {
	int walk;    /* 1: the component walk only (forced, or openat2 missing or filtered) */
	int soft;    /* set by the caller: a missing component sets missing instead of an error */
	int missing; /* the last sbx_walk_dir stopped at a missing component (soft only) */
};

/* force_walk: the component walk even where openat2 works (tests run both). Without it,
 * openat2 failing with ENOSYS, EPERM or E2BIG (old kernel, seccomp) switches to the walk for
 * good. */
void sbx_walk_init(struct sbx_walk *w, int force_walk);

/* Opens the folder comp (one component) under dfd, how being O_PATH or O_RDONLY: the fd, or
 * -1 with errno (ENOTDIR or ELOOP where comp is a symlink, ENOENT where it is missing). */
int sbx_walk_open(struct sbx_walk *w, int dfd, const char *comp, int how);

/* Opens the folder path (relative and normalized: no empty, "." or ".." component; changed
 * while walking and restored) under root, as how (O_PATH or O_RDONLY). With create, a missing
 * component is made, mode 0755 set through its fd whatever the umask. Returns a new fd, or -1
 * with *e (SBX_ETRANSFER) naming the component and the rule ("path component x is a symlink
 * (never followed)", "... does not exist", "... is not a directory", "cannot create directory
 * x", "... keeps changing"), prefixed by what ("" or "hard-link target "); callers put what
 * they were opening before it (sbx_err_prefix).
 * With w->soft, a missing component returns -1 with w->missing set and *e untouched. */
int sbx_walk_dir(struct sbx_walk *w, int root, char *path, int create, int how, const char *what,
                 struct sbx_err *e);

#endif
