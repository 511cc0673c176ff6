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

/* ---- sessions ----------------------------------------------------------------------------
 *
 * A session is one retained connection to an agent, started through an exec channel: an argv
 * template whose words may contain "{agent}" (replaced by the agent's path inside the
 * sandbox), e.g. {"podman", "exec", "-i", "SB", "{agent}", "serve", NULL}. The agent's stdout
 * carries frames only; its stderr is kept (the last 4 KiB) to explain a failure.
 *
 * Every call has a deadline (sbx_session_set_timeout; 30 s by default). A broken channel
 * (EOF, garbage, a tty's rewriting, a missed deadline) fails with SBX_EUNAVAILABLE and leaves
 * the session broken: later calls fail at once with the same error. A probe the agent could
 * not answer is SBX_EPROBE; a bad request SBX_EUSAGE; a peer that breaks the protocol
 * SBX_EPROTOCOL (the session is broken then too). */

struct sbx_session;

struct sbx_hello {
	int proto; /* the version both sides chose */
	int64_t proto_min, proto_max;
	char agent_version[32];
	char arch[16];
	int64_t uid, euid, gid, egid, pid;
	char kernel[128];
	int64_t caps; /* enum sbx_cap bits (shared/proto.h) */
	int cgroup;   /* 0 none found, 1 v1 or hybrid, 2 v2 */
	uint8_t sha256[32];
	int64_t max_payload, window;
};

/* Starts argv_template (NULL-terminated) with {agent} replaced by agent, and completes the
 * handshake within timeout_s. */
int sbx_session_open(struct sbx_session **out, char *const argv_template[], const char *agent,
                     double timeout_s, struct sbx_err *e);

/* Closes the channel (EOF to the agent), waits up to 2 s for the channel process, then kills
 * it. Returns nothing; safe on NULL. */
void sbx_session_close(struct sbx_session *s);

const struct sbx_hello *sbx_session_hello(const struct sbx_session *s);

/* The deadline of each later call, in seconds (> 0). */
void sbx_session_set_timeout(struct sbx_session *s, double seconds);

/* The channel process's stderr so far (at most its last 4 KiB), NUL-terminated. */
const char *sbx_session_stderr(const struct sbx_session *s);

/* One ping round trip; *rtt_s receives its duration. */
int sbx_ping(struct sbx_session *s, double *rtt_s, struct sbx_err *e);

enum sbx_kind { SBX_KIND_ABSENT = 0, SBX_KIND_FILE = 1, SBX_KIND_DIR = 2 };
const char *sbx_kind_name(enum sbx_kind k);

/* dir, file or absent (following symlinks, like `[ -d P ]` / `[ -f P ]`). */
int sbx_kind(struct sbx_session *s, const char *path, enum sbx_kind *out, struct sbx_err *e);

struct sbx_stat {
	char *path;
	int err;       /* errno of lstat; 0 when the fields below are valid */
	char *message; /* when err != 0 */
	char type[12]; /* file dir symlink fifo socket chardev blockdev */
	uint32_t mode; /* permission and set-id bits (st_mode & 07777) */
	int64_t uid, gid, size, mtime_ns;
	char *target; /* symlinks: where it points; else NULL */
};

/* lstat of every path, in one round trip per batch; *out is an array of n entries. */
int sbx_stat(struct sbx_session *s, const char *const *paths, size_t n, struct sbx_stat **out,
             struct sbx_err *e);
void sbx_stat_free(struct sbx_stat *st, size_t n);

/* Physical path with `cd -P` semantics; a missing tail is kept. *out is malloc'd. */
int sbx_resolve(struct sbx_session *s, const char *path, char **out, struct sbx_err *e);

/* Whether extracting into dir stays clear of keep_out (the reference's _lands_clear).
 * *physical and *warning (NULL when clear) are malloc'd; either pointer may be NULL. */
int sbx_lands_clear(struct sbx_session *s, const char *dir, const char *const *keep_out, size_t n,
                    int *clear, char **physical, char **warning, struct sbx_err *e);

/* ---- exec ---- */

enum sbx_outcome {
	SBX_OUT_EXITED = 0,
	SBX_OUT_SIGNALED = 1,
	SBX_OUT_TIMED_OUT = 2,
	SBX_OUT_NOT_STARTED = 3,
};
const char *sbx_outcome_name(enum sbx_outcome o);

/* Output sink: chan 1 stdout, 2 stderr; return 0, or -1 to cancel the command. */
typedef int (*sbx_output_fn)(void *ctx, int chan, const void *data, size_t len);

struct sbx_exec_opts {
	char *const *argv; /* NULL-terminated argv (no shell needed), or */
	const char *shell; /* a shell command line, run as /bin/sh -c */
	const char *cwd;
	char *const *env;       /* NULL-terminated "K=V" entries over the sandbox's environment */
	int env_clear;          /* start from an empty environment instead */
	const char *user;       /* name or uid; NULL: root */
	double timeout_s;       /* 0: none; the whole process group is killed when it passes */
	int linger_ms;          /* after exit, how long to wait for pipes held by background
	                           processes (default 200 when 0; -1 for none) */
	const void *stdin_data; /* bytes to feed on stdin, or */
	size_t stdin_len;
	int stdin_fd; /* a file descriptor to stream (-1: none; 0 is a valid fd, so set
	                 it explicitly); with neither, stdin is /dev/null */
	sbx_output_fn on_output;
	void *ctx;
};

/* Initialises opts with no stdin (stdin_fd = -1) and no output sink. */
void sbx_exec_opts_init(struct sbx_exec_opts *o);

struct sbx_exec_result {
	enum sbx_outcome outcome;
	int code;   /* exit code; 128+signal when signaled; 124 timed out; 126/127 not started */
	int signal; /* when SIGNALED */
	int err;    /* errno when NOT_STARTED */
	char message[256];
	int user_fallback; /* ran as the default user: the sandbox cannot switch users */
	int cancelled;     /* the host cancelled it (an output sink refused data) */
	char note[200];
	int64_t pid;
	double seconds;
};

/* Runs a command to completion. The call's deadline is the session timeout plus timeout_s. */
int sbx_exec(struct sbx_session *s, const struct sbx_exec_opts *o, struct sbx_exec_result *r,
             struct sbx_err *e);

/* The same in two steps, so other calls (a ping, a probe) can run while output streams:
 * sbx_exec_start returns a handle; any later call on the session keeps delivering its output;
 * sbx_exec_wait finishes it. opts must stay valid until then. */
struct sbx_exec;
int sbx_exec_start(struct sbx_session *s, const struct sbx_exec_opts *o, struct sbx_exec **out,
                   struct sbx_err *e);
int sbx_exec_wait(struct sbx_session *s, struct sbx_exec *x, struct sbx_exec_result *r,
                  struct sbx_err *e);

/* 1 once the command's result has arrived (sbx_exec_wait will not block). */
int sbx_exec_done(const struct sbx_exec *x);

#endif
