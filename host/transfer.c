/* Transfers on the host side, as operations (sbx.h): a thread packs (or reads a kept archive)
 * into a pipe the session streams as the job's stdin, or a thread unpacks what the job's
 * stdout delivers through a pipe into a private staging folder; the session's step, on the
 * caller's thread, moves the bytes and commits. The blocking calls wait for their op. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "msg.h"
#include "pack.h"
#include "proto.h"
#include "sbx.h"
#include "session.h"
#include "treemove.h"
#include "unpack.h"

#define STAGE_PREFIX ".sbx-stage"

void sbx_xfer_opts_init(struct sbx_xfer_opts *o)
{
	memset(o, 0, sizeof *o);
}

static const struct sbx_xfer_opts *opts_or_default(const struct sbx_xfer_opts *o,
                                                   struct sbx_xfer_opts *def)
{
	if (o != NULL)
		return o;
	sbx_xfer_opts_init(def);
	return def;
}

static double timeout_of(const struct sbx_xfer_opts *o)
{
	return o->timeout_s > 0 ? o->timeout_s : 600;
}

/* ---- the response ---- */

static void parse_stats(const uint8_t *p, size_t len, struct sbx_xfer_stats *st, char *kind,
                        size_t kcap, int *have_sha)
{
	struct sbx_msgr rd;
	struct sbx_field f;
	*have_sha = 0;
	sbx_msgr_init(&rd, p, len);
	while (sbx_msgr_next(&rd, &f) == 1) {
		int64_t v = 0;
		sbx_field_i64(&f, &v);
		switch (f.tag) {
		case SBX_T_SHA256:
			if (f.len == 32) {
				memcpy(st->sha256, f.val, 32);
				*have_sha = 1;
			}
			break;
		case SBX_T_FILES:
			st->files = (uint64_t)v;
			break;
		case SBX_T_DIRS:
			st->dirs = (uint64_t)v;
			break;
		case SBX_T_LINKS:
			st->links = (uint64_t)v;
			break;
		case SBX_T_BYTES:
			st->data_bytes = (uint64_t)v;
			break;
		case SBX_T_ARCHIVE_BYTES:
			st->archive_bytes = (uint64_t)v;
			break;
		case SBX_T_NOTE:
			if (f.len < sizeof st->note)
				sbx_field_str(&f, st->note, sizeof st->note);
			break;
		case SBX_T_KIND:
			if (kind != NULL && f.len < kcap)
				sbx_field_str(&f, kind, kcap);
			break;
		default:
			break;
		}
	}
}

/* ---- the source thread (uploads) ---- */

struct source {
	pthread_t th;
	int out_fd; /* the pipe's write end; the thread closes it */
	/* a folder or one entry of it to pack */
	int root_fd;
	const char *one[2];
	const char *as_name;
	/* or a kept archive to stream */
	int file_fd;
	struct sbx_sha256 sha;
	uint8_t digest[32];
	uint64_t bytes;
	int rc;
	struct sbx_err e;
};

static void *source_main(void *arg)
{
	struct source *src = arg;
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL); /* EPIPE as a value, never a signal */
	if (src->file_fd < 0) {
		struct sbx_pack_opts po = {.root_fd = src->root_fd,
		                           .names = src->one[0] != NULL ? src->one : NULL,
		                           .as_name = src->as_name,
		                           .out_fd = src->out_fd};
		struct sbx_pack_stats ps;
		memset(&ps, 0, sizeof ps);
		src->rc = sbx_pack(&po, &ps, &src->e);
		memcpy(src->digest, ps.sha256, 32);
		src->bytes = ps.archive_bytes;
	} else {
		uint8_t *buf = malloc(1 << 16);
		sbx_sha256_init(&src->sha);
		src->rc =
		        buf == NULL ? sbx_err_set(&src->e, SBX_EUNAVAILABLE, ENOMEM, "buffer") : 0;
		while (buf != NULL) {
			ssize_t n = read(src->file_fd, buf, 1 << 16);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				src->rc =
				        sbx_err_set(&src->e, SBX_EUSAGE, errno, "read the archive");
				break;
			}
			if (n == 0)
				break;
			sbx_sha256_update(&src->sha, buf, (size_t)n);
			src->bytes += (uint64_t)n;
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(src->out_fd, buf + off, (size_t)(n - off));
				if (w < 0 && errno == EINTR)
					continue;
				if (w < 0) {
					src->rc = sbx_err_set(&src->e, SBX_EUNAVAILABLE, errno,
					                      "stream the archive");
					goto out;
				}
				off += w;
			}
		}
	out:
		sbx_sha256_final(&src->sha, src->digest);
		free(buf);
	}
	close(src->out_fd);
	src->out_fd = -1;
	return NULL;
}

/* ---- an upload as an operation: a job whose stdin is the source's pipe ---- */

struct upload {
	struct sbx_exec_opts eo; /* the job's stdin: the read end of the source's pipe */
	struct source src;
	char one_name[256], as_name[256];
	int in_fd;
	int started, joined, committed;
	/* upload_archive: the archive (opened once the probe said clear), whether it did, and
	 * why not */
	char *archive;
	int landing;
	char *warning;
};

/* The source ends: its thread joined once (closing the pipe first when the agent ended the
 * job before reading it all: the thread sees EPIPE). */
static void upload_join(struct upload *u)
{
	if (!u->started || u->joined)
		return;
	if (u->in_fd >= 0) {
		close(u->in_fd);
		u->in_fd = -1;
	}
	pthread_join(u->src.th, NULL);
	u->joined = 1;
}

static void upload_stdin_end(struct sbx_op *op, void *ctx)
{
	struct upload *u = ctx;
	pthread_join(u->src.th, NULL);
	u->joined = 1;
	if (u->src.rc != 0) {
		/* The local side failed: abandon; the agent discards its staging. */
		sbx_op_cancel_remote(op);
		return;
	}
	uint8_t b[128];
	struct sbx_msgw cw;
	sbx_msgw_init(&cw, b, sizeof b);
	sbx_msgw_i64(&cw, SBX_T_OP, SBX_OP_COMMIT);
	sbx_msgw_i64(&cw, SBX_T_JOB, op->p->id);
	sbx_msgw_bytes(&cw, SBX_T_SHA256, u->src.digest, 32);
	/* The COMMIT's own answer only says it was delivered; the upload's answer tells the
	 * outcome, so nobody waits for it. */
	struct sbx_err e;
	if (sbx_detached(op->s, &cw, SBX_LANE_BULK, &e) != 0)
		sbx_session_fail(op->s, e.cls, e.errnum, e.msg);
	else
		u->committed = 1;
}

