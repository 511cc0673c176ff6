/* The one thing every harness program does first: tell the test it runs, and with which
 * supervisor nonce, by renaming "PID NONCE" into place at READY ("-": say nothing). */
#ifndef SBX_HARNESS_READY_H
#define SBX_HARNESS_READY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ready(const char *path)
{
	char tmp[4096];
	const char *nonce = getenv("SBX_SUPERVISOR");
	if (strcmp(path, "-") == 0)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fprintf(f, "%d %s\n", (int)getpid(), nonce != NULL && *nonce != 0 ? nonce : "-");
	if (fclose(f) == 0)
		rename(tmp, path);
}

#endif
