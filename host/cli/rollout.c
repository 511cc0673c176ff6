/* sbx rollout: one agent-rollout episode end to end on the ns runner.
 *
 *   1. an agent sandbox from an image; the task's agent/ folder uploaded to /task;
 *   2. the harness (/task/run.sh) run under the supervisor with a deadline (SandboxSession:
 *      stage, launch, termination witnessed, then collect); its /logs/artifacts downloaded
 *      with --links keep and the agent's archive kept (archive_copy);
 *   3. a clean verifier sandbox; the task's tests/ uploaded to /tests; the artifacts replayed
 *      byte for byte (upload_archive, keep_out /tests); the verifier (/tests/verify.sh) run
 *      under the supervisor; /logs/verifier downloaded (--links data);
 *   4. a summary: reward, exit statuses, receipts, timings; both sandboxes removed, always.
 * Everything the host keeps goes to --out DIR (default ./rollout-out/NAME). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "arch.h"
#include "hex.h"
#include "sbx_runner.h"

struct phase {
	const char *name;
	double seconds;
};

struct rollout {
	const char *task, *image, *verifier_image, *user, *out_arg;
	const char *kind; /* --runner KIND: the kind of both sandboxes (default ns) */
	double timeout, verify_timeout;
	char out[PATH_MAX + 64];
	char agent_sb[192], verifier_sb[192]; /* specs */
	struct phase phases[16];
	int nphases;
	double t0;
	/* results */
	int harness_ran, verifier_ran;
	struct sbx_receipt harness, verifier;
	int have_harness, have_verifier;
	enum sbx_kind artifacts_kind;
	char reward[64];
	struct sbx_xfer_stats up, collect, replay;
	struct sbx_err collect_err;
	int collect_failed;
	int progress; /* a terminal: show progress lines */
};

static double now_s(void)
{
	return (double)sbx_now_ns() / 1e9;
}

static void phase(struct rollout *r, const char *name)
{
	double t = now_s();
	if (r->nphases < 16) {
		r->phases[r->nphases].name = name;
		r->phases[r->nphases].seconds = t - r->t0;
		r->nphases++;
	}
	r->t0 = t;
	if (r->progress)
		cli_fprintf(stderr, "  %-28s %8.3f s\n", name, r->phases[r->nphases - 1].seconds);
}

/* The sandboxes of an episode: of any kind that creates them (sbx_runner.h), named by spec. */
static int sb_create(const struct rollout *r, const char *image, char *spec, size_t cap,
                     struct sbx_err *e)
{
	struct sbx_create_opts co = {.image = image};
	return sbx_sandbox_create(r->kind, &co, spec, cap, e);
}

static void sb_remove(const char *spec)
{
	struct sbx_err e;
	sbx_sandbox_remove(spec, &e);
}

static int sb_open(const char *spec, struct sbx_session **s, struct sbx_err *e)
{
	struct sbx_open_opts oo = {.timeout_s = 30};
	return sbx_open(spec, &oo, s, e);
}

/* A local skeleton "logs/NAME" (0777 folders) merged into the sandbox's /, so the harness and
 * the verifier find their output folders whatever user they run as (no shell needed). */
static int make_logs(struct sbx_session *s, const char *sub, struct sbx_err *e)
{
	char tmp[] = "/tmp/sbx-rollout-skel-XXXXXX";
	if (mkdtemp(tmp) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, errno, "temporary folder");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/logs", tmp);
	int rc = mkdir(p, 0777) == 0 && chmod(p, 0777) == 0 ? 0 : -1;
	snprintf(p, sizeof p, "%s/logs/%s", tmp, sub);
	if (rc == 0)
		rc = mkdir(p, 0777) == 0 && chmod(p, 0777) == 0 ? 0 : -1;
	if (rc != 0)
		sbx_err_set(e, SBX_EUSAGE, errno, "skeleton");
	else
		rc = sbx_upload_dir(s, tmp, "/", NULL, &(struct sbx_xfer_stats){0}, e);
	snprintf(p, sizeof p, "%s/logs/%s", tmp, sub);
	rmdir(p);
	snprintf(p, sizeof p, "%s/logs", tmp);
	rmdir(p);
	rmdir(tmp);
	return rc;
}

