/* Transfers on the host side: a thread packs (or reads a kept archive) into a pipe the session
 * streams as the job's stdin, or a thread unpacks what the job's stdout delivers into a
 * private staging folder; the session loop stays on the caller's thread. See sbx.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void upload_ended(struct sbx_op *op, void *ctx)
{
	(void)op;
	upload_join(ctx);
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

/* The blocking form: waited for (the transfer's own timeout), progress told as stdin goes. */
static int upload_wait(struct sbx_session *s, struct sbx_op *p, const struct sbx_xfer_opts *o,
                       struct sbx_xfer_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (p == NULL)
		return -1;
	int64_t start = sbx_now_ns();
	int64_t deadline = start + (int64_t)(timeout_of(o) * 1e9);
	int rc = 0, cancelled = 0;
	uint64_t last_progress = 0;
	while (rc == 0 && !p->done) {
		if (sbx_now_ns() >= deadline) {
			rc = sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                 "upload: no result within %.0f s", timeout_of(o));
			break;
		}
		rc = sbx_session_wait(s, deadline, e);
		const struct sbx_job *j = sbx_op_job(p);
		if (o->progress != NULL && j->stdin_off != last_progress) {
			last_progress = j->stdin_off;
			if (o->progress(o->ctx, last_progress) != 0 && !cancelled) {
				sbx_op_cancel_remote(p);
				cancelled = 1;
			}
		}
	}
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
	if (kind != SBX_KIND_DIR && kind != SBX_KIND_FILE)
		return sbx_err_set(e, SBX_EUSAGE, 0, "upload_archive: kind must be dir or file");
	char dir[PATH_MAX], base[256];
	if (target == NULL || target[0] != '/' ||
	    split(target, dir, sizeof dir, base, sizeof base) != 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "upload_archive: the target must be absolute");
	const char *into = kind == SBX_KIND_DIR ? target : dir;
	/* The probe first: preparing the target is destructive. */
	int clear = 0;
	if (sbx_lands_clear(s, into, keep_out, n_keep_out, &clear, NULL, warning, e) != 0)
		return -1;
	if (!clear)
		return 0;
	if (warning != NULL) {
		free(*warning);
		*warning = NULL;
	}
	struct sbx_msgw w;
	/* A file's archive holds one member named as the file: the target must name it so. */
	uint8_t *b = upload_req(into, kind == SBX_KIND_DIR ? SBX_XMODE_REPLACE : SBX_XMODE_MERGE, 0,
	                        1, kind == SBX_KIND_FILE ? base : NULL, o, &w, e);
	if (b == NULL)
		return -1;
	struct upload *u = calloc(1, sizeof *u);
	if (u == NULL) {
		free(b);
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "upload");
	}
	u->src.root_fd = -1;
	u->src.file_fd = open(archive, O_RDONLY | O_CLOEXEC);
	if (u->src.file_fd < 0) {
		free(u);
		free(b);
		return sbx_err_set(e, SBX_EUSAGE, errno, "archive %s", archive);
	}
	struct sbx_op *op = upload_async(s, &w, u, e);
	free(b);
	int rc = upload_wait(s, op, o, st, e);
	if (rc == 0)
		*landed = 1;
	return rc;
}

/* ---- downloads: the archive pulled from the session on the caller's thread ---- */

/* The unpacker asks for bytes (sink_pull); the session is pumped until the job's output
 * callback (sink_output) has given some. One thread, no pipe: while a pull waits, output goes
 * straight from the channel's buffer into the unpacker's window (dst); only what does not fit
 * there is kept in buf for the next pull. The agent's credit is returned as bytes arrive, so
 * buf holds at most what one pump brings. */
struct sink {
	struct sbx_session *s;
	struct sbx_op *p; /* the DOWNLOAD job */
	int64_t deadline;
	uint8_t *buf;
	size_t off, len, cap;
	uint8_t *dst; /* the pull waiting, or NULL */
	size_t dcap, dlen;
	int failed; /* the unpacker stopped: later output is refused (the job is cancelled) */
	uint64_t bytes;
	struct sbx_err e; /* the session's error when pulling failed */
	const struct sbx_xfer_opts *o;
};

