/* `sbx-agent init`: the first process of a namespace sandbox. It holds the pid namespace open
 * (the namespace dies with it), reaps the orphans the kernel hands to PID 1, and on SIGTERM
 * kills everything else in the namespace and exits. Every other signal is ignored. */
#include "init.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

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

int sbx_init_main(void)
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
	if (chdir("/") != 0) {
		/* Nothing to do: the creator chose the root; stay where we are. */
	}
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);
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
