/* Harness for behaviour 2: dies of the signal named in argv (a real fault for SEGV), with the
 * disposition reset and the signal unblocked so nothing inherited can save it. Usage: self_signal
 * TOKEN READY|- SIGNO */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int sig = atoi(argv[3]);
	struct rlimit nocore = {0, 0};
	setrlimit(RLIMIT_CORE, &nocore); /* no core files from a test */
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	ready(argv[2]);
	if (sig == SIGSEGV) {
		volatile char *page =
		        mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (page != MAP_FAILED)
			page[0] = 1;
	}
	raise(sig);
	for (;;)
		pause(); /* a stop signal lands here; the test then stops the run */
}
