/* sbx upload-dir / download-dir / upload-path / download-path / upload-archive: one row each,
 * from argv or from JSON lines (upload_dir ...). A progress line on a terminal for long
 * transfers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hex.h"

/* ---- progress on a terminal ---- */

struct progress {
	double start, last;
	int shown;
};

static double now_s(void)
{
	return (double)sbx_now_ns() / 1e9;
}

static int show_progress(void *ctx, uint64_t bytes)
{
	struct progress *p = ctx;
	double t = now_s();
	if (t - p->last < 0.25 || t - p->start < 0.5)
		return 0;
	p->last = t;
	p->shown = 1;
	double mib = (double)bytes / 1048576.0;
	cli_fprintf(stderr, "\r  %10.1f MiB  %8.1f MiB/s  %6.1f s ", mib, mib / (t - p->start),
	            t - p->start);
	return 0;
}

static void end_progress(struct progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
}

/* ---- results ---- */

static void json_stats(struct sbx_jw *w, const struct sbx_xfer_stats *st)
{
	char h[2 * sizeof st->sha256 + 1];
	sbx_hex(st->sha256, sizeof st->sha256, h);
	sbx_jw_kint(w, "files", (int64_t)st->files);
	sbx_jw_kint(w, "dirs", (int64_t)st->dirs);
	sbx_jw_kint(w, "links", (int64_t)st->links);
	sbx_jw_kint(w, "bytes", (int64_t)st->data_bytes);
	sbx_jw_kint(w, "archive_bytes", (int64_t)st->archive_bytes);
	sbx_jw_kstr(w, "sha256", h);
	sbx_jw_kdouble(w, "seconds", st->seconds);
	if (st->note[0] != '\0')
		sbx_jw_kstr(w, "note", st->note);
}

/* One transfer: its arguments from argv or from a JSON request, and its result. */
struct xfer_call {
	struct cli_call c;
	const char *src, *dst, *kind;
	struct sbx_xfer_opts xo;
	const char **names, **exclude, **keep_out;
	size_t nnames, nexclude, nkeep;
	/* results */
	struct sbx_xfer_stats st;
	enum sbx_kind got; /* download-path */
	int landed;        /* upload-archive */
	char *warning;
};

static int push(const char ***v, size_t *n, const char *s)
{
	const char **t = realloc(*v, (*n + 2) * sizeof *t);
	if (t == NULL)
		return -1;
	t[(*n)++] = s;
	t[*n] = NULL;
	*v = t;
	return 0;
}

static void xfer_done(struct cli_call *c)
{
	struct xfer_call *a = (struct xfer_call *)c;
	free(a->names);
	free(a->exclude);
	free(a->keep_out);
	free(a->warning);
}

static int parse_links(const char *v, enum sbx_links *out, struct sbx_err *e)
{
	if (strcmp(v, "data") == 0)
		*out = SBX_LINKS_DATA;
	else if (strcmp(v, "keep") == 0)
		*out = SBX_LINKS_KEEP;
	else
		return sbx_err_set(e, SBX_EUSAGE, 0, "links must be data or keep, not '%s'", v);
	return 0;
}

static int is(const struct cli_call *c, const char *name)
{
	return strcmp(c->cmd->name, name) == 0;
}

static void xfer_init(struct xfer_call *a)
{
	sbx_xfer_opts_init(&a->xo);
	a->landed = 1;
}

