/* The runner table (sbx_runner.h): one row per kind, each row defined in its own file (local,
 * qemu and via here, ns in ns.c, podman and docker in podman.c, kubectl and ssh in remote.c),
 * and the calls that pick a row by spec. */
#include "sbx_runner.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "channel.h"
#include "inject.h"
#include "runner.h"

const struct sbx_runner_class *const sbx_runner_classes[] = {
        &sbx_runner_local,  &sbx_runner_qemu,   &sbx_runner_ns,
        &sbx_runner_podman, &sbx_runner_docker, &sbx_runner_kubectl,
        &sbx_runner_ssh,    &sbx_runner_via,    NULL,
};

const struct sbx_runner_class *sbx_runner_class_of(const char *spec, const char **arg,
                                                   struct sbx_err *e)
{
	const char *colon = strchr(spec, ':');
	size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
	for (const struct sbx_runner_class *const *c = sbx_runner_classes; *c != NULL; c++)
		if (strlen((*c)->name) == n && strncmp((*c)->name, spec, n) == 0) {
			*arg = colon != NULL ? colon + 1 : NULL;
			return *c;
		}
	sbx_err_set(e, SBX_EUSAGE, 0,
	            "unknown runner '%s' (this build has: local, qemu:ARCH, ns:NAME, podman:NAME, "
	            "docker:NAME, kubectl:POD[/CONTAINER][@NAMESPACE], ssh:[USER@]HOST[:PORT], "
	            "via:COMMAND)",
	            spec);
	return NULL;
}

/* The class and its arg, parsed; NULL with *e. */
static const struct sbx_runner_class *parsed(const char *spec, const char **arg, struct sbx_err *e)
{
	const struct sbx_runner_class *c = sbx_runner_class_of(spec, arg, e);
	if (c != NULL && c->parse(c, *arg, e) != 0)
		return NULL;
	return c;
}

int sbx_open(const char *spec, const struct sbx_open_opts *o, struct sbx_session **s,
             struct sbx_err *e)
{
	*s = NULL;
	struct sbx_open_opts def = {0};
	const char *arg;
	const struct sbx_runner_class *c = parsed(spec, &arg, e);
	if (c == NULL || c->open(c, arg, o != NULL ? o : &def, s, e) != 0)
		return -1;
	if (o != NULL && o->timeout_s > 0)
		sbx_session_set_timeout(*s, o->timeout_s);
	/* Started, not waited for: only supervision needs it, and says why when it is missing. */
	struct sbx_err te;
	sbx_session_trust_for(*s, spec, c->boundary, &te);
	return 0;
}

/* The bundled images by name (busybox, debian, noshell): build/images/NAME-ARCH (a folder for
 * ns, NAME-ARCH.tar for an engine) beside the agents ($SBX_IMAGE_DIR, else AGENT_DIR/../images),
 * for the create's architecture (this machine's by default). 1 when o->image is one of those
 * names and the file exists (the name then means it, not an engine's image of that name). */
