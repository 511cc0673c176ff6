/* `sbx-agent init`: the first process of a namespace sandbox. It holds the pid namespace open
 * (the namespace dies with it), reaps the orphans the kernel hands to PID 1, and on SIGTERM
 * kills everything else in the namespace and exits. Every other signal is ignored. With
 * --serve it is also the resident agent (agent/resident.h): each connection it takes from
 * outside becomes a `serve` child. */
#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "resident.h"
#include "serve.h"

static void reap_all(int block)
{
	for (;;) {
		pid_t p = waitpid(-1, NULL, block ? 0 : WNOHANG);
		if (p > 0)
			continue;
		if (p < 0 && errno == EINTR)
			continue;
		return; /* 0: none exited yet; ECHILD: no children left */
	}
}

/* A connection taken: its own `serve` process, with init's signal mask undone, in the
 * folder init was started in (home: where an exec into the container starts too). */
static void serve_child(int c, int lfd, int sfd, int home)
{
	pid_t p = fork();
	if (p == 0) {
		close(lfd);
		close(sfd);
		if (home >= 0 && fchdir(home) == 0)
			close(home);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int big = 1 << 20; /* as on the direct socket: a wake-up per MiB of a transfer */
		setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
		setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
		int out = fcntl(c, F_DUPFD_CLOEXEC, 3);
		_exit(out < 0 ? 3 : sbx_serve(c, out));
	}
	close(c); /* the child's now; after a failed fork the host sees EOF and goes the exec way */
}

int sbx_init_main(int serve)
{
	if (getpid() != 1) {
		fputs("sbx-agent init: must run as PID 1 of its own pid namespace\n", stderr);
		return 2;
	}
	/* Every signal is taken synchronously: nothing runs in a handler, and a signal the loop
	 * does not ask for stays blocked (ignored) for good. */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	int home = serve ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	if (chdir("/") != 0) {
		/* Nothing to do: the creator chose the root; stay where we are. */
	}
	int lfd = -1, sfd = -1;
	if (serve && geteuid() != 0) {
		fputs("sbx-agent init: not root; sessions come by exec\n", stderr);
	} else if (serve) {
		char err[160];
		sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
		lfd = sfd >= 0 ? sbx_resident_listen(err, sizeof err) : -1;
		if (lfd < 0) /* init still does its first job; sessions come by exec */
			fprintf(stderr, "sbx-agent init: %s\n", sfd < 0 ? "signalfd" : err);
	}
	for (;;) {
		int sig;
		if (lfd >= 0) {
			struct pollfd p[2] = {{sfd, POLLIN, 0}, {lfd, POLLIN, 0}};
			if (poll(p, 2, -1) < 0)
				continue;
			if (p[1].revents & POLLIN) {
				int c = sbx_resident_accept(lfd);
				if (c >= 0)
					serve_child(c, lfd, sfd, home);
			}
			struct signalfd_siginfo si;
			if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof si) != sizeof si)
				continue;
			sig = (int)si.ssi_signo;
		} else {
			siginfo_t si;
			sig = sigwaitinfo(&all, &si);
		}
		if (sig == SIGCHLD) {
			reap_all(0);
		} else if (sig == SIGTERM) {
			/* As PID 1, kill(-1) reaches every other process of this namespace (and of
			 * namespaces nested in it) and nothing outside. */
			kill(-1, SIGKILL);
			reap_all(1);
			return 0;
		}
		/* Any other signal, or EINTR: ignored. */
	}
}
