/* Harness for behaviour 8: writes its ready line, then stops itself with SIGSTOP (again after
 * every SIGCONT) so only a signal that works on a stopped process ends it. Usage: self_stop TOKEN
 * READY|- */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	signal(SIGTERM, SIG_IGN); /* a CONT then TERM does not end it either */
	ready(argv[2]);
	for (;;)
		raise(SIGSTOP);
}
