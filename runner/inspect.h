/* What podman and docker say about a container or an image, parsed without I/O (fuzzed by
 * fuzz/fuzz_inspect.c): runner/podman.c asks `ENGINE inspect --format` for one line per object
 * whose fields are tab-separated and, but for the id, JSON values written by the engine's own
 * `json` function (labels and names come from image authors: JSON keeps their tabs and
 * newlines inside strings). docs/runners.md. */
#ifndef SBX_INSPECT_H
#define SBX_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sbx_runner.h"

/* The format for `ENGINE inspect --type container`: the id bare ({{.Id}}: podman's templates
 * know it only so), every other field through {{json}} (field names both engines share). */
#define SBX_INSPECT_CTR_FORMAT                                                                     \
	"{{.Id}}\t{{json .Name}}\t{{json .State}}\t{{json .Created}}\t{{json .Image}}\t"           \
	"{{json .Config.Image}}\t{{json .Config.Labels}}\t{{json .HostConfig}}"

/* The format for `ENGINE image inspect`. */
#define SBX_INSPECT_IMG_FORMAT                                                                     \
	"{{.Id}}\t{{json .RepoTags}}\t{{json .Created}}\t{{json .Size}}\t{{json .Config.Labels}}"

struct sbx_podman_status {
	int exists;
	char name[64];
	char state[32]; /* the engine's: running, exited, created, paused, ... */
	int paused;
	int64_t pid;        /* State.Pid: a process of this machine only when the engine is */
	int64_t created_ns; /* ns since the epoch */
	char id[72];        /* 64 hex digits */
	char image[256];    /* Config.Image: the name it was made from */
	char image_id[72];  /* 64 hex digits (docker's "sha256:" left out) */
	char arch[16];      /* the sbx.arch label; empty when the container has none */
	char agent[64];     /* the sbx.agent label: init's path (sbx_podman_create); or empty */
	int made;           /* it carries the sbx.agent label: sbx made it */
	struct sbx_resources res; /* HostConfig's limits (the engine's defaults included) */
	int64_t swap_mib;         /* HostConfig.MemorySwap: memory and swap together; 0 none */
};

/* An image sbx imported (the sbx.tarball label). */
struct sbx_podman_image {
	char id[72];
	char tags[4][160]; /* the first four RepoTags (podman: "localhost/" included) */
	int ntags;
	int64_t created_ns;
	int64_t size;
	char tarball[72]; /* the sbx.tarball label: the tarball's SHA-256; empty when none */
};

/* One line of SBX_INSPECT_CTR_FORMAT (no newline). SBX_EPROTOCOL when it is not one: a field
 * missing or of the wrong type, an id that is not 64 hex digits. */
int sbx_inspect_ctr(const char *line, size_t len, struct sbx_podman_status *st, struct sbx_err *e);

/* One line of SBX_INSPECT_IMG_FORMAT. */
int sbx_inspect_img(const char *line, size_t len, struct sbx_podman_image *im, struct sbx_err *e);

/* RFC 3339 ("2026-12-01T18:57:13.626810685Z", or with "+01:00"), as ns since the epoch. */
int sbx_inspect_time(const char *s, size_t len, int64_t *ns);

#endif
