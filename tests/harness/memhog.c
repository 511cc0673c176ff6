/* Harness for behaviour 17: allocates and touches memory 1 MiB at a time until MAX_MIB (then
 * sleeps), so a memory limit below MAX_MIB ends it through the OOM killer. Usage: memhog TOKEN
 * READY|- MAX_MIB */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

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
