/* libsbx: the host-side driver of sbx agents.
 *
 * Every function that can fail returns 0 on success and -1 on failure, filling the caller's
 * struct sbx_err (class, errno, message; see shared/err.h). libsbx never prints, never writes
 * to stdout and never exits. The installed headers: this one; sbx_runner.h (creating, opening,
 * listing and removing sandboxes of every runner kind); json.h (the JSON reader and writer the
 * CLI uses); err.h, utf8.h (the terminal escape), hex.h and arch.h from shared/. */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* libsbx's version, "MAJOR.MINOR.PATCH"; the same as the agent it was built with. */
const char *sbx_version(void);

/* CLOCK_MONOTONIC in nanoseconds: the clock of every deadline libsbx keeps. */
int64_t sbx_now_ns(void);

/* The channels of a command's output (sbx_output_fn). */
#define SBX_STDOUT 1
#define SBX_STDERR 2

/* ---- agents ---------------------------------------------------------------------------- */

/* The folder holding build/agent/<arch>/sbx-agent: $SBX_AGENT_DIR when set, else the
 * `agent` folder beside the folder of the running executable (build/host/sbx finds
 * build/agent). Writes it to out (cap bytes). */
int sbx_agent_dir(char *out, size_t cap, struct sbx_err *e);

/* Path of the agent binary for arch (an sbx architecture name) under dir (NULL:
 * sbx_agent_dir()); the file must exist and be executable (SBX_EUSAGE otherwise). */
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
int sbx_proc_capture(char *const argv[], double timeout_s, size_t out_cap,
                     struct sbx_proc_result *r, struct sbx_err *e);
/* The same, run in the folder cwd (NULL: this process's). */
int sbx_proc_capture_in(char *const argv[], const char *cwd, double timeout_s, size_t out_cap,
                        struct sbx_proc_result *r, struct sbx_err *e);

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
	int fwd; /* 1: it speaks TCP forwarding (docs/forwarding.md) */
};

/* Starts argv_template (NULL-terminated) with {agent} replaced by agent, and completes the
 * handshake within timeout_s. */
int sbx_session_open(struct sbx_session **out, char *const argv_template[], const char *agent,
                     double timeout_s, struct sbx_err *e);

/* Closes the channel (EOF to the agent), waits up to 2 s for the channel process, then kills
 * it. Returns nothing; safe on NULL. */
void sbx_session_close(struct sbx_session *s);

const struct sbx_hello *sbx_session_hello(const struct sbx_session *s);
/* How the session's frames travel: "exec" (the channel command's stdin and stdout), "direct"
 * (the agent's direct unix socket, which the podman/docker runner moves a session to when the
 * engine runs on this machine; docs/protocol.md, "DIRECT") or "resident" (a socket of the
 * container's init, which is the agent in containers sbx made: no exec at all;
 * docs/runners.md, "The resident agent"). */
const char *sbx_session_channel(const struct sbx_session *s);

/* The deadline of each later call, in seconds (> 0). */
void sbx_session_set_timeout(struct sbx_session *s, double seconds);
double sbx_session_timeout(const struct sbx_session *s);

/* The channel process's stderr so far (at most its last 4 KiB), NUL-terminated. */
const char *sbx_session_stderr(const struct sbx_session *s);

/* Trust (docs/supervision.md, "Trust"). Each sandbox has a 32-byte secret that only the host and
 * the sandbox's keeper hold (the keeper: its init, a daemon started at first contact, or for
 * a sandbox that is this machine the session's agent itself). No key ever crosses the
 * channel: run requests carry a nonce and a MAC under the secret, and the receipt key is
 * derived from both on each side. A session is trusted once the keeper has proved it holds
 * the secret (or has taken it); supervision runs need a trusted session. */
#define SBX_SECRET_LEN 32
enum sbx_trust_how {
	SBX_TRUST_CHECK = 0,   /* the keeper holds secret already: prove it (AUTH) */
	SBX_TRUST_KEEPER = 1,  /* give secret to the sandbox's keeper, once and for good */
	SBX_TRUST_SESSION = 2, /* give it to this session's agent for the session's life (a
	                          sandbox that is this machine: local, qemu) */
};

/* The trust this session is to establish with secret; asked when first needed (the first run,
 * or sbx_session_trusted), so sessions that only probe or transfer never start a keeper. */
int sbx_session_trust(struct sbx_session *s, const uint8_t secret[SBX_SECRET_LEN],
                      enum sbx_trust_how how, struct sbx_err *e);

/* 0 when the session is trusted (asking now, and waiting within the session timeout, when it
 * was not asked yet); -1 with the reason otherwise (SBX_ETRANSFER when the sandbox's keeper is
 * missing or does not hold the secret; SBX_EUSAGE when no trust was asked for). */
int sbx_session_trusted(struct sbx_session *s, struct sbx_err *e);

