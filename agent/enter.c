/* The confined way into an ns sandbox (agent/enter.h). It does what `nsenter --target PID
 * --mount --uts --ipc --net --pid --root --wd` does, joins the sandbox's user namespace last
 * (its other namespaces are the host's: joined first, while this process still has the
 * host's capabilities), then drops to the sandbox's boundary before the exec: the program it runs
 * is the sandbox's own file (the layer's /.sbx/sbx-agent, which the sandbox's root can replace), so
 * it must start with no more than the sandbox's processes hold. */
#include "enter.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"

extern char **environ;

static int fail(const char *what)
{
	fprintf(stderr, "sbx-agent enter: %s: %s\n", what, strerror(errno));
	return 125;
}

int sbx_enter_main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("usage: sbx-agent enter PID PROGRAM [ARG]...\n", stderr);
		return 2;
	}
	char *end;
	long pid = strtol(argv[0], &end, 10);
	if (*argv[0] == '\0' || *end != '\0' || pid <= 1) {
		fputs("sbx-agent enter: PID must be a number above 1\n", stderr);
		return 2;
	}
	/* Every descriptor opened before joining anything: after the mount namespace's, the
	 * host's /proc is out of reach. */
	static const char *const kinds[] = {"ipc", "uts", "net", "mnt"};
	static const int types[] = {CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET, CLONE_NEWNS};
	int fds[4], pidns, root, userns = -1;
	char path[64];
	struct stat mine, its;
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "/proc/%ld/ns/%s", pid, kinds[i]);
		if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return fail(path);
	}
	snprintf(path, sizeof path, "/proc/%ld/ns/pid", pid);
	if ((pidns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return fail(path);
	snprintf(path, sizeof path, "/proc/%ld/root", pid);
	if ((root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail(path);
	/* A sandbox made --privileged (or by an sbx before user namespaces) shares ours. */
	snprintf(path, sizeof path, "/proc/%ld/ns/user", pid);
	if ((userns = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(userns, &its) != 0 ||
	    stat("/proc/self/ns/user", &mine) != 0)
		return fail(path);
	if (its.st_ino == mine.st_ino && its.st_dev == mine.st_dev) {
		close(userns);
		userns = -1;
	}
	/* The pid namespace applies to children only: this process stays the host's, outside
	 * the sandbox's sight, and waits. */
	if (setns(pidns, CLONE_NEWPID) != 0)
		return fail("join the pid namespace");
	pid_t c = fork();
	if (c < 0)
		return fail("fork");
	if (c == 0) {
		for (int i = 0; i < 4; i++)
			if (setns(fds[i], types[i]) != 0)
				_exit(fail(kinds[i]));
		if (fchdir(root) != 0 || chroot(".") != 0 || chdir("/") != 0)
			_exit(fail("enter the sandbox's root"));
		if (userns >= 0 && sbx_confine_userns(userns) != 0)
			_exit(fail("join the sandbox's user namespace"));
		if (sbx_confine() != 0)
			_exit(fail("confine"));
		execve(argv[1], argv + 1, environ);
		_exit(errno == ENOENT ? 127 : 126);
	}
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	close(pidns);
	close(root);
	if (userns >= 0)
		close(userns);
	int st;
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return fail("wait");
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		kill(getpid(), WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}
