/* The kernel calls sbx makes that libc does not wrap everywhere (musl ships no openat2 struct,
 * older kernels lack close_range), each defined once here, and the one monotonic clock. The
 * agent, the host library and the runners all call these; none of them allocates, so they are
 * safe in a child between fork and exec. */
#ifndef SBX_SYS_H
#define SBX_SYS_H

#include <stdint.h>
#include <sys/types.h>

/* openat2's resolve flags (linux/openat2.h, which musl does not ship). */
#define SBX_RESOLVE_NO_MAGICLINKS 0x02
#define SBX_RESOLVE_NO_SYMLINKS 0x04
#define SBX_RESOLVE_BENEATH 0x08
#define SBX_RESOLVE_IN_ROOT 0x10

/* openat2(dfd, path, {flags, mode 0, resolve}): the descriptor, or -1 with errno; ENOSYS
 * before Linux 5.6, and ENOSYS or EPERM where a seccomp filter does not know the call. */
int sbx_openat2(int dfd, const char *path, uint64_t flags, uint64_t resolve);

/* pidfd_open(pid, 0): a close-on-exec descriptor for the process, or -1 with errno (ENOSYS
 * before Linux 5.3). */
int sbx_pidfd_open(pid_t pid);

/* pidfd_send_signal(fd, sig, NULL, 0): 0, or -1 with errno. */
int sbx_pidfd_signal(int fd, int sig);

/* renameat2 with RENAME_NOREPLACE or RENAME_EXCHANGE (the flags below): 0, or -1 with errno;
 * ENOSYS where the C library's headers do not know the call, EINVAL where the filesystem
 * does not take the flag. */
#define SBX_RENAME_NOREPLACE 1u
#define SBX_RENAME_EXCHANGE 2u
int sbx_renameat2(int odir, const char *oname, int ndir, const char *nname, unsigned flags);

/* getdents64(fd, buf, len): bytes of struct linux_dirent64 records (u64 inode, s64 offset,
 * u16 record length, u8 type, the name with its NUL), 0 at the end, -1 with errno. */
long sbx_getdents64(int fd, void *buf, size_t len);

/* Closes every descriptor from first up, or with cloexec set marks each close-on-exec (so
 * that an exec drops them while the caller still uses them until then). close_range where the
 * kernel has it (Linux 5.9; its CLOEXEC flag 5.11). The one fallback: each descriptor listed
 * in /proc/self/fd, or where /proc is missing every number below the soft RLIMIT_NOFILE (at
 * most 65536). Async-signal-safe: no allocation. */
void sbx_close_from(int first, int cloexec);

/* CLOCK_MONOTONIC in nanoseconds: every deadline and duration of the agent and the host. */
int64_t sbx_now_ns(void);

/* CLOCK_REALTIME in nanoseconds (receipts' timestamps). */
int64_t sbx_wall_ns(void);

#endif
