/* Runner specs to channel argv templates: local, qemu:ARCH, ns:NAME, podman:NAME,
 * docker:NAME, kubectl:POD[/C][@NS], ssh:[USER@]HOST[:PORT], and --via command lines. */
#include "runner.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "ns.h"
#include "podman.h"
#include "remote.h"
#include "sbx.h"

static void free_words(char **w)
{
	if (w == NULL)
		return;
	for (char **p = w; *p != NULL; p++)
		free(*p);
	free(w);
}

void sbx_runner_free(struct sbx_runner *r)
{
	free_words(r->argv);
	free(r->agent);
	sbx_session_close(r->session);
	r->argv = NULL;
	r->agent = NULL;
	r->session = NULL;
}

struct sbx_session *sbx_runner_take_session(struct sbx_runner *r)
{
	struct sbx_session *s = r->session;
	r->session = NULL;
	return s;
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
			free_words(out);
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
	free_words(out);
	return sbx_err_set(e, SBX_EUSAGE, 0, "unbalanced quote in '%s'", line);
}

static int set(struct sbx_runner *r, const char *const *words, const char *agent, struct sbx_err *e)
{
	size_t n = 0;
	while (words[n] != NULL)
		n++;
	r->argv = calloc(n + 1, sizeof *r->argv);
	r->agent = strdup(agent);
	int ok = r->argv != NULL && r->agent != NULL;
	for (size_t i = 0; ok && i < n; i++)
		ok = (r->argv[i] = strdup(words[i])) != NULL;
	if (!ok) {
		sbx_runner_free(r);
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "runner");
	}
	return 0;
}

int sbx_runner_from_spec(const char *spec, const char *agent_dir, const char *agent,
                         struct sbx_runner *r, struct sbx_err *e)
{
	return sbx_runner_from_spec_ex(spec, agent_dir, agent, SBX_RUNNER_DIRECT_ASK, r, e);
}

int sbx_runner_from_spec_ex(const char *spec, const char *agent_dir, const char *agent,
                            unsigned flags, struct sbx_runner *r, struct sbx_err *e)
{
	r->argv = NULL;
	r->agent = NULL;
	r->session = NULL;
	char path[PATH_MAX];
	if (strcmp(spec, "local") == 0) {
		if (agent == NULL) {
			if (sbx_agent_path(agent_dir, sbx_arch_self(), path, sizeof path, e) != 0)
				return -1;
			agent = path;
		}
		const char *words[] = {"{agent}", "serve", NULL};
		return set(r, words, agent, e);
	}
	if (strncmp(spec, "qemu:", 5) == 0) {
		const struct sbx_arch *a = sbx_arch_by_name(spec + 5);
		if (a == NULL)
			return sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture in runner '%s'",
			                   spec);
		if (agent == NULL) {
			if (sbx_agent_path(agent_dir, a->name, path, sizeof path, e) != 0)
				return -1;
			agent = path;
		}
		const char *words[] = {a->qemu, "{agent}", "serve", NULL};
		return set(r, words, agent, e);
	}
	if (strncmp(spec, "ns:", 3) == 0) {
		/* The agent is the one injected into the sandbox's layer at create; --agent
		 * names another path inside the sandbox. */
		char **words;
		if (sbx_ns_argv(spec + 3, &words, e) != 0)
			return -1;
		int rc =
		        set(r, (const char *const *)words, agent != NULL ? agent : SBX_NS_AGENT, e);
		free_words(words);
		return rc;
	}
	if (strncmp(spec, "podman:", 7) == 0 || strncmp(spec, "docker:", 7) == 0) {
		char engine[8];
		memcpy(engine, spec, 6);
		engine[6] = '\0';
		char **words;
		if (sbx_podman_argv(engine, spec + 7, &words, e) != 0)
			return -1;
		struct sbx_podman_inject info;
		struct sbx_session *s = NULL;
		int rc = agent != NULL ? 0
		                       : sbx_podman_open(engine, spec + 7, agent_dir, 30.0,
		                                         (flags & SBX_RUNNER_DIRECT_ASK) != 0, &s,
		                                         &info, e);
		if (rc == 0)
			rc = set(r, (const char *const *)words, agent != NULL ? agent : info.path,
			         e);
		free_words(words);
		if (rc != 0)
			sbx_session_close(s);
		else
			r->session = s;
		return rc;
	}
	if (strncmp(spec, "kubectl:", 8) == 0 || strncmp(spec, "ssh:", 4) == 0) {
		struct sbx_remote rm;
		if (sbx_remote_parse(spec, &rm, e) != 0)
			return -1;
		struct sbx_inject_result res;
		struct sbx_session *s = NULL;
		int rc = agent != NULL ? 0 : sbx_remote_open(&rm, agent_dir, 30.0, &s, &res, e);
		/* ssh hands the remote words to a shell: {agent} becomes the quoted path. */
		const char *path = agent != NULL ? agent : res.path;
		char *quoted = rc == 0 && rm.joined ? sbx_shell_quote(path) : NULL;
		if (rc == 0 && rm.joined && quoted == NULL)
			rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "runner");
		if (rc == 0)
			rc = set(r, (const char *const *)rm.tmpl, rm.joined ? quoted : path, e);
		free(quoted);
		sbx_remote_free(&rm);
		if (rc != 0)
			sbx_session_close(s);
		else
			r->session = s;
		return rc;
	}
	return sbx_err_set(e, SBX_EUSAGE, 0,
	                   "unknown runner '%s' (this build has: local, qemu:ARCH, ns:NAME, "
	                   "podman:NAME, docker:NAME, kubectl:POD[/CONTAINER][@NAMESPACE], "
	                   "ssh:[USER@]HOST[:PORT]; or --via)",
	                   spec);
}

int sbx_runner_from_via(const char *via, const char *agent, struct sbx_runner *r, struct sbx_err *e)
{
	r->argv = NULL;
	r->agent = NULL;
	r->session = NULL;
	char **words;
	if (sbx_split_words(via, &words, e) != 0)
		return -1;
	int needs_agent = 0;
	for (char **w = words; *w != NULL; w++)
		needs_agent |= strstr(*w, "{agent}") != NULL;
	if (needs_agent && agent == NULL) {
		free_words(words);
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "--via uses {agent}: say where the agent is with --agent PATH");
	}
	int rc = set(r, (const char *const *)words, agent != NULL ? agent : "", e);
	free_words(words);
	return rc;
}
