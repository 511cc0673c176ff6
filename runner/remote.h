/* The kubectl and ssh runners: a pod's container reached with `kubectl exec -i`, a machine
 * reached with `ssh -T`. Neither has a native copy that works everywhere (kubectl cp needs tar
 * in the image, Kubernetes issue 58512), so the agent is streamed through the channel itself
 * (runner/inject.h), for the architecture `uname -m` reports there. See docs/runners.md. */
#ifndef SBX_REMOTE_H
#define SBX_REMOTE_H

#include "err.h"
#include "inject.h"
#include "sbx.h"

struct sbx_remote {
	char **tmpl; /* the channel template, with {agent}; NULL-terminated, malloc'd */
	char **run;  /* runs a command inside: the command's words follow */
	int joined;  /* ssh: the far side joins the command into one shell line ({agent} too) */
	char what[320];
};

/* spec is "kubectl:POD[/CONTAINER][@NAMESPACE]" or "ssh:[USER@]HOST[:PORT]" (HOST may be
 * "[v6address]"). The channels:
 *   kubectl exec -i [-n NS] POD [-c CONTAINER] -- {agent} serve
 *   ssh -T -e none -o BatchMode=yes [-F $SBX_SSH_CONFIG] [-p PORT] [USER@]HOST {agent} serve
 * where, for ssh, {agent} must be given shell-quoted (sbx_shell_quote). Names starting with
 * '-' or holding spaces or control characters are refused (SBX_EUSAGE). */
int sbx_remote_parse(const char *spec, struct sbx_remote *rm, struct sbx_err *e);

void sbx_remote_free(struct sbx_remote *rm);

/* Opens a checked session to agent_dir/ARCH/sbx-agent (NULL: sbx_agent_dir()) for the
 * sandbox's architecture, injecting it when needed: first in one exec (runner/boot.h), then,
 * when that fails or $SBX_NO_BOOT=1, the older way: a survey exec (uname -m, agents there),
 * then sbx_inject_open (streaming only, each candidate folder tried before anything is
 * copied). SBX_EUNAVAILABLE when the channel fails or nothing worked. */
int sbx_remote_open(const struct sbx_remote *rm, const char *agent_dir, double timeout_s,
                    struct sbx_session **s, struct sbx_inject_result *res, struct sbx_err *e);

#endif
