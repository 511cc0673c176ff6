/* The PATH search every command launch shares (exec requests and the harness supervisor):
 * execvp's rules against the environment the program will get, with a default path for
 * images that set none, and no shell involved. */
#ifndef SBX_AGENT_PATHEXEC_H
#define SBX_AGENT_PATHEXEC_H

/* What a fresh login would search when the environment has no PATH. */
#define SBX_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Executes argv[0] (a path when it holds a '/', else searched in env's PATH) with argv and
 * env. Returns only on failure, with the errno to report: ENOENT when found nowhere, EACCES
 * when only candidates that may not be executed were found, else the first other error. */
int sbx_pathexec(char *const argv[], char *const env[]);

#endif
