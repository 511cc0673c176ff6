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
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper.h"
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
 * folder init was started in (home: where an exec into the container starts too). It keeps
 * no copy of the keeper's secret: trust requests go to init's keeper socket like any other
 * serve process's. */
static void serve_child(int c, int lfd, int sfd, int kfd, int home, struct sbx_keeper *k)
{
	pid_t p = fork();
	if (p == 0) {
		memset(k, 0, sizeof *k);
		close(lfd);
		close(sfd);
		if (kfd >= 0)
			close(kfd);
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
	/* The keeper's secret will live here: no ptrace, no /proc/1/mem (agent/keeper.h). */
	prctl(PR_SET_DUMPABLE, 0);
	struct sbx_keeper keeper;
	memset(&keeper, 0, sizeof keeper);
	/* Every signal is taken synchronously: nothing runs in a handler, and a signal the loop
	 * does not ask for stays blocked (ignored) for good. */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	int home = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sbx_keeper_conns conns;
	sbx_keeper_conns_init(&conns, home);
	if (chdir("/") != 0) {
		/* Nothing to do: the creator chose the root; stay where we are. */
	}
	char err[160];
	int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		fprintf(stderr, "sbx-agent init: signalfd: %s\n", strerror(errno));
		return 2;
	}
	int lfd = -1;
	if (serve && geteuid() != 0) {
		fputs("sbx-agent init: not root; sessions come by exec\n", stderr);
	} else if (serve) {
		lfd = sbx_resident_listen(err, sizeof err);
		if (lfd < 0) /* init still does its first job; sessions come by exec */
			fprintf(stderr, "sbx-agent init: %s\n", err);
	}
	int kfd = sbx_keeper_listen(err, sizeof err);
	if (kfd < 0) /* no keeper: the host's trust requests fail, saying so */
		fprintf(stderr, "sbx-agent init: %s\n", err);
	for (;;) {
		/* [0] signals, [1] resident listener, [2] keeper listener, then its connections */
		struct pollfd p[3 + SBX_KEEPER_CONNS];
		p[0] = (struct pollfd){sfd, POLLIN, 0};
		p[1] = (struct pollfd){lfd, POLLIN, 0};
		int timeout = -1;
		sbx_keeper_conns_poll(&conns, kfd, p + 2, &timeout);
		if (poll(p, 3 + SBX_KEEPER_CONNS, timeout) < 0)
			continue;
		if (p[1].revents & POLLIN) {
			int c = sbx_resident_accept(lfd);
			if (c >= 0)
				serve_child(c, lfd, sfd, kfd, home, &keeper);
		}
		sbx_keeper_conns_ready(&keeper, &conns, kfd, p + 2);
		struct signalfd_siginfo si;
		if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof si) != sizeof si)
			continue;
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD) {
			reap_all(0);
		} else if (sig == SIGTERM) {
			/* As PID 1, kill(-1) reaches every other process of this namespace (and of
			 * namespaces nested in it) and nothing outside. */
			kill(-1, SIGKILL);
			reap_all(1);
			return 0;
		}
		/* Any other signal: ignored. */
	}
}
