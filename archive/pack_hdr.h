/* The headers of a plain member, written the way libarchive's pax writer (with
 * hdrcharset=BINARY) writes them, without libarchive: an 'x' header whose records are
 * "hdrcharset=BINARY" and, when the mtime has nanoseconds, "mtime=S.F", then the ustar header.
 * A pack spends a good part of its time per member inside libarchive's writer; for the members
 * most trees are made of, these bytes are the same and cost a fraction (test_pack_hdr checks
 * byte for byte against libarchive). Anything else (long or non-ASCII names or targets, big
 * ids or sizes, times out of range, hard links, sparse files) is left to libarchive. */
#ifndef SBX_ARCHIVE_PACK_HDR_H
#define SBX_ARCHIVE_PACK_HDR_H

#include <stddef.h>
#include <sys/stat.h>

/* Room for the 'x' header, its records padded, and the ustar header. */
#define SBX_PACK_HDR_MAX 1536

/* name: the member name (a folder's without its trailing '/'); target: a symlink's target or
 * NULL; st: its stat (type, permissions, ids, size, mtime). The bytes into out (at most
 * SBX_PACK_HDR_MAX), their count; 0 when the member is not plain (libarchive writes it). */
size_t sbx_pack_hdr(const char *name, const char *target, const struct stat *st,
                    unsigned char out[SBX_PACK_HDR_MAX]);

#endif
