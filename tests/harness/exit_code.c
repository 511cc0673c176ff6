/* Harness for behaviour 1: exits with the status given in argv, after writing its ready line.
 * Usage: exit_code TOKEN READY|- N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	ready(argv[2]);
	return atoi(argv[3]);
}
