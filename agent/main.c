/* sbx-agent: the static program injected into a sandbox. This file only dispatches the
 * command line; each command lives in its own file (serve.c, supervise_main.c, init.c,
 * selftest.c, pack_main.c, enter.c). */
#include <archive.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "enter.h"
#include "init.h"
#include "pack_main.h"
#include "selftest.h"
#include "serve.h"
#include "supervise.h"
#include "version.h"

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
	      "  supervise  --run-dir DIR [--timeout S] [--grace S] [--log-max BYTES] [--user U]\n"
	      "             [--cwd D] [--env K=V]... [--env-clear] [--key-hex HEX | --key-fd FD]\n"
	      "             -- ARGV...    run a harness to completion; print its receipt\n"
	      "  supervise --rearm --run-dir DIR    begin the next activation in a run folder\n"
	      "  init [--serve]\n"
	      "             PID 1 of a sandbox: reap orphans; SIGTERM kills all; --serve: take\n"
	      "             sessions on a socket from outside the pid namespace "
	      "(docs/runners.md)\n"
	      "  enter PID PROGRAM [ARG]...\n"
	      "             run PROGRAM in the ns sandbox whose init is PID, confined to its\n"
	      "             boundary (docs/runners.md)\n",
	      f);
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
	if (strcmp(cmd, "enter") == 0)
		return sbx_enter_main(argc - 2, argv + 2);
	if (strcmp(cmd, "selftest") == 0)
		return sbx_selftest_run(stdout) == 0 ? 0 : 1;
	if (strcmp(cmd, "pack") == 0)
		return sbx_pack_main(argc - 2, argv + 2);
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "sbx-agent: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