static int xfer_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct xfer_call *a = (struct xfer_call *)c;
	const char *pos[3] = {NULL, NULL, NULL};
	int npos = 0, want = is(c, "upload-archive") ? 3 : 2;
	xfer_init(a);
	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;
		if (strcmp(argv[i], "--readable") == 0) {
			a->xo.make_readable = 1;
			continue;
		} else if (strcmp(argv[i], "--skip-unsafe") == 0) {
			a->xo.skip_unsafe = 1;
			continue;
		} else if (strcmp(argv[i], "--force-walk") == 0) {
			a->xo.force_walk = 1;
			continue;
		} else if (strcmp(argv[i], "--name") == 0 && v != NULL) {
			r = push(&a->names, &a->nnames, v);
		} else if (strcmp(argv[i], "--exclude") == 0 && v != NULL) {
			r = push(&a->exclude, &a->nexclude, v);
		} else if (strcmp(argv[i], "--keep-out") == 0 && v != NULL) {
			r = push(&a->keep_out, &a->nkeep, v);
		} else if (strcmp(argv[i], "--links") == 0 && v != NULL) {
			if (parse_links(v, &a->xo.links, e) != 0)
				return -1;
		} else if (strcmp(argv[i], "--archive-copy") == 0 && v != NULL) {
			a->xo.archive_copy = v;
		} else if (strcmp(argv[i], "--xfer-timeout") == 0 && v != NULL) {
			a->xo.timeout_s = atof(v);
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "%s: unknown option or missing value: %s", c->cmd->name,
			                   argv[i]);
		} else {
			if (npos < 3)
				pos[npos] = argv[i];
			npos++;
			continue;
		}
		if (r != 0)
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "arguments");
		i++;
	}
	if (npos != want)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s takes %s", c->cmd->name,
		                   want == 3 ? "ARCHIVE dir|file TARGET" : "SOURCE TARGET");
	a->src = pos[0];
	if (want == 3) {
		a->kind = pos[1];
		a->dst = pos[2];
	} else {
		a->dst = pos[1];
	}
	return 0;
}

static int xfer_json(struct cli_call *c, const struct sbx_json *req, struct sbx_err *e)
{
	struct xfer_call *a = (struct xfer_call *)c;
	const char *src = is(c, "upload-archive") ? "archive" : "source";
	xfer_init(a);
	a->src = jstr(req, src);
	a->dst = jstr(req, "target");
	a->kind = jstr(req, "kind");
	if (a->src == NULL || a->dst == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"%s\" and \"target\"", c->op, src);
	a->xo.archive_copy = jstr(req, "archive_copy");
	const char *links = jstr(req, "links");
	if (jbool(req, "make_readable", &a->xo.make_readable, e) != 0 ||
	    jbool(req, "skip_unsafe", &a->xo.skip_unsafe, e) != 0 ||
	    jbool(req, "force_walk", &a->xo.force_walk, e) != 0 ||
	    jdouble(req, "timeout", &a->xo.timeout_s, e) != 0 ||
	    (links != NULL && parse_links(links, &a->xo.links, e) != 0) ||
	    jlist(req, "names", &a->names, &a->nnames, e) != 0 ||
	    jlist(req, "exclude", &a->exclude, &a->nexclude, e) != 0 ||
	    jlist(req, "keep_out", &a->keep_out, &a->nkeep, e) != 0)
		return -1;
	return 0;
}

static int xfer_run(struct cli_call *c, struct sbx_err *e)
{
	struct xfer_call *a = (struct xfer_call *)c;
	struct sbx_session *s = c->s;
	a->xo.names = a->names;
	a->xo.exclude = a->exclude;
	struct progress pr = {now_s(), 0, 0};
	if (!c->json && !c->lines && isatty(2)) {
		a->xo.progress = show_progress;
		a->xo.ctx = &pr;
	}
	int rc;
	a->got = SBX_KIND_ABSENT;
	if (is(c, "upload-dir")) {
		rc = sbx_upload_dir(s, a->src, a->dst, &a->xo, &a->st, e);
	} else if (is(c, "download-dir")) {
		rc = sbx_download_dir(s, a->src, a->dst, &a->xo, &a->st, e);
	} else if (is(c, "upload-path")) {
		rc = sbx_upload_path(s, a->src, a->dst, &a->xo, &a->st, e);
	} else if (is(c, "download-path")) {
		rc = sbx_download_path(s, a->src, a->dst, &a->xo, &a->got, &a->st, e);
	} else {
		enum sbx_kind k;
		if (a->kind != NULL && strcmp(a->kind, "dir") == 0)
			k = SBX_KIND_DIR;
		else if (a->kind != NULL && strcmp(a->kind, "file") == 0)
			k = SBX_KIND_FILE;
		else
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "upload-archive: kind must be dir or file");
		rc = sbx_upload_archive(s, a->src, k, a->dst, a->keep_out, a->nkeep, &a->xo,
		                        &a->landed, &a->warning, &a->st, e);
	}
	end_progress(&pr);
	c->status = a->landed ? 0 : EX_FALSE;
	return rc;
}

/* The uploads without blocking (sbx session). Their deadline is the blocking form's: the
 * transfer's timeout, 600 s when none is given (sbx_xfer_opts). */
