/* The ns runner: a sandbox made of Linux namespaces over a root filesystem folder, with no
 * daemon. Each sandbox has its own mount, pid, uts, ipc and network namespaces (loopback
 * only), sees its image through an overlay whose writable layer lives in a state folder, and
 * runs `sbx-agent init` as PID 1; its exec channel is nsenter. Root only. See docs/runners.md.
 *
 * State folders live under $SBX_NS_DIR, or /run/sbx/ns when it is unset: NAME/state (key=value
 * lines), NAME/upper and NAME/work (the overlay's writable layer), NAME/root (its mount point,
 * used only inside the sandbox's mount namespace: nothing is mounted in the caller's). */
#ifndef SBX_NS_H
#define SBX_NS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sbx_runner.h"

/* Where the agent is found inside every ns sandbox (what {agent} becomes). */
#define SBX_NS_AGENT "/.sbx/sbx-agent"

struct sbx_ns_opts {
	const char *arch;         /* the image's architecture (sbx name); NULL: the "arch=" line of
	                             IMAGE/.sbx-image (images/build.sh writes it), else the host's */
	const char *agent_dir;    /* holds ARCH/sbx-agent; NULL: sbx_agent_dir() */
	const char *agent;        /* an explicit agent binary to inject; NULL: from agent_dir */
	struct sbx_resources res; /* cgroup limits (cgroup.h); disk_gib: the writable layer on
	                             a tmpfs of that size */
	int privileged;           /* 1: no boundary: every capability, no seccomp filter, no
	                             user namespace (the host's root; docs/runners.md, "The
	                             boundary") */
};

/* Creates a running sandbox from image_dir (a root filesystem folder; never written). name:
 * 1 to 63 of [A-Za-z0-9_.-], not starting with '.' or '-'; NULL generates "sbx-XXXXXX". The
 * name actually used is written to name_out (cap bytes; may be NULL). The state folder
 * appears under its name only once init runs: a failed create leaves nothing behind.
 * SBX_EUSAGE: bad name or image, name taken, not root; SBX_EUNAVAILABLE: the kernel refused
 * (namespaces, overlay, mounts). */
int sbx_ns_create(const char *image_dir, const char *name, const struct sbx_ns_opts *o,
                  char *name_out, size_t cap, struct sbx_err *e);

enum sbx_ns_state {
	SBX_NS_ABSENT = 0,  /* no state folder */
	SBX_NS_STOPPED = 1, /* a state folder, but its init is gone (or the pid was reused) */
	SBX_NS_RUNNING = 2,
};
const char *sbx_ns_state_name(enum sbx_ns_state s);

struct sbx_ns_status {
	enum sbx_ns_state state;
	int64_t pid;        /* init's pid on the host (as recorded; 0 when absent) */
	int64_t created_ns; /* creation time, ns since the epoch */
	char image[PATH_MAX];
	char arch[16];
	char dir[PATH_MAX];       /* the state folder */
	int paused;               /* its cgroup is frozen (sbx_ns_pause) */
	struct sbx_resources res; /* its cgroup's limits, read back, and the layer's size */
};

/* Freezes (pause 1) or thaws every process of a running sandbox through its cgroup's
 * freezer. SBX_EUNAVAILABLE when it is not running; SBX_EUSAGE when it has no cgroup. */
int sbx_ns_pause(const char *name, int pause, struct sbx_err *e);

/* What a sandbox is. An absent sandbox is a success with state SBX_NS_ABSENT. */
int sbx_ns_status(const char *name, struct sbx_ns_status *st, struct sbx_err *e);

/* Removes a sandbox: kills its init (the kernel then kills every process of the pid
 * namespace), waits until it is gone, detaches any mount left under the state folder, removes
 * the writable layer and the state folder. An absent sandbox is a success. */
int sbx_ns_remove(const char *name, struct sbx_err *e);

/* The exec channel of a running sandbox as an argv template (NULL-terminated, malloc'd
 * words in a malloc'd array; free each word and the array): env -i ... nsenter --target PID
 * into its namespaces and root, then "{agent} serve" (through the layer's qemu-ARCH-static
 * for a foreign architecture). Checks first that the recorded pid is still this sandbox's
 * init (start time and pid namespace): SBX_EUNAVAILABLE when absent or stopped. */
int sbx_ns_argv(const char *name, char ***argv_template, struct sbx_err *e);

/* The names of every sandbox (running or stopped) under the state folder, sorted; *names is
 * a malloc'd array of *n malloc'd strings. */
int sbx_ns_list(char ***names, size_t *n, struct sbx_err *e);

/* The state folder root: $SBX_NS_DIR, or /run/sbx/ns. */
int sbx_ns_dir(char *out, size_t cap, struct sbx_err *e);

#endif
