/* Transfer jobs (UPLOAD, DOWNLOAD): the archive work runs in a child process fed by pipes,
 * like an exec job, so the serve loop keeps answering probes while megabytes move. The child
 * writes its RESPONSE payload to a result pipe; an upload's child waits, after unpacking into
 * a private staging folder, for the host's COMMIT (the SHA-256 the host sent) on a commit
 * pipe, and only then moves the tree into place. A closed commit pipe (cancel, lost channel)
 * makes it remove the staging folder and leave the target as it was. */
#ifndef SBX_AGENT_XFER_H
#define SBX_AGENT_XFER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

struct sbx_xfer_req {
	int upload; /* 1 UPLOAD, 0 DOWNLOAD */
	char *path; /* upload: target folder; download: source file or folder */
	int xmode;  /* enum sbx_xmode */
	int readable, open, force_walk;
	char **names, **exclude; /* NULL-terminated, or NULL */
	int skip_unsafe;
	char *only; /* upload of a file: the one member (a name without '/'), or NULL */
};

int sbx_xfer_parse(int upload, const uint8_t *p, size_t len, struct sbx_xfer_req *r,
                   struct sbx_err *e);
void sbx_xfer_req_free(struct sbx_xfer_req *r);

struct sbx_xfer_child {
	pid_t pid;
	int fd_in;     /* upload: the archive goes here; else -1 */
	int fd_out;    /* download: the archive comes from here; else -1 */
	int fd_res;    /* the RESPONSE payload comes from here */
	int fd_commit; /* upload: COMMIT's SHA-256 goes here; else -1 */
};

/* Forks the child (which never returns). -1 with *e when pipes or fork fail. */
int sbx_xfer_spawn(const struct sbx_xfer_req *r, struct sbx_xfer_child *c, struct sbx_err *e);

/* Largest RESPONSE payload a child writes. */
#define SBX_XFER_RES_MAX 8192

#endif
