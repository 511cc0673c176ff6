/* The ns runner's user namespaces (docs/runners.md, "The boundary"): each sandbox gets its own
 * range of 65536 host ids (uid and gid 0..65535 inside are BASE..BASE+65535 outside), claimed
 * in the state folder, a user namespace with that map, and an idmapped view of its image
 * through it, so the image's owners keep their meaning inside. */
#ifndef SBX_USERNS_H
#define SBX_USERNS_H

#include <stdint.h>

#include "err.h"

#define SBX_USERNS_IDS 65536u
#define SBX_USERNS_BASE 100000000u /* the first range without /etc/subuid */
#define SBX_USERNS_SLOTS 4096      /* ranges from SBX_USERNS_BASE: sandboxes at once */

struct sbx_userns {
	uint32_t uid, gid; /* the host ids of uid 0 and gid 0 inside */
	int slot;          /* the claim, $STATE/.ids/SLOT; -1: none */
};

/* Claims a free range for sandbox name in the state folder base: root's first range of at
 * least 65536 ids in /etc/subuid and /etc/subgid (cut in ranges of 65536), when both name
 * one; else SBX_USERNS_SLOTS ranges from SBX_USERNS_BASE. The first free one from this
 * process's hint (after its last claim, or the lowest it released since), wrapping around:
 * the lowest free one while no other process claims or releases. */
int sbx_userns_claim(const char *base, const char *name, struct sbx_userns *u, struct sbx_err *e);

/* Whether the sandbox name of base still holds slot (1) or not (0). */
typedef int (*sbx_userns_held_fn)(const char *base, const char *name, int slot);

/* Gives back the claims nothing holds any more (a create or a remove that died half way, a
 * state folder deleted by hand): a claim at least min_age_s old (a create in progress is
 * younger), its sandbox not holding it (held), and no process in /proc with a uid or gid in
 * its range. One reclaimer at a time (flock on .ids). How many it freed, or -1. */
int sbx_userns_reclaim(const char *base, sbx_userns_held_fn held, int64_t min_age_s);

/* Gives the claim back (remove, or a create that failed); a slot below 0 is none. */
void sbx_userns_release(const char *base, int slot);

/* A new user namespace with u's map, held by the returned fd (its /proc/PID/ns/user), or -1
 * with e set; *net_fd receives a new network namespace it owns (so root inside has its
 * CAP_NET_RAW and CAP_NET_BIND_SERVICE there). Forks a short-lived child to make them. */
int sbx_userns_make(const struct sbx_userns *u, int *net_fd, struct sbx_err *e);

/* Mounts an idmapped bind of the folder src at dst (relative to the cwd), the ids mapped
 * through the user namespace userns_fd: a file the host's uid 0 owns is owned by 0 inside
 * it. 0, or -1 with errno; no allocation (safe between fork and exec). */
int sbx_userns_idmap(const char *src, int userns_fd, const char *dst);

#endif