/* The host's key store: a secret per sandbox identity (a runner spec such as "ns:t1",
 * "podman:c1", "ssh:h", or "via:" and the command line), one 0600 file each in the key folder:
 * $SBX_KEY_DIR, else $HOME/.cache/sbx/keys, else /tmp/sbx-keys-UID (made 0700 when missing;
 * its path into out). Load: 1 found, 0 none, -1 error. New: a random secret, stored before it
 * is handed out. Forget: absent is success. */
int sbx_keydir(char *out, size_t cap, struct sbx_err *e);
int sbx_secret_load(const char *identity, uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e);
int sbx_secret_store(const char *identity, const uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e);
int sbx_secret_new(const char *identity, uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e);
int sbx_secret_forget(const char *identity, struct sbx_err *e);

/* A run's receipt key kept for later processes (sbx receipt, sbx stop): the file for a channel
 * spec and a run folder in the key folder (named by a digest of both), and reading and
 * writing one (0600, a fresh file each run). */
int sbx_runkey_path(const char *channel, const char *run_dir, char *out, size_t cap,
                    struct sbx_err *e);
int sbx_runkey_load(const char *path, uint8_t key[32], struct sbx_err *e);
int sbx_runkey_save(const char *path, const uint8_t key[32], struct sbx_err *e);

/* The trust a session opened for spec (its identity in the key store) starts with: without a
 * boundary (local, qemu: the sandbox is this machine) a fresh secret for this session only;
 * with one, AUTH with the stored secret, or, when none is stored, a new one given to the
 * sandbox's keeper (trust on first use, at the first run) and stored once the keeper took it.
 * sbx_open (sbx_runner.h) calls it with its runner's boundary. */
int sbx_session_trust_for(struct sbx_session *s, const char *spec, int boundary, struct sbx_err *e);

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

/* ---- operations that do not block ------------------------------------------------------
 *
 * Every call above waits for its answer. Its _async form starts the same work and returns at
 * once with an operation; many may be in flight on one session (each on its own stream of the
 * one connection), and many sessions in one thread. The program waits on the session's fds
 * (sbx_session_fds: poll them, or register them with its event loop) and calls
 * sbx_session_step when one is ready or the deadline came; the step does what is ready without
 * blocking, and operations that ended join the session's completion queue
 * (sbx_session_next_done). A blocking call on the session also moves every operation in
 * flight. An operation's result is read with its _result function once it is done, and it is
 * freed with sbx_op_free (freeing one still running cancels it). A broken session ends every
 * operation with its error. Options and buffers given to an _async call must outlive it,
 * unless it says otherwise (the transfers read theirs at the start only). */
struct sbx_op;
struct pollfd;

/* The fds the session waits on (at most max written, with the events wanted) and the time
 * (sbx_now_ns clock, CLOCK_MONOTONIC in ns) by which it must be stepped even if none is ready
 * (INT64_MAX: none). Their count. */
int sbx_session_fds(struct sbx_session *s, struct pollfd *fds, int max, int64_t *deadline_ns);
/* Does what is ready, never blocks. 0, or -1 once the session is broken. */
int sbx_session_step(struct sbx_session *s);
/* The next operation that ended (in the order they ended), or NULL. */
struct sbx_op *sbx_session_next_done(struct sbx_session *s);
/* How many operations are in flight. */
size_t sbx_session_ops(const struct sbx_session *s);
/* 1 once op ended. */
int sbx_op_done(const struct sbx_op *op);
/* Waits (stepping the session) until op ended: its status. */
int sbx_op_wait(struct sbx_op *op, struct sbx_err *e);
/* 0 when op succeeded; -1 with *e when it failed (or is still running: SBX_EUSAGE). */
int sbx_op_status(const struct sbx_op *op, struct sbx_err *e);
/* Ends op now (SBX_EUNAVAILABLE, ECANCELED): a job in the sandbox is cancelled, a late answer
 * dropped. */
void sbx_op_cancel(struct sbx_op *op);
/* op ends (SBX_EUNAVAILABLE, ETIMEDOUT) unless done within seconds from now (0: no deadline). */
void sbx_op_set_deadline(struct sbx_op *op, double seconds);
/* A value of the caller's kept with op (to find its owner when it comes out of the queue). */
void sbx_op_set_tag(struct sbx_op *op, uintptr_t tag);
uintptr_t sbx_op_tag(const struct sbx_op *op);
/* What op is: "ping", "request", "job", ... */
const char *sbx_op_name(const struct sbx_op *op);
void sbx_op_free(struct sbx_op *op);

/* Many sessions in one thread: a loop over an epoll set of their fds. A session is in one loop
 * at a time (a second sbx_loop_add is SBX_EUSAGE, EBUSY); sbx_loop_remove takes it out, and
 * closing a session takes it out of its loop. sbx_loop_run_once waits until something is ready
 * on any of them or a deadline came (at most timeout_ms; -1: no limit), steps those that are
 * due, and returns how many it stepped (-1 when the wait failed); its cost follows what is
 * ready, not how many sessions there are. Ended operations of all its sessions come out of
 * sbx_loop_next_done, round robin over the sessions that have one. */
