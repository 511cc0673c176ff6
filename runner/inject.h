/* Agent injection through an exec channel, shared by the podman/docker, kubectl and ssh
 * runners: find where the agent is (or put it there: a runner's native copy, else streamed
 * through `sh -c 'cat > tmp && chmod 0755 tmp && mv -f tmp final'`), and open the session
 * whose HELLO carries the local agent's SHA-256. See docs/runners.md. */
#ifndef SBX_INJECT_H
#define SBX_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"
#include "sbx.h"

enum sbx_inject_how {
	SBX_INJECT_REUSED = 0,   /* an agent with the same SHA-256 was already there */
	SBX_INJECT_COPIED = 1,   /* the runner's native copy (ENGINE cp) */
	SBX_INJECT_STREAMED = 2, /* through sh -c 'cat > ...' over the exec channel */
};

struct sbx_inject_result {
	char path[256]; /* the agent inside the sandbox (not quoted) */
	enum sbx_inject_how how;
	int tries; /* channels opened to get there */
};

/* How to reach one sandbox. */
struct sbx_inject_target {
	char *const *tmpl; /* the channel template: ... {agent} serve */
	char *const *run;  /* words that run a command inside; the command's words follow */
	/* 1 when the far side joins the command's words with spaces and gives the line to a
	 * shell (ssh): every word, {agent} included, is then shell-quoted. */
	int joined;
	/* A native copy of the local file local to dst inside (0 on success), tried before
	 * streaming; NULL: streaming only. */
	int (*copy)(void *ctx, const char *local, const char *dst);
	void *copy_ctx;
	/* Where to look first (a remembered place); NULL or "": /tmp/.sbx-agent-<sha12>. */
	const char *first;
	/* 1: with no first, copy at once (nothing suggests an agent is there already). */
	int no_guess;
	/* When not NULL: the agent files a survey found inside (sbx_inject_survey), one per
	 * line; only those are tried before copying, and first is not used. */
	const char *found;
	const char *what; /* for messages, e.g. "podman container t1" */
};

/* SHA-256 of a local file. */
int sbx_inject_sha256_file(const char *path, uint8_t out[SBX_SHA256_LEN], struct sbx_err *e);

/* One exec through t->run of `sh -c 'echo sbx-machine:$(uname -m); for f in
 * DIR/.sbx-agent-*; ...'`: the sandbox's sbx architecture, and the agent files already in the
 * candidate folders, one per line in found (a survey: needs sh and uname inside).
 * SBX_EUNAVAILABLE with the channel's last output line when it cannot run; SBX_EUSAGE when
 * sbx has no agent for that machine. */
int sbx_inject_survey(const struct sbx_inject_target *t, double timeout_s, char *arch, size_t cap,
                      char *found, size_t found_cap, struct sbx_err *e);

/* Opens a session to the agent local (a host file) inside the sandbox, injecting it when
 * needed: the name inside is DIR/.sbx-agent-<first 12 hex of its SHA-256> with DIR the first
 * of /tmp, /dev/shm, /var/tmp, /run, / where it can be written and executed (streaming runs
 * the copy with --version before it takes that name: a noexec folder keeps nothing). A file
 * already there is used only when HELLO's SHA-256 equals local's, and replaced otherwise.
 * SBX_EUNAVAILABLE when nothing worked. */
int sbx_inject_open(const struct sbx_inject_target *t, const char *local, double timeout_s,
                    struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e);

/* s in single quotes for a POSIX shell ('\'' for each quote); malloc'd, NULL on ENOMEM. */
char *sbx_shell_quote(const char *s);

/* The last non-empty line of a program's output (for error messages), into buf; returns buf. */
const char *sbx_last_line(const struct sbx_proc_result *r, char *buf, size_t cap);

/* t->run followed by cmd (NULL-terminated, at most 16 words); with t->joined, cmd becomes one
 * word of shell-quoted words. Malloc'd, freed with sbx_inject_free_words; NULL on ENOMEM. */
char **sbx_inject_command(const struct sbx_inject_target *t, const char *const *cmd);
void sbx_inject_free_words(char **w);

#endif
