/* Harness for behaviour 15: writes BYTES (0 = without end) alternately to stdout and stderr in
 * 64 KiB blocks, then exits 0. Usage: flood TOKEN READY|- BYTES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ready(const char *path)
{
	char tmp[4096];
	const char *nonce = getenv("SBX_SUPERVISOR");
	if (strcmp(path, "-") == 0)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fprintf(f, "%d %s\n", (int)getpid(), nonce != NULL && *nonce != 0 ? nonce : "-");
	if (fclose(f) == 0)
		rename(tmp, path);
}

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
