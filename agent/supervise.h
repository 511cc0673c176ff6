/* The harness supervisor: runs one activation of a harness in a run folder under a
 * deadline, watches stop/expire markers, terminates everything the run started, and writes a
 * signed receipt. `sbx-agent supervise` is its command line. */
#ifndef SBX_AGENT_SUPERVISE_H
#define SBX_AGENT_SUPERVISE_H

#include <stddef.h>
#include <stdint.h>

#include "cmd.h"
#include "err.h"

struct sbx_sup_opts {
	const char *dir;    /* run folder */
	struct sbx_cmd cmd; /* the harness; user NULL: the supervisor's; timeout from launch */
	int64_t grace_ms;   /* SIGTERM -> SIGKILL grace; 5000 when < 0 */
	int64_t log_max;    /* max bytes of output.log; 16 MiB when <= 0 */
	uint8_t key[64];    /* HMAC key, kept only in memory */
	size_t key_len;     /* 0: receipts are unsigned (no receipt.sig) */
	int foreground;     /* 1: print the receipt JSON on stdout at the end */
};

/* Runs one activation to completion in the calling process, which must have no other children
 * (every descendant of the caller counts as the run's and is killed at the end). It becomes a
 * child subreaper and non-dumpable; signals are blocked while it runs and restored after.
 * Returns the status to mirror: the harness's code, 128+signal when signaled, 124 when timed out
 * (deadline or expire) and the harness did not exit by itself first, 125 when the supervisor
 * failed, 126/127 when the harness could not start. */
int sbx_supervise(const struct sbx_sup_opts *o);

/* `sbx-agent supervise ...`; argv[0] is "supervise". */
int sbx_supervise_main(int argc, char **argv);

#endif
