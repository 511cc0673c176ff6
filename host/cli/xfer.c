/* sbx upload-dir / download-dir / upload-path / download-path / upload-archive, and their
 * JSON-lines forms (upload_dir ...). A progress line on a terminal for long transfers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hex.h"

static const char *const xfer_cmds[] = {"upload-dir",    "download-dir",   "upload-path",
                                        "download-path", "upload-archive", NULL};

int cli_xfer_known(const char *cmd)
{
	for (const char *const *c = xfer_cmds; *c != NULL; c++)
		if (strcmp(*c, cmd) == 0)
			return 1;
	return 0;
}

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
	sbx_jw_key(w, "files");
	sbx_jw_int(w, (int64_t)st->files);
	sbx_jw_key(w, "dirs");
	sbx_jw_int(w, (int64_t)st->dirs);
	sbx_jw_key(w, "links");
	sbx_jw_int(w, (int64_t)st->links);
	sbx_jw_key(w, "bytes");
	sbx_jw_int(w, (int64_t)st->data_bytes);
	sbx_jw_key(w, "archive_bytes");
	sbx_jw_int(w, (int64_t)st->archive_bytes);
	sbx_jw_key(w, "sha256");
	sbx_jw_str(w, h);
	sbx_jw_key(w, "seconds");
	sbx_jw_double(w, st->seconds);
	if (st->note[0] != '\0') {
		sbx_jw_key(w, "note");
		sbx_jw_str(w, st->note);
	}
}

/* The parsed arguments of one transfer, from argv or from a JSON request. */
struct xargs {
	const char *src, *dst, *kind;
	struct sbx_xfer_opts xo;
	const char **names, **exclude, **keep_out;
	size_t nnames, nexclude, nkeep;
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

static void xargs_free(struct xargs *a)
{
	free(a->names);
	free(a->exclude);
	free(a->keep_out);
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

/* Runs one transfer; *w gets the JSON fields of the result (after "ok"). Returns 0, 1 when
 * the answer is "no" (upload-archive not landed), or -1 with *e. */
static int run_one(struct sbx_session *s, const char *cmd, struct xargs *a, struct sbx_jw *w,
                   int human, struct sbx_err *e)
{
	struct sbx_xfer_stats st;
	memset(&st, 0, sizeof st);
	a->xo.names = a->names;
	a->xo.exclude = a->exclude;
	struct progress pr = {now_s(), 0, 0};
	if (human && isatty(2)) {
		a->xo.progress = show_progress;
		a->xo.ctx = &pr;
	}
	int rc = 0, res = 0;
	enum sbx_kind kind = SBX_KIND_ABSENT;
	int landed = 1;
	char *warning = NULL;
	if (strcmp(cmd, "upload-dir") == 0)
		rc = sbx_upload_dir(s, a->src, a->dst, &a->xo, &st, e);
	else if (strcmp(cmd, "download-dir") == 0)
		rc = sbx_download_dir(s, a->src, a->dst, &a->xo, &st, e);
	else if (strcmp(cmd, "upload-path") == 0)
		rc = sbx_upload_path(s, a->src, a->dst, &a->xo, &st, e);
	else if (strcmp(cmd, "download-path") == 0)
		rc = sbx_download_path(s, a->src, a->dst, &a->xo, &kind, &st, e);
	else {
		enum sbx_kind k = SBX_KIND_ABSENT;
		if (a->kind != NULL && strcmp(a->kind, "dir") == 0)
			k = SBX_KIND_DIR;
		else if (a->kind != NULL && strcmp(a->kind, "file") == 0)
			k = SBX_KIND_FILE;
		else
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "upload-archive: kind must be dir or file");
		rc = sbx_upload_archive(s, a->src, k, a->dst, a->keep_out, a->nkeep, &a->xo,
		                        &landed, &warning, &st, e);
	}
	end_progress(&pr);
	if (rc != 0) {
		free(warning);
		return -1;
	}
	if (strcmp(cmd, "download-path") == 0) {
		sbx_jw_key(w, "kind");
		if (kind == SBX_KIND_ABSENT)
			sbx_jw_null(w);
		else
			sbx_jw_str(w, sbx_kind_name(kind));
		if (human)
			cli_printf("%s\n",
			           kind == SBX_KIND_ABSENT ? "absent" : sbx_kind_name(kind));
	}
	if (strcmp(cmd, "upload-archive") == 0) {
		sbx_jw_key(w, "landed");
		sbx_jw_bool(w, landed);
		if (warning != NULL) {
			sbx_jw_key(w, "warning");
			sbx_jw_str(w, warning);
			if (human)
				cli_fprintf(stderr, "sbx: warning: %s\n", warning);
		}
		res = landed ? 0 : 1;
	}
	free(warning);
	if (landed)
		json_stats(w, &st);
	if (human && st.note[0] != '\0')
		cli_fprintf(stderr, "sbx: note: %s\n", st.note);
	return res;
}

int cli_xfer(const struct opts *o, struct sbx_session *s, const char *cmd, int argc, char **argv)
{
	struct xargs a;
	memset(&a, 0, sizeof a);
	sbx_xfer_opts_init(&a.xo);
	struct sbx_err e;
	const char *pos[3] = {NULL, NULL, NULL};
	int npos = 0, want = strcmp(cmd, "upload-archive") == 0 ? 3 : 2;
	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;
		if (strcmp(argv[i], "--readable") == 0) {
			a.xo.make_readable = 1;
			continue;
		} else if (strcmp(argv[i], "--skip-unsafe") == 0) {
			a.xo.skip_unsafe = 1;
			continue;
		} else if (strcmp(argv[i], "--force-walk") == 0) {
			a.xo.force_walk = 1;
			continue;
		} else if (strcmp(argv[i], "--name") == 0 && v != NULL) {
			r = push(&a.names, &a.nnames, v);
		} else if (strcmp(argv[i], "--exclude") == 0 && v != NULL) {
			r = push(&a.exclude, &a.nexclude, v);
		} else if (strcmp(argv[i], "--keep-out") == 0 && v != NULL) {
			r = push(&a.keep_out, &a.nkeep, v);
		} else if (strcmp(argv[i], "--links") == 0 && v != NULL) {
			if (parse_links(v, &a.xo.links, &e) != 0) {
				xargs_free(&a);
				return fail(o, &e, EX_USAGE);
			}
		} else if (strcmp(argv[i], "--archive-copy") == 0 && v != NULL) {
			a.xo.archive_copy = v;
		} else if (strcmp(argv[i], "--xfer-timeout") == 0 && v != NULL) {
			a.xo.timeout_s = atof(v);
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			sbx_err_set(&e, SBX_EUSAGE, 0, "%s: unknown option or missing value: %s",
			            cmd, argv[i]);
			xargs_free(&a);
			return fail(o, &e, EX_USAGE);
		} else {
			if (npos < 3)
				pos[npos] = argv[i];
			npos++;
			continue;
		}
		if (r != 0) {
			xargs_free(&a);
			sbx_err_set(&e, SBX_EUSAGE, ENOMEM, "arguments");
			return fail(o, &e, EX_USAGE);
		}
		i++;
	}
	if (npos != want) {
		sbx_err_set(&e, SBX_EUSAGE, 0, "%s takes %s", cmd,
		            want == 3 ? "ARCHIVE dir|file TARGET" : "SOURCE TARGET");
		xargs_free(&a);
		return fail(o, &e, EX_USAGE);
	}
	a.src = pos[0];
	if (want == 3) {
		a.kind = pos[1];
		a.dst = pos[2];
	} else {
		a.dst = pos[1];
	}
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	sbx_jw_key(&w, "ok");
	sbx_jw_bool(&w, 1);
	int rc = run_one(s, cmd, &a, &w, !o->json, &e);
	sbx_jw_obj_end(&w);
	xargs_free(&a);
	if (rc < 0) {
		sbx_jw_free(&w);
		return fail(o, &e, class_exit(e.cls));
	}
	if (o->json)
		print_json(&w);
	sbx_jw_free(&w);
	return rc == 1 ? EX_FALSE : 0;
}

