/* sbx-agent: the static program injected into a sandbox. This file only dispatches the
 * command line; each command lives in its own file. */
#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shared/arch.h"
#include "../shared/version.h"
#include "digest.h"
#include "init.h"
#include "pack.h"
#include "selftest.h"
#include "serve.h"
#include "supervise.h"

#ifndef SBX_LIBARCHIVE_DEBIAN
#error "build with -DSBX_LIBARCHIVE_DEBIAN=\"version\" (the Makefile passes toolchain/pins)"
#endif
#ifndef SBX_BEARSSL_DEBIAN
#error "build with -DSBX_BEARSSL_DEBIAN=\"version\""
#endif

static void usage(FILE *f)
{
	fputs("usage: sbx-agent --version | selftest | serve | supervise ... | pack ... | help\n"
	      "  --version  version, architecture, libarchive and BearSSL versions\n"
	      "  selftest   check libarchive (pax round trip) and BearSSL (SHA-256, HMAC "
	      "vectors)\n"
	      "  serve      speak the sbx protocol on stdin/stdout (docs/protocol.md)\n"
	      "  pack DIR [--exclude PATTERN]... [--name NAME]... [--skip-unsafe]\n"
	      "             write DIR's contents as a pax stream on stdout; stats on stderr\n"
	      "  supervise  --session DIR [--timeout S] [--grace S] [--log-max BYTES] [--user U]\n"
	      "             [--cwd D] [--env K=V]... [--env-clear] [--key-hex HEX | --key-fd FD]\n"
	      "             -- ARGV...    run a harness to completion; print its receipt\n"
	      "  supervise --rearm --session DIR    begin the next activation of a session\n"
	      "  init [--serve]\n"
	      "             PID 1 of a sandbox: reap orphans; SIGTERM kills all; --serve: take\n"
	      "             sessions on a socket from outside the pid namespace "
	      "(docs/runners.md)\n",
	      f);
}

static int cmd_pack(int argc, char **argv)
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

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("sbx-agent %s %s libarchive %s (Debian %s) BearSSL (Debian %s)\n",
		       SBX_VERSION, sbx_arch_self(),
		       archive_version_string() + strlen("libarchive "), SBX_LIBARCHIVE_DEBIAN,
		       SBX_BEARSSL_DEBIAN);
		return 0;
	}
	if (strcmp(cmd, "serve") == 0)
		return sbx_serve(0, 1);
	if (strcmp(cmd, "supervise") == 0)
		return sbx_supervise_main(argc - 1, argv + 1);
	if (strcmp(cmd, "init") == 0)
		return sbx_init_main(argc > 2 && strcmp(argv[2], "--serve") == 0);
	if (strcmp(cmd, "selftest") == 0)
		return sbx_selftest_run(stdout) == 0 ? 0 : 1;
	if (strcmp(cmd, "pack") == 0)
		return cmd_pack(argc - 2, argv + 2);
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "sbx-agent: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
