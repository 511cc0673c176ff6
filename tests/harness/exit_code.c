/* Harness for behaviour 1: exits with the status given in argv, after writing its ready line.
 * Usage: exit_code TOKEN READY|- N */
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

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	ready(argv[2]);
	return atoi(argv[3]);
}