struct sbx_loop;
struct sbx_loop *sbx_loop_new(struct sbx_err *e);
int sbx_loop_add(struct sbx_loop *l, struct sbx_session *s, struct sbx_err *e);
void sbx_loop_remove(struct sbx_loop *l, struct sbx_session *s);
size_t sbx_loop_sessions(const struct sbx_loop *l);
int sbx_loop_run_once(struct sbx_loop *l, int timeout_ms);
struct sbx_op *sbx_loop_next_done(struct sbx_loop *l);
void sbx_loop_free(struct sbx_loop *l);

struct sbx_op *sbx_ping_async(struct sbx_session *s, struct sbx_err *e);
int sbx_ping_result(const struct sbx_op *op, double *rtt_s, struct sbx_err *e);
struct sbx_op *sbx_kind_async(struct sbx_session *s, const char *path, struct sbx_err *e);
int sbx_kind_result(const struct sbx_op *op, enum sbx_kind *out, struct sbx_err *e);
/* Its output goes to o->on_output from within sbx_session_step (or a blocking call). */
struct sbx_op *sbx_exec_async(struct sbx_session *s, const struct sbx_exec_opts *o,
                              struct sbx_err *e);
int sbx_exec_result(const struct sbx_op *op, struct sbx_exec_result *r, struct sbx_err *e);

/* ---- transfers ----------------------------------------------------------------------------
 *
 * File trees move as pax archives streamed over the session: the agent packs and unpacks in
 * the sandbox (placement by directory fds, never through a symlink, exact modes and numeric
 * owners as root), libsbx packs local folders and unpacks downloads into a fresh private
 * staging folder that is moved into place only when complete. Both sides hash the stream
 * (SHA-256) and the receiver compares before anything is committed. Errors: a refused member
 * or a failure inside the sandbox is SBX_ETRANSFER naming the member and the rule; a lost
 * channel is SBX_EUNAVAILABLE; a bad local path SBX_EUSAGE. See docs/transfers.md. */

enum sbx_links {
	SBX_LINKS_DATA = 0, /* host copy: links leaving the root refused, set-id stripped */
	SBX_LINKS_KEEP = 1, /* host copy: symlinks kept as symlinks wherever they point */
};

/* Bytes moved so far (of the archive stream); return 0, or -1 to cancel. */
typedef int (*sbx_progress_fn)(void *ctx, uint64_t bytes);

struct sbx_xfer_opts {
	double timeout_s;  /* the whole transfer; 0: 600 s */
	int make_readable; /* upload_dir: a+rX on the uploaded tree */
	/* downloads */
	const char *const *names;   /* NULL-terminated top-level entries, or NULL: everything */
	int skip_unsafe;            /* skip FIFOs, devices, sockets instead of failing */
	enum sbx_links links;       /* how the host copy treats symlinks */
	const char *const *exclude; /* GNU tar default --exclude patterns (NULL-terminated) */
	const char *archive_copy;   /* keep the agent's archive here, only when accepted */
	int force_walk;             /* tests: the O_NOFOLLOW walk on both sides */
	sbx_progress_fn progress;
	void *ctx;
};
void sbx_xfer_opts_init(struct sbx_xfer_opts *o);

struct sbx_xfer_stats {
	uint64_t files, dirs, links, data_bytes, archive_bytes;
	uint8_t sha256[32]; /* of the archive stream, equal on both sides */
	double seconds;
	char note[512]; /* what the sandbox could not do (a non-root agent), or "" */
};

/* Contents of the local folder source into target in the sandbox (created when missing;
 * merged like tar into an existing folder). Modes travel; make_readable adds a+rX. */
int sbx_upload_dir(struct sbx_session *s, const char *source, const char *target,
                   const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e);

/* Contents of the sandbox folder source into the local folder target (created when missing,
 * merged when it exists), with names / skip_unsafe / links / exclude / archive_copy. A local
 * folder the commit writes into that other users may write (group/other-writable without the
 * sticky bit, or owned by another user who is not root) is refused (SBX_EUSAGE). */
int sbx_download_dir(struct sbx_session *s, const char *source, const char *target,
                     const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e);

/* A file or folder out of the sandbox: *kind says what source was (SBX_KIND_ABSENT: nothing
 * was written). A file lands at target with its mode bits (set-id stripped); its archive must
 * hold that one regular file, named as source's last name, or it is refused (SBX_ETRANSFER).
 * A folder as sbx_download_dir. exclude applies to folders only. */
int sbx_download_path(struct sbx_session *s, const char *source, const char *target,
                      const struct sbx_xfer_opts *o, enum sbx_kind *kind, struct sbx_xfer_stats *st,
                      struct sbx_err *e);

