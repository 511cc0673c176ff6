/* Harness for behaviour 6: traps SIGTERM, "checkpoints" for CKPT_MS (writing READY.ckpt) and
 * exits with CODE by itself within the grace. Usage: trap_term TOKEN READY|- CODE CKPT_MS */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ready.h"

static volatile sig_atomic_t term;

static void on_term(int sig)
{
	(void)sig;
	term = 1;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	ready(argv[2]);
	while (!term)
		pause();
	long ms = atol(argv[4]);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	if (strcmp(argv[2], "-") != 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s.ckpt", argv[2]);
		FILE *f = fopen(path, "w");
		if (f != NULL) {
			fputs("checkpoint\n", f);
			fclose(f);
		}
	}
	return atoi(argv[3]);
}