struct stage_ctx {
	struct rollout *r;
	char *argv[4];
	const char *cwd;
	double timeout;
	struct sbx_session *s;
	int collect; /* the harness: collect artifacts */
};

static int stage(void *ctx, struct sbx_run_opts *o, struct sbx_err *e)
{
	(void)e;
	struct stage_ctx *c = ctx;
	o->argv = c->argv;
	o->cwd = c->cwd;
	o->user = c->collect ? c->r->user : NULL;
	o->timeout_s = c->timeout;
	o->grace_s = 2;
	return 0;
}

static int show_progress(void *ctx, uint64_t bytes)
{
	(void)ctx;
	cli_fprintf(stderr, "\r    %10.1f MiB ", (double)bytes / 1048576.0);
	return 0;
}

static int collect(void *ctx, struct sbx_harness *hs, struct sbx_err *e)
{
	(void)hs;
	struct stage_ctx *c = ctx;
	if (!c->collect)
		return 0;
	struct rollout *r = c->r;
	struct sbx_xfer_opts o;
	sbx_xfer_opts_init(&o);
	o.links = SBX_LINKS_KEEP;
	char copy[PATH_MAX + 96], dst[PATH_MAX + 96];
	snprintf(copy, sizeof copy, "%s/artifacts.tar", r->out);
	snprintf(dst, sizeof dst, "%s/artifacts", r->out);
	o.archive_copy = copy;
	if (r->progress)
		o.progress = show_progress;
	int rc = sbx_download_path(c->s, "/logs/artifacts", dst, &o, &r->artifacts_kind,
	                           &r->collect, e);
	if (r->progress)
		fputs("\r\033[K", stderr);
	return rc;
}

/* Runs one supervised program in a sandbox; keeps its receipt. */
static int supervised(struct rollout *r, struct sbx_session *s, const char *session_dir,
                      const char *script, const char *cwd, double timeout, int is_harness,
                      struct sbx_receipt *out, int *have, struct sbx_err *e)
{
	struct sbx_harness *hs;
	if (sbx_harness_open(&hs, s, session_dir, e) != 0)
		return -1;
	struct stage_ctx c = {.r = r,
	                      .argv = {"/bin/sh", (char *)script, NULL, NULL},
	                      .cwd = cwd,
	                      .timeout = timeout,
	                      .s = s,
	                      .collect = is_harness};
	int rc = sbx_harness_execute(hs, stage, collect, &c, timeout, 10, e);
	const struct sbx_receipt *rec = sbx_harness_receipt(hs);
	if (rec != NULL) {
		*out = *rec;
		out->json = NULL; /* the copy does not own the bytes */
		*have = 1;
	}
	const struct sbx_err *ce = sbx_harness_capture_error(hs);
	if (is_harness && ce != NULL && ce->cls != SBX_OK) {
		r->collect_failed = 1;
		r->collect_err = *ce;
	}
	struct sbx_err e2;
	sbx_harness_close(hs, 10, &e2);
	sbx_harness_free(hs);
	return rc;
}

static void json_receipt(struct sbx_jw *w, const char *key, const struct sbx_receipt *r, int have)
{
	sbx_jw_key(w, key);
	if (!have) {
		sbx_jw_null(w);
		return;
	}
	sbx_jw_obj_begin(w);
	sbx_jw_key(w, "verified");
	sbx_jw_bool(w, r->verified);
	sbx_jw_key(w, "trigger");
	sbx_jw_str(w, r->trigger);
	sbx_jw_key(w, "status");
	sbx_jw_int(w, r->status);
	sbx_jw_key(w, "timed_out");
	sbx_jw_bool(w, r->timed_out);
	sbx_jw_key(w, "termination_witnessed");
	sbx_jw_bool(w, r->termination_witnessed);
	sbx_jw_key(w, "kill_rounds");
	sbx_jw_int(w, r->kill_rounds);
	sbx_jw_key(w, "oom_kills");
	sbx_jw_int(w, r->oom_kills);
	sbx_jw_obj_end(w);
}

