/* Write-behind for the file data of large members (archive/unpack.c): threads of its own do
 * the pwrite calls while the unpacking thread reads, hashes and parses the next bytes, so a
 * slow destination (tmpfs allocating fresh pages, a disk) overlaps with the stream instead of
 * adding to it. The data is copied into a ring of fixed slots, taken in turn by two writer
 * threads (one on a single CPU): writes queued between two drains may land in any order, so
 * they must not overlap (an unpacked member's blocks never do). Nothing about a member is
 * finished (mode, times, close) before sbx_wb_drain has said its data is all written. */
#ifndef SBX_ARCHIVE_WBEHIND_H
#define SBX_ARCHIVE_WBEHIND_H

#include <stddef.h>
#include <sys/types.h>

struct sbx_wb;

/* A writer with its thread; NULL when either cannot be had (the caller writes itself). */
struct sbx_wb *sbx_wb_new(void);

/* Queues n bytes for fd at offset at (copied: p may change on return); waits while the ring
 * is full. -1 with errno when an earlier write failed (nothing more is queued then). */
int sbx_wb_write(struct sbx_wb *w, int fd, off_t at, const void *p, size_t n);

/* Waits until everything queued is written. 0, or -1 with errno of the first failed write
 * since the last drain (the failure is then cleared). */
int sbx_wb_drain(struct sbx_wb *w);

/* All n bytes at offset at (EINTR and short writes retried): 0, or the errno of the failure
 * (EIO for a write of nothing). What the thread does, and the unpacker for small members. */
int sbx_pwrite_all(int fd, const void *buf, size_t n, off_t at);

/* Drains, stops the thread, frees (NULL is fine). */
void sbx_wb_free(struct sbx_wb *w);

#endif
