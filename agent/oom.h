/* OOM evidence for a run: the supervisor's memory cgroup's oom_kill counter, read before launch
 * and after termination; the delta, and who it most likely hit. */
#ifndef SBX_AGENT_OOM_H
#define SBX_AGENT_OOM_H

#include <stdint.h>

enum sbx_oom_source { SBX_OOM_NONE, SBX_OOM_V1, SBX_OOM_V2 };

struct sbx_oom {
	enum sbx_oom_source source;
	char file[512]; /* the counter file found at begin */
	uint64_t before;
};

/* Finds the counter from /proc/self/cgroup (v2 memory.events, then memory.events.local; v1
 * memory.oom_control) and takes its value. Unreadable: source SBX_OOM_NONE. */
void sbx_oom_begin(struct sbx_oom *o);

/* oom_kill events since begin; 0 when the source is none or the counter went unreadable. */
uint64_t sbx_oom_kills(const struct sbx_oom *o);

/* "cgroup-v2", "cgroup-v1" or "none". */
const char *sbx_oom_source_name(const struct sbx_oom *o);

/* "harness" (it died of a SIGKILL the supervisor did not send), "descendant" (a reaped
 * descendant did, before the supervisor began killing), "suspected" (kills counted, victim
 * unseen: another process of the cgroup, or a descendant reaped by its own parent), "none". */
const char *sbx_oom_attribute(uint64_t kills, int harness_sigkilled, int descendant_sigkilled);

#endif