static void summary(const struct opts *o, struct rollout *r, const struct sbx_err *fail_err)
{
	struct sbx_jw w;
	sbx_jw_init(&w);
	sbx_jw_obj_begin(&w);
	sbx_jw_key(&w, "ok");
	sbx_jw_bool(&w, fail_err == NULL);
	if (fail_err != NULL)
		json_err(&w, fail_err);
	sbx_jw_key(&w, "reward");
	if (r->reward[0] != '\0')
		sbx_jw_str(&w, r->reward);
	else
		sbx_jw_null(&w);
	json_receipt(&w, "harness", &r->harness, r->have_harness);
	json_receipt(&w, "verifier", &r->verifier, r->have_verifier);
	sbx_jw_key(&w, "artifacts");
	sbx_jw_obj_begin(&w);
	sbx_jw_key(&w, "kind");
	if (r->artifacts_kind == SBX_KIND_ABSENT)
		sbx_jw_null(&w);
	else
		sbx_jw_str(&w, sbx_kind_name(r->artifacts_kind));
	sbx_jw_key(&w, "files");
	sbx_jw_int(&w, (int64_t)r->collect.files);
	sbx_jw_key(&w, "archive_bytes");
	sbx_jw_int(&w, (int64_t)r->collect.archive_bytes);
	char h[2 * sizeof r->collect.sha256 + 1];
	sbx_hex(r->collect.sha256, sizeof r->collect.sha256, h);
	sbx_jw_kstr(&w, "sha256", h);
	sbx_hex(r->replay.sha256, sizeof r->replay.sha256, h);
	sbx_jw_kstr(&w, "replayed_sha256", h);
	if (r->collect_failed) {
		sbx_jw_key(&w, "collect_error");
		sbx_jw_str(&w, r->collect_err.msg);
	}
	sbx_jw_obj_end(&w);
	sbx_jw_key(&w, "out");
	sbx_jw_str(&w, r->out);
	sbx_jw_key(&w, "timings");
	sbx_jw_obj_begin(&w);
	double total = 0;
	for (int i = 0; i < r->nphases; i++) {
		sbx_jw_key(&w, r->phases[i].name);
		sbx_jw_double(&w, r->phases[i].seconds);
		total += r->phases[i].seconds;
	}
	sbx_jw_key(&w, "total");
	sbx_jw_double(&w, total);
	sbx_jw_obj_end(&w);
	sbx_jw_obj_end(&w);
	char path[PATH_MAX + 96];
	snprintf(path, sizeof path, "%s/summary.json", r->out);
	FILE *f = fopen(path, "w");
	size_t len;
	const char *text = sbx_jw_text(&w, &len);
	if (f != NULL) {
		if (text != NULL) {
			fwrite(text, 1, len, f);
			fputc('\n', f);
		}
		fclose(f);
	}
	if (o->json) {
		print_json(&w);
	} else {
		cli_printf("rollout %s\n", fail_err == NULL ? "finished" : "FAILED");
		if (fail_err != NULL)
			cli_printf("  error       %s: %s\n", sbx_err_class_name(fail_err->cls),
			           fail_err->msg);
		cli_printf("  reward      %s\n", r->reward[0] ? r->reward : "(none)");
		if (r->have_harness)
			cli_printf("  harness     exit %d, trigger %s, receipt %s, termination of "
			           "every "
			           "process %s (%lld SIGKILL rounds)\n",
			           r->harness.status, r->harness.trigger,
			           r->harness.verified ? "verified" : "NOT VERIFIED",
			           r->harness.termination_witnessed ? "witnessed" : "NOT witnessed",
			           (long long)r->harness.kill_rounds);
		if (r->have_verifier)
			cli_printf("  verifier    exit %d, trigger %s, receipt %s\n",
			           r->verifier.status, r->verifier.trigger,
			           r->verifier.verified ? "verified" : "NOT VERIFIED");
		cli_printf(
		        "  artifacts   %s, %llu files, %llu archive bytes, replayed with the same "
		        "SHA-256: %s\n",
		        r->artifacts_kind == SBX_KIND_ABSENT ? "absent"
		                                             : sbx_kind_name(r->artifacts_kind),
		        (unsigned long long)r->collect.files,
		        (unsigned long long)r->collect.archive_bytes,
		        r->artifacts_kind == SBX_KIND_ABSENT                   ? "-"
		        : memcmp(r->collect.sha256, r->replay.sha256, 32) == 0 ? "yes"
		                                                               : "NO");
		cli_printf("  timings    ");
		for (int i = 0; i < r->nphases; i++)
			cli_printf(" %s %.3f s%s", r->phases[i].name, r->phases[i].seconds,
			           i + 1 < r->nphases ? "," : "\n");
		cli_printf("  kept in     %s\n", r->out);
	}
	sbx_jw_free(&w);
}

