/* `sbx-agent init`: PID 1 of a namespace sandbox (the ns runner). */
#ifndef SBX_AGENT_INIT_H
#define SBX_AGENT_INIT_H

/* Keeps the namespaces alive and reaps every orphan until SIGTERM, then kills everything in
 * its pid namespace, reaps it and returns 0. Refuses (returns 2, a line on stderr) unless it
 * is PID 1: kill(-1) anywhere else would reach processes outside the sandbox. serve: also
 * the resident agent (agent/resident.h), when it runs as root and a folder takes its socket. */
int sbx_init_main(int serve);

#endif
