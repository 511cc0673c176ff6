/* Runner internals (not installed; the API is sbx_runner.h): the rows of the runner table,
 * each defined in its runner's own file, and the helpers they share. */
#ifndef SBX_RUNNER_H
#define SBX_RUNNER_H

#include <sys/types.h>

#include "sbx_runner.h"

extern const struct sbx_runner_class sbx_runner_local, sbx_runner_qemu, sbx_runner_ns,
        sbx_runner_podman, sbx_runner_docker, sbx_runner_kubectl, sbx_runner_ssh, sbx_runner_via;

/* A session through the channel template tmpl with {agent} = agent, within o's timeout. */
int sbx_runner_open_template(const char *const *tmpl, const char *agent,
                             const struct sbx_open_opts *o, struct sbx_session **s,
                             struct sbx_err *e);

/* A session with a sandbox's init when it is the resident agent (ns sandboxes and containers
 * sbx made): root, and the very agent this host would inject for its architecture; else -1
 * (and the runner takes its exec way). $SBX_RESIDENT=0 skips it. */
int sbx_runner_resident(pid_t pid, const char *agent_dir, double timeout_s, struct sbx_session **s);

/* A list from k malloc'd names (freed here, with the array): each one's status by self; the
 * absent left out. */
int sbx_runner_list_of(const struct sbx_runner_class *self, char **names, size_t k,
                       struct sbx_sandbox **out, size_t *n, struct sbx_err *e);

#endif
