/* Harness for the user switch: prints the Uid, Gid and Groups lines of its /proc/self/status
 * (into the run's output.log) after writing its ready line. Usage: ids TOKEN READY|- */
#include <stdio.h>
#include <string.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	ready(argv[2]);
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return 1;
	char line[4096];
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "Uid:", 4) == 0 || strncmp(line, "Gid:", 4) == 0 ||
		    strncmp(line, "Groups:", 7) == 0)
			fputs(line, stdout);
	fclose(f);
	return fflush(stdout) == 0 ? 0 : 1;
}
