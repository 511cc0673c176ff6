/* kubectl:POD[/CONTAINER][@NAMESPACE] and ssh:[USER@]HOST[:PORT]: spec parsing, channel
 * argv, and injection through the channel (runner/boot.c, runner/inject.c). Nothing here talks
 * to an API server or a socket: every step is one kubectl or ssh process. */
#include "remote.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "runner.h"

struct vec {
	char **w;
	size_t n, cap;
	int failed;
};

static void add(struct vec *v, const char *s)
{
	if (v->failed)
		return;
	if (v->n + 2 > v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 16;
		char **w = realloc(v->w, cap * sizeof *w);
		if (w == NULL) {
			v->failed = 1;
			return;
		}
		v->w = w;
		v->cap = cap;
	}
	if ((v->w[v->n] = strdup(s)) == NULL) {
		v->failed = 1;
		return;
	}
	v->w[++v->n] = NULL;
}

static void free_words(char **w)
{
	for (char **p = w; p != NULL && *p != NULL; p++)
		free(*p);
	free(w);
}

void sbx_remote_free(struct sbx_remote *rm)
{
	free_words(rm->tmpl);
	free_words(rm->run);
	rm->tmpl = NULL;
	rm->run = NULL;
}

/* A name that cannot be taken for an option or split by a shell: 1..253 of
 * A-Za-z0-9 and extra, not starting with '-'. */
static int good_name(const char *s, size_t n, const char *extra)
{
	if (n == 0 || n > 253 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alnum =
		        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && (c == '\0' || strchr(extra, c) == NULL))
			return 0;
	}
	return 1;
}

static int kubectl_parse(const char *spec, struct vec *run, char *what, size_t cap,
                         struct sbx_err *e)
{
	char pod[254] = "", ctr[254] = "", ns[254] = "";
	const char *at = strrchr(spec, '@');
	size_t head = at != NULL ? (size_t)(at - spec) : strlen(spec);
	const char *slash = memchr(spec, '/', head);
	size_t plen = slash != NULL ? (size_t)(slash - spec) : head;
	if (!good_name(spec, plen, ".-_"))
		return sbx_err_set(e, SBX_EUSAGE, 0, "kubectl runner: bad pod name in '%s'", spec);
	snprintf(pod, sizeof pod, "%.*s", (int)plen, spec);
	if (slash != NULL) {
		size_t clen = head - plen - 1;
		if (!good_name(slash + 1, clen, ".-_"))
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "kubectl runner: bad container name in '%s'", spec);
		snprintf(ctr, sizeof ctr, "%.*s", (int)clen, slash + 1);
	}
	if (at != NULL) {
		if (!good_name(at + 1, strlen(at + 1), ".-_"))
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "kubectl runner: bad namespace in '%s'", spec);
		snprintf(ns, sizeof ns, "%s", at + 1);
	}
	add(run, "kubectl");
	add(run, "exec");
	add(run, "-i");
	if (ns[0] != '\0') {
		add(run, "-n");
		add(run, ns);
	}
	add(run, pod);
	if (ctr[0] != '\0') {
		add(run, "-c");
		add(run, ctr);
	}
	add(run, "--");
	snprintf(what, cap, "pod %s%s%s%s%s", pod, ctr[0] ? " container " : "", ctr,
	         ns[0] ? " in namespace " : "", ns);
	return 0;
}

static int ssh_parse(const char *spec, struct vec *run, char *what, size_t cap, struct sbx_err *e)
{
	char user[254] = "", host[254] = "", port[8] = "";
	const char *at = strrchr(spec, '@');
	const char *h = spec;
	if (at != NULL) {
		if (!good_name(spec, (size_t)(at - spec), ".-_"))
			return sbx_err_set(e, SBX_EUSAGE, 0, "ssh runner: bad user in '%s'", spec);
		snprintf(user, sizeof user, "%.*s", (int)(at - spec), spec);
		h = at + 1;
	}
	const char *p = NULL;
	size_t hlen;
	if (h[0] == '[') {
		const char *close = strchr(h, ']');
		if (close == NULL || (close[1] != '\0' && close[1] != ':'))
			return sbx_err_set(e, SBX_EUSAGE, 0, "ssh runner: bad host in '%s'", spec);
		h++;
		hlen = (size_t)(close - h);
		p = close[1] == ':' ? close + 2 : NULL;
	} else {
		const char *colon = strchr(h, ':');
		if (colon != NULL && strchr(colon + 1, ':') == NULL) {
			hlen = (size_t)(colon - h);
			p = colon + 1;
		} else {
			hlen = strlen(h); /* no port, or a bare IPv6 address */
		}
	}
	if (!good_name(h, hlen, ".-_:%"))
		return sbx_err_set(e, SBX_EUSAGE, 0, "ssh runner: bad host in '%s'", spec);
	snprintf(host, sizeof host, "%.*s", (int)hlen, h);
	if (p != NULL) {
		char *end;
		errno = 0;
		long n = strtol(p, &end, 10);
		if (p[0] < '0' || p[0] > '9' || *end != '\0' || errno != 0 || n < 1 || n > 65535)
			return sbx_err_set(e, SBX_EUSAGE, 0, "ssh runner: bad port in '%s'", spec);
		snprintf(port, sizeof port, "%ld", n);
	}
	/* -T: no tty (it would rewrite the frames); -e none: no escape character, so a "~."
	 * at the start of a line in the data is data; BatchMode: fail rather than prompt. */
	add(run, "ssh");
	add(run, "-T");
	add(run, "-e");
	add(run, "none");
	add(run, "-o");
	add(run, "BatchMode=yes");
	const char *cfg = getenv("SBX_SSH_CONFIG");
	if (cfg != NULL && cfg[0] != '\0') {
		add(run, "-F");
		add(run, cfg);
	}
	if (port[0] != '\0') {
		add(run, "-p");
		add(run, port);
	}
	char dest[520];
	snprintf(dest, sizeof dest, "%s%s%s", user, user[0] ? "@" : "", host);
	add(run, dest);
	snprintf(what, cap, "ssh host %.280s%s%s", dest, port[0] ? " port " : "", port);
	return 0;
}

