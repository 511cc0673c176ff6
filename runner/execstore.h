/* The programs an ns sandbox runs from its own layer (the agent, and for a foreign image its
 * init and qemu) and the host's copy beside its state (enter): placed by hard link to one
 * copy per source file, so that every sandbox maps the same pages. */
#ifndef SBX_EXECSTORE_H
#define SBX_EXECSTORE_H

#include <sys/types.h>

#include "err.h"

/* Copies src to dir/name (which must not exist), mode 0755, owned by uid:gid. */
int sbx_exec_copy(const char *src, const char *dir, const char *name, uid_t uid, gid_t gid,
                  struct sbx_err *e);

/* Places src at dir/name as a hard link to its copy in store (made on first use: a folder
 * of the host's root, 0700), owned by the host's root, mode 0755. A layer on another
 * filesystem than the store gets a copy of its own (sbx_exec_copy with uid:gid). */
int sbx_exec_place(const char *src, const char *store, const char *dir, const char *name, uid_t uid,
                   gid_t gid, struct sbx_err *e);

/* Removes the entries of store that no sandbox links any more. */
void sbx_exec_prune(const char *store);

#endif
