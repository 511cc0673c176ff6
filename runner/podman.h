/* The podman and docker runners: OCI containers reached with `ENGINE exec -i -u 0 NAME {agent}
 * serve`. The agent is found, or delivered, and started in one exec through the container's
 * shell (runner/boot.h); without a shell it is put there with the engine's native copy
 * (`ENGINE cp`). Also the container lifecycle behind `sbx sandbox create --runner podman`.
 * See docs/runners.md.
 *
 * ENGINE is "podman" or "docker"; both share this code (their differences: docs/runners.md,
 * "Docker and podman"). */
#ifndef SBX_PODMAN_H
#define SBX_PODMAN_H

#include <stddef.h>

#include "err.h"
#include "inspect.h"
#include "sbx.h"
#include "sbx_runner.h"

struct sbx_podman_create_opts {
	const char *arch;         /* sbx architecture name; NULL: the "arch=" line of the
	                             .sbx-image beside a tarball (build/images/NAME/), else the
	                             image's own Architecture */
	const char *agent_dir;    /* holds ARCH/sbx-agent; NULL: sbx_agent_dir() */
	const char *agent;        /* an explicit agent binary for init; NULL: from agent_dir */
	const char *const *extra; /* NULL-terminated words added to `ENGINE create` (e.g.
	                             "--tmpfs=/tmp:rw,noexec"); may be NULL */
	struct sbx_resources res; /* --memory and --memory-swap, --cpus, --pids-limit,
	                             --storage-opt size= */
};

/* Creates and starts a container named name (NULL: "sbx-XXXXXX"; written to name_out) from
 * image: an image name, or a path ending in ".tar" which is first imported as
 * sbx-<basename without .tar>. The container runs `/.sbx-agent-<sha12> init` (the agent under
 * the name injection looks for, copied in with `ENGINE cp` before start) as PID 1, so images
 * without a shell work and the first session copies nothing; it has no network, the labels
 * sbx.arch=ARCH and sbx.agent=/.sbx-agent-<sha12>, ulimits no higher than the caller's, and,
 * with podman, runc + cgroupfs (see docs/runners.md; $SBX_PODMAN_FLAGS replaces the global
 * flags). Resources become the engine's flags, and the container's description is read back
 * before it starts: a limit the engine refused or dropped fails the create. A failed create
 * removes what it made. SBX_EUSAGE: bad name, image or resources (a disk size the engine's
 * storage cannot bound); SBX_EUNAVAILABLE: the engine failed. */
int sbx_podman_create(const char *engine, const char *image, const char *name,
                      const struct sbx_podman_create_opts *o, char *name_out, size_t cap,
                      struct sbx_err *e);

/* An absent container is a success with exists == 0. */
int sbx_podman_status(const char *engine, const char *name, struct sbx_podman_status *st,
                      struct sbx_err *e);

/* `ENGINE rm -f` (no grace: its init kills everything on SIGTERM anyway); an absent container
 * is a success. Also drops the injection hint kept for it. */
int sbx_podman_remove(const char *engine, const char *name, struct sbx_err *e);

/* `ENGINE pause` / `unpause`: the container's cgroup frozen (its files stay). Pausing a paused
 * one, or resuming a running one, is a success; an absent or stopped one is SBX_EUNAVAILABLE. */
int sbx_podman_pause(const char *engine, const char *name, int pause, struct sbx_err *e);

enum sbx_podman_how {
	SBX_PODMAN_REUSED = 0,   /* an agent with the same SHA-256 was already there */
	SBX_PODMAN_COPIED = 1,   /* ENGINE cp */
	SBX_PODMAN_STREAMED = 2, /* through sh -c 'cat > ...' over the exec channel */
};

struct sbx_podman_inject {
	char path[256]; /* the agent inside the container */
	enum sbx_podman_how how;
	int tries;              /* channels opened to get there */
	int direct;             /* 1: the session moved to the direct socket (host/direct.c) */
	int resident;           /* 1: the session is with the container's init (no exec) */
	char direct_error[256]; /* why it did not, when it was tried */
};

/* Opens a session to the agent in a running container, injecting it first when needed. First
 * one exec of `sh -c SCRIPT` (runner/boot.h): the container's `uname -m` picks the local agent,
 * which is used where DIR/.sbx-agent-<first 12 hex of its SHA-256> already is (DIR: /tmp,
 * /dev/shm, /var/tmp, /run, /) or else sent on the same stdin and placed in the first of those
 * where it can be written and run. When that fails (no shell, a stale file at that name): the
 * container's labels (sbx.arch, sbx.agent) or its image's architecture, a session to the
 * remembered place ($SBX_PODMAN_DIR, default /run/sbx/podman, or the sbx.agent label), then
 * `ENGINE cp` (or streaming) to the first usable DIR; a copy there is used only when HELLO's
 * SHA-256 equals the local file's. Then, when the engine runs on this machine, the session
 * moves to the agent's direct socket (host/direct.c) if the container's PID 1 is remembered in
 * $SBX_PODMAN_DIR, or, with ask_pid, after asking the engine for it (`inspect`, run alongside
 * the session's exec, then remembered): a one-shot probe is cheaper without that question,
 * anything longer is faster on the direct socket. agent_dir: NULL for sbx_agent_dir().
 * $SBX_NO_BOOT=1 skips the one-exec way, $SBX_PODMAN_COPY=stream skips it and ENGINE cp (for
 * tests). SBX_EUNAVAILABLE: the container is absent or not running, or nothing worked. */
int sbx_podman_open(const char *engine, const char *name, const char *agent_dir, double timeout_s,
                    int ask_pid, struct sbx_session **s, struct sbx_podman_inject *info,
                    struct sbx_err *e);

/* The exec channel template: {ENGINE, "exec", "-i", "-u", "0", NAME, "{agent}", "serve"}
 * (never -t: a tty rewrites the frames). Malloc'd words in a malloc'd, NULL-terminated array. */
int sbx_podman_argv(const char *engine, const char *name, char ***argv_template, struct sbx_err *e);

#endif