#define XFER_TIMEOUT 600.0

static struct sbx_op *upload_start(struct cli_call *c, struct sbx_err *e)
{
	struct xfer_call *a = (struct xfer_call *)c;
	struct sbx_op *op = is(c, "upload-dir")
	                            ? sbx_upload_dir_async(c->s, a->src, a->dst, &a->xo, e)
	                            : sbx_upload_path_async(c->s, a->src, a->dst, &a->xo, e);
	if (op != NULL)
		sbx_op_set_deadline(op, a->xo.timeout_s > 0 ? a->xo.timeout_s : XFER_TIMEOUT);
	return op;
}

static int upload_finish(struct cli_call *c, struct sbx_op *op, struct sbx_err *e)
{
	return sbx_upload_result(op, &((struct xfer_call *)c)->st, e);
}

static void xfer_print(struct cli_call *c)
{
	struct xfer_call *a = (struct xfer_call *)c;
	struct sbx_jw *w = c->w;
	if (is(c, "download-path")) {
		if (c->json)
			sbx_jw_kstr(w, "kind",
			            a->got == SBX_KIND_ABSENT ? NULL : sbx_kind_name(a->got));
		else
			cli_printf("%s\n", sbx_kind_name(a->got));
	}
	if (is(c, "upload-archive") && c->json) {
		sbx_jw_kbool(w, "landed", a->landed);
		if (a->warning != NULL)
			sbx_jw_kstr(w, "warning", a->warning);
	} else if (a->warning != NULL) {
		cli_fprintf(stderr, "sbx: warning: %s\n", a->warning);
	}
	if (c->json && a->landed)
		json_stats(w, &a->st);
	if (!c->json && a->st.note[0] != '\0')
		cli_fprintf(stderr, "sbx: note: %s\n", a->st.note);
}

#define XFER_ROW(NAME, OP)                                                                         \
	.name = NAME, .op = OP, .need = CLI_FULL, .size = sizeof(struct xfer_call),                \
	.parse_argv = xfer_argv, .parse_json = xfer_json, .run = xfer_run, .print = xfer_print,    \
	.done = xfer_done
#define XFER_FIELDS "; \"timeout\" (s, as --xfer-timeout)"

const struct cli_cmd cli_upload_dir = {
        XFER_ROW("upload-dir", "upload_dir"),
        .start = upload_start,
        .finish = upload_finish,
        .synopsis = "[--readable] SRC TARGET",
        .summary = "a local folder's contents into TARGET",
        .fields = "\"source\", \"target\", \"make_readable\", \"force_walk\"" XFER_FIELDS,
};

const struct cli_cmd cli_download_dir = {
        XFER_ROW("download-dir", "download_dir"),
        .synopsis = "[--name N]... [--exclude P]... [--skip-unsafe] [--links data|keep] "
                    "[--archive-copy F] SRC TARGET",
        .summary = "a sandbox folder's contents into TARGET",
        .fields = "\"source\", \"target\", \"names\", \"exclude\", \"skip_unsafe\", \"links\", "
                  "\"archive_copy\"" XFER_FIELDS,
};

const struct cli_cmd cli_upload_path = {
        XFER_ROW("upload-path", "upload_path"),
        .start = upload_start,
        .finish = upload_finish,
        .synopsis = "SRC TARGET",
        .summary = "restore a file or folder at TARGET",
        .fields = "\"source\", \"target\"" XFER_FIELDS,
};

const struct cli_cmd cli_download_path = {
        XFER_ROW("download-path", "download_path"),
        .synopsis = "[--exclude P]... [--links data|keep] [--archive-copy F] SRC TARGET",
        .summary = "a sandbox file or folder to TARGET; prints dir, file or absent",
        .fields = "\"source\", \"target\", \"exclude\", \"links\", \"archive_copy\"" XFER_FIELDS,
};

const struct cli_cmd cli_upload_archive = {
        XFER_ROW("upload-archive", "upload_archive"),
        .synopsis = "[--keep-out D]... ARCHIVE dir|file TARGET",
        .summary = "replay a kept archive; exit 1 when diverted",
        .details = "Not landed (TARGET would be, or be inside, or hold a KEEP_OUT folder): "
                   "nothing is written, a warning says why.",
        .fields = "\"archive\", \"kind\", \"target\", \"keep_out\"" XFER_FIELDS,
};
