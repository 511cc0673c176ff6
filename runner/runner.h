/* Runners: how the host reaches an agent. Each gives an exec channel as an argv template
 * (words may hold "{agent}") and the agent's path as the channel sees it. This issue's
 * runners: local (the agent as a local process), qemu:ARCH (through qemu-ARCH-static) and
 * ns:NAME (nsenter into a namespace sandbox made by sbx_ns_create, runner/ns.h), podman:NAME
 * and docker:NAME (ENGINE exec -i -u 0 NAME, the agent injected on first use: runner/podman.h),
 * kubectl:POD[/CONTAINER][@NAMESPACE] and ssh:[USER@]HOST[:PORT] (kubectl exec -i / ssh -T,
 * the agent streamed through the channel on first use: runner/remote.h);
 * --via takes any command line, e.g. 'podman exec -i SB {agent} serve'. */
#ifndef SBX_RUNNER_H
#define SBX_RUNNER_H

#include "err.h"
#include "sbx.h"

struct sbx_runner {
	char **argv; /* NULL-terminated template */
	char *agent; /* what {agent} becomes */
	/* A session already open through argv (podman/docker/kubectl/ssh: injection opens one to
	 * check the agent's SHA-256); take it with sbx_runner_take_session, or sbx_runner_free
	 * closes it. */
	struct sbx_session *session;
};

/* spec: "local", "qemu:ARCH", "ns:NAME", "podman:NAME", "docker:NAME", "kubectl:POD[/C][@NS]"
 * or "ssh:[USER@]HOST[:PORT]". agent_dir holds
 * ARCH/sbx-agent; agent, when not NULL, overrides the agent path (for ns:NAME, a path inside the
 * sandbox; the default is the copy injected at create, /.sbx/sbx-agent). ns:NAME fails with
 * SBX_EUNAVAILABLE when the sandbox is absent or stopped. podman:NAME and docker:NAME inject the
 * agent for the container's architecture from agent_dir (sbx_podman_open) and leave the checked
 * session in r->session; with agent given, they use that path inside the container as it is.
 * kubectl: and ssh: do the same for the architecture `uname -m` reports (sbx_remote_open);
 * for ssh, r->agent is the path shell-quoted (the remote side runs the words as a shell line).
 * $SBX_SSH_CONFIG, when set, is given to ssh as -F FILE. */
int sbx_runner_from_spec(const char *spec, const char *agent_dir, const char *agent,
                         struct sbx_runner *r, struct sbx_err *e);

/* sbx_runner_from_spec with flags: SBX_RUNNER_DIRECT_ASK lets podman:/docker: ask the engine
 * for the container's PID when it is not remembered, so that the session can move to the
 * agent's direct socket (sbx_podman_open). sbx_runner_from_spec sets it; a caller about to send
 * one probe and close does better without it. */
#define SBX_RUNNER_DIRECT_ASK 1u
int sbx_runner_from_spec_ex(const char *spec, const char *agent_dir, const char *agent,
                            unsigned flags, struct sbx_runner *r, struct sbx_err *e);

/* A command line split into words like a POSIX shell would for quoting ('...', "...", \),
 * without expansions. agent may be NULL when the line has no {agent}. */
int sbx_runner_from_via(const char *via, const char *agent, struct sbx_runner *r,
                        struct sbx_err *e);

/* Splits a line into words (the quoting above); *words is NULL-terminated and malloc'd. */
int sbx_split_words(const char *line, char ***words, struct sbx_err *e);

/* The session the runner opened, if any (NULL otherwise); the runner no longer owns it. */
struct sbx_session *sbx_runner_take_session(struct sbx_runner *r);

void sbx_runner_free(struct sbx_runner *r);

#endif