static int sink_output(void *ctx, int chan, const void *data, size_t len)
{
	struct sink *k = ctx;
	if (chan != SBX_CH_STDOUT)
		return 0;
	if (k->failed)
		return -1;
	k->bytes += len;
	if (k->o->progress != NULL && k->o->progress(k->o->ctx, k->bytes) != 0)
		return -1;
	if (k->dst != NULL && k->dlen < k->dcap && k->off == k->len) {
		size_t n = k->dcap - k->dlen < len ? k->dcap - k->dlen : len;
		memcpy(k->dst + k->dlen, data, n);
		k->dlen += n;
		data = (const uint8_t *)data + n;
		len -= n;
	}
	if (len == 0)
		return 0;
	if (k->off > 0 && k->cap - k->len < len) {
		memmove(k->buf, k->buf + k->off, k->len - k->off);
		k->len -= k->off;
		k->off = 0;
	}
	if (k->cap - k->len < len) {
		size_t n = k->cap > 0 ? k->cap : 1 << 18;
		while (n - k->len < len)
			n *= 2;
		uint8_t *b = realloc(k->buf, n);
		if (b == NULL)
			return -1;
		k->buf = b;
		k->cap = n;
	}
	memcpy(k->buf + k->len, data, len);
	k->len += len;
	return 0;
}

static ssize_t sink_pull(void *ctx, void *out, size_t cap)
{
	struct sink *k = ctx;
	if (k->off < k->len) {
		size_t n = k->len - k->off < cap ? k->len - k->off : cap;
		memcpy(out, k->buf + k->off, n);
		k->off += n;
		return (ssize_t)n;
	}
	k->off = k->len = 0;
	k->dst = out;
	k->dcap = cap;
	k->dlen = 0;
	ssize_t r = 0;
	while (k->dlen == 0 && !k->p->done) {
		if (sbx_now_ns() >= k->deadline) {
			sbx_err_set(&k->e, SBX_EUNAVAILABLE, ETIMEDOUT, "download: no end in time");
			errno = ETIMEDOUT;
			r = -1;
			break;
		}
		if (sbx_session_wait(k->s, k->deadline, &k->e) != 0) {
			errno = k->e.errnum != 0 ? k->e.errnum : EIO;
			r = -1;
			break;
		}
	}
	k->dst = NULL;
	return r < 0 ? r : (ssize_t)k->dlen;
}

/* Runs a DOWNLOAD of source into the staging folder stage_fd. *kind gets the agent's word.
 * only: a file's download, the one member its archive may hold. */
