/* `sbx-agent enter PID PROGRAM ARGS...`: the channel into an ns sandbox (runner/ns.c), run
 * from the host's copy of the agent in the sandbox's state folder, never from the layer. */
#ifndef SBX_AGENT_ENTER_H
#define SBX_AGENT_ENTER_H

/* Joins the ipc, uts, net, pid and mount namespaces and the root of process PID (the sandbox's
 * init), confines itself (shared/confine.h) and execs PROGRAM there; the process that stays
 * on the host waits for it and returns its status. argv: PID PROGRAM ARGS... */
int sbx_enter_main(int argc, char **argv);

#endif