/* Restores a local file or folder at target: a folder replaces what is at target (atomically:
 * staged beside it, then exchanged) and is made world-writable; a file lands in its parent,
 * created world-writable when missing, an existing parent opened to all where the sandbox
 * allows (keeping a sticky bit), else only required to be writable. */
int sbx_upload_path(struct sbx_session *s, const char *source, const char *target,
                    const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e);

/* The transfers as operations that do not block. o and every string given (source, target,
 * archive, o->names, o->exclude, o->archive_copy, keep_out) are read at the start only: they
 * need not outlive the call. o->progress and o->timeout_s are the blocking forms': give the
 * op a deadline (sbx_op_set_deadline) instead. Cancelling one (sbx_op_cancel, or sbx_op_free
 * while it runs) sends CANCEL: an upload's agent drops its staging (the old tree stays); a
 * download stops its unpacking, removes its staging folder and the partial archive_copy, and
 * leaves the local target as it was.
 *
 * Uploads: the packing thread starts at once, the archive goes as the channel takes it.
 * Downloads: the archive is unpacked by a worker thread reading a pipe the session's step
 * fills; the agent's credit goes back only as bytes enter the pipe, so at most one credit
 * window (4 MiB) is held in memory; the commit (staging moved into place, archive_copy named)
 * runs in the session's step once the agent's answer and the unpacker's end are both in, with
 * every rule of the blocking forms. A refusal by the unpacker cancels the job and the op fails
 * with the unpacker's error (naming the member). download_path probes the kind first (its
 * first step); upload_archive's lands_clear probe is its first step, and the upload starts on
 * its answer. Their results: sbx_upload_result, sbx_download_result (kind: what
 * download_path found; a download_dir of an absent folder fails there as sbx_download_dir
 * does), sbx_upload_archive_result (landed and *warning, malloc'd, as sbx_upload_archive). */
struct sbx_op *sbx_upload_dir_async(struct sbx_session *s, const char *source, const char *target,
                                    const struct sbx_xfer_opts *o, struct sbx_err *e);
struct sbx_op *sbx_upload_path_async(struct sbx_session *s, const char *source, const char *target,
                                     const struct sbx_xfer_opts *o, struct sbx_err *e);
int sbx_upload_result(const struct sbx_op *op, struct sbx_xfer_stats *st, struct sbx_err *e);
struct sbx_op *sbx_download_dir_async(struct sbx_session *s, const char *source, const char *target,
                                      const struct sbx_xfer_opts *o, struct sbx_err *e);
struct sbx_op *sbx_download_path_async(struct sbx_session *s, const char *source,
                                       const char *target, const struct sbx_xfer_opts *o,
                                       struct sbx_err *e);
int sbx_download_result(const struct sbx_op *op, enum sbx_kind *kind /* may be NULL */,
                        struct sbx_xfer_stats *st, struct sbx_err *e);
struct sbx_op *sbx_upload_archive_async(struct sbx_session *s, const char *archive,
                                        enum sbx_kind kind, const char *target,
                                        const char *const *keep_out, size_t n_keep_out,
                                        const struct sbx_xfer_opts *o, struct sbx_err *e);
int sbx_upload_archive_result(const struct sbx_op *op, int *landed,
                              char **warning /* malloc'd, may be NULL */, struct sbx_xfer_stats *st,
                              struct sbx_err *e);

/* Replays a download's archive_copy byte for byte at target (kind: what download_path said;
 * a file's archive must hold only the one regular file named as target's last name).
 * The folder it would extract into (target, or a file's parent) is checked with
 * sbx_lands_clear against keep_out first: when diverted into, above or at a keep_out folder,
 * nothing is touched, *landed is 0 and *warning (malloc'd, may be NULL) says why. */
int sbx_upload_archive(struct sbx_session *s, const char *archive, enum sbx_kind kind,
                       const char *target, const char *const *keep_out, size_t n_keep_out,
                       const struct sbx_xfer_opts *o, int *landed, char **warning,
                       struct sbx_xfer_stats *st, struct sbx_err *e);

/* ---- harness supervision ------------------------------------------------------------------
 *
 * A supervisor in the sandbox owns one harness run in a run folder (root-owned 0700): it
 * launches the harness in its own session and process group as its subreaper, keeps the
 * deadline even when this connection goes away, and on harness exit, deadline, expire, stop or
 * a signal terminates every process of the run and writes a receipt (JSON, one line) signed
 * with HMAC-SHA256 under a key only it and the host hold. See docs/supervision.md. */

struct sbx_run_opts {
	const char *run_dir; /* absolute run folder in the sandbox */
	char *const *argv;   /* the harness */
	char *const *env;    /* "K=V" over the inherited environment */
	int env_clear;
	const char *cwd;
	const char *user; /* name or uid; NULL: the agent's user */
	double timeout_s; /* deadline from launch; 0 none */
	double grace_s;   /* SIGTERM -> SIGKILL; < 0: 5 s */
	int64_t log_max;  /* bytes kept of the combined output; 0: 16 MiB */
};
void sbx_run_opts_init(struct sbx_run_opts *o);