static int run_download(struct sbx_session *s, const char *source, const char *only, int stage_fd,
                        int tee_fd, const struct sbx_xfer_opts *o, char *kind, size_t kcap,
                        struct sbx_xfer_stats *st, struct sbx_err *e)
{
	size_t need = strlen(source) + 128;
	for (const char *const *n = o->names; n != NULL && *n != NULL; n++)
		need += strlen(*n) + 8;
	for (const char *const *n = o->exclude; n != NULL && *n != NULL; n++)
		need += strlen(*n) + 8;
	struct sbx_msgw w;
	uint8_t *b = sbx_req_buf(need, &w, e);
	if (b == NULL)
		return -1;
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DOWNLOAD);
	sbx_msgw_str(&w, SBX_T_PATH, source);
	if (only == NULL) {
		for (const char *const *n = o->names; n != NULL && *n != NULL; n++)
			sbx_msgw_str(&w, SBX_T_NAMES, *n);
		for (const char *const *n = o->exclude; n != NULL && *n != NULL; n++)
			sbx_msgw_str(&w, SBX_T_EXCLUDE, *n);
	}
	sbx_msgw_i64(&w, SBX_T_SKIP_UNSAFE, o->skip_unsafe != 0);

	struct sink k;
	memset(&k, 0, sizeof k);
	k.o = o;
	struct sbx_exec_opts eo;
	sbx_exec_opts_init(&eo);
	eo.on_output = sink_output;
	eo.ctx = &k;
	int64_t start = sbx_now_ns();
	int64_t deadline = start + (int64_t)(timeout_of(o) * 1e9);
	struct sbx_op *p = sbx_job_async(s, b, w.len, &eo, NULL, NULL, e);
	int rc = p == NULL ? -1 : 0;
	free(b);
	int urc = 0;
	struct sbx_err ue;
	struct sbx_unpack_stats us;
	memset(&us, 0, sizeof us);
	if (rc == 0) {
		k.s = s;
		k.p = p;
		k.deadline = deadline;
		struct sbx_unpack_opts uo = {.in_fd = -1,
		                             .pull = sink_pull,
		                             .pull_ctx = &k,
		                             .root_fd = stage_fd,
		                             .mode = o->links == SBX_LINKS_KEEP ? SBX_PUT_KEEP
		                                                                : SBX_PUT_DATA,
		                             .force_walk = o->force_walk,
		                             .tee_fd = tee_fd,
		                             .only = only};
		urc = sbx_unpack(&uo, &us, &ue);
		if (urc != 0 && !p->done) {
			/* Refused or failed here: the rest is not wanted. */
			k.failed = 1;
			if (!sbx_op_job(p)->sink_failed)
				sbx_op_cancel_remote(p);
		}
		rc = sbx_op_wait_until(p, deadline, e);
	}
	free(k.buf);
	int have_sha = 0;
	if (rc == 0)
		rc = sbx_op_answer_ok(p, e);
	if (rc == 0)
		parse_stats(p->resp, p->resp_len, st, kind, kcap, &have_sha);
	int absent = rc == 0 && strcmp(kind, "absent") == 0;
	if (rc == 0 && !absent && urc != 0) {
		*e = ue;
		rc = -1;
	}
	if (rc != 0 && urc != 0 && p != NULL && p->done && k.failed)
		*e = ue; /* the host refused and cancelled: its refusal is the cause */
	if (rc == 0 && !absent && (!have_sha || memcmp(st->sha256, us.sha256, 32) != 0)) {
		char a[65], c[65];
		sbx_hex(us.sha256, SBX_SHA256_LEN, a);
		sbx_hex(st->sha256, SBX_SHA256_LEN, c);
		rc = sbx_err_set(e, SBX_ETRANSFER, 0,
		                 "download: the agent packed a stream with SHA-256 %s, the host "
		                 "received %s",
		                 have_sha ? c : "(none)", a);
	}
	st->seconds = (double)(sbx_now_ns() - start) / 1e9;
	sbx_op_free(p);
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
		if (keep && rc == 0 && fsync(c->fd) != 0)
			rc = sbx_err_set(e, SBX_EUSAGE, errno, "archive_copy %s", path);
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

