/* Packing a folder into a pax stream inside the sandbox (download_dir's agent half): a walk
 * from directory descriptors that never follows a symlink, libarchive's pax writer, and a
 * SHA-256 of every byte written. */
#ifndef SBX_ARCHIVE_PACK_H
#define SBX_ARCHIVE_PACK_H

#include <stdint.h>

#include "digest.h"
#include "err.h"

struct sbx_pack_opts {
	int root_fd;                /* the folder whose contents are packed (O_DIRECTORY) */
	const char *const *names;   /* NULL: everything; else only these top-level entries */
	const char *const *exclude; /* GNU tar default --exclude patterns (shared/exclude.h) */
	int skip_unsafe;            /* skip FIFOs, devices and sockets instead of failing */
	int out_fd;                 /* where the stream goes */
	const char *as_name;        /* NULL, or: names holds exactly one top-level entry (one path
	                               component), stored under this member name instead of its own
	                               (its contents, for a directory, under as_name/...) */
	int libarchive_only;        /* tests: every header by libarchive (archive/pack_hdr.h) */
	int map_files;              /* large plain files read through a mapping, hashed as they
	                               are copied (archive/mapread.h): the process's SIGBUS
	                               handler is the pack's meanwhile, so only for a process
	                               that packs one stream at a time (the agent) */
};

struct sbx_pack_stats {
	uint64_t files, dirs, symlinks, hardlinks, skipped, excluded;
	uint64_t data_bytes;    /* file contents (holes of sparse files not counted) */
	uint64_t archive_bytes; /* the stream, padding included */
	uint8_t sha256[SBX_SHA256_LEN];
};

/* Packs the tree; members are named relative to the folder ("a/b"), in name order within each
 * directory so the same tree gives the same bytes. Owners are numeric only (no user names);
 * modes keep set-id and sticky bits; mtimes keep nanoseconds (atime and ctime are left out).
 * Names are stored as bytes (pax hdrcharset=BINARY). A file or symlink with more than one name
 * is stored once and its other names as hard links to the first, as GNU tar stores them. A
 * file with holes (lseek SEEK_HOLE) is stored as a GNU sparse 1.0 member: only its data
 * regions travel. -1 with *e: SBX_ETRANSFER
 * naming the member for what the tree holds (an unsafe member without skip_unsafe, an
 * unreadable file, a file that changed type while read, an as_name entry that is missing),
 * SBX_EUNAVAILABLE when out_fd fails, SBX_EUSAGE for an as_name that is not a member name or
 * names that are not exactly one plain component with it, or exclude patterns beyond
 * shared/exclude.h's bounds. */
int sbx_pack(const struct sbx_pack_opts *o, struct sbx_pack_stats *st, struct sbx_err *e);

#endif
