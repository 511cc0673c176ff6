/* The placement engine: puts archive members (already parsed, by libarchive) under a root
 * directory fd without ever following a symlink or acting on a path string from the root.
 * Every member is re-walked from the root fd (openat2 RESOLVE_BENEATH|NO_SYMLINKS, or an
 * O_NOFOLLOW component walk); directory modes are applied last, through kept fds. */
#ifndef SBX_TREE_PUT_H
#define SBX_TREE_PUT_H

#include <stdint.h>

#include "err.h"

enum sbx_put_mode {
	SBX_PUT_SANDBOX, /* as root inside a sandbox: numeric owners and exact modes incl. set-id */
	SBX_PUT_DATA,    /* host "data": links leaving the root refused, set-id and group/other
	                    write stripped, never chown */
	SBX_PUT_KEEP,    /* host "keep": symlinks kept as symlinks (any target), never followed;
	                    set-id and group/other write stripped, never chown */
};

/* What a placement keeps between members (deferred directory metadata and hard links to
 * members not placed yet, with their names; counted with the allocator's overhead) is bounded:
 * a member that would take it past this is refused, naming the bound. */
#define SBX_PUT_STATE_MAX (32u << 20)

/* Opaque: a dup of the root fd, the deferred directory metadata (kept directory fds, applied
 * after contents), the open file member. */
struct sbx_put;

/* Starts placing under root_fd (a directory; it is duplicated, the caller keeps its own).
 * force_walk uses the O_NOFOLLOW component walk even where openat2 works (tests run both);
 * without it, openat2 failing with ENOSYS/EPERM/E2BIG (old kernel, seccomp) switches to the
 * walk for good. Returns 0, or -1 with *e set (SBX_EUSAGE, SBX_ETRANSFER). */
int sbx_put_open(struct sbx_put **out, int root_fd, enum sbx_put_mode mode, int force_walk,
                 struct sbx_err *e);

struct sbx_put_member {
	const char *name; /* as in the archive (normalized inside via sbx_member_name) */
	int type;         /* 'f' file, 'd' dir, 'l' symlink, 'h' hard link; anything else refused */
	unsigned mode;    /* permission + set-id + sticky bits */
	long long uid, gid; /* numeric only; never looked up; used in SBX_PUT_SANDBOX only */
	long long mtime_sec;
	long mtime_nsec;
	const char *link; /* symlink target, or hard-link target member name */
};

/* Places one member. For 'f' returns a new, empty, writable file in *fd: the caller streams
 * the data into it and then calls sbx_put_end_file (one file open at a time). For every other
 * type *fd is -1 and the member is complete on return, except a hard link whose target does
 * not exist yet (a forward reference to a later member): it is made by sbx_put_finish, by the
 * same rules, unless a later member redefines its name (the last definition wins). A
 * directory named like the root ("./") is accepted and skipped: it never changes the root's
 * own mode or owner.
 * Refusals are SBX_ETRANSFER with "member NAME: RULE". After any refusal the caller must
 * abort the whole operation; sbx_put_finish then refuses too. */
int sbx_put_begin(struct sbx_put *p, const struct sbx_put_member *m, int *fd, struct sbx_err *e);

/* Completes the file from sbx_put_begin through its fd: owner (sandbox mode, before the mode,
 * since chown clears set-id bits), mode, mtime. Closes fd in every case. */
int sbx_put_end_file(struct sbx_put *p, int fd, struct sbx_err *e);

/* Makes the deferred hard links in archive order (a target still missing, a directory, or one
 * reached through a symlink is refused), then applies the deferred directory owners, modes and
 * mtimes, deepest first (a later definition of the same directory wins), through the fds kept
 * at placement, never by path. Directories beyond the fd budget (half of RLIMIT_NOFILE) are
 * re-opened by the same safe walk and must still be the very directory placed (device and
 * inode), else refused. */
int sbx_put_finish(struct sbx_put *p, struct sbx_err *e);

/* Sandbox mode run by a user other than root: an owner the kernel refuses to give (EPERM)
 * leaves the member with the agent's own owner instead of refusing it; this counts them so
 * the caller can say so. 0 as root and in the host modes. */
uint64_t sbx_put_owners_kept(const struct sbx_put *p);

/* Closes every fd (an open file member's too) and frees p; NULL is fine. */
void sbx_put_free(struct sbx_put *p);

#endif
