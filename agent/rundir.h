/* The run folder of a supervised run, reached one way by both of its users: the supervisor
 * (agent/supervise.c) and the serve loop's supervision requests (agent/supctl.c). A harness
 * often runs as the folder's owner and can put anything at any of its names (a FIFO, a socket,
 * a symlink, a huge file), so every file is opened relative to the folder's descriptor, never
 * through a symlink, without blocking, and read only when it is a regular file, within the
 * caller's bound. */
#ifndef SBX_AGENT_SESSDIR_H
#define SBX_AGENT_SESSDIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

/* Opens the folder (creating it 0700 first when create is set) and checks it: a real
 * directory (a symlink in its place is never followed), owned by the euid, not writable by
 * group or other. Returns the descriptor, or -1 with *e (SBX_EUSAGE). */
int sbx_rundir_open(const char *dir, int create, struct sbx_err *e);

/* 1 when something of any kind is at name (the markers: a `stop` of any kind still means
 * stop); 1 when it is a regular file, for sbx_rundir_is_file. */
int sbx_rundir_exists(int dfd, const char *name);
int sbx_rundir_is_file(int dfd, const char *name);

/* The size of name when it is a regular file; -1 when it is absent or anything else. */
int64_t sbx_rundir_size(int dfd, const char *name);

/* Creates name to write (0600, O_EXCL|O_NOFOLLOW, close-on-exec): what a crashed run left at
 * that name is removed first, never written through. The fd, or -1 with *e (SBX_ETRANSFER). */
int sbx_rundir_create(int dfd, const char *name, struct sbx_err *e);

/* name opened for reading when it is a regular file (O_NOFOLLOW, O_NONBLOCK, O_NOCTTY: no kind
 * of file blocks the open or becomes a terminal); its stat in *st. -1 with *e: SBX_EUSAGE when
 * absent, SBX_ETRANSFER ("NAME is a FIFO, not a regular file", or the errno) otherwise. */
int sbx_rundir_open_file(int dfd, const char *name, struct stat *st, struct sbx_err *e);

/* The first cap-1 bytes of the regular file name, NUL-terminated; their count, or -1 with *e
 * as sbx_rundir_open_file. A larger file is read only that far. */
ssize_t sbx_rundir_read(int dfd, const char *name, char *buf, size_t cap, struct sbx_err *e);

/* Writes name atomically: a temporary name unique to this process, created O_EXCL|O_NOFOLLOW,
 * written, fsynced, renamed over name (whatever was there, a FIFO included, is replaced). */
int sbx_rundir_write(int dfd, const char *name, const void *data, size_t len, struct sbx_err *e);

/* The activation number in `activation`: 1 when the file is absent, -1 with *e when it is
 * anything but a regular file holding a positive decimal number (and a newline). */
int sbx_rundir_activation(int dfd, int64_t *n, struct sbx_err *e);

/* 1 while the supervisor of the folder lives: it holds an exclusive flock on its regular file
 * supervisor.pid for its whole life (the kernel drops it when it dies, whatever killed it). No
 * pid or start-time comparison: under QEMU user mode a process's view of its own
 * /proc/PID/stat is emulated and its start time is not the one others see. */
int sbx_rundir_alive(int dfd);

/* begin_activation: moves the finished activation's files into DIR/activation-N/ and bumps
 * `activation`. -1 with *e (SBX_EUSAGE) when a run is still alive, no receipt exists yet, the
 * folder has a `closing` marker or its `activation` is not a number. */
int sbx_rundir_rearm(const char *dir, struct sbx_err *e);

#endif
