/* Injection in one exec: `RUN... sh -c SCRIPT` reports the sandbox's machine, and either starts
 * the agent already there (found by its name, .sbx-agent-<sha12>, in /tmp /dev/shm /var/tmp
 * /run /) or receives it on the same stdin, places it in the first of those folders where it
 * can be written and run, and starts it; the session then goes on over that same channel.
 * A short line dialog precedes the frames (docs/runners.md, "Injection"):
 *
 *   sandbox: sbx-machine:<uname -m>
 *   host:    <name> <size>
 *   sandbox: sbx-exec:<path>             (an agent was there: it runs now)
 *        or: sbx-send                    (host: the <size> bytes of the agent)
 *            sbx-exec:<path> | sbx-fail:<why>
 *
 * Needs sh, uname, head, wc, chmod, mv, rm inside; anything else (no shell, an old head) fails
 * the dialog and the caller falls back to its other ways (runner/inject.h). */
#ifndef SBX_BOOT_H
#define SBX_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"
#include "inject.h"

/* The dialog's engine, no I/O: fed the sandbox's lines one at a time. */
enum sbx_boot_state {
	SBX_BOOT_WANT_MACHINE, /* before sbx-machine: */
	SBX_BOOT_WANT_VERDICT, /* after our reply: sbx-exec: or sbx-send */
	SBX_BOOT_WANT_EXEC,    /* after the bytes: sbx-exec: or sbx-fail: */
	SBX_BOOT_DONE,
	SBX_BOOT_FAILED,
};

enum sbx_boot_act {
	SBX_BOOT_MORE,    /* read another line */
	SBX_BOOT_MACHINE, /* d->arch is set: the caller finds that agent and calls sbx_boot_reply */
	SBX_BOOT_SEND,    /* write the agent's bytes, then read another line */
	SBX_BOOT_RUNS,    /* d->path runs the agent: its HELLO comes next */
	SBX_BOOT_FAIL,    /* e says why */
};

struct sbx_boot_dialog {
	enum sbx_boot_state state;
	char arch[16];  /* sbx architecture of the sandbox's machine */
	char path[256]; /* where the agent runs, inside */
	int sent;       /* 1 when the bytes were asked for */
	int lines;      /* lines seen (a noisy channel gets a bound) */
};

void sbx_boot_init(struct sbx_boot_dialog *d);

/* One line of the sandbox's stdout (without its newline). Lines not starting with "sbx-" are
 * skipped (a channel's own chatter), at most 64 of them. */
enum sbx_boot_act sbx_boot_line(struct sbx_boot_dialog *d, const char *line, size_t len,
                                struct sbx_err *e);

/* The name an agent goes by in a sandbox, the one place it is made: ".sbx-agent-" and the
 * first 12 hex digits of its SHA-256 (injection looks for it, a container's init runs it). */
#define SBX_AGENT_NAME_LEN 24 /* with its NUL */
void sbx_agent_name(const uint8_t sha[SBX_SHA256_LEN], char out[SBX_AGENT_NAME_LEN]);

/* The host's reply after SBX_BOOT_MACHINE: "<name> <size>\n" into buf; its length, or 0 when
 * it does not fit. name is .sbx-agent-<the first 12 hex digits of sha>. */
size_t sbx_boot_reply(const uint8_t sha[SBX_SHA256_LEN], uint64_t size, char *buf, size_t cap);

/* Opens a session by the dialog through t->run (t->tmpl, t->copy, t->first and t->found are
 * not used). res->how is SBX_INJECT_REUSED when the agent was there, SBX_INJECT_STREAMED when
 * it was delivered; the session's HELLO has been checked against the local agent's SHA-256.
 * -1 with e set when the dialog or the session failed: the caller may try its other ways. */
int sbx_boot_open(const struct sbx_inject_target *t, const char *agent_dir, double timeout_s,
                  struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e);

#endif