static int bundled_image(const struct sbx_runner_class *c, const struct sbx_create_opts *o,
                         char *out, size_t cap)
{
	static const char *const names[] = {"busybox", "debian", "noshell", NULL};
	int known = 0;
	for (const char *const *n = names; *n != NULL; n++)
		known |= strcmp(o->image, *n) == 0;
	if (!known)
		return 0;
	const struct sbx_arch *a = sbx_arch_by_name(o->arch != NULL ? o->arch : sbx_arch_self());
	if (a == NULL)
		return 0;
	char dir[PATH_MAX];
	const char *env = getenv("SBX_IMAGE_DIR");
	struct sbx_err e;
	if (env != NULL && env[0] != '\0')
		snprintf(dir, sizeof dir, "%s", env);
	else if (o->agent_dir != NULL)
		snprintf(dir, sizeof dir, "%s/../images", o->agent_dir);
	else if (sbx_agent_dir(dir, sizeof dir - 10, &e) == 0)
		strcat(dir, "/../images");
	else
		return 0;
	int ns = strcmp(c->name, "ns") == 0;
	if ((size_t)snprintf(out, cap, "%s/%s-%s%s", dir, o->image, a->name, ns ? "" : ".tar") >=
	    cap)
		return 0;
	struct stat st;
	return stat(out, &st) == 0 && (ns ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

int sbx_sandbox_create(const char *kind, const struct sbx_create_opts *o, char *spec_out,
                       size_t cap, struct sbx_err *e)
{
	const char *arg;
	const struct sbx_runner_class *c = sbx_runner_class_of(kind, &arg, e);
	if (c == NULL)
		return -1;
	if (c->create == NULL || arg != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the %s runner does not create sandboxes%s",
		                   c->name, arg != NULL ? " (give the kind alone)" : "");
	struct sbx_create_opts bo;
	char bundled[PATH_MAX];
	if (o->image != NULL && bundled_image(c, o, bundled, sizeof bundled)) {
		bo = *o;
		bo.image = bundled;
		o = &bo;
	}
	char made[128];
	if (c->create(c, o, made, sizeof made, e) != 0)
		return -1;
	if ((size_t)snprintf(spec_out, cap, "%s:%s", c->name, made) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "spec");
	return 0;
}

int sbx_sandbox_status(const char *spec, struct sbx_sandbox *sb, struct sbx_err *e)
{
	memset(sb, 0, sizeof *sb);
	const char *arg;
	const struct sbx_runner_class *c = parsed(spec, &arg, e);
	if (c == NULL)
		return -1;
	if (c->status == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the %s runner cannot say what its sandbox is",
		                   c->name);
	return c->status(c, arg, sb, e);
}

int sbx_sandbox_remove(const char *spec, struct sbx_err *e)
{
	const char *arg;
	const struct sbx_runner_class *c = parsed(spec, &arg, e);
	if (c == NULL)
		return -1;
	if (c->remove == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the %s runner does not remove sandboxes",
		                   c->name);
	if (c->remove(c, arg, e) != 0)
		return -1;
	/* Its secret goes with it: a sandbox made later under the name is another one. */
	return sbx_secret_forget(spec, e);
}

static int pause_or_resume(const char *spec, int pause, struct sbx_err *e)
{
	const char *arg;
	const struct sbx_runner_class *c = parsed(spec, &arg, e);
	if (c == NULL)
		return -1;
	int (*fn)(const struct sbx_runner_class *, const char *, struct sbx_err *) =
	        pause ? c->pause : c->resume;
	if (fn == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the %s runner cannot %s its sandboxes",
		                   c->name, pause ? "pause" : "resume");
	return fn(c, arg, e);
}

int sbx_sandbox_pause(const char *spec, struct sbx_err *e)
{
	return pause_or_resume(spec, 1, e);
}

int sbx_sandbox_resume(const char *spec, struct sbx_err *e)
{
	return pause_or_resume(spec, 0, e);
}

/* A class's items of one sort (its sandboxes, its images) into *v (malloc'd, *k of them); 1
 * when the class has none of that sort. */
typedef int (*fetch_fn)(const struct sbx_runner_class *c, void **v, size_t *k, struct sbx_err *e);

/* The items fetch gives of every class (kind: of that one), in one array of size-byte items;
 * what names them in an error. */
static int collect(const char *kind, size_t size, fetch_fn fetch, const char *what, void **out,
                   size_t *n, struct sbx_err *e)
{
	*out = NULL;
	*n = 0;
	for (const struct sbx_runner_class *const *c = sbx_runner_classes; *c != NULL; c++) {
		if (kind != NULL && strcmp(kind, (*c)->name) != 0)
			continue;
		void *v;
		size_t k;
		int rc = fetch(*c, &v, &k, e);
		if (rc > 0)
			continue;
		if (rc < 0) {
			free(*out);
			*out = NULL;
			*n = 0;
			return -1;
		}
		char *all = realloc(*out, (*n + k + 1) * size);
		if (all == NULL) {
			free(v);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "%s", what);
		}
		if (k > 0)
			memcpy(all + *n * size, v, k * size);
		free(v);
		*out = all;
		*n += k;
	}
	if (kind != NULL && *out == NULL) {
		const char *arg;
		if (sbx_runner_class_of(kind, &arg, e) == NULL)
			return -1;
	}
	return 0;
}

static int fetch_sandboxes(const struct sbx_runner_class *c, void **v, size_t *k, struct sbx_err *e)
{
	if (c->list == NULL)
		return 1;
	struct sbx_sandbox *s = NULL;
	int rc = c->list(c, &s, k, e);
	*v = s;
	return rc;
}

static int fetch_images(const struct sbx_runner_class *c, void **v, size_t *k, struct sbx_err *e)
{
	if (c->images == NULL)
		return 1;
	struct sbx_image *im = NULL;
	int rc = c->images(c, &im, k, e);
	*v = im;
	return rc;
}

int sbx_sandbox_list(const char *kind, struct sbx_sandbox **out, size_t *n, struct sbx_err *e)
{
	void *all;
	int rc = collect(kind, sizeof **out, fetch_sandboxes, "list", &all, n, e);
	*out = all;
	return rc;
}

int sbx_image_list(const char *kind, struct sbx_image **out, size_t *n, struct sbx_err *e)
{
	void *all;
	int rc = collect(kind, sizeof **out, fetch_images, "images", &all, n, e);
	*out = all;
	return rc;
}

int sbx_image_remove(const struct sbx_image *im, struct sbx_err *e)
{
	const char *arg;
	const struct sbx_runner_class *c = sbx_runner_class_of(im->kind, &arg, e);
	if (c == NULL)
		return -1;
	if (c->image_remove == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "the %s runner keeps no images", c->name);
	return c->image_remove(c, im, e);
}

/* ---- helpers for the classes (runner.h) ---- */

int sbx_runner_open_template(const char *const *tmpl, const char *agent,
                             const struct sbx_open_opts *o, struct sbx_session **s,
                             struct sbx_err *e)
{
	return sbx_session_open(s, (char *const *)tmpl, agent, o->timeout_s > 0 ? o->timeout_s : 30,
	                        e);
}

int sbx_runner_resident(pid_t pid, const char *agent_dir, double timeout_s, struct sbx_session **s)
{
	const char *v = getenv("SBX_RESIDENT");
	if (v != NULL && strcmp(v, "0") == 0)
		return -1;
	struct sbx_err e;
	if (sbx_session_resident(s, pid, timeout_s, &e) != 0)
		return -1;
	const struct sbx_hello *h = sbx_session_hello(*s);
	char local[PATH_MAX];
	uint8_t sha[SBX_SHA256_LEN];
	if (h->euid == 0 && sbx_agent_path(agent_dir, h->arch, local, sizeof local, &e) == 0 &&
	    sbx_inject_sha256_file(local, sha, &e) == 0 && memcmp(sha, h->sha256, sizeof sha) == 0)
		return 0;
	sbx_session_close(*s); /* another sbx's agent, or not root: the exec way injects ours */
	*s = NULL;
	return -1;
}

int sbx_runner_list_of(const struct sbx_runner_class *self, char **names, size_t k,
                       struct sbx_sandbox **out, size_t *n, struct sbx_err *e)
{
	*out = calloc(k ? k : 1, sizeof **out);
	*n = 0;
	int rc = *out != NULL ? 0 : sbx_err_set(e, SBX_EUSAGE, ENOMEM, "list");
	for (size_t i = 0; i < k; i++) {
		struct sbx_err ignored;
		/* Gone while listed: left out. */
		if (rc == 0 && self->status(self, names[i], &(*out)[*n], &ignored) == 0 &&
		    strcmp((*out)[*n].state, "absent") != 0)
			(*n)++;
		free(names[i]);
	}
	free(names);
	return rc;
}

/* ---- local: the agent as a process of this machine ---- */

static int local_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return arg == NULL ? 0 : sbx_err_set(e, SBX_EUSAGE, 0, "the local runner takes no name");
}