static int upload_ended(struct sbx_op *op, void *ctx)
{
	(void)op;
	upload_join(ctx);
	return 0;
}

static void upload_release(void *ctx)
{
	struct upload *u = ctx;
	upload_join(u);
	if (u->in_fd >= 0)
		close(u->in_fd);
	if (u->src.root_fd >= 0)
		close(u->src.root_fd);
	if (u->src.file_fd >= 0)
		close(u->src.file_fd);
	free(u->archive);
	free(u->warning);
}

static const struct sbx_job_hooks upload_hooks = {
        .stdin_end = upload_stdin_end, .ended = upload_ended, .release = upload_release};

static int start_source(struct source *src, int *in_fd, struct sbx_err *e);

/* The upload of u's source (root_fd or file_fd set; u malloc'd, the op's from here) with the
 * request in w. */
static struct sbx_op *upload_async(struct sbx_session *s, struct sbx_msgw *w, struct upload *u,
                                   struct sbx_err *e)
{
	u->in_fd = -1;
	if (start_source(&u->src, &u->in_fd, e) != 0) {
		upload_release(u);
		free(u);
		return NULL;
	}
	u->started = 1;
	sbx_exec_opts_init(&u->eo);
	u->eo.stdin_fd = u->in_fd;
	struct sbx_op *op = sbx_job_async(s, w->buf, w->len, &u->eo, &upload_hooks, u, e);
	if (op != NULL)
		op->result = SBX_OP_UPLOAD;
	return op;
}

int sbx_upload_result(const struct sbx_op *op, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	const struct upload *u = sbx_op_job_ctx(op);
	if (u == NULL || op->result != SBX_OP_UPLOAD)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not an upload", sbx_op_name(op));
	int rc = sbx_op_status(op, e);
	if (rc == 0)
		rc = sbx_op_answer_ok(op, e);
	/* Success answers a COMMIT: one before it is not an answer to anything asked (and the
	 * source, stopped by it, failing is its consequence, not the cause). */
	if (rc == 0 && !u->committed)
		rc = sbx_err_set(e, SBX_EPROTOCOL, 0,
		                 "upload: the agent reported success before the commit was sent");
	if (rc == 0 && u->src.rc != 0) {
		*e = u->src.e;
		rc = -1;
	}
	if (rc == 0) {
		int have_sha = 0;
		parse_stats(op->resp, op->resp_len, st, NULL, 0, &have_sha);
		if (!have_sha || memcmp(st->sha256, u->src.digest, 32) != 0) {
			char a[65], b[65];
			sbx_hex(u->src.digest, SBX_SHA256_LEN, a);
			sbx_hex(st->sha256, SBX_SHA256_LEN, b);
			rc = sbx_err_set(
			        e, SBX_EPROTOCOL, 0,
			        "upload: the agent committed a stream whose SHA-256 (%s) is "
			        "not the one sent (%s)",
			        have_sha ? b : "none", a);
		}
	} else if (op->resp != NULL) {
		parse_stats(op->resp, op->resp_len, st, NULL, 0, &(int){0});
	}
	return rc;
}

/* The blocking forms: op waited for within the transfer's own timeout, o->progress told the
 * bytes moved (moved(op)) as they go; a progress callback that refuses cancels the job in the
 * sandbox, which then answers. 0 once op is done; -1 with *e when the wait failed first. */
static int xfer_wait(struct sbx_session *s, struct sbx_op *p, const struct sbx_xfer_opts *o,
                     const char *what, uint64_t (*moved)(const struct sbx_op *), struct sbx_err *e)
{
	int64_t deadline = sbx_now_ns() + (int64_t)(timeout_of(o) * 1e9);
	int cancelled = 0;
	uint64_t last = 0;
	while (!p->done) {
		if (sbx_now_ns() >= deadline)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "%s: no result within %.0f s", what, timeout_of(o));
		if (sbx_session_wait(s, deadline, e) != 0)
			return -1;
		uint64_t m = moved(p);
		if (o->progress != NULL && m != last) {
			last = m;
			if (o->progress(o->ctx, m) != 0 && !cancelled) {
				sbx_op_cancel_remote(p);
				cancelled = 1;
			}
		}
	}
	return 0;
}

static uint64_t upload_moved(const struct sbx_op *op)
{
	const struct sbx_job *j = sbx_op_job(op);
	return j != NULL ? j->stdin_off : 0;
}

static int upload_wait(struct sbx_session *s, struct sbx_op *p, const struct sbx_xfer_opts *o,
                       struct sbx_xfer_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (p == NULL)
		return -1;
	int64_t start = sbx_now_ns();
	int rc = xfer_wait(s, p, o, "upload", upload_moved, e);
	if (rc == 0)
		rc = sbx_upload_result(p, st, e);
	else if (p->resp != NULL)
		parse_stats(p->resp, p->resp_len, st, NULL, 0, &(int){0});
	st->seconds = (double)(sbx_now_ns() - start) / 1e9;
	sbx_op_free(p);
	return rc;
}

static int start_source(struct source *src, int *in_fd, struct sbx_err *e)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	fcntl(pp[0], F_SETPIPE_SZ, 1 << 20);
	fcntl(pp[0], F_SETFL, fcntl(pp[0], F_GETFL) | O_NONBLOCK);
	src->out_fd = pp[1];
	if (pthread_create(&src->th, NULL, source_main, src) != 0) {
		close(pp[0]);
		close(pp[1]);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "thread");
	}
	*in_fd = pp[0];
	return 0;
}