static int jflag(const struct sbx_json *req, const char *key)
{
	const struct sbx_json *x = sbx_json_get(req, key);
	int b = 0;
	return x != NULL && sbx_json_bool(x, &b) == 0 && b;
}

static int jlist(const struct sbx_json *req, const char *key, const char ***out, size_t *n,
                 struct sbx_err *e)
{
	const struct sbx_json *x = sbx_json_get(req, key);
	if (x == NULL || x->type == SBX_JSON_NULL)
		return 0;
	*out = jstrs(x, n, e);
	return *out == NULL ? -1 : 0;
}

int cli_xfer_session(struct sbx_session *s, const char *op, const struct sbx_json *req,
                     struct sbx_jw *w, struct sbx_err *e, int *rc)
{
	static const char *const ops[] = {"upload_dir",    "download_dir",   "upload_path",
	                                  "download_path", "upload_archive", NULL};
	const char *cmd = NULL;
	for (int i = 0; ops[i] != NULL; i++)
		if (strcmp(op, ops[i]) == 0)
			cmd = xfer_cmds[i];
	if (cmd == NULL)
		return 0;
	*rc = -1;
	struct xargs a;
	memset(&a, 0, sizeof a);
	sbx_xfer_opts_init(&a.xo);
	a.src = jstr(req, strcmp(op, "upload_archive") == 0 ? "archive" : "source");
	a.dst = jstr(req, "target");
	a.kind = jstr(req, "kind");
	if (a.src == NULL || a.dst == NULL) {
		sbx_err_set(e, SBX_EUSAGE, 0, "%s needs \"%s\" and \"target\"", op,
		            strcmp(op, "upload_archive") == 0 ? "archive" : "source");
		return 1;
	}
	a.xo.make_readable = jflag(req, "make_readable");
	a.xo.skip_unsafe = jflag(req, "skip_unsafe");
	a.xo.force_walk = jflag(req, "force_walk");
	a.xo.archive_copy = jstr(req, "archive_copy");
	const char *links = jstr(req, "links");
	double d;
	const struct sbx_json *x = sbx_json_get(req, "timeout");
	if (x != NULL && sbx_json_double(x, &d) == 0)
		a.xo.timeout_s = d;
	if ((links != NULL && parse_links(links, &a.xo.links, e) != 0) ||
	    jlist(req, "names", &a.names, &a.nnames, e) != 0 ||
	    jlist(req, "exclude", &a.exclude, &a.nexclude, e) != 0 ||
	    jlist(req, "keep_out", &a.keep_out, &a.nkeep, e) != 0) {
		xargs_free(&a);
		return 1;
	}
	sbx_jw_key(w, "ok");
	sbx_jw_bool(w, 1);
	int r = run_one(s, cmd, &a, w, 0, e);
	xargs_free(&a);
	*rc = r < 0 ? -1 : 0;
	return 1;
}