#define SBX_RUN_KEY_LEN 32

/* Launches the supervisor through the sandbox's keeper; needs a trusted session
 * (sbx_session_trust). *pid (may be NULL) receives the supervisor's pid, key the run's receipt
 * key (derived from the secret and a fresh nonce on both sides; it never crossed the
 * channel): keep it to verify the receipt. */
int sbx_run_start(struct sbx_session *s, const struct sbx_run_opts *o, int64_t *pid,
                  uint8_t key[SBX_RUN_KEY_LEN], struct sbx_err *e);

/* Cancellation (graded as such). Always accepted; the supervisor acts within milliseconds. */
int sbx_run_stop(struct sbx_session *s, const char *run_dir, struct sbx_err *e);

/* Ends the run as at its time limit (graded as timeout); before launch the harness never
 * starts (expired_before_launch). *placed (may be NULL) is 0 when the run had already
 * finished or was already expired, like the reference's expire returning False. */
int sbx_run_expire(struct sbx_session *s, const char *run_dir, const char *reason, int *placed,
                   struct sbx_err *e);

struct sbx_run_status {
	char state[16]; /* none launching running terminating killing done */
	int alive;      /* the supervisor process is alive */
	int has_receipt;
	int64_t activation;
	int64_t log_size;
};
int sbx_run_status(struct sbx_session *s, const char *run_dir, struct sbx_run_status *st,
                   struct sbx_err *e);

/* Up to max bytes of "output.log", "receipt.json" or "receipt.sig" from offset; *data is
 * malloc'd (NUL-terminated), *size the file's size now. */
int sbx_run_read(struct sbx_session *s, const char *run_dir, const char *name, int64_t offset,
                 size_t max, char **data, size_t *len, int64_t *size, struct sbx_err *e);

struct sbx_receipt {
	char *json; /* the receipt's exact bytes (one JSON line) */
	size_t len;
	int verified; /* the signature matches under the key given */
	/* parsed fields */
	char trigger[16];
	int status, timed_out, cancelled, expired_before_launch, launched;
	int termination_witnessed;
	int exit_code, exit_signal; /* -1 when not applicable */
	int64_t kill_rounds, activation, oom_kills;
};
void sbx_receipt_free(struct sbx_receipt *r);

/* Fetches the receipt now and verifies it with key (SBX_EUSAGE when there is none yet). */
int sbx_run_receipt(struct sbx_session *s, const char *run_dir, const uint8_t *key, size_t key_len,
                    struct sbx_receipt *r, struct sbx_err *e);

/* Waits until the receipt exists and the supervisor has gone (at most timeout_s; <= 0: no
 * limit but the session's keepalive), then fetches and verifies it. */
int sbx_run_wait(struct sbx_session *s, const char *run_dir, const uint8_t *key, size_t key_len,
                 double timeout_s, struct sbx_receipt *r, struct sbx_err *e);

/* begin_activation: rearm a finished session for a new run in the same folder. */
int sbx_run_rearm(struct sbx_session *s, const char *run_dir, struct sbx_err *e);

/* Marks the session closing: no later activation is accepted. */
int sbx_run_close(struct sbx_session *s, const char *run_dir, struct sbx_err *e);

/* The supervision calls that do not block (see "operations that do not block"): started, then
 * their result read once done. A run's start asks the keeper first when trust is not decided
 * yet (no round trip later). */
struct sbx_op *sbx_run_start_async(struct sbx_session *s, const struct sbx_run_opts *o,
                                   struct sbx_err *e);
int sbx_run_start_result(const struct sbx_op *op, int64_t *pid, uint8_t key[SBX_RUN_KEY_LEN],
                         struct sbx_err *e);
/* Their result: sbx_op_status. */
struct sbx_op *sbx_run_rearm_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e);
struct sbx_op *sbx_run_close_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e);
struct sbx_op *sbx_run_stop_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e);
struct sbx_op *sbx_run_expire_async(struct sbx_session *s, const char *run_dir, const char *reason,
                                    struct sbx_err *e);
int sbx_run_expire_result(const struct sbx_op *op, int *placed, struct sbx_err *e);
struct sbx_op *sbx_run_status_async(struct sbx_session *s, const char *run_dir, struct sbx_err *e);
int sbx_run_status_result(const struct sbx_op *op, struct sbx_run_status *st, struct sbx_err *e);
struct sbx_op *sbx_run_read_async(struct sbx_session *s, const char *run_dir, const char *name,
                                  int64_t offset, size_t max, struct sbx_err *e);
int sbx_run_read_result(const struct sbx_op *op, char **data, size_t *len, int64_t *size,
                        struct sbx_err *e);

