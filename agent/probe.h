/* The agent's probe operations (KIND, STAT, RESOLVE, LANDS_CLEAR): each reads a REQUEST
 * payload and writes the RESPONSE payload into a writer the caller owns. They only read the
 * filesystem; a question the agent could not answer is an error, never "absent". */
#ifndef SBX_PROBE_H
#define SBX_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "msg.h"

/* Every response opens with SBX_T_STATUS (0, or an enum sbx_err_class); an error adds
 * SBX_T_ERRNO and SBX_T_MESSAGE. A malformed request (no PATH, a PATH that is empty or holds a
 * NUL, a payload that does not parse) is SBX_EUSAGE; a response that does not fit w is
 * replaced by SBX_EUSAGE "response too large". */

/* One PATH, symlinks followed. KIND "dir", "file" or "absent" (missing, or neither a file nor
 * a directory, as `[ -d ]` / `[ -f ]` answer); any other failure is SBX_EPROBE. */
void sbx_probe_kind(const uint8_t *req, size_t len, struct sbx_msgw *w);

/* Repeated PATH, lstat semantics. One ENTRY per path, in order, each a nested field list:
 * PATH, then ERRNO and MESSAGE on failure, or TYPE, MODE, UID_OF, GID_OF, SIZE, MTIME_NS and,
 * for a symlink, TARGET. */
void sbx_probe_stat(const uint8_t *req, size_t len, struct sbx_msgw *w);

/* One PATH; PHYSICAL is sbx_resolve_physical of it. */
void sbx_probe_resolve(const uint8_t *req, size_t len, struct sbx_msgw *w);

/* PATH (where an archive would be extracted; it need not exist) and repeated KEEP_OUT.
 * CLEAR is 1 when the physical place is the named one, or lies neither at, inside nor above
 * any keep_out (each taken both lexically and physically); else 0 with a MESSAGE saying
 * which. PHYSICAL is always sent. */
void sbx_probe_lands_clear(const uint8_t *req, size_t len, struct sbx_msgw *w);

/* The physical path `cd -P` would reach: realpath of the longest existing prefix, with the
 * missing tail appended as given and the whole lexically normalized. A relative path is taken
 * from the current directory. Only a missing component (ENOENT, ENOTDIR) ends the prefix;
 * anything else (EACCES, ELOOP, ENAMETOOLONG) fails. Returns 0, or -1 with *err set (class
 * SBX_EPROBE and the errno). */
int sbx_resolve_physical(const char *path, char *out, size_t cap, struct sbx_err *err);

/* What path names, symlinks followed, for KIND and a download's source: "dir", "file",
 * "absent" (ENOENT or ENOTDIR: nothing there), "other" (a FIFO, a device, a socket), or NULL
 * with errno when stat failed any other way (EACCES, ELOOP, EIO: the answer is unknown). */
const char *sbx_probe_kind_of(const char *path);

#endif
