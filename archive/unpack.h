/* Unpacking a tar/pax stream under a root directory fd: libarchive parses, shared/tree_put
 * places. The same engine runs in the agent (SBX_PUT_SANDBOX, as root in the sandbox) and in
 * libsbx (SBX_PUT_DATA / SBX_PUT_KEEP into a private staging folder). Streaming: nothing is
 * buffered beyond libarchive's block and one member's headers; every byte read from in_fd is hashed
 * (and copied to tee_fd when asked), including bytes after the archive's end marker, so the digest
 * is of the whole stream the sender sent. */
#ifndef SBX_ARCHIVE_UNPACK_H
#define SBX_ARCHIVE_UNPACK_H

#include <stdint.h>
#include <sys/types.h>

#include "digest.h"
#include "err.h"
#include "tree_put.h"

struct sbx_unpack_opts {
	int in_fd;   /* the archive stream, read to EOF (libsbx's downloads: a pipe the session
	                fills, read by a worker thread) */
	int root_fd; /* the directory members are placed under (kept open by the caller) */
	enum sbx_put_mode mode;
	int force_walk; /* tree_put's O_NOFOLLOW component walk even where openat2 works */
	int readable;   /* make_readable: a+r on everything, a+x on directories and on files
	                   that have any x bit (chmod -R a+rX) */
	int tee_fd;     /* -1, or an fd that receives a copy of every byte read (archive_copy) */
	uint64_t max_members; /* 0: no limit */
	const char *only; /* NULL, or the one member a file's archive holds: a regular file of this
	                     (normalized) name, exactly once; any other member is refused */
};

/* What one member may make libarchive read into memory before it is placed, checked on the
 * raw headers before libarchive parses them (it allocates as they say): the body of one
 * extension header (pax 'x'/'g', GNU 'L'/'K', Solaris 'A'), all of one member's extension
 * headers together, the entries of its sparse map (old GNU 'S' headers and their extension
 * blocks, pax GNU.sparse 0.0/0.1 records, SUN.holesdata, the 1.0 map at the start of the
 * data) and of its ACLs (SCHILY.acl.*, 'A': libarchive searches its list for each one it adds;
 * ACLs are not restored). Past a bound the archive is refused, naming the bound. */
#define SBX_UNPACK_EXT_MAX (512u * 1024)
#define SBX_UNPACK_EXT_TOTAL (1024u * 1024)
#define SBX_UNPACK_SPARSE_MAX 65536u
#define SBX_UNPACK_ACL_MAX 4096u

struct sbx_unpack_stats {
	uint64_t files, dirs, symlinks, hardlinks;
	uint64_t data_bytes;    /* file contents written (holes not counted) */
	uint64_t archive_bytes; /* bytes read from in_fd */
	uint64_t owners_kept;   /* sandbox mode, not root: members left with the agent's owner */
	uint8_t sha256[SBX_SHA256_LEN];
};

/* Unpacks the whole stream. Returns 0 when every member was placed and sbx_put_finish
 * succeeded; -1 with *e: SBX_ETRANSFER naming the member and the rule for a refused member,
 * a corrupt or truncated archive ("archive: ..."), or a failed write; SBX_EUNAVAILABLE when
 * reading in_fd or writing tee_fd fails. Nothing is rolled back: the caller stages into a
 * fresh folder and discards it on failure. */
int sbx_unpack(const struct sbx_unpack_opts *o, struct sbx_unpack_stats *st, struct sbx_err *e);

#endif
