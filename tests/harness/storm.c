/* Harness for behaviour 12: a bounded fork storm (a binary tree of DEPTH levels, every node
 * alive) or a pid-hopping chain (fork, setsid, parent exits, repeat). Usage: storm TOKEN READY|-
 * tree DEPTH | hop */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	signal(SIGCHLD, SIG_IGN); /* hop parents and storm nodes leave no zombies of their own */
	if (strcmp(argv[3], "tree") == 0 && argc == 5) {
		int depth = atoi(argv[4]);
		ready(argv[2]); /* before the storm: the test stops it while it still grows */
		for (int level = 0; level < depth; level++) {
			/* each node forks two children per level; both carry on growing */
			if (fork() == 0)
				continue;
			if (fork() == 0)
				continue;
			break;
		}
		for (;;)
			sleep(1000);
	}
	if (strcmp(argv[3], "hop") == 0) {
		/* bounded even when nothing stops it: 30 s, and a few failed forks in a row */
		time_t end = time(NULL) + 30;
		if (fork() == 0) {
			for (int fails = 0; time(NULL) < end && fails < 100;) {
				pid_t p = fork();
				if (p < 0) {
					fails++;
					usleep(1000);
					continue;
				}
				if (p > 0)
					_exit(0); /* the parent leaves; the child hops on */
				fails = 0;
				setsid();
			}
			_exit(0);
		}
		ready(argv[2]);
		for (;;)
			sleep(1000);
	}
	return 2;
}
