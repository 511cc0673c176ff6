/* `sbx-agent pack DIR`: a folder's contents as a pax stream on stdout, through the same engine
 * as a download (archive/pack.h), with its statistics on stderr (tests/pack_fidelity.sh
 * compares it with GNU tar). */
#include "pack_main.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "pack.h"

int sbx_pack_main(int argc, char **argv)
{
	const char *dir = NULL, *excl[64], *names[64];
	int nx = 0, nn = 0, skip = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--skip-unsafe") == 0)
			skip = 1;
		else if (strcmp(argv[i], "--exclude") == 0 && i + 1 < argc && nx < 63)
			excl[nx++] = argv[++i];
		else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc && nn < 63)
			names[nn++] = argv[++i];
		else if (dir == NULL && argv[i][0] != '-')
			dir = argv[i];
		else {
			fprintf(stderr, "sbx-agent pack: bad argument %s\n", argv[i]);
			return 2;
		}
	}
	excl[nx] = NULL;
	names[nn] = NULL;
	if (dir == NULL) {
		fprintf(stderr, "sbx-agent pack: which folder?\n");
		return 2;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "sbx-agent pack: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct sbx_pack_opts o = {.root_fd = fd,
	                          .names = nn ? names : NULL,
	                          .exclude = excl,
	                          .skip_unsafe = skip,
	                          .out_fd = 1,
	                          .map_files = getenv("SBX_PACK_NOMAP") == NULL};
	struct sbx_pack_stats st;
	struct sbx_err e;
	int rc = sbx_pack(&o, &st, &e);
	close(fd);
	if (rc != 0) {
		fprintf(stderr, "sbx-agent pack: %s: %s\n", sbx_err_class_name(e.cls), e.msg);
		return 1;
	}
	char hex[SBX_SHA256_HEX_LEN];
	sbx_hex(st.sha256, SBX_SHA256_LEN, hex);
	fprintf(stderr,
	        "files %llu dirs %llu symlinks %llu hardlinks %llu skipped %llu excluded %llu "
	        "data %llu archive %llu sha256 %s\n",
	        (unsigned long long)st.files, (unsigned long long)st.dirs,
	        (unsigned long long)st.symlinks, (unsigned long long)st.hardlinks,
	        (unsigned long long)st.skipped, (unsigned long long)st.excluded,
	        (unsigned long long)st.data_bytes, (unsigned long long)st.archive_bytes, hex);
	return 0;
}
