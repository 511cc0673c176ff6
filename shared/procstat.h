/* /proc/PID/stat as the agent (its process-tree walk) and the host's runners (a sandbox's
 * init, a container's PID 1) read it: state, parent and start time, the start time being what
 * tells a process from a later one with the same pid. */
#ifndef SBX_PROCSTAT_H
#define SBX_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* Start time (field 22, clock ticks since boot), parent and state letter (each may be NULL).
 * -1 when the process is gone or the file cannot be parsed. */
int sbx_proc_stat(pid_t pid, uint64_t *start, pid_t *ppid, char *state);

#endif