int sbx_remote_parse(const char *spec, struct sbx_remote *rm, struct sbx_err *e)
{
	memset(rm, 0, sizeof *rm);
	struct vec run = {0};
	int rc;
	if (strncmp(spec, "kubectl:", 8) == 0) {
		rc = kubectl_parse(spec + 8, &run, rm->what, sizeof rm->what, e);
	} else if (strncmp(spec, "ssh:", 4) == 0) {
		rc = ssh_parse(spec + 4, &run, rm->what, sizeof rm->what, e);
		rm->joined = 1;
	} else {
		return sbx_err_set(e, SBX_EUSAGE, 0, "not a kubectl: or ssh: runner: '%s'", spec);
	}
	struct vec tmpl = {0};
	for (size_t i = 0; rc == 0 && i < run.n; i++)
		add(&tmpl, run.w[i]);
	add(&tmpl, "{agent}");
	add(&tmpl, "serve");
	if (rc == 0 && (run.failed || tmpl.failed))
		rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "runner");
	if (rc != 0) {
		free_words(run.w);
		free_words(tmpl.w);
		return -1;
	}
	rm->run = run.w;
	rm->tmpl = tmpl.w;
	return 0;
}

int sbx_remote_open(const struct sbx_remote *rm, const char *agent_dir, double timeout_s,
                    struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e)
{
	*s = NULL;
	char found[2048];
	struct sbx_inject_target t = {
	        .tmpl = rm->tmpl,
	        .run = rm->run,
	        .joined = rm->joined,
	        .found = found,
	        .what = rm->what,
	};
	const char *nb = getenv("SBX_NO_BOOT");
	if (nb == NULL || strcmp(nb, "1") != 0) {
		/* One exec: the agent found or delivered and started by the sandbox's shell. */
		struct sbx_err be;
		if (sbx_boot_open(&t, agent_dir, timeout_s, s, res, &be) == 0)
			return 0;
		if (be.cls == SBX_EUSAGE)
			return sbx_err_set(e, be.cls, be.errnum, "%s: %s", rm->what, be.msg);
	}
	char arch[16], local[PATH_MAX];
	if (sbx_inject_survey(&t, timeout_s, arch, sizeof arch, found, sizeof found, e) != 0)
		return -1;
	if (sbx_agent_path(agent_dir, arch, local, sizeof local, e) != 0)
		return -1;
	return sbx_inject_open(&t, local, timeout_s, s, res, e);
}

/* ---- the kubectl and ssh rows of the runner table (sbx_runner.h) ---- */

static int remote_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	char spec[512];
	struct sbx_remote rm;
	if (arg == NULL ||
	    (size_t)snprintf(spec, sizeof spec, "%s:%s", self->name, arg) >= sizeof spec)
		return sbx_err_set(e, SBX_EUSAGE, 0, "%s: needs a target", self->name);
	if (sbx_remote_parse(spec, &rm, e) != 0)
		return -1;
	sbx_remote_free(&rm);
	return 0;
}

static int remote_open(const struct sbx_runner_class *self, const char *arg,
                       const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	char spec[512];
	snprintf(spec, sizeof spec, "%s:%s", self->name, arg);
	struct sbx_remote rm;
	if (sbx_remote_parse(spec, &rm, e) != 0)
		return -1;
	int rc;
	if (o->agent == NULL) {
		struct sbx_inject_result res;
		rc = sbx_remote_open(&rm, o->agent_dir, o->timeout_s > 0 ? o->timeout_s : 30, s,
		                     &res, e);
	} else {
		/* --agent: that path there, as it is; ssh hands the words to a shell, so it goes
		 * quoted. */
		char *quoted = rm.joined ? sbx_shell_quote(o->agent) : NULL;
		rc = rm.joined && quoted == NULL
		             ? sbx_err_set(e, SBX_EUSAGE, ENOMEM, "runner")
		             : sbx_runner_open_template((const char *const *)rm.tmpl,
		                                        rm.joined ? quoted : o->agent, o, s, e);
		free(quoted);
	}
	sbx_remote_free(&rm);
	return rc;
}

const struct sbx_runner_class sbx_runner_kubectl = {.name = "kubectl",
                                                    .arg = "POD[/C][@NS]",
                                                    .boundary = 1,
                                                    .parse = remote_parse,
                                                    .open = remote_open};

const struct sbx_runner_class sbx_runner_ssh = {.name = "ssh",
                                                .arg = "[USER@]HOST[:PORT]",
                                                .boundary = 1,
                                                .parse = remote_parse,
                                                .open = remote_open};
