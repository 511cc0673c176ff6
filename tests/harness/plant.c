/* Harness that attacks its own run folder: once the supervisor says "running", it puts a
 * FIFO, a bound socket, a symlink to a FIFO or a 1 TiB sparse file at each NAME (made under a
 * temporary name, then renamed over it, as a harness running as the folder's owner can), then
 * writes its ready line and waits to be stopped. Usage: plant TOKEN READY DIR KIND NAME...
 * with KIND fifo, socket, symlink or huge. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ready.h"

static int running(const char *dir)
{
	char path[4096], buf[32] = "";
	snprintf(path, sizeof path, "%s/state", dir);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	return n > 0 && strncmp(buf, "running", 7) == 0;
}

static int make(const char *kind, const char *dir, const char *tmp)
{
	if (strcmp(kind, "fifo") == 0)
		return mkfifo(tmp, 0600);
	if (strcmp(kind, "symlink") == 0) {
		/* to a FIFO: whoever follows it blocks */
		char target[4096];
		snprintf(target, sizeof target, "%s/.plant-target", dir);
		if (mkfifo(target, 0600) != 0 && errno != EEXIST)
			return -1;
		return symlink(target, tmp);
	}
	if (strcmp(kind, "huge") == 0) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int rc = fd >= 0 && ftruncate(fd, (off_t)1 << 40) == 0 ? 0 : -1;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (strcmp(kind, "socket") == 0) {
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		if (strlen(tmp) >= sizeof a.sun_path)
			return -1;
		strcpy(a.sun_path, tmp);
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1) != 0)
			return -1;
		return 0; /* kept open and listening: a connect would succeed */
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	const char *dir = argv[3], *kind = argv[4];
	for (int i = 0; i < 1000 && !running(dir); i++)
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	for (int i = 5; i < argc; i++) {
		char path[4096], tmp[4096];
		snprintf(path, sizeof path, "%s/%s", dir, argv[i]);
		snprintf(tmp, sizeof tmp, "%s/.p%d", dir, i);
		unlink(tmp);
		if (make(kind, dir, tmp) != 0 || rename(tmp, path) != 0) {
			perror(argv[i]);
			return 3;
		}
	}
	ready(argv[2]);
	for (;;)
		pause();
}
