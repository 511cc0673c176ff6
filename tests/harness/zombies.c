/* Harness for behaviour 13: a child forks N children that exit at once and never waits for
 * them, then sleeps; the harness sleeps too. Usage: zombies TOKEN READY|- N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int n = atoi(argv[3]);
	if (fork() == 0) {
		for (int i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			if (p < 0)
				_exit(4);
		}
		ready(argv[2]); /* written by the zombies' parent: its pid is in the ready line */
		for (;;)
			sleep(1000);
	}
	for (;;)
		sleep(1000);
}
