/* The agent's HELLO: who it is and what the kernel under it can do. */
#ifndef SBX_AGENT_HELLO_H
#define SBX_AGENT_HELLO_H

#include <stdint.h>

#include "msg.h"

/* Probes the capabilities (enum sbx_cap bits) and the cgroup version (0, 1, 2). */
int64_t sbx_hello_caps(int *cgroup_version);

/* Writes the HELLO payload. */
void sbx_hello_write(struct sbx_msgw *w, uint64_t window);

#endif
