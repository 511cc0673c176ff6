/* Harness for behaviour 8: writes its ready line, then stops itself with SIGSTOP (again after
 * every SIGCONT) so only a signal that works on a stopped process ends it. Usage: self_stop TOKEN
 * READY|- */
#include <signal.h>
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
	if (argc != 3)
		return 2;
	signal(SIGTERM, SIG_IGN); /* a CONT then TERM does not end it either */
	ready(argv[2]);
	for (;;)
		raise(SIGSTOP);
}