static int read_small(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

static int episode(struct rollout *r, struct sbx_err *e)
{
	char p[PATH_MAX + 96];
	struct sbx_session *s = NULL;
	/* The agent's sandbox. */
	if (sb_create(r, r->image, r->agent_sb, sizeof r->agent_sb, e) != 0)
		return -1;
	if (sb_open(r->agent_sb, &s, e) != 0)
		return -1;
	phase(r, "agent_sandbox");
	snprintf(p, sizeof p, "%s/agent", r->task);
	struct sbx_xfer_opts xo;
	sbx_xfer_opts_init(&xo);
	if (sbx_upload_dir(s, p, "/task", &xo, &r->up, e) != 0 ||
	    make_logs(s, "artifacts", e) != 0) {
		sbx_session_close(s);
		return -1;
	}
	phase(r, "upload_task");
	/* The harness, supervised; artifacts collected once termination is witnessed. */
	int rc = supervised(r, s, "/tmp/.sbx-harness", "/task/run.sh", "/task", r->timeout, 1,
	                    &r->harness, &r->have_harness, e);
	sbx_session_close(s);
	s = NULL;
	phase(r, "harness_and_collect");
	if (rc != 0)
		return -1;
	if (r->collect_failed) {
		*e = r->collect_err;
		return -1;
	}
	sb_remove(r->agent_sb);
	r->agent_sb[0] = '\0';
	phase(r, "agent_sandbox_rm");
	/* A clean verifier sandbox: the tests, then the agent's artifacts byte for byte. */
	if (sb_create(r, r->verifier_image, r->verifier_sb, sizeof r->verifier_sb, e) != 0 ||
	    sb_open(r->verifier_sb, &s, e) != 0)
		return -1;
	phase(r, "verifier_sandbox");
	snprintf(p, sizeof p, "%s/tests", r->task);
	const char *keep_out[] = {"/tests"};
	int landed = 1;
	char *warning = NULL;
	rc = sbx_upload_dir(s, p, "/tests", &xo, &(struct sbx_xfer_stats){0}, e);
	if (rc == 0)
		rc = make_logs(s, "verifier", e);
	if (rc == 0 && r->artifacts_kind != SBX_KIND_ABSENT) {
		snprintf(p, sizeof p, "%s/artifacts.tar", r->out);
		rc = sbx_upload_archive(s, p, r->artifacts_kind, "/logs/artifacts", keep_out, 1,
		                        &xo, &landed, &warning, &r->replay, e);
		if (rc == 0 && !landed)
			rc = sbx_err_set(e, SBX_ETRANSFER, 0, "artifacts not replayed: %s",
			                 warning ? warning : "diverted");
	}
	free(warning);
	if (rc != 0) {
		sbx_session_close(s);
		return -1;
	}
	phase(r, "replay_artifacts");
	rc = supervised(r, s, "/tmp/.sbx-verifier", "/tests/verify.sh", "/tests", r->verify_timeout,
	                0, &r->verifier, &r->have_verifier, e);
	phase(r, "verify");
	if (rc == 0) {
		snprintf(p, sizeof p, "%s/verifier", r->out);
		rc = sbx_download_dir(s, "/logs/verifier", p, &xo, &(struct sbx_xfer_stats){0}, e);
		snprintf(p, sizeof p, "%s/verifier/reward.txt", r->out);
		if (rc == 0 && read_small(p, r->reward, sizeof r->reward) != 0)
			snprintf(r->reward, sizeof r->reward, "%s", "");
	}
	sbx_session_close(s);
	phase(r, "collect_verdict");
	return rc;
}

struct rollout_call {
	struct cli_call c;
	struct rollout r;
	char def_image[PATH_MAX + 64];
};

static int rollout_argv(struct cli_call *c, int argc, char **argv, struct sbx_err *e)
{
	struct rollout *r = &((struct rollout_call *)c)->r;
	r->kind = "ns";
	r->timeout = 60;
	r->verify_timeout = 60;
	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "rollout: %s needs a value", argv[i]);
		if (strcmp(argv[i], "--task") == 0)
			r->task = v;
		else if (strcmp(argv[i], "--image") == 0)
			r->image = v;
		else if (strcmp(argv[i], "--verifier-image") == 0)
			r->verifier_image = v;
		else if (strcmp(argv[i], "--user") == 0)
			r->user = v;
		else if (strcmp(argv[i], "--out") == 0)
			r->out_arg = v;
		else if (strcmp(argv[i], "--runner") == 0)
			r->kind = v;
		else if (strcmp(argv[i], "--timeout") == 0)
			r->timeout = atof(v);
		else if (strcmp(argv[i], "--verify-timeout") == 0)
			r->verify_timeout = atof(v);
		else
			return sbx_err_set(e, SBX_EUSAGE, 0, "rollout: unknown option %s", argv[i]);
		i++;
	}
	if (r->task == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "rollout needs --task DIR (a folder with agent/run.sh and "
		                   "tests/verify.sh)");
	return 0;
}

