/* Packing a folder into a pax stream inside the sandbox (download_dir's agent half): a walk
 * from directory descriptors that never follows a symlink, libarchive's pax writer, and a
 * SHA-256 of every byte written. */
#ifndef SBX_AGENT_PACK_H
#define SBX_AGENT_PACK_H

#include <stdint.h>

#include "digest.h"
#include "err.h"

struct sbx_pack_opts {
	int root_fd;                /* the folder whose contents are packed (O_DIRECTORY) */
	const char *const *names;   /* NULL: everything; else only these top-level entries */
	const char *const *exclude; /* GNU tar default --exclude patterns (shared/exclude.h) */
	int skip_unsafe;            /* skip FIFOs, devices and sockets instead of failing */
	int out_fd;                 /* where the stream goes */
};

struct sbx_pack_stats {
	uint64_t files, dirs, symlinks, hardlinks, skipped, excluded;
	uint64_t data_bytes;    /* file contents */
	uint64_t archive_bytes; /* the stream, padding included */
	uint8_t sha256[SBX_SHA256_LEN];
};

/* Packs the tree; members are named relative to the folder ("a/b"), in name order within each
 * directory so the same tree gives the same bytes. Owners are numeric only (no user names);
 * modes keep set-id and sticky bits; mtimes keep nanoseconds (atime and ctime are left out).
 * Names are stored as bytes (pax hdrcharset=BINARY). -1 with *e: SBX_ETRANSFER naming
 * the member for what the tree holds (an unsafe member without skip_unsafe, an unreadable
 * file, a file that changed type while read), SBX_EUNAVAILABLE when out_fd fails. */
int sbx_pack(const struct sbx_pack_opts *o, struct sbx_pack_stats *st, struct sbx_err *e);

#endif
