/* Terminal sessions that live in the sandbox (docs/pty.md): a holder process per session,
 * forked twice from the serve loop so it outlives the connection (as the supervisor does). It
 * runs the program on a new pty (or on pipes, stdout and stderr apart), keeps a bounded window
 * of its output addressed by absolute offsets (shared/ring.h), its exit status, and one
 * client's claim at a time; it answers on a unix socket in its own folder, and when the program
 * ends it kills every process of the session (agent/killtree.h) as the supervisor does. */
#ifndef SBX_AGENT_PTYHOLD_H
#define SBX_AGENT_PTYHOLD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cmd.h"
#include "err.h"
#include "proto.h"

struct sbx_pty_spec {
	struct sbx_cmd cmd; /* argv (a shell string as sh -c); user NULL: root */
	int rows, cols;
	int pipe; /* 1: pipe mode */
	size_t retain;
};

/* Parses a PTY_SPAWN request (the command fields of EXEC, ROWS, COLS, PIPE, RETAIN); -1 with
 * *e (SBX_EUSAGE) when malformed. */
int sbx_pty_parse(const uint8_t *req, size_t len, struct sbx_pty_spec *sp, struct sbx_err *e);
void sbx_pty_spec_free(struct sbx_pty_spec *sp);

/* Starts the holder and the program under it: 0 with the session's id and the program's pid,
 * or -1 with *e (the program could not start: SBX_ETRANSFER with why). */
int sbx_pty_spawn(const struct sbx_pty_spec *sp, char id[SBX_PTY_ID_LEN + 1], pid_t *pid,
                  struct sbx_err *e);

/* The folder of the holders' folders (SBX_SANDBOX_DIRS/SBX_PTY_DIR), made (0700) when create;
 * 0, or -1 when none is usable. */
int sbx_pty_root(char *buf, size_t cap, int create);

/* An id is exactly SBX_PTY_ID_LEN lowercase hex digits (so it is safe as a folder name). */
int sbx_pty_id_ok(const char *id);

/* The holder's socket wire: [u32 length][message], both ways; frames from the holder on a
 * stream connection: [u8 kind][u32 length][bytes]. */
#define SBX_PTY_MSG_MAX (64u * 1024u)
#define SBX_PTY_CHUNK (64u * 1024u)
enum { SBX_PTY_FR_OUT = 1, SBX_PTY_FR_ERR = 2, SBX_PTY_FR_END = 16, SBX_PTY_FR_EVICT = 17 };
/* Reads exactly n bytes of the holder's socket fd (EINTR retried): 0, or -1 on its end or an
 * error. */
int sbx_pty_recv_all(int fd, uint8_t *p, size_t n);

#endif
