/* Runners, the public API (installed beside sbx.h): how a program reaches, makes, inspects,
 * lists and removes sandboxes of every kind through one interface. A sandbox is named by a
 * spec, "KIND:ARG" ("ns:t1", "podman:c1", "docker:c1", "kubectl:POD[/C][@NS]",
 * "ssh:[USER@]HOST[:PORT]", "qemu:ARCH", "via:COMMAND LINE") or "local"; each kind is one row
 * of a table of classes (struct sbx_runner_class), as BearSSL's hash classes are: adding a
 * runner is one file that defines its class and one row in runner/runner.c. See
 * docs/runners.md. */
#ifndef SBX_RUNNER_API_H
#define SBX_RUNNER_API_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sbx.h"

/* Limits a sandbox is made with (the reference's SandboxResources, and a process limit). A
 * runner that cannot hold one it is given refuses the create (SBX_EUSAGE), never ignores it. */
struct sbx_resources {
	double cpu;         /* CPUs, as a quota (0.5: half of one); 0: none */
	int64_t memory_mib; /* memory (and swap) of every process together; 0: none */
	int64_t pids;       /* processes at once; 0: none */
	double disk_gib;    /* the writable layer's size; 0: none */
};

/* A sandbox as its runner describes it. */
struct sbx_sandbox {
	char spec[192];     /* what --runner and sbx_open take: "ns:t1", "podman:c1" */
	const char *kind;   /* the class's name: "ns", "podman", ... */
	char state[32];     /* "running", "stopped", "absent", or the engine's own word */
	int running;        /* sessions can be opened now */
	int64_t pid;        /* its init as this machine sees it; 0 when unknown */
	int64_t created_ns; /* ns since the epoch; 0 when unknown */
	char image[1024];
	char arch[16];                  /* sbx architecture name; "" when unknown */
	char id[80];                    /* the engine's id, or "" */
	int paused;                     /* its processes are frozen (sbx_sandbox_pause) */
	struct sbx_resources resources; /* what it was made with, where the runner knows */
};

/* An image sbx imported for its sandboxes (podman/docker: `sbx-BASE:<sha16>`, labelled
 * sbx.tarball with the tarball's SHA-256). */
struct sbx_image {
	const char *kind;  /* the class's name */
	char ref[192];     /* the name a create uses ("sbx-busybox-x86_64:0123456789abcdef") */
	char tags[4][160]; /* its other names */
	int ntags;
	char id[72];      /* the engine's id, 64 hex digits */
	char tarball[72]; /* the SHA-256 of the tarball it came from */
	int64_t created_ns;
	int64_t size;   /* bytes, as the engine counts them */
	int containers; /* containers made from it, in any state, by anyone */
};

struct sbx_create_opts {
	const char *image;              /* ns: a root filesystem folder; podman/docker: an image
	                                   name or a .tar to import */
	const char *name;               /* NULL: generated */
	const char *arch;               /* NULL: the image's own */
	const char *agent_dir;          /* holds ARCH/sbx-agent; NULL: sbx_agent_dir() */
	const char *agent;              /* an explicit agent binary for the sandbox's init */
	const char *const *engine_args; /* podman/docker: words added to `ENGINE create` */
	int privileged;                 /* ns: keep every capability, no seccomp filter */
	struct sbx_resources resources;
};

struct sbx_open_opts {
	const char *agent_dir; /* holds ARCH/sbx-agent; NULL: sbx_agent_dir() */
	const char *agent;     /* a path to run instead of the agent the runner would inject */
	double timeout_s;      /* the session's timeout; 0: 30 s */
	int brief;             /* one probe and done: no question to the engine for the direct
	                          socket (podman/docker) */
};

/* One kind of runner. Every method gets its class first (one function can serve several
 * rows: podman and docker) and fills *e on failure; a NULL one means the kind cannot do that
 * ("local" is not created; "ssh:" hosts are not listed). arg is the spec after "KIND:". */
