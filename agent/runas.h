/* Who a command runs as: the one user lookup and the one switch that exec requests and the
 * harness supervisor share, so `sbx exec --user U` and `sbx run --user U` give U the same
 * uid, group and supplementary groups. */
#ifndef SBX_AGENT_RUNAS_H
#define SBX_AGENT_RUNAS_H

#include <sys/types.h>

#include "err.h"

struct sbx_runas {
	uid_t uid;
	gid_t gid;
	char name[256]; /* the passwd entry's name, for its supplementary groups; "" without one */
};

/* Resolves user: a name in the sandbox's /etc/passwd, or a decimal uid (below 2^31). An entry
 * (by name, or by uid for a number) gives its uid, primary group and, at the switch, its
 * supplementary groups; a uid without an entry runs with gid = uid and no supplementary
 * groups (never group 0 by default). -1 with *e (SBX_EUSAGE) when user is neither. */
int sbx_runas_lookup(const char *user, struct sbx_runas *r, struct sbx_err *e);

/* Whether running as r takes a switch: 0 when r is this process's euid already, 1 when it
 * takes one and this process is root, -1 when it takes one this process cannot make. */
int sbx_runas_needed(const struct sbx_runas *r);

/* In a child about to exec, as root: supplementary groups (the entry's, or none), then gid,
 * then uid. Returns 0, or the errno of the step that failed. */
int sbx_runas_switch(const struct sbx_runas *r);

#endif
