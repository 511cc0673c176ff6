/* Reading a file's data through a mapping, hashed and copied in one pass (the pack's large
 * plain files, archive/pack.c): no kernel copy into a buffer before the hash reads it, and
 * the bytes hashed are the bytes copied even when the file changes meanwhile. A file that
 * shrinks under the mapping faults (SIGBUS) on the pages past its new end; that fault is
 * caught and reported as the file having ended, so the caller refuses the member as it does
 * when pread comes back short. The SIGBUS handler is the process's between begin and end:
 * for a process that does one mapped read at a time (the agent's packing child, the
 * `sbx-agent pack` command), not for a library's host program. */
#ifndef SBX_ARCHIVE_MAPREAD_H
#define SBX_ARCHIVE_MAPREAD_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "digest.h"

struct sbx_mapread {
	int on;   /* begin succeeded: the handler is installed */
	int fd;   /* the file the window maps; -1: none */
	off_t at; /* the window: [at, at + len) of the file at p */
	size_t len;
	unsigned char *p;
	struct sigaction old; /* the SIGBUS disposition before begin */
};

/* Installs the SIGBUS handler. 0, or -1 with errno (nothing is mapped then). */
int sbx_mapread_begin(struct sbx_mapread *m);

/* Copies n bytes of fd at offset off into dst, hashing them into sha (shared/digest.h,
 * sbx_sha256_update_copy). 0; or -1 with errno: ENODATA when the file ended before off + n
 * (sha then holds part of the bytes: the caller gives up the stream), or mmap's errno
 * (nothing done: the caller reads the bytes instead). */
int sbx_mapread_copy(struct sbx_mapread *m, int fd, off_t off, size_t n, struct sbx_sha256 *sha,
                     unsigned char *dst);

/* Drops the window (before fd is closed: a later file may get its number). */
void sbx_mapread_unmap(struct sbx_mapread *m);

/* Unmaps and puts the SIGBUS disposition back. */
void sbx_mapread_end(struct sbx_mapread *m);

#endif