static int local_open(const struct sbx_runner_class *self, const char *arg,
                      const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	(void)self, (void)arg;
	char path[PATH_MAX];
	const char *agent = o->agent;
	if (agent == NULL) {
		if (sbx_agent_path(o->agent_dir, sbx_arch_self(), path, sizeof path, e) != 0)
			return -1;
		agent = path;
	}
	const char *tmpl[] = {"{agent}", "serve", NULL};
	return sbx_runner_open_template(tmpl, agent, o, s, e);
}

const struct sbx_runner_class sbx_runner_local = {
        .name = "local", .boundary = 0, .parse = local_parse, .open = local_open};

/* ---- qemu:ARCH: a foreign architecture's agent under qemu-ARCH-static ---- */

static int qemu_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return arg != NULL && sbx_arch_by_name(arg) != NULL
	               ? 0
	               : sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture in runner 'qemu:%s'",
	                             arg != NULL ? arg : "");
}

static int qemu_open(const struct sbx_runner_class *self, const char *arg,
                     const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	(void)self;
	const struct sbx_arch *a = sbx_arch_by_name(arg);
	char path[PATH_MAX];
	const char *agent = o->agent;
	if (agent == NULL) {
		if (sbx_agent_path(o->agent_dir, a->name, path, sizeof path, e) != 0)
			return -1;
		agent = path;
	}
	const char *tmpl[] = {a->qemu, "{agent}", "serve", NULL};
	return sbx_runner_open_template(tmpl, agent, o, s, e);
}