/* Parses and verifies receipt bytes (exported for tests and file-only providers). */
int sbx_receipt_parse(const char *json, size_t len, const char *sig_hex, const uint8_t *key,
                      size_t key_len, struct sbx_receipt *r, struct sbx_err *e);

/* ---- the reference's SandboxSession, in C --------------------------------------------------
 *
 * One harness session over a retained connection: execute (stage, run under supervision,
 * confirm termination, collect), stop_harness, expire, read_output_log, begin_activation and
 * close, with the reference's rules: artifacts are collected only after termination is
 * witnessed (or nothing launched), even when execution failed; close is idempotent and
 * retryable and each of its phases is bounded; a closing session accepts no activation. */

struct sbx_harness;

/* Fills o (argv, env, cwd, user, timeout, ...) for the activation; o->session and the key
 * are set by sbx_harness. Return 0, or -1 with *e to abandon the launch. */
typedef int (*sbx_prepare_fn)(void *ctx, struct sbx_run_opts *o, struct sbx_err *e);
/* Copies artifacts out (e.g. with transfers); called only after cleanup is confirmed. */
typedef int (*sbx_collect_fn)(void *ctx, struct sbx_harness *hs, struct sbx_err *e);

/* A harness session on folder session_dir; a fresh random receipt key is made for it. */
int sbx_harness_open(struct sbx_harness **out, struct sbx_session *s, const char *session_dir,
                     struct sbx_err *e);
void sbx_harness_free(struct sbx_harness *hs);

/* Runs one activation: prepare, launch, wait for the receipt (timeout_s: the harness's own
 * deadline, enforced by the supervisor; the wait adds the grace and close_timeout_s), then
 * collect. Returns 0 when the activation ran to a verified receipt (the harness's status is in
 * sbx_harness_receipt); -1 with *e otherwise — artifacts are still collected when termination was
 * confirmed, and a collect failure is kept apart (sbx_harness_capture_error). */
int sbx_harness_execute(struct sbx_harness *hs, sbx_prepare_fn prepare, sbx_collect_fn collect,
                        void *ctx, double timeout_s, double close_timeout_s, struct sbx_err *e);

/* Cancellation; confirms termination within timeout_s. */
int sbx_harness_stop(struct sbx_harness *hs, double timeout_s, struct sbx_err *e);

/* As at its time limit (graded as timeout). *accepted is 0 when the activation already
 * finished, the session is closing, or expiry was already requested. Before launch it keeps
 * the harness from starting (expired_before_launch). */
int sbx_harness_expire(struct sbx_harness *hs, double timeout_s, const char *reason, int *accepted,
                       struct sbx_err *e);

/* The combined supervisor/harness log as it is when the call starts (malloc'd,
 * NUL-terminated); a log larger than SBX_HS_LOG_MAX is refused (read it by offsets with
 * sbx_run_read). */
#define SBX_HS_LOG_MAX (64 << 20)
int sbx_harness_read_output_log(struct sbx_harness *hs, char **text, size_t *len,
                                struct sbx_err *e);

/* Rearms a finished activation with fresh supervisor files in the same folder. */
int sbx_harness_begin_activation(struct sbx_harness *hs, double timeout_s, struct sbx_err *e);

/* Stops what runs (bounded), fences later activations, releases. Idempotent; after a
 * failure it may be called again. */
int sbx_harness_close(struct sbx_harness *hs, double timeout_s, struct sbx_err *e);

struct sbx_harness_state {
	int launch_started, expired, expired_before_launch, cleanup_confirmed;
	int closing, closed, capture_attempted, capture_failed;
};
void sbx_harness_state(const struct sbx_harness *hs, struct sbx_harness_state *st);
/* The last verified receipt, or NULL. */
const struct sbx_receipt *sbx_harness_receipt(const struct sbx_harness *hs);
const struct sbx_err *sbx_harness_capture_error(const struct sbx_harness *hs);

/* ---- shell_assignments ------------------------------------------------------------------ */

/* One value for sbx_shell_assignments: a scalar string, an array of words, or a map
 * (alternating keys and values) that becomes an array of KEY=VALUE words. */
struct sbx_shval {
	const char *name; /* a shell identifier */
	enum { SBX_SHVAL_SCALAR, SBX_SHVAL_ARRAY, SBX_SHVAL_MAP } kind;
	const char *scalar;
	const char *const *items; /* NULL-terminated */
};

/* Bash source assigning each value, every word single-quoted, for sandbox runners that cannot
 * parse JSON. malloc'd; NULL with *e for a bad name or an odd map. */
char *sbx_shell_assignments(const struct sbx_shval *v, size_t n, struct sbx_err *e);

