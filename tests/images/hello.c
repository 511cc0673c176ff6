/* hello: the one program of the shell-less test image (build/images/noshell-x86_64/hello).
 * It proves that a command runs in a root holding no /bin/sh, so it needs nothing but the
 * kernel: images/build.sh links it statically with the host compiler. `hello --wait` prints
 * the same line and then sleeps until a signal ends it: a long-lived PID 1 for a container
 * that sbx did not create (the injection tests). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	/* A write error (a closed or full stdout) must not pass as success. */
	if (puts("hello from a shell-less image") == EOF || fflush(stdout) != 0)
		return 1;
	if (argc > 1 && strcmp(argv[1], "--wait") == 0)
		for (;;)
			pause();
	return 0;
}
