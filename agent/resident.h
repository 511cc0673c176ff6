/* The resident agent (docs/runners.md, "The resident agent"): PID 1 of a container sbx made
 * (`sbx-agent init --serve`) listens on a unix socket at a fixed place in the container, so
 * that the host reaches an agent without an exec at all. A connection is taken only from a
 * process outside the container's pid namespace; each one becomes a `serve` process of its
 * own, a child of init. */
#ifndef SBX_AGENT_RESIDENT_H
#define SBX_AGENT_RESIDENT_H

#include <stddef.h>

/* The listening socket (non-blocking, close-on-exec) SBX_RESIDENT_SOCK in SBX_RESIDENT_DIR
 * at the first of SBX_SOCKET_DIRS (shared/proto.h: the host tries the same list) that takes
 * it, folder 0700 and owned by root; -1 with a message in err. A folder already there
 * (a restarted container) is kept when it is a real folder owned by root, its old socket
 * removed. */
int sbx_resident_listen(char *err, size_t cap);

/* A listening unix socket (non-blocking, close-on-exec) at DIR/dir/sock for the first DIR of
 * SBX_SOCKET_DIRS whose dir folder it can make or reuse (0700, owned by this euid, never a
 * symlink); an old socket there is removed. -1 with a message in err. */
int sbx_sock_listen(const char *dir, const char *sock, char *err, size_t cap);

/* A connection (blocking) to DIR/dir/sock at the first DIR of SBX_SOCKET_DIRS where that folder is
 * ours (owned by this euid, not writable by others); -1 with errno when none answers. */
int sbx_sock_connect(const char *dir, const char *sock);

/* One pending connection: the connected socket (blocking) when its peer is outside this pid
 * namespace; -1 when there was none or it was refused (closed unanswered). */
int sbx_resident_accept(int lfd);

#endif
