/* The serve loop's jobs: exec commands (agent/exec.h) and transfer children (agent/xfer.h),
 * one per stream, from their start to their RESPONSE. Their output pipes become DATA frames
 * under the host's credit (through the staging pipe, shared/splice.h, without a copy where it
 * can), their stdin takes the host's DATA (agent/stdin.h); deadlines kill, a finished job's
 * pipes linger a while, and its result follows its last DATA on the bulk lane. The loop itself
 * (agent/serve.c) polls the fds and calls in here. */
#ifndef SBX_AGENT_JOB_H
#define SBX_AGENT_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "credit.h"
#include "err.h"
#include "exec.h"
#include "msg.h"
#include "outq.h"
#include "proto.h"
#include "splice.h"
#include "stdin.h"

/* Bulk bytes queued for the host past which no job's pipe is read. */
#define SBX_JOB_BULK_LIMIT (2u * 1024u * 1024u)
#define SBX_JOB_MAX 256

struct sbx_job {
	struct sbx_job *next;
	uint32_t stream;
	pid_t pid;
	int fd_out, fd_err; /* -1 once ended */
	int reaped, status;
	struct sbx_spawned sp; /* exec: how it started */
	int64_t start_ns, deadline_ns;
	/* After the process exits its pipes are drained; a background process may keep them
	 * open forever, so draining stops after linger_left_ns of time in which the agent could
	 * have read (time blocked on the host's credit does not count). */
	int64_t linger_left_ns, linger_mark_ns;
	int timed_out, cancelled;
	struct sbx_credit_tx tx[SBX_CH_COUNT];
	struct sbx_stdin in;
	/* transfer jobs: no stderr channel; the child's RESPONSE comes on fd_res */
	int xfer, upload;
	int fd_res, fd_commit;
	uint8_t *res;
	size_t res_len;
};

struct sbx_jobs {
	struct sbx_job *list;
	int n;
	uint64_t host_window; /* credit the host grants per output channel */
	struct sbx_outq *out;
	struct sbx_splice *splice;
	uint8_t *resp;     /* scratch for results, SBX_FRAME_MAX_PAYLOAD bytes */
	const char *fatal; /* set once output could not be queued (no memory): the session ends */
};

struct sbx_job *sbx_job_find(struct sbx_jobs *js, uint32_t stream);

/* EXEC, UPLOAD and DOWNLOAD requests: the job started on stream (its RESPONSE comes when it
 * ends), or -1 with *e for the request's RESPONSE now. */
int sbx_job_exec(struct sbx_jobs *js, uint32_t stream, const uint8_t *req, size_t len,
                 struct sbx_err *e);
int sbx_job_xfer(struct sbx_jobs *js, uint32_t stream, int upload, const uint8_t *req, size_t len,
                 struct sbx_err *e);

/* PTY_STREAM: a terminal session's output and input through a relay child (agent/ptyctl.h). */
int sbx_job_pty(struct sbx_jobs *js, uint32_t stream, const uint8_t *req, size_t len,
                struct sbx_err *e);

/* COMMIT: hands the host's SHA-256 to the waiting upload child, which compares, then moves the
 * tree into place or discards it. The answer in w. */
void sbx_job_commit(struct sbx_jobs *js, const uint8_t *req, size_t len, struct sbx_msgw *w);

/* CANCEL, a deadline or the session's end: an exec job's process group is killed; a transfer
 * child is not, its pipes close (so it stops, removes its staging folder and reports). */
void sbx_job_kill(struct sbx_job *j);

/* Queues a CREDIT frame returning g bytes of j's stdin window (nothing when g is 0). */
void sbx_job_grant(struct sbx_jobs *js, struct sbx_job *j, uint64_t g);

/* The host's bytes for j's stdin (DATA on channel 0): n of the total announced by the frame
 * at p. -1 with the reason when the host overran its credit or memory ran out. */
int sbx_job_stdin(struct sbx_jobs *js, struct sbx_job *j, uint64_t total, const uint8_t *p,
                  size_t n, const char **why);

/* What poll found: chan's pipe readable (revents), stdin writable, the result pipe readable. */
void sbx_job_output(struct sbx_jobs *js, struct sbx_job *j, int chan, short revents);
void sbx_job_input(struct sbx_jobs *js, struct sbx_job *j);
void sbx_job_result(struct sbx_job *j);

/* SIGCHLD came: reaps the jobs' processes that exited. */
void sbx_job_reap(struct sbx_jobs *js);

/* Deadlines, lingering pipes and finished jobs (their RESPONSE queued, the job freed); the
 * poll timeout in ms until the next deadline, -1 for none. */
int sbx_job_tend(struct sbx_jobs *js);

/* At the session's end, after sbx_job_kill of each: waits for and frees every job. */
void sbx_job_free_all(struct sbx_jobs *js);

#endif
