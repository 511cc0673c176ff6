/* libsbx: the host-side driver of sbx agents.
 *
 * Every function that can fail returns 0 on success and -1 on failure, filling the caller's
 * struct sbx_err (class, errno, message; see shared/err.h). libsbx never prints, never writes
 * to stdout and never exits. */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* libsbx's version, "MAJOR.MINOR.PATCH"; the same as the agent it was built with. */
const char *sbx_version(void);

/* ---- agents ---------------------------------------------------------------------------- */

/* The folder holding build/agent/<arch>/sbx-agent: $SBX_AGENT_DIR when set, else the
 * `agent` folder beside the folder of the running executable (build/host/sbx finds
 * build/agent). Writes it to out (cap bytes). */
int sbx_agent_dir(char *out, size_t cap, struct sbx_err *e);

/* Path of the agent binary for arch (an sbx architecture name) under dir; the file must
 * exist and be executable (SBX_EUSAGE otherwise). */
int sbx_agent_path(const char *dir, const char *arch, char *out, size_t cap, struct sbx_err *e);

/* ---- running a local program with a deadline -------------------------------------------- */

struct sbx_proc_result {
	enum { SBX_PROC_EXITED, SBX_PROC_SIGNALED, SBX_PROC_TIMED_OUT } how;
	int code;       /* exit code when EXITED, signal number when SIGNALED */
	char *output;   /* stdout and stderr interleaved, NUL-terminated; free with free() */
	size_t len;     /* bytes in output (at most the cap given, then truncated set) */
	int truncated;  /* 1 when output went past the cap and the rest was dropped */
	double seconds; /* wall time */
};

/* Runs argv (argv[0] looked up in PATH) with stdin from /dev/null, collecting its combined
 * output up to out_cap bytes; kills its process group with SIGKILL when timeout_s passes
 * (TIMED_OUT). Fails with SBX_EUNAVAILABLE when it cannot start (127/126 from exec are
 * reported as EXITED, like a shell would). */
int sbx_run_capture(char *const argv[], double timeout_s, size_t out_cap, struct sbx_proc_result *r,
                    struct sbx_err *e);

/* ---- agent self-test ------------------------------------------------------------------- */

/* Runs `sbx-agent selftest` for arch: directly when arch is the host's, through its
 * qemu-*-static otherwise (or always, with force_qemu). passed is 1 when it exited 0 and
 * printed "selftest: passed". */
struct sbx_selftest_result {
	int passed;
	int via_qemu;
	struct sbx_proc_result proc;
};

int sbx_agent_selftest(const char *agent_dir, const char *arch, int force_qemu,
                       struct sbx_selftest_result *r, struct sbx_err *e);

void sbx_proc_result_free(struct sbx_proc_result *r);

#endif