/* ---- TCP forwarding over the session (docs/forwarding.md) ---------------------------------
 *
 * One operation carries any number of forwards, both ways, until it is cancelled (sbx_op_cancel,
 * then it ends with SBX_EUNAVAILABLE ECANCELED) or the session breaks; it never ends on its
 * own while it works. `out` forwards ("PORT" or "PORT:HOST:HPORT"): the agent listens on
 * 127.0.0.1:PORT inside, each connection reaches HOST:HPORT (a bare PORT: target:PORT) from the
 * host. `in` forwards ("LPORT:ADDR:PORT", IPv6 in brackets): the host listens on
 * 127.0.0.1:LPORT (0 picks a free port, bound before sbx_forward_async returns), each connection
 * reaches ADDR:PORT as seen inside. ready_file (out forwards only) is created inside once every
 * inside listener is up. A listener that cannot be bound, inside or out, ends the op with the
 * error. Options are read at the start only. */
struct sbx_forward_opts {
	const char *const *out;
	size_t n_out;
	const char *const *in;
	size_t n_in;
	const char *target;     /* HOST of a bare out PORT; NULL: 127.0.0.1 */
	const char *ready_file; /* NULL: none */
	int max_conn;           /* open connections per forward; 0: SBX_FWD_MAX_CONN (1024) */
	/* One line per connection event (opened; ended with bytes each way; reset and why;
	 * refused past max_conn), and the line "ready" once every listener is up; called from
	 * the step; what the sandbox sent is shown escaped. NULL: none. */
	void (*on_event)(void *ctx, const char *line);
	void *ctx;
};
struct sbx_op *sbx_forward_async(struct sbx_session *s, const struct sbx_forward_opts *o,
                                 struct sbx_err *e);
/* 1 once every listener is up (inside ones answered, ready_file made); 0 before. */
int sbx_forward_ready(const struct sbx_op *op);
/* The host port of in forward i (the one bound when LPORT was 0), or -1. */
int sbx_forward_port(const struct sbx_op *op, size_t i);
/* Forward i (the out ones first, then the in ones, as given) as a line: "out PORT ->
 * HOST:HPORT" or "in 127.0.0.1:LPORT -> ADDR:PORT"; -1 past the last. */
int sbx_forward_describe(const struct sbx_op *op, size_t i, char *buf, size_t cap);
/* Connections open now, and in all since the start. */
void sbx_forward_counts(const struct sbx_op *op, size_t *open, uint64_t *total);

/* ---- terminal sessions that live in the sandbox (docs/pty.md) --------------------------
 *
 * A session runs one program on a new pty (or on pipes: stdout and stderr apart) under a
 * holder process in the sandbox that outlives the connection. Its output is retained in a
 * window (1 MiB by default) addressed by absolute byte offsets; one client at a time holds it
 * (attach, with takeover evicting the holder, whose reads then fail with SBX_PTY_EVICTED as
 * errnum); when the program ends every process of the session is killed. Every answer of the
 * agent is checked (ids, offsets, codes, counts) before it is believed. */
#define SBX_PTY_ID_MAX 17   /* 16 hex digits and a NUL */
#define SBX_PTY_EVICTED 103 /* ECONNABORTED: another client took the session over */

struct sbx_pty_spec {
	const char *command; /* runs under /bin/sh -c; or */
	char *const *argv;   /* an argv (PATH search); both NULL: /bin/sh itself */
	char *const *env;    /* "K=V" over the agent's environment */
	int env_clear;
	const char *cwd;
	const char *user; /* name or uid; NULL: root */
	int rows, cols;   /* the terminal's size (24x80 when 0) */
	int pipe;         /* 1: pipe mode, no terminal */
	size_t retain;    /* retained bytes per channel (0: 1 MiB; 4 KiB..64 MiB) */
};
void sbx_pty_spec_init(struct sbx_pty_spec *sp);

struct sbx_pty_info {
	char id[SBX_PTY_ID_MAX];
	int pipe;
	int64_t pid, retain;
	int64_t head, base;         /* stdout (the terminal): bytes ever written, oldest held */
	int64_t head_err, base_err; /* stderr (pipe mode) */
	int held;                   /* a client holds it */
	int exited, code, signal;   /* the program's end: code (128+signal when signal) */
};

/* What an attach found: where the replay of each channel starts and how many of the bytes
 * asked for (from `since`) had already left the window. */
struct sbx_pty_attach_info {
	int64_t start, lost, start_err, lost_err;
	struct sbx_pty_info st;
	uint8_t ticket[16];
};

struct sbx_op *sbx_pty_spawn_async(struct sbx_session *s, const struct sbx_pty_spec *sp,
                                   struct sbx_err *e);
int sbx_pty_spawn_result(const struct sbx_op *op, char id[SBX_PTY_ID_MAX], struct sbx_err *e);
int sbx_pty_spawn(struct sbx_session *s, const struct sbx_pty_spec *sp, char id[SBX_PTY_ID_MAX],
                  struct sbx_err *e);