/* only: a file's upload, the one member the agent may place (the target's last name). */
static uint8_t *upload_req(const char *target, int xmode, int readable, int open_all,
                           const char *only, const struct sbx_xfer_opts *o, struct sbx_msgw *w,
                           struct sbx_err *e)
{
	if (target == NULL || target[0] != '/')
		return sbx_err_set(e, SBX_EUSAGE, 0, "the target must be an absolute path"), NULL;
	uint8_t *b = sbx_req_buf(strlen(target) + (only != NULL ? strlen(only) : 0) + 160, w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(w, SBX_T_OP, SBX_OP_UPLOAD);
	sbx_msgw_str(w, SBX_T_PATH, target);
	sbx_msgw_i64(w, SBX_T_XMODE, xmode);
	sbx_msgw_i64(w, SBX_T_READABLE, readable);
	sbx_msgw_i64(w, SBX_T_OPEN, open_all);
	sbx_msgw_i64(w, SBX_T_FORCE_WALK, o->force_walk != 0);
	if (only != NULL)
		sbx_msgw_str(w, SBX_T_ONLY, only);
	return b;
}

/* Uploads a local folder's contents (one == NULL) or one entry of it under as_name. */
static struct sbx_op *upload_local(struct sbx_session *s, const char *dir, const char *one,
                                   const char *as_name, const char *target, int xmode, int readable,
                                   int open_all, const struct sbx_xfer_opts *o, struct sbx_err *e)
{
	struct sbx_msgw w;
	uint8_t *b = upload_req(target, xmode, readable, open_all, as_name, o, &w, e);
	if (b == NULL)
		return NULL;
	struct upload *u = calloc(1, sizeof *u);
	if (u == NULL) {
		free(b);
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "upload");
		return NULL;
	}
	u->src.file_fd = -1;
	u->src.root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (u->src.root_fd < 0) {
		sbx_err_set(e, SBX_EUSAGE, errno, "local folder %s", dir);
		free(u);
		free(b);
		return NULL;
	}
	/* The names stay the caller's until the source thread has read them: copied. */
	snprintf(u->one_name, sizeof u->one_name, "%s", one != NULL ? one : "");
	snprintf(u->as_name, sizeof u->as_name, "%s", as_name != NULL ? as_name : "");
	u->src.one[0] = one != NULL ? u->one_name : NULL;
	u->src.as_name = as_name != NULL ? u->as_name : NULL;
	struct sbx_op *op = upload_async(s, &w, u, e);
	free(b);
	return op;
}

struct sbx_op *sbx_upload_dir_async(struct sbx_session *s, const char *source, const char *target,
                                    const struct sbx_xfer_opts *o, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return upload_local(s, source, NULL, NULL, target, SBX_XMODE_MERGE, o->make_readable, 0, o,
	                    e);
}

int sbx_upload_dir(struct sbx_session *s, const char *source, const char *target,
                   const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return upload_wait(s, sbx_upload_dir_async(s, source, target, o, e), o, st, e);
}

/* dirname/basename of a path into caller buffers; "" base for "/". */
static int split(const char *path, char *dir, size_t dcap, char *base, size_t bcap)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	const char *end = path + len;
	const char *sl = end;
	while (sl > path && sl[-1] != '/')
		sl--;
	size_t blen = (size_t)(end - sl);
	size_t dlen = (size_t)(sl - path);
	while (dlen > 1 && path[dlen - 1] == '/')
		dlen--;
	if (blen >= bcap || dlen + 2 >= dcap)
		return -1;
	memcpy(base, sl, blen);
	base[blen] = '\0';
	if (dlen == 0)
		snprintf(dir, dcap, ".");
	else
		snprintf(dir, dcap, "%.*s", (int)dlen, path);
	return 0;
}

struct sbx_op *sbx_upload_path_async(struct sbx_session *s, const char *source, const char *target,
                                     const struct sbx_xfer_opts *o, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	struct stat sst;
	if (stat(source, &sst) != 0) {
		sbx_err_set(e, SBX_EUSAGE, errno, "local source %s", source);
		return NULL;
	}
	if (S_ISDIR(sst.st_mode))
		return upload_local(s, source, NULL, NULL, target, SBX_XMODE_REPLACE, 0, 1, o, e);
	if (!S_ISREG(sst.st_mode)) {
		sbx_err_set(e, SBX_EUSAGE, 0, "local source %s is neither a file nor a folder",
		            source);
		return NULL;
	}
	char sdir[PATH_MAX], sbase[256], tdir[PATH_MAX], tbase[256];
	if (split(source, sdir, sizeof sdir, sbase, sizeof sbase) != 0 ||
	    split(target, tdir, sizeof tdir, tbase, sizeof tbase) != 0 || tbase[0] == '\0' ||
	    target[0] != '/') {
		sbx_err_set(e, SBX_EUSAGE, 0, "upload_path: bad source or target");
		return NULL;
	}
	return upload_local(s, sdir, sbase, tbase, tdir, SBX_XMODE_MERGE, 0, 1, o, e);
}

int sbx_upload_path(struct sbx_session *s, const char *source, const char *target,
                    const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return upload_wait(s, sbx_upload_path_async(s, source, target, o, e), o, st, e);
}

/* ---- upload_archive: the lands_clear probe, then (when clear) the upload ---- */

static int archive_probed(struct sbx_op *op, void *ctx, struct sbx_err *e)
{
	struct upload *u = ctx;
	int clear = 0;
	if (sbx_lands_clear_parse(op->p->resp, op->p->resp_len, &clear, NULL, &u->warning, e) != 0)
		return -1;
	if (!clear)
		return 0; /* nothing is touched */
	free(u->warning);
	u->warning = NULL;
	u->landing = 1;
	u->src.file_fd = open(u->archive, O_RDONLY | O_CLOEXEC);
	if (u->src.file_fd < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "archive %s", u->archive);
	if (start_source(&u->src, &u->in_fd, e) != 0)
		return -1;
	u->started = 1;
	u->eo.stdin_fd = u->in_fd;
	return 1;
}

static const struct sbx_job_hooks archive_hooks = {.stdin_end = upload_stdin_end,
                                                   .ended = upload_ended,
                                                   .release = upload_release,
                                                   .probed = archive_probed};

