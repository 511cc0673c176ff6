/* execvp's search, on the environment given rather than the caller's own. */
#include "pathexec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *env_get(char *const env[], const char *key)
{
	size_t k = strlen(key);
	for (char *const *p = env; p != NULL && *p != NULL; p++)
		if (strncmp(*p, key, k) == 0 && (*p)[k] == '=')
			return *p + k + 1;
	return NULL;
}

int sbx_pathexec(char *const argv[], char *const env[])
{
	const char *file = argv[0];
	if (strchr(file, '/') != NULL) {
		execve(file, argv, env);
		return errno;
	}
	const char *path = env_get(env, "PATH");
	int err = ENOENT, saw_eacces = 0;
	char buf[4096];
	for (const char *p = path != NULL ? path : SBX_DEFAULT_PATH;; p++) {
		const char *end = strchr(p, ':');
		int dl = end != NULL ? (int)(end - p) : (int)strlen(p);
		/* An empty entry means the current directory, as in execvp. */
		snprintf(buf, sizeof buf, "%.*s%s%s", dl, p, dl ? "/" : "", file);
		execve(buf, argv, env);
		if (errno == EACCES)
			saw_eacces = 1;
		else if (errno != ENOENT && errno != ENOTDIR)
			err = errno;
		if (end == NULL)
			break;
		p = end;
	}
	return saw_eacces && err == ENOENT ? EACCES : err;
}