const struct sbx_runner_class sbx_runner_qemu = {
        .name = "qemu", .arg = "ARCH", .boundary = 0, .parse = qemu_parse, .open = qemu_open};

/* ---- via:COMMAND: any exec channel, {agent} the --agent path ---- */

static int via_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return arg != NULL && arg[0] != '\0'
	               ? 0
	               : sbx_err_set(e, SBX_EUSAGE, 0, "via: needs a command line");
}

static int via_open(const struct sbx_runner_class *self, const char *arg,
                    const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	(void)self;
	char **words;
	if (sbx_split_words(arg, &words, e) != 0)
		return -1;
	int needs_agent = 0;
	for (char **w = words; *w != NULL; w++)
		needs_agent |= strstr(*w, "{agent}") != NULL;
	int rc = needs_agent && o->agent == NULL
	                 ? sbx_err_set(e, SBX_EUSAGE, 0,
	                               "--via uses {agent}: say where the agent is with --agent "
	                               "PATH")
	                 : sbx_runner_open_template((const char *const *)words,
	                                            o->agent != NULL ? o->agent : "", o, s, e);
	sbx_words_free(words);
	return rc;
}

/* A channel sbx knows nothing about: its sandbox is not taken for this machine. */
const struct sbx_runner_class sbx_runner_via = {
        .name = "via", .arg = "COMMAND LINE", .boundary = 1, .parse = via_parse, .open = via_open};

/* ---- words ---- */

void sbx_words_free(char **w)
{
	if (w == NULL)
		return;
	for (char **p = w; *p != NULL; p++)
		free(*p);
	free(w);
}

int sbx_split_words(const char *line, char ***words, struct sbx_err *e)
{
	size_t cap = strlen(line) + 1, n = 0;
	char **out = calloc(cap + 1, sizeof *out);
	char *word = malloc(cap);
	if (out == NULL || word == NULL) {
		free(out);
		free(word);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "splitting '%s'", line);
	}
	const char *p = line;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		size_t len = 0;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n') {
			if (*p == '\'') {
				const char *end = strchr(p + 1, '\'');
				if (end == NULL)
					goto unbalanced;
				memcpy(word + len, p + 1, (size_t)(end - p - 1));
				len += (size_t)(end - p - 1);
				p = end + 1;
			} else if (*p == '"') {
				p++;
				while (*p != '"') {
					if (*p == '\0')
						goto unbalanced;
					if (*p == '\\' && (p[1] == '"' || p[1] == '\\' ||
					                   p[1] == '$' || p[1] == '`'))
						p++;
					word[len++] = *p++;
				}
				p++;
			} else if (*p == '\\' && p[1] != '\0') {
				word[len++] = p[1];
				p += 2;
			} else {
				word[len++] = *p++;
			}
		}
		word[len] = '\0';
		if ((out[n++] = strdup(word)) == NULL) {
			free(word);
			sbx_words_free(out);
			return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "splitting '%s'", line);
		}
	}
	free(word);
	if (n == 0) {
		free(out);
		return sbx_err_set(e, SBX_EUSAGE, 0, "empty command line");
	}
	*words = out;
	return 0;
unbalanced:
	free(word);
	sbx_words_free(out);
	return sbx_err_set(e, SBX_EUSAGE, 0, "unbalanced quote in '%s'", line);
}