struct sbx_op *sbx_upload_archive_async(struct sbx_session *s, const char *archive,
                                        enum sbx_kind kind, const char *target,
                                        const char *const *keep_out, size_t n_keep_out,
                                        const struct sbx_xfer_opts *o, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	if (kind != SBX_KIND_DIR && kind != SBX_KIND_FILE) {
		sbx_err_set(e, SBX_EUSAGE, 0, "upload_archive: kind must be dir or file");
		return NULL;
	}
	char dir[PATH_MAX], base[256];
	if (archive == NULL || target == NULL || target[0] != '/' ||
	    split(target, dir, sizeof dir, base, sizeof base) != 0) {
		sbx_err_set(e, SBX_EUSAGE, 0, "upload_archive: the target must be absolute");
		return NULL;
	}
	const char *into = kind == SBX_KIND_DIR ? target : dir;
	/* The probe first: preparing the target is destructive. */
	struct sbx_msgw pw, w;
	uint8_t *pb = sbx_lands_clear_req(into, keep_out, n_keep_out, &pw, e);
	if (pb == NULL)
		return NULL;
	/* A file's archive holds one member named as the file: the target must name it so. */
	uint8_t *b = upload_req(into, kind == SBX_KIND_DIR ? SBX_XMODE_REPLACE : SBX_XMODE_MERGE, 0,
	                        1, kind == SBX_KIND_FILE ? base : NULL, o, &w, e);
	struct upload *u = b != NULL ? calloc(1, sizeof *u) : NULL;
	if (u != NULL) {
		u->src.root_fd = u->src.file_fd = u->in_fd = -1;
		sbx_exec_opts_init(&u->eo);
		u->archive = strdup(archive);
	}
	if (b != NULL && (u == NULL || u->archive == NULL)) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "upload_archive");
		free(u);
		u = NULL;
	}
	struct sbx_op *op = NULL;
	if (u != NULL) {
		op = sbx_job_probed_async(s, pb, pw.len, b, w.len, &u->eo, &archive_hooks, u, e);
		if (op != NULL)
			op->result = SBX_OP_UPLOAD;
	}
	free(pb);
	free(b);
	return op;
}

int sbx_upload_archive_result(const struct sbx_op *op, int *landed, char **warning,
                              struct sbx_xfer_stats *st, struct sbx_err *e)
{
	*landed = 0;
	if (warning != NULL)
		*warning = NULL;
	memset(st, 0, sizeof *st);
	const struct upload *u = sbx_op_job_ctx(op);
	if (u == NULL || op->result != SBX_OP_UPLOAD || u->archive == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not an upload_archive",
		                   sbx_op_name(op));
	if (sbx_op_status(op, e) != 0)
		return -1;
	if (!u->landing) {
		if (warning != NULL && u->warning != NULL &&
		    (*warning = strdup(u->warning)) == NULL)
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "upload_archive");
		return 0;
	}
	if (sbx_upload_result(op, st, e) != 0)
		return -1;
	*landed = 1;
	return 0;
}

int sbx_upload_archive(struct sbx_session *s, const char *archive, enum sbx_kind kind,
                       const char *target, const char *const *keep_out, size_t n_keep_out,
                       const struct sbx_xfer_opts *o, int *landed, char **warning,
                       struct sbx_xfer_stats *st, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	memset(st, 0, sizeof *st);
	*landed = 0;
	if (warning != NULL)
		*warning = NULL;
	struct sbx_op *op =
	        sbx_upload_archive_async(s, archive, kind, target, keep_out, n_keep_out, o, e);
	if (op == NULL)
		return -1;
	int64_t start = sbx_now_ns();
	int rc = xfer_wait(s, op, o, "upload", upload_moved, e);
	if (rc == 0)
		rc = sbx_upload_archive_result(op, landed, warning, st, e);
	st->seconds = (double)(sbx_now_ns() - start) / 1e9;
	sbx_op_free(op);
	return rc;
}

/* mkdir -p of a local folder (0755 & ~umask per level: never writable by other users, which
 * a commit into it would refuse). */
static int mkdirs(const char *path, struct sbx_err *e)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, 0755) != 0 && errno != EEXIST)
				return sbx_err_set(e, SBX_EUSAGE, errno, "create local folder %s",
				                   buf);
			*p = c;
			if (c == '\0')
				break;
		}
	}
	return 0;
}

static mode_t umask_now(void)
{
	mode_t m = umask(022);
	umask(m);
	return m;
}

/* A failed transfer's error also says what could not be removed, and where. */
static void left_behind(struct sbx_err *e, const char *dir, const char *name, const char *why)
{
	size_t len = strlen(e->msg);
	snprintf(e->msg + len, sizeof e->msg - len, "; left behind: %s/%s (%s)", dir, name, why);
}

/* The archive_copy: written as NAME.partial-XXXXXX in its folder (held open, written only by
 * the caller), renamed to NAME through that folder's fd once the download is in place. */
struct copy {
	int dir, fd;
	char dir_path[PATH_MAX], base[256], tmp[300];
};

static int open_copy(const char *path, struct copy *c, struct sbx_err *e)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	if (split(path, c->dir_path, sizeof c->dir_path, c->base, sizeof c->base) != 0 ||
	    c->base[0] == '\0')
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "archive_copy %s", path);
	c->dir = open(c->dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dir < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "archive_copy %s", path);
	char what[PATH_MAX + 32];
	snprintf(what, sizeof what, "the folder of archive_copy %s", path);
	if (sbx_dir_private(c->dir, what, e) != 0)
		return -1;
	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "random name");
		char suf[7];
		for (int i = 0; i < 6; i++)
			suf[i] = abc[r[i] % 36];
		suf[6] = '\0';
		snprintf(c->tmp, sizeof c->tmp, "%s.partial-%s", c->base, suf);
		c->fd = openat(c->dir, c->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		               0600);
		if (c->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	return sbx_err_set(e, SBX_EUSAGE, errno, "archive_copy %s", path);
}

