/* The agent's answers about terminal sessions, read as an attacker's bytes (docs/pty.md): a
 * session's status, an attach's replay offsets, a listing, a stream's end. Sans-I/O, so
 * fuzz/fuzz_pty.c drives them. Private to host/. */
#ifndef SBX_HOST_PTYMSG_H
#define SBX_HOST_PTYMSG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sbx.h"

/* The fields of one session's status (a STATUS result, an entry of LIST, the status part of
 * an ATTACH result): 0, or -1 with *e (SBX_EPROTOCOL) when an id is not 16 hex digits, an
 * offset is negative or past its head, a base is older than head minus the window, a code or
 * signal out of range. */
int sbx_ptymsg_info(const uint8_t *p, size_t len, struct sbx_pty_info *st, struct sbx_err *e);
/* An ATTACH result: the ticket, the replay's starts and losses, checked against since. */
int sbx_ptymsg_attach(const uint8_t *p, size_t len, int64_t since, int64_t since_err,
                      struct sbx_pty_attach_info *ai, struct sbx_err *e);
/* A LIST result: at most max sessions (malloc'd). */
int sbx_ptymsg_list(const uint8_t *p, size_t len, size_t max, struct sbx_pty_info **out, size_t *n,
                    struct sbx_err *e);
/* A STREAM result (its STATUS already 0): 1 the program ended (*code), 0 detached (cancelled),
 * -1 with *e: evicted (SBX_PTY_EVICTED) or malformed. */
int sbx_ptymsg_end(const uint8_t *p, size_t len, int *code, struct sbx_err *e);

#endif
