/* The channel API of libsbx, for runners (runner/): the few entry points a runner needs
 * beyond sbx.h to reach an agent its own way: a dialog with a shell before the agent speaks
 * (injection in one exec), a session over a socket it connected, the direct and resident
 * sockets, handing a new sandbox its secret, and waiting on an fd with a deadline. Not for
 * programs (they use sbx.h and sbx_runner.h); the folder graph is cli -> runner -> libsbx. */
#ifndef SBX_CHANNEL_H
#define SBX_CHANNEL_H

#include <stdint.h>
#include <sys/types.h>

#include "sbx.h"

/* A dialog on the channel before the agent speaks (runner/boot.c: the agent delivered and
 * started by a shell in the same exec). run gets the channel's non-blocking ends: to_fd (its
 * stdin) and from_fd (its stdout); it must read no byte past its own last line, and return 0
 * when the agent is about to speak, -1 with e set when not. */
struct sbx_boot {
	int (*run)(void *ctx, int to_fd, int from_fd, int64_t deadline_ns, struct sbx_err *e);
	void *ctx;
};

/* sbx_session_open with a dialog first (boot may be NULL). */
int sbx_session_open_boot(struct sbx_session **out, char *const argv_template[], const char *agent,
                          double timeout_s, const struct sbx_boot *boot, struct sbx_err *e);

/* Moves an open, quiet session (no stream in flight) from its exec channel to the agent's
 * direct socket: a unix socket inside the sandbox of which pid is a process, reached through
 * /proc/PID/root (host/direct.c). -1 with e set when it did not happen: the session goes on
 * over the exec channel, unless the agent went silent after the token (s->broken is then set:
 * close it). */
int sbx_session_direct(struct sbx_session *s, pid_t pid, struct sbx_err *e);

/* A session over fd, a connected socket (both directions; the session owns it, also on
 * failure): waits for the agent's HELLO. */
int sbx_session_open_fd(struct sbx_session **out, int fd, double timeout_s, struct sbx_err *e);

/* A session with the resident agent of the sandbox whose PID 1 is pid (as this machine sees
 * it): `sbx-agent init --serve` listening at one of SBX_SOCKET_DIRS (shared/proto.h),
 * reached through /proc/PID/root (host/direct.c). Taken only when the socket's listener is
 * pid itself. -1 with e set when there is none: the caller goes the exec way. */
int sbx_session_resident(struct sbx_session **out, pid_t pid, double timeout_s, struct sbx_err *e);

/* 1 once the session is broken (every later call fails with the first error). */
int sbx_session_broken(const struct sbx_session *s);

/* Gives the sandbox of pid (its init, as this machine sees it) its secret, straight to init's
 * keeper socket through /proc/PID/root (host/direct.c): for sandboxes sbx just made, before
 * anything runs in them. The listener must be pid itself. */
int sbx_keeper_setup_at(pid_t pid, const uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e);

/* Waits until fd is ready for events (poll) or deadline_ns passes (SBX_EUNAVAILABLE,
 * ETIMEDOUT, the message prefixed with what). */
int sbx_fd_wait(int fd, short events, int64_t deadline_ns, const char *what, struct sbx_err *e);

#endif
