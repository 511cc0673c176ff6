/* `sbx-agent serve`: the protocol loop on stdin/stdout. */
#ifndef SBX_AGENT_SERVE_H
#define SBX_AGENT_SERVE_H

/* Runs until the host closes stdin (returns 0) or breaks the protocol (returns 3, with a
 * line on stderr). */
int sbx_serve(int in_fd, int out_fd);

#endif