/* Gives the copy its name (keep) or removes it; the error says what is left. */
static int close_copy(struct copy *c, int keep, const char *path, int rc, struct sbx_err *e)
{
	if (c->fd >= 0) {
		/* Synced by the unpacking worker once the whole stream was in. */
		if (keep && rc == 0)
			rc = sbx_move_verified(c->dir, c->tmp, c->dir, c->base, c->fd, 0, path, e);
		if (close(c->fd) != 0 && keep && rc == 0)
			rc = sbx_err_set(e, SBX_EUSAGE, errno, "archive_copy %s", path);
		if ((!keep || rc != 0) && unlinkat(c->dir, c->tmp, 0) != 0 && errno != ENOENT) {
			int err = errno;
			if (rc == 0)
				rc = sbx_err_set(e, SBX_EUSAGE, err, "remove %s/%s", c->dir_path,
				                 c->tmp);
			else
				left_behind(e, c->dir_path, c->tmp, strerror(err));
		}
	}
	if (c->dir >= 0)
		close(c->dir);
	return rc;
}

/* A file's download: the one member staged (a regular file, as the unpack's only rule made
 * sure) moves to target, checked to be the very file staged. */
static int place_file(int sfd, const char *name, int home, const char *tbase, const char *target,
                      struct sbx_err *e)
{
	int fd = openat(sfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		int err = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		return sbx_err_set(e, SBX_ETRANSFER, err, "%s: the download is not a regular file",
		                   target);
	}
	int rc = sbx_move_verified(sfd, name, home, tbase, fd, 0, target, e);
	close(fd);
	return rc;
}

/* Removes the staging folder stage of home when it still is the one sfd holds; when another
 * process moved it, its contents are removed through sfd and *e2 says so. */