static int download_common(struct sbx_session *s, const char *source, const char *target,
                           int want_file_or_dir, const struct sbx_xfer_opts *o,
                           enum sbx_kind *kind_out, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	if (kind_out != NULL)
		*kind_out = SBX_KIND_ABSENT;
	if (source == NULL || source[0] != '/')
		return sbx_err_set(e, SBX_EUSAGE, 0, "the source must be an absolute path");
	/* What is there decides how the host copy is staged: a folder merges into target, a
	 * file replaces target. */
	enum sbx_kind k = SBX_KIND_DIR;
	if (want_file_or_dir && sbx_kind(s, source, &k, e) != 0)
		return -1;
	if (k == SBX_KIND_ABSENT)
		return 0;
	char tdir[PATH_MAX], tbase[256];
	if (split(target, tdir, sizeof tdir, tbase, sizeof tbase) != 0 || tbase[0] == '\0')
		return sbx_err_set(e, SBX_EUSAGE, 0, "bad local target %s", target);
	struct stat tst;
	int texists = stat(target, &tst) == 0;
	if (texists && k == SBX_KIND_DIR && !S_ISDIR(tst.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, ENOTDIR, "local target %s is not a folder",
		                   target);
	if (texists && k == SBX_KIND_FILE && S_ISDIR(tst.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, EISDIR, "local target %s is a folder", target);
	int in_target = k == SBX_KIND_DIR && texists;
	if (!in_target && mkdirs(tdir, e) != 0)
		return -1;
	/* The folder the commit writes into: held open, and written by nobody else (who could
	 * otherwise swap the staging folder for their own before the move by name). */
	const char *hpath = in_target ? target : tdir;
	int home = open(hpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (home < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "local folder %s", hpath);
	char what[PATH_MAX + 32];
	snprintf(what, sizeof what, "the local folder %s", hpath);
	if (sbx_dir_private(home, what, e) != 0) {
		close(home);
		return -1;
	}
	char stage[64];
	int sfd = sbx_mkstage(home, STAGE_PREFIX, stage, sizeof stage, e);
	if (sfd < 0) {
		close(home);
		return -1;
	}
	struct copy cp = {.dir = -1, .fd = -1};
	int rc = o->archive_copy != NULL ? open_copy(o->archive_copy, &cp, e) : 0;
	/* A file's archive holds one member, named as the source names the file. */
	const char *sb = strrchr(source, '/') + 1;
	char kind[16] = "";
	if (rc == 0)
		rc = run_download(s, source, k == SBX_KIND_FILE ? sb : NULL, sfd, cp.fd, o, kind,
		                  sizeof kind, st, e);
	if (rc == 0 && strcmp(kind, "absent") == 0) {
		k = SBX_KIND_ABSENT; /* gone between the probe and the download */
	} else if (rc == 0 && !want_file_or_dir && strcmp(kind, "file") == 0) {
		rc = sbx_err_set(e, SBX_ETRANSFER, ENOTDIR,
		                 "%s in the sandbox is a file, not a folder", source);
	} else if (rc == 0 && strcmp(kind, k == SBX_KIND_DIR ? "dir" : "file") != 0) {
		rc = sbx_err_set(e, SBX_ETRANSFER, 0,
		                 "%s changed from a %s to %s during the download", source,
		                 k == SBX_KIND_DIR ? "folder" : "file", kind);
	}
	if (rc == 0 && k == SBX_KIND_DIR) {
		if (in_target) {
			rc = sbx_tree_merge(sfd, home, SBX_MERGE_PRIVATE, e);
		} else if (fchmod(sfd, 0777 & ~umask_now()) != 0) {
			rc = sbx_err_set(e, SBX_ETRANSFER, errno, "move the download to %s",
			                 target);
		} else if ((rc = sbx_move_verified(home, stage, home, tbase, sfd, 1, target, e)) ==
		           0) {
			stage[0] = '\0'; /* it is the target now */
		}
	} else if (rc == 0 && k == SBX_KIND_FILE) {
		rc = place_file(sfd, sb, home, tbase, target, e);
	}
	if (stage[0] != '\0') {
		struct sbx_err e2;
		if (drop_stage(home, stage, sfd, &e2) != 0) {
			if (rc == 0)
				rc = sbx_err_set(e, SBX_ETRANSFER, e2.errnum,
				                 "remove the staging folder %s/%s: %s", hpath,
				                 stage, e2.msg);
			else
				left_behind(e, hpath, stage, e2.msg);
		}
	}
	close(sfd);
	close(home);
	rc = close_copy(&cp, k != SBX_KIND_ABSENT, o->archive_copy, rc, e);
	if (rc == 0 && kind_out != NULL)
		*kind_out = k;
	return rc;
}

int sbx_download_dir(struct sbx_session *s, const char *source, const char *target,
                     const struct sbx_xfer_opts *o, struct sbx_xfer_stats *st, struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	enum sbx_kind k;
	/* A folder that is not there is the reference's tar failing: a transfer error. */
	if (download_common(s, source, target, 0, o, &k, st, e) != 0)
		return -1;
	if (k == SBX_KIND_ABSENT)
		return sbx_err_set(e, SBX_ETRANSFER, ENOENT, "no folder %s in the sandbox", source);
	return 0;
}

int sbx_download_path(struct sbx_session *s, const char *source, const char *target,
                      const struct sbx_xfer_opts *o, enum sbx_kind *kind, struct sbx_xfer_stats *st,
                      struct sbx_err *e)
{
	struct sbx_xfer_opts def;
	o = opts_or_default(o, &def);
	return download_common(s, source, target, 1, o, kind, st, e);
}
