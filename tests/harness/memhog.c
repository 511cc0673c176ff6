/* Harness for behaviour 17: allocates and touches memory 1 MiB at a time until MAX_MIB (then
 * sleeps), so a memory limit below MAX_MIB ends it through the OOM killer. Usage: memhog TOKEN
 * READY|- MAX_MIB */
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
	long max = atol(argv[3]);
	ready(argv[2]);
	for (long i = 0; i < max; i++) {
		char *p = malloc(1 << 20);
		if (p == NULL)
			return 3;
		memset(p, (int)(i & 0xff) | 1, 1 << 20);
		usleep(2000);
	}
	for (;;)
		sleep(1000);
}
