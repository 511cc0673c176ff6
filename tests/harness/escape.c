/* Harness for behaviours 9-11: leaves escapees (double fork, setsid, setpgid(0,0), a setsid
 * orphan re-exec'd with an empty environment), then stays or exits 0. Usage: escape TOKEN READY|-
 * doublefork|setsid|setpgid|emptyenv|all stay|exit */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ready.h"

/* An escapee: tells the harness it is in place, then sleeps until killed. */
static void sleeper(int fd)
{
	if (write(fd, "e", 1) != 1)
		_exit(3);
	close(fd);
	for (;;)
		sleep(1000);
}

/* Runs fn-like escape MODE in a fresh child; returns after the intermediate process (if any)
 * has exited, so the escapee is an orphan where the mode makes one. */
static void spawn(const char *mode, int fd, char **argv)
{
	pid_t p = fork();
	if (p < 0)
		_exit(4);
	if (p > 0) {
		if (strcmp(mode, "setsid") != 0 && strcmp(mode, "setpgid") != 0)
			waitpid(p, NULL, 0); /* the intermediate of a double fork */
		return;
	}
	if (strcmp(mode, "setsid") == 0) {
		setsid();
		sleeper(fd);
	}
	if (strcmp(mode, "setpgid") == 0) {
		setpgid(0, 0);
		sleeper(fd);
	}
	/* doublefork and emptyenv: an intermediate whose child outlives it */
	if (strcmp(mode, "emptyenv") == 0)
		setsid();
	pid_t q = fork();
	if (q != 0)
		_exit(q < 0 ? 4 : 0);
	if (strcmp(mode, "emptyenv") == 0) {
		char fdarg[16];
		snprintf(fdarg, sizeof fdarg, "%d", fd);
		char *nargv[] = {argv[0], argv[1], argv[2], "sleeper", fdarg, NULL};
		char *nenv[] = {NULL};
		execve("/proc/self/exe", nargv, nenv);
		_exit(5);
	}
	sleeper(fd);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[3], "sleeper") == 0)
		sleeper(atoi(argv[4])); /* the empty-environment descendant, after its re-exec */
	if (argc != 5)
		return 2;
	static const char *const modes[] = {"doublefork", "setsid", "setpgid", "emptyenv"};
	int fds[2];
	if (pipe(fds) != 0)
		return 4;
	int n = 0;
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		if (strcmp(argv[3], "all") == 0 || strcmp(argv[3], modes[i]) == 0) {
			spawn(modes[i], fds[1], argv);
			n++;
		}
	}
	if (n == 0)
		return 2;
	close(fds[1]);
	for (int got = 0; got < n;) { /* every escapee in place before "ready" */
		char c;
		struct pollfd pfd = {fds[0], POLLIN, 0};
		if (poll(&pfd, 1, 5000) != 1 || read(fds[0], &c, 1) != 1)
			return 6;
		got++;
	}
	ready(argv[2]);
	if (strcmp(argv[4], "exit") == 0)
		return 0;
	for (;;)
		sleep(1000);
}