struct sbx_op *sbx_pty_status_async(struct sbx_session *s, const char *id, struct sbx_err *e);
int sbx_pty_status_result(const struct sbx_op *op, struct sbx_pty_info *st, struct sbx_err *e);
int sbx_pty_status(struct sbx_session *s, const char *id, struct sbx_pty_info *st,
                   struct sbx_err *e);

/* The terminal's new size (the program gets SIGWINCH); a named signal ("TERM", "SIGINT")
 * to the session's process group; the session ended (every process killed, the holder
 * gone). Each async form's result is sbx_pty_op_result (the agent's answer judged). */
struct sbx_op *sbx_pty_resize_async(struct sbx_session *s, const char *id, int rows, int cols,
                                    struct sbx_err *e);
int sbx_pty_resize(struct sbx_session *s, const char *id, int rows, int cols, struct sbx_err *e);
struct sbx_op *sbx_pty_signal_async(struct sbx_session *s, const char *id, const char *name,
                                    struct sbx_err *e);
int sbx_pty_signal(struct sbx_session *s, const char *id, const char *name, struct sbx_err *e);
struct sbx_op *sbx_pty_close_async(struct sbx_session *s, const char *id, struct sbx_err *e);
int sbx_pty_op_result(const struct sbx_op *op, struct sbx_err *e);
int sbx_pty_close(struct sbx_session *s, const char *id, struct sbx_err *e);

/* Every session of the sandbox (*out malloc'd, free() it). */
struct sbx_op *sbx_pty_list_async(struct sbx_session *s, struct sbx_err *e);
int sbx_pty_list_result(const struct sbx_op *op, struct sbx_pty_info **out, size_t *n,
                        struct sbx_err *e);
int sbx_pty_list(struct sbx_session *s, struct sbx_pty_info **out, size_t *n, struct sbx_err *e);

/* Claims the session (takeover: evicting its holder; without, a held session fails with
 * EBUSY), replaying stdout from since and stderr from since_err (0: all that is retained). */
struct sbx_op *sbx_pty_attach_async(struct sbx_session *s, const char *id, int takeover,
                                    int64_t since, int64_t since_err, struct sbx_err *e);
int sbx_pty_attach_result(const struct sbx_op *op, struct sbx_pty_attach_info *ai,
                          struct sbx_err *e);

/* A claimed session's live stream: output buffered as it comes (the agent's credit returned
 * as it is read, so memory stays bounded), input written in order. Starting never blocks;
 * sbx_pty_op is the stream's operation, done when the session's output ended (the program
 * exited), the holder was evicted or went away. */
struct sbx_pty;
struct sbx_pty *sbx_pty_open(struct sbx_session *s, const char *id,
                             const struct sbx_pty_attach_info *ai, struct sbx_err *e);
/* Attach and open, waited for. */
struct sbx_pty *sbx_pty_attach(struct sbx_session *s, const char *id, int takeover, int64_t since,
                               int64_t since_err, struct sbx_pty_attach_info *ai,
                               struct sbx_err *e);
struct sbx_op *sbx_pty_op(const struct sbx_pty *p);
/* Bytes of chan (1 stdout or the terminal, 2 stderr) buffered now, and the offset of the
 * next one to read. */
size_t sbx_pty_buffered(const struct sbx_pty *p, int chan);
int64_t sbx_pty_offset(const struct sbx_pty *p, int chan);
/* Takes what chan has buffered, without blocking: its count, 0 when none (then *ended says
 * whether more can come). */
size_t sbx_pty_take(struct sbx_pty *p, int chan, void *buf, size_t cap, int *ended);
/* Reads chan, waiting (stepping the session) up to timeout_s (< 0: the session's timeout):
 * the count; 0 when the program ended and chan is drained; -1 with *e: ETIMEDOUT, or the
 * session lost (SBX_PTY_EVICTED when another client took it over). */
ssize_t sbx_pty_read(struct sbx_pty *p, int chan, void *buf, size_t cap, double timeout_s,
                     struct sbx_err *e);
/* Puts what of data the input pipe takes now, never waiting: the count (0: full, try after a
 * step), or -1 with *e once the stream ended. */
ssize_t sbx_pty_put(struct sbx_pty *p, const void *data, size_t len, struct sbx_err *e);
/* Writes raw bytes to the program's input (waiting while the pipe to the stream is full). */
int sbx_pty_write(struct sbx_pty *p, const void *data, size_t len, struct sbx_err *e);
/* Waits until the program ended (its output drained into the buffers): its code. */
int sbx_pty_wait_exit(struct sbx_pty *p, double timeout_s, int *code, struct sbx_err *e);
/* How the stream ended once its op is done: 0 with *code (the program ended), or -1 with *e. */
int sbx_pty_end_status(const struct sbx_pty *p, int *code, struct sbx_err *e);
/* Lets go: the stream ends, the session lives on (its claim given up). Frees p. */
void sbx_pty_detach(struct sbx_pty *p);

#endif
