/* The ns runner's cgroups: one per sandbox, under "sbx/" of each controller it needs (cgroup
 * v1: freezer always; memory, pids, cpu for the limits it holds), or one folder of the unified
 * hierarchy (v2, where /sys/fs/cgroup is one). Made before the sandbox's first process, which
 * joins it before it forks anything; frozen for sbx_sandbox_pause; removed after its last
 * process is gone. docs/runners.md, "Limits and pause on ns". */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stddef.h>

#include "err.h"
#include "sbx_runner.h"

#define SBX_CG_FDS 4

/* A sandbox's cgroup: rel is its path under each hierarchy ("sbx/ns-NAME-XXXXXX"). */
struct sbx_cg {
	int v2;
	char rel[96];
	int procs[SBX_CG_FDS]; /* cgroup.procs of each, open for writing; -1 after */
	int nprocs;
};

/* Makes the cgroup for sandbox name with r's limits (memory and swap together; a quota of
 * r->cpu CPUs over 100 ms; r->pids processes) and opens its cgroup.procs files. SBX_EUSAGE
 * when a limit is asked that this machine's cgroups cannot hold (its controller missing). */
int sbx_cg_make(const char *name, const struct sbx_resources *r, struct sbx_cg *cg,
                struct sbx_err *e);

/* In a child, before it forks: moves the calling process into the cgroup (writes "0" to each
 * cgroup.procs fd). No allocation. -1 with errno on failure. */
int sbx_cg_join(const struct sbx_cg *cg);

/* The folders of the cgroup that exist (one per v1 controller it has, or the v2 one), up to
 * max; how many. */
int sbx_cg_dirs(int v2, const char *rel, char dirs[][256], int max);

/* Closes the cgroup.procs fds (the parent, once the child joined). */
void sbx_cg_close(struct sbx_cg *cg);

/* Freezes (on 1) or thaws the cgroup, and waits (up to 5 s) until the kernel says it is so. */
int sbx_cg_freeze(int v2, const char *rel, int on, struct sbx_err *e);

/* 1 when the cgroup is frozen (or freezing), 0 when not, -1 when it is not there. */
int sbx_cg_frozen(int v2, const char *rel);

/* The limits the cgroup holds now, read back. */
void sbx_cg_limits(int v2, const char *rel, struct sbx_resources *r);

/* Removes the cgroup's folders (thawed first: a frozen cgroup's dying tasks would stay);
 * retried for a moment while its last processes exit. */
int sbx_cg_remove(int v2, const char *rel, struct sbx_err *e);

#endif