struct sbx_runner_class {
	const char *name;
	const char *arg; /* what follows "KIND:" in a spec, as `sbx help` shows it; NULL: none */
	int boundary; /* 1: the sandbox is not this machine (its keeper holds the secret for good);
	                 0: local, qemu (a secret for each session) */
	int (*parse)(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e);
	int (*open)(const struct sbx_runner_class *self, const char *arg,
	            const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e);
	/* Writes the new sandbox's arg (its name) to arg_out. */
	int (*create)(const struct sbx_runner_class *self, const struct sbx_create_opts *o,
	              char *arg_out, size_t cap, struct sbx_err *e);
	/* An absent sandbox is a success with state "absent". */
	int (*status)(const struct sbx_runner_class *self, const char *arg, struct sbx_sandbox *sb,
	              struct sbx_err *e);
	/* An absent sandbox is a success. */
	int (*remove)(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e);
	/* The sandboxes sbx made of this kind; *out malloc'd (free()), *n of them. */
	int (*list)(const struct sbx_runner_class *self, struct sbx_sandbox **out, size_t *n,
	            struct sbx_err *e);
	/* Freezes every process of the sandbox / lets them run again; its files stay. */
	int (*pause)(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e);
	int (*resume)(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e);
	/* The images sbx imported for this kind; *out malloc'd, *n of them. */
	int (*images)(const struct sbx_runner_class *self, struct sbx_image **out, size_t *n,
	              struct sbx_err *e);
	/* Removes one of them; an image a container still uses is refused, never forced. */
	int (*image_remove)(const struct sbx_runner_class *self, const struct sbx_image *im,
	                    struct sbx_err *e);
};

/* The table, NULL-terminated, in the order `sbx help` lists them. */
extern const struct sbx_runner_class *const sbx_runner_classes[];

/* The class of spec ("local" has no ':'), and *arg the part after "KIND:"; NULL with *e
 * (SBX_EUSAGE) when no class has that name. */
const struct sbx_runner_class *sbx_runner_class_of(const char *spec, const char **arg,
                                                   struct sbx_err *e);

/* A session to spec's sandbox (the agent injected when needed), with its trust started
 * (sbx_session_trust_for). */
int sbx_open(const char *spec, const struct sbx_open_opts *o, struct sbx_session **s,
             struct sbx_err *e);

/* A new sandbox of kind ("ns", "podman", "docker"); its spec to spec_out. Its secret is given to
 * its init before anything else runs there (docs/supervision.md, "Trust"). */
int sbx_sandbox_create(const char *kind, const struct sbx_create_opts *o, char *spec_out,
                       size_t cap, struct sbx_err *e);

int sbx_sandbox_status(const char *spec, struct sbx_sandbox *sb, struct sbx_err *e);

/* Removes the sandbox and forgets its secret. */
int sbx_sandbox_remove(const char *spec, struct sbx_err *e);

/* Freezes every process of spec's sandbox, or lets them run again (SBX_EUSAGE where the runner
 * cannot). */
int sbx_sandbox_pause(const char *spec, struct sbx_err *e);
int sbx_sandbox_resume(const char *spec, struct sbx_err *e);

/* The sandboxes sbx made, of one kind (NULL: every kind that can list); *out malloc'd. */
int sbx_sandbox_list(const char *kind, struct sbx_sandbox **out, size_t *n, struct sbx_err *e);

/* The images sbx imported, of one kind (NULL: every kind that has them); *out malloc'd. */
int sbx_image_list(const char *kind, struct sbx_image **out, size_t *n, struct sbx_err *e);

/* Removes im (from sbx_image_list) with its kind's engine. */
int sbx_image_remove(const struct sbx_image *im, struct sbx_err *e);

/* A command line split into words like a POSIX shell would for quoting ('...', "...", \),
 * without expansions; *words is NULL-terminated and malloc'd (sbx_words_free). */
int sbx_split_words(const char *line, char ***words, struct sbx_err *e);
void sbx_words_free(char **words);

#endif
