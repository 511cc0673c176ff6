/* tree TOKEN N_GROUP N_SETSID READY: a process tree for bench-supervise — N_GROUP children in
 * the harness's group and N_SETSID that escaped with setsid, all asleep; READY appears once
 * every one of them runs. TOKEN stays in every process's argv. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int ng = atoi(argv[2]), ns = atoi(argv[3]);
	int p[2];
	if (pipe(p) != 0)
		return 1;
	for (int i = 0; i < ng + ns; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			if (i >= ng)
				setsid();
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			close(p[1]);
			for (;;)
				pause();
		}
		if (pid < 0)
			return 1;
	}
	close(p[1]);
	char c;
	for (int got = 0; got < ng + ns;) {
		if (read(p[0], &c, 1) != 1)
			return 1;
		got++;
	}
	int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 1;
	close(fd);
	for (;;)
		pause();
}
