/* Harness for behaviour 15: writes BYTES (0 = without end) alternately to stdout and stderr in
 * 64 KiB blocks, then exits 0. Usage: flood TOKEN READY|- BYTES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	static char block[65536];
	memset(block, 'x', sizeof block);
	for (size_t i = 63; i < sizeof block; i += 64)
		block[i] = '\n';
	long long left = atoll(argv[3]);
	int forever = left == 0;
	ready(argv[2]);
	for (int fd = 1; forever || left > 0; fd = 3 - fd) {
		size_t n = forever || left > (long long)sizeof block ? sizeof block : (size_t)left;
		ssize_t w = write(fd, block, n);
		if (w <= 0)
			return 3;
		left -= w;
	}
	return 0;
}
