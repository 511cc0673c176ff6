/* Finding and signalling every process of one run: the supervisor's descendants (a /proc walk
 * over parent links; the supervisor is a subreaper, so orphans stay in its tree) plus any process
 * whose environment carries the run's marker (a second net, never the first). */
#ifndef SBX_AGENT_KILLTREE_H
#define SBX_AGENT_KILLTREE_H

#include <stdint.h>
#include <sys/types.h>

struct sbx_kt {
	pid_t self;      /* the supervisor: never signalled; its descendants are the run */
	char marker[64]; /* the whole environ entry "SBX_SUPERVISOR=<nonce>"; "" for none */
};

/* Called for each living process of the run found by a walk (cmdline: NULs as spaces). */
typedef void (*sbx_kt_visit)(void *arg, pid_t pid, const char *cmdline);

/* One /proc walk: sends sig1 then sig2 (0: none) to every living (non-zombie) process of the
 * run except self, and calls visit (when not NULL). Returns how many were found; *others (when
 * not NULL) gets how many of them are not direct children of self (their death cannot be
 * witnessed by waitpid). -1 when /proc cannot be read. Own children are signalled with kill()
 * (an unreaped pid cannot be recycled); others through a pidfd after re-checking the start
 * time the walk saw, or kill() after that re-check where pidfd_open is missing. */
int sbx_killtree(const struct sbx_kt *k, int sig1, int sig2, sbx_kt_visit visit, void *arg,
                 int *others);

#endif
