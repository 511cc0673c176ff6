/* The user lookup and switch of every command launch (agent/runas.h). */
#include "runas.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void keep_name(struct sbx_runas *r, const struct passwd *pw)
{
	r->name[0] = '\0';
	if (pw != NULL && pw->pw_name != NULL && strlen(pw->pw_name) < sizeof r->name)
		strcpy(r->name, pw->pw_name);
}

int sbx_runas_lookup(const char *user, struct sbx_runas *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	struct passwd *pw = getpwnam(user);
	if (pw == NULL) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(user, &end, 10);
		if (user[0] < '0' || user[0] > '9' || *end != '\0' || errno != 0 || v > 0x7fffffff)
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "no user '%s' in the sandbox's /etc/passwd", user);
		pw = getpwuid((uid_t)v);
		if (pw == NULL) {
			/* No entry to take a group from: the uid's own number, never root's. */
			r->uid = (uid_t)v;
			r->gid = (gid_t)v;
			return 0;
		}
	}
	r->uid = pw->pw_uid;
	r->gid = pw->pw_gid;
	keep_name(r, pw);
	return 0;
}

int sbx_runas_needed(const struct sbx_runas *r)
{
	if (r->uid == geteuid())
		return 0;
	return geteuid() == 0 ? 1 : -1;
}

int sbx_runas_switch(const struct sbx_runas *r)
{
	/* Groups first: after setuid there is no privilege left to set them. */
	int rc = r->name[0] != '\0' ? initgroups(r->name, r->gid) : setgroups(0, NULL);
	if (rc != 0 || setgid(r->gid) != 0 || setuid(r->uid) != 0)
		return errno;
	return 0;
}
