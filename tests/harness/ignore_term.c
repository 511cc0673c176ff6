/* Harness for behaviour 7: ignores every catchable signal ("ignore") or blocks them all
 * ("block"), in itself and in one child, and never exits. Usage: ignore_term TOKEN READY|-
 * ignore|block */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	if (strcmp(argv[3], "block") == 0) {
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
	} else {
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
				signal(s, SIG_IGN);
	}
	pid_t child = fork(); /* inherits the mask and dispositions */
	if (child == 0) {
		for (;;)
			sleep(1000);
	}
	ready(argv[2]);
	for (;;)
		sleep(1000);
}
