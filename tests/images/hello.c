/* hello: the one program of the shell-less test image (build/images/noshell-x86_64/hello).
 * It proves that a command runs in a root holding no /bin/sh, so it needs nothing but the
 * kernel: images/build.sh links it statically with the host compiler. */
#include <stdio.h>

int main(void)
{
	/* A write error (a closed or full stdout) must not pass as success. */
	if (puts("hello from a shell-less image") == EOF || fflush(stdout) != 0)
		return 1;
	return 0;
}