/* The episode, its sandboxes removed, and its summary (which says itself whether it failed:
 * the row prints its own answer). */
static int rollout_run(struct cli_call *c, struct sbx_err *e)
{
	struct rollout_call *rc_ = (struct rollout_call *)c;
	struct rollout *r = &rc_->r;
	c->fail_status = EX_USAGE;
	if (r->image == NULL) {
		/* The bundled BusyBox image of this machine's architecture, beside the build. */
		char dir[PATH_MAX];
		if (sbx_agent_dir(dir, sizeof dir, e) != 0)
			return -1;
		snprintf(rc_->def_image, sizeof rc_->def_image, "%s/../images/busybox-%s%s", dir,
		         sbx_arch_self(), strcmp(r->kind, "ns") != 0 ? ".tar" : "");
		r->image = rc_->def_image;
	}
	if (r->verifier_image == NULL)
		r->verifier_image = r->image;
	char cwd[PATH_MAX - 64];
	if (r->out_arg != NULL)
		snprintf(r->out, sizeof r->out, "%s", r->out_arg);
	else if (getcwd(cwd, sizeof cwd) != NULL)
		snprintf(r->out, sizeof r->out, "%s/rollout-out/%ld", cwd, (long)time(NULL));
	char mk[PATH_MAX + 64];
	snprintf(mk, sizeof mk, "%s", r->out);
	for (char *q = mk + 1; *q != '\0'; q++)
		if (*q == '/') {
			*q = '\0';
			mkdir(mk, 0755);
			*q = '/';
		}
	if (mkdir(mk, 0755) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUSAGE, errno, "rollout: output folder %s", r->out);
	c->fail_status = 0;
	r->progress = !c->json && isatty(2);
	r->t0 = now_s();
	int rc = episode(r, e);
	/* Both sandboxes go, whatever happened. */
	if (r->agent_sb[0] != '\0')
		sb_remove(r->agent_sb);
	if (r->verifier_sb[0] != '\0')
		sb_remove(r->verifier_sb);
	phase(r, "close");
	summary(c->o, r, rc == 0 ? NULL : e);
	c->answered = 1;
	c->status = rc == 0 ? 0 : class_exit(e->cls);
	return 0;
}

const struct cli_cmd cli_rollout = {
        .name = "rollout",
        .need = CLI_NONE,
        .size = sizeof(struct rollout_call),
        .parse_argv = rollout_argv,
        .run = rollout_run,
        .synopsis = "--task DIR [--runner KIND] [--image DIR|TAR] [--verifier-image DIR|TAR] "
                    "[--user U] [--timeout S] [--verify-timeout S] [--out DIR]",
        .summary = "one agent-rollout episode (two sandboxes)",
        .details = "KIND: a runner that creates sandboxes (default ns). The summary (reward, "
                   "statuses, receipts, timings) is printed and kept in DIR/summary.json.",
};