static int drop_stage(int home, const char *stage, int sfd, struct sbx_err *e2)
{
	struct stat a, b;
	if (fstat(sfd, &a) == 0 && fstatat(home, stage, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return sbx_rmtree_at(home, stage, e2);
	if (sbx_rmtree_in(sfd, e2) != 0)
		return -1;
	return sbx_err_set(e2, SBX_ETRANSFER, 0,
	                   "moved by another process; emptied, the empty folder is where it was "
	                   "moved");
}

/* ---- downloads: the unpacker in a worker thread, fed through a pipe by the session ----
 *
 * The DOWNLOAD job's output arrives on the thread that steps the session; it goes into a
 * pipe (non-blocking) whose other end the worker's sbx_unpack reads into the private staging
 * folder. The agent's credit is returned only as bytes enter the pipe: what the pipe does not
 * take is held (at most the stream's credit window, SBX_WINDOW_DEFAULT) and the op polls the
 * pipe for room. The worker's end is told through an eventfd among the op's fds. The commit
 * (the staging folder moved or merged into place, the archive_copy renamed) runs on the
 * session's thread once both the agent's answer and the worker's end are in: the digest and
 * the agent's word are judged there first, and a cancel can never race a commit half done. */

struct download {
	/* from the start: the caller's options and strings are not read later */
	char *source, *target, *copy_path;
	int dir_only; /* download_dir: a file is refused, absent is an error */
	enum sbx_put_mode mode;
	int force_walk;
	uint8_t *req_dir, *req_file; /* the DOWNLOAD request for a folder, for a file */
	size_t len_dir, len_file;
	struct sbx_exec_opts eo; /* no stdin, no output sink (the data hook takes the output) */
	/* the local side, once the kind is known */
	enum sbx_kind k;
	int in_target;
	char tbase[256], hpath[PATH_MAX], stage[64];
	int home, sfd;
	struct copy cp;
	const char *only; /* a file's one member: source's last name */
	/* the pipe into the worker, and the bytes it did not take yet */
	int wfd, rfd, wake;
	uint8_t *held;
	size_t hoff, hlen, hcap;
	int nomem; /* held bytes could not be kept: the op fails with ENOMEM */
	uint64_t bytes;
	pthread_t th;
	int started, joined, answered;
	/* the worker's, read once it is joined */
	int urc;
	struct sbx_err ue;
	struct sbx_unpack_stats us;
	/* the result */
	enum sbx_kind kind;
	struct sbx_xfer_stats st;
};

static void *unpack_main(void *arg)
{
	struct download *d = arg;
	struct sbx_unpack_opts uo = {.in_fd = d->rfd,
	                             .root_fd = d->sfd,
	                             .mode = d->mode,
	                             .force_walk = d->force_walk,
	                             .tee_fd = d->cp.fd,
	                             .only = d->only};
	d->urc = sbx_unpack(&uo, &d->us, &d->ue);
	/* The copy reaches the disk here, off the session's thread, which only renames it. */
	if (d->urc == 0 && d->cp.fd >= 0 && fsync(d->cp.fd) != 0)
		d->urc = sbx_err_set(&d->ue, SBX_EUSAGE, errno, "archive_copy %s", d->copy_path);
	uint64_t one = 1;
	while (write(d->wake, &one, sizeof one) < 0 && errno == EINTR)
		;
	return NULL;
}

/* The worker's EOF: nothing more goes into the pipe (held bytes are dropped: the op is
 * ending, or everything went). */
static void close_w(struct sbx_op *op, struct download *d)
{
	if (d->wfd >= 0)
		close(d->wfd);
	d->wfd = -1;
	d->hoff = d->hlen = 0;
	free(d->held);
	d->held = NULL;
	d->hcap = 0;
	if (op != NULL)
		op->fds[1] = (struct pollfd){-1, 0, 0};
}

/* The worker joined (it ended or reads EOF now): nothing more goes to it, its pipe's read end
 * and its wake-up fd closed. */
static void join_unpack(struct sbx_op *op, struct download *d)
{
	close_w(op, d);
	if (d->started && !d->joined)
		pthread_join(d->th, NULL);
	d->joined = d->started;
	if (d->rfd >= 0)
		close(d->rfd);
	if (d->wake >= 0)
		close(d->wake);
	d->rfd = d->wake = -1;
	if (op != NULL)
		op->fds[2] = (struct pollfd){-1, 0, 0};
}

/* Ends the local side (the worker joined or never started): the staging folder committed
 * (rc 0) or removed, the copy named (when the download was there to keep) or removed. */
static int local_end(struct download *d, int rc, struct sbx_err *e)
{
	if (rc == 0 && d->sfd >= 0 && d->k == SBX_KIND_DIR) {
		if (d->in_target) {
			rc = sbx_tree_merge(d->sfd, d->home, SBX_MERGE_PRIVATE, e);
		} else if (fchmod(d->sfd, 0777 & ~umask_now()) != 0) {
			rc = sbx_err_set(e, SBX_ETRANSFER, errno, "move the download to %s",
			                 d->target);
		} else if ((rc = sbx_move_verified(d->home, d->stage, d->home, d->tbase, d->sfd, 1,
		                                   d->target, e)) == 0) {
			d->stage[0] = '\0'; /* it is the target now */
		}
	} else if (rc == 0 && d->sfd >= 0 && d->k == SBX_KIND_FILE) {
		rc = place_file(d->sfd, d->only, d->home, d->tbase, d->target, e);
	}
	if (d->stage[0] != '\0' && d->sfd >= 0) {
		struct sbx_err e2;
		if (drop_stage(d->home, d->stage, d->sfd, &e2) != 0) {
			if (rc == 0)
				rc = sbx_err_set(e, SBX_ETRANSFER, e2.errnum,
				                 "remove the staging folder %s/%s: %s", d->hpath,
				                 d->stage, e2.msg);
			else
				left_behind(e, d->hpath, d->stage, e2.msg);
		}
	}
	d->stage[0] = '\0';
	if (d->sfd >= 0)
		close(d->sfd);
	if (d->home >= 0)
		close(d->home);
	d->sfd = d->home = -1;
	rc = close_copy(&d->cp, d->k != SBX_KIND_ABSENT, d->copy_path, rc, e);
	d->cp.fd = d->cp.dir = -1;
	return rc;
}

/* Everything local undone: the worker stopped, the staging folder and the copy removed. */
static void dl_abort(struct sbx_op *op, struct download *d)
{
	join_unpack(op, d);
	struct sbx_err e2;
	local_end(d, -1, &e2);
}

/* The local side of a download of kind d->k, and its worker started. */
static int prepare_local(struct download *d, struct sbx_err *e)
{
	char tdir[PATH_MAX];
	if (split(d->target, tdir, sizeof tdir, d->tbase, sizeof d->tbase) != 0 ||
	    d->tbase[0] == '\0')
		return sbx_err_set(e, SBX_EUSAGE, 0, "bad local target %s", d->target);
	/* What is there decides how the host copy is staged: a folder merges into target, a
	 * file replaces target. */
	struct stat tst;
	int texists = stat(d->target, &tst) == 0;
	if (texists && d->k == SBX_KIND_DIR && !S_ISDIR(tst.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, ENOTDIR, "local target %s is not a folder",
		                   d->target);
	if (texists && d->k == SBX_KIND_FILE && S_ISDIR(tst.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, EISDIR, "local target %s is a folder", d->target);
	d->in_target = d->k == SBX_KIND_DIR && texists;
	if (!d->in_target && mkdirs(tdir, e) != 0)
		return -1;
	/* The folder the commit writes into: held open, and written by nobody else (who could
	 * otherwise swap the staging folder for their own before the move by name). */
	snprintf(d->hpath, sizeof d->hpath, "%s", d->in_target ? d->target : tdir);
	d->home = open(d->hpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->home < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "local folder %s", d->hpath);
	char what[PATH_MAX + 32];
	snprintf(what, sizeof what, "the local folder %s", d->hpath);
	if (sbx_dir_private(d->home, what, e) != 0)
		return -1;
	d->sfd = sbx_mkstage(d->home, STAGE_PREFIX, d->stage, sizeof d->stage, e);
	if (d->sfd < 0) {
		d->stage[0] = '\0';
		return -1;
	}
	if (d->copy_path != NULL && open_copy(d->copy_path, &d->cp, e) != 0)
		return -1;
	/* A file's archive holds one member, named as the source names the file. */
	d->only = d->k == SBX_KIND_FILE ? strrchr(d->source, '/') + 1 : NULL;
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	d->rfd = pp[0];
	d->wfd = pp[1];
	fcntl(d->wfd, F_SETPIPE_SZ, 1 << 20);
	fcntl(d->wfd, F_SETFL, fcntl(d->wfd, F_GETFL) | O_NONBLOCK);
	d->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "eventfd");
	if (pthread_create(&d->th, NULL, unpack_main, d) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "thread");
	d->started = 1;
	return 0;
}

static void watch(struct sbx_op *op, struct download *d)
{
	op->fds[1] = (struct pollfd){d->wfd, 0, 0};
	op->fds[2] = (struct pollfd){d->wake, POLLIN, 0};
}

/* What the pipe takes of b now. */
static size_t to_pipe(struct download *d, const uint8_t *b, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(d->wfd, b + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* full (the read end stays open until the worker is joined) */
		off += (size_t)w;
	}
	return off;
}

static void dl_credit(struct sbx_op *op, int ch, uint64_t n)
{
	if (n > 0 && op->p != NULL && !op->p->done)
		sbx_engine_consumed(&op->s->eng, op->p, ch, n);
}

static void dl_data(struct sbx_op *op, void *ctx, int ch, const uint8_t *b, size_t n)
{
	struct download *d = ctx;
	if (ch != SBX_CH_STDOUT || d->wfd < 0) {
		dl_credit(op, ch, n); /* nobody reads it any more: the op is ending */
		return;
	}
	d->bytes += n;
	size_t went = d->hoff == d->hlen ? to_pipe(d, b, n) : 0;
	dl_credit(op, ch, went);
	b += went;
	n -= went;
	if (n == 0)
		return;
	/* Held, its credit withheld: the agent cannot send more than the window it was
	 * granted (the engine refuses an overrun), so this stays within that window. */
	if (d->hoff > 0) {
		memmove(d->held, d->held + d->hoff, d->hlen - d->hoff);
		d->hlen -= d->hoff;
		d->hoff = 0;
	}
	if (d->hlen + n > SBX_WINDOW_DEFAULT) {
		d->nomem = 1;
	} else if (d->hcap - d->hlen < n) {
		size_t c = d->hcap > 0 ? d->hcap : 1 << 16;
		while (c - d->hlen < n)
			c *= 2;
		uint8_t *nb = realloc(d->held, c);
		if (nb == NULL) {
			d->nomem = 1;
		} else {
			d->held = nb;
			d->hcap = c;
		}
	}
	if (d->nomem) {
		/* The worker reads EOF and fails; the op fails with ENOMEM (dl_settle). */
		dl_credit(op, ch, n);
		close_w(op, d);
		return;
	}
	memcpy(d->held + d->hlen, b, n);
	d->hlen += n;
	op->fds[1].events = POLLOUT;
}

/* Held bytes into the pipe as it has room; once all went after the answer, the worker's
 * EOF. */
static void dl_pump(struct sbx_op *op, struct download *d)
{
	if (d->wfd >= 0 && d->hoff < d->hlen) {
		size_t went = to_pipe(d, d->held + d->hoff, d->hlen - d->hoff);
		d->hoff += went;
		dl_credit(op, SBX_CH_STDOUT, went);
	}
	if (d->hoff < d->hlen)
		return;
	d->hoff = d->hlen = 0;
	op->fds[1].events = 0;
	if (d->answered)
		close_w(op, d);
}

/* The op's end once the worker ended: a refusal before the agent's answer cancels the job;
 * after the answer, the agent's word, the worker's and the digests are judged, then the
 * commit. */
static void dl_settle(struct sbx_op *op, struct download *d)
{
	if (!d->joined || op->done)
		return;
	struct sbx_err e;
	int rc;
	if (!d->answered) {
		/* Refused or failed here: the rest is not wanted. */
		sbx_op_cancel_remote(op);
		e = d->ue;
		if (d->nomem)
			sbx_err_set(&e, SBX_EUNAVAILABLE, ENOMEM, "download: holding its bytes");
		local_end(d, -1, &e);
		sbx_op_finish(op, -1, &e);
		return;
	}
	char kind[16] = "";
	int have_sha = 0;
	rc = sbx_op_response(op, &e);
	if (rc == 0)
		parse_stats(op->p->resp, op->p->resp_len, &d->st, kind, sizeof kind, &have_sha);
	int absent = rc == 0 && strcmp(kind, "absent") == 0;
	if (rc == 0 && !absent && d->urc != 0) {
		e = d->ue;
		rc = -1;
	}
	if (rc == 0 && !absent && (!have_sha || memcmp(d->st.sha256, d->us.sha256, 32) != 0)) {
		char a[65], c[65];
		sbx_hex(d->us.sha256, SBX_SHA256_LEN, a);
		sbx_hex(d->st.sha256, SBX_SHA256_LEN, c);
		rc = sbx_err_set(&e, SBX_ETRANSFER, 0,
		                 "download: the agent packed a stream with SHA-256 %s, the host "
		                 "received %s",
		                 have_sha ? c : "(none)", a);
	}
	if (rc == 0 && absent) {
		d->k = SBX_KIND_ABSENT; /* gone between the probe and the download */
	} else if (rc == 0 && d->dir_only && strcmp(kind, "file") == 0) {
		rc = sbx_err_set(&e, SBX_ETRANSFER, ENOTDIR,
		                 "%s in the sandbox is a file, not a folder", d->source);
	} else if (rc == 0 && strcmp(kind, d->k == SBX_KIND_DIR ? "dir" : "file") != 0) {
		rc = sbx_err_set(&e, SBX_ETRANSFER, 0,
		                 "%s changed from a %s to %s during the download", d->source,
		                 d->k == SBX_KIND_DIR ? "folder" : "file", kind);
	}
	rc = local_end(d, rc, &e);
	if (rc == 0)
		d->kind = d->k;
	d->st.seconds = (double)(sbx_now_ns() - op->start_ns) / 1e9;
	sbx_op_finish(op, rc, &e);
}

static void dl_fd(struct sbx_op *op, void *ctx)
{
	struct download *d = ctx;
	if (op->fds[1].fd >= 0 && op->fds[1].revents != 0)
		dl_pump(op, d);
	if (op->fds[2].fd >= 0 && (op->fds[2].revents & POLLIN) && d->started && !d->joined) {
		uint64_t v;
		if (read(d->wake, &v, sizeof v) == (ssize_t)sizeof v)
			join_unpack(op, d);
	}
	dl_settle(op, d);
}

static int dl_ended(struct sbx_op *op, void *ctx)
{
	struct download *d = ctx;
	if (op->stopping) {
		/* Cancelled, past its deadline, or the session broke: the target stays as it
		 * was. */
		dl_abort(op, d);
		return 0;
	}
	d->answered = 1;
	if (d->hoff == d->hlen)
		close_w(op, d);
	dl_settle(op, d);
	return 1;
}

static int dl_probed(struct sbx_op *op, void *ctx, struct sbx_err *e)
{
	struct download *d = ctx;
	enum sbx_kind k;
	if (sbx_kind_parse(op->p->resp, op->p->resp_len, &k, e) != 0)
		return -1;
	if (k == SBX_KIND_ABSENT)
		return 0; /* nothing was written */
	d->k = k;
	if (prepare_local(d, e) != 0 ||
	    sbx_job_set_req(op, k == SBX_KIND_FILE ? d->req_file : d->req_dir,
	                    k == SBX_KIND_FILE ? d->len_file : d->len_dir, e) != 0) {
		dl_abort(op, d);
		return -1;
	}
	watch(op, d);
	return 1;
}

static void dl_release(void *ctx)
{
	struct download *d = ctx;
	dl_abort(NULL, d);
	free(d->source);
	free(d->target);
	free(d->copy_path);
	free(d->req_dir);
	free(d->req_file);
}

static const struct sbx_job_hooks download_hooks = {.ended = dl_ended,
                                                    .release = dl_release,
                                                    .data = dl_data,
                                                    .fd = dl_fd,
                                                    .probed = dl_probed};

/* The DOWNLOAD request of source (names and exclude for a folder only). */
static uint8_t *download_req(const char *source, int folder, const struct sbx_xfer_opts *o,
                             size_t *len, struct sbx_err *e)
{
	size_t need = strlen(source) + 128;
	for (const char *const *n = o->names; folder && n != NULL && *n != NULL; n++)
		need += strlen(*n) + 8;
	for (const char *const *n = o->exclude; folder && n != NULL && *n != NULL; n++)
		need += strlen(*n) + 8;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(need, &w, e);
	if (b == NULL)
		return NULL;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DOWNLOAD);
	sbx_msgw_str(&w, SBX_T_PATH, source);
	for (const char *const *n = o->names; folder && n != NULL && *n != NULL; n++)
		sbx_msgw_str(&w, SBX_T_NAMES, *n);
	for (const char *const *n = o->exclude; folder && n != NULL && *n != NULL; n++)
		sbx_msgw_str(&w, SBX_T_EXCLUDE, *n);
	sbx_msgw_i64(&w, SBX_T_SKIP_UNSAFE, o->skip_unsafe != 0);
	*len = w.len;
	return b;
}

static struct sbx_op *download_async(struct sbx_session *s, const char *source, const char *target,
                                     int want_file_or_dir, const struct sbx_xfer_opts *o,
                                     struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	if (source == NULL || source[0] != '/') {
		sbx_err_set(e, SBX_EUSAGE, 0, "the source must be an absolute path");
		return NULL;
	}
	if (target == NULL) {
		sbx_err_set(e, SBX_EUSAGE, 0, "no local target");
		return NULL;
	}
	struct download *d = calloc(1, sizeof *d);
	if (d == NULL) {
		sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "download");
		return NULL;
	}
	d->home = d->sfd = d->cp.dir = d->cp.fd = d->wfd = d->rfd = d->wake = -1;
	sbx_exec_opts_init(&d->eo);
	d->dir_only = !want_file_or_dir;
	d->mode = o->links == SBX_LINKS_KEEP ? SBX_PUT_KEEP : SBX_PUT_DATA;
	d->force_walk = o->force_walk;
	d->source = strdup(source);
	d->target = strdup(target);
	d->copy_path = o->archive_copy != NULL ? strdup(o->archive_copy) : NULL;
	int rc = d->source == NULL || d->target == NULL ||
	                         (o->archive_copy != NULL && d->copy_path == NULL)
	                 ? sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "download")
	                 : 0;
	if (rc == 0 && (d->req_dir = download_req(source, 1, o, &d->len_dir, e)) == NULL)
		rc = -1;
	if (rc == 0 && want_file_or_dir &&
	    (d->req_file = download_req(source, 0, o, &d->len_file, e)) == NULL)
		rc = -1;
	if (rc != 0) {
		dl_release(d);
		free(d);
		return NULL;
	}
	struct sbx_op *op;
	if (want_file_or_dir) {
		/* What is there decides the staging: the kind probe is the op's first step. */
		struct sbx_msgw pw;
		uint8_t *pb = sbx_kind_req(source, &pw, e);
		if (pb == NULL) {
			dl_release(d);
			free(d);
			return NULL;
		}
		op = sbx_job_probed_async(s, pb, pw.len, d->req_dir, d->len_dir, &d->eo,
		                          &download_hooks, d, e);
		free(pb);
	} else {
		d->k = SBX_KIND_DIR;
		if (sbx_session_error(s, e) != 0 || prepare_local(d, e) != 0) {
			dl_release(d);
			free(d);
			return NULL;
		}
		op = sbx_job_async(s, d->req_dir, d->len_dir, &d->eo, &download_hooks, d, e);
		if (op != NULL)
			watch(op, d);
	}
	if (op != NULL)
		op->result = SBX_OP_DOWNLOAD;
	return op;
}

