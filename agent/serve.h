/* `sbx-agent serve`: the protocol loop on stdin/stdout. */
#ifndef SBX_AGENT_SERVE_H
#define SBX_AGENT_SERVE_H

/* Runs until the host closes stdin (returns 0) or breaks the protocol (returns 3, with a
 * line on stderr). Trust requests go to the sandbox's keeper socket, or to this session's own
 * keeper once the host set one up (SETUP with KEEP 0: a sandbox that is the host's machine). */
int sbx_serve(int in_fd, int out_fd);

#endif