struct sbx_op *sbx_download_dir_async(struct sbx_session *s, const char *source, const char *target,
                                      const struct sbx_xfer_opts *o, struct sbx_err *e)
{
	return download_async(s, source, target, 0, o, e);
}

struct sbx_op *sbx_download_path_async(struct sbx_session *s, const char *source,
                                       const char *target, const struct sbx_xfer_opts *o,
                                       struct sbx_err *e)
{
	return download_async(s, source, target, 1, o, e);
}

int sbx_download_result(const struct sbx_op *op, enum sbx_kind *kind, struct sbx_xfer_stats *st,
                        struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (kind != NULL)
		*kind = SBX_KIND_ABSENT;
	const struct download *d = sbx_op_job_ctx(op);
	if (d == NULL || op->result != SBX_OP_DOWNLOAD)
		return sbx_err_set(e, SBX_EUSAGE, 0, "this %s is not a download", sbx_op_name(op));
	if (sbx_op_status(op, e) != 0)
		return -1;
	*st = d->st;
	/* A folder that is not there is the reference's tar failing: a transfer error. */
	if (d->dir_only && d->kind == SBX_KIND_ABSENT)
		return sbx_err_set(e, SBX_ETRANSFER, ENOENT, "no folder %s in the sandbox",
		                   d->source);
	if (kind != NULL)
		*kind = d->kind;
	return 0;
}

static uint64_t download_moved(const struct sbx_op *op)
{
	const struct download *d = sbx_op_job_ctx(op);
	return d != NULL ? d->bytes : 0;
}

static int download_wait(struct sbx_session *s, struct sbx_op *op, const struct sbx_xfer_opts *o,
                         enum sbx_kind *kind, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (kind != NULL)
		*kind = SBX_KIND_ABSENT;
	if (op == NULL)
		return -1;
	int rc = xfer_wait(s, op, o, "download", download_moved, e);
	if (rc == 0)
		rc = sbx_download_result(op, kind, st, e);
	sbx_op_free(op);
	return rc;
}

int sbx_download_dir(struct sbx_session *s, const char *source, const char *target,
                     const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return download_wait(s, sbx_download_dir_async(s, source, target, o, e), o, NULL, st, e);
}

int sbx_download_path(struct sbx_session *s, const char *source, const char *target,
                      const struct sbx_xfer_opts *o, enum sbx_kind *kind, struct sbx_xfer_stats *st,
                      struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return download_wait(s, sbx_download_path_async(s, source, target, o, e), o, kind, st, e);
}
