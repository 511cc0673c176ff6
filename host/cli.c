/* The `sbx` command: a thin layer over libsbx that parses arguments and prints results. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "sbx.h"

static void usage(FILE *f)
{
	fputs("usage: sbx [--agent-dir DIR] COMMAND\n"
	      "  version                 print sbx's version\n"
	      "  arches                  list the architectures and their agent binaries\n"
	      "  selftest [--qemu] [ARCH...]\n"
	      "                          run every agent's selftest (natively for this machine's\n"
	      "                          architecture, under qemu-ARCH-static for the others)\n"
	      "exit status: 0 success, 1 a check failed, 2 usage error, 3 could not run\n",
	      f);
}

static int cmd_arches(const char *dir)
{
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	for (unsigned i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct sbx_err e;
		int have = sbx_agent_path(dir, t[i].name, path, sizeof path, &e) == 0;
		printf("%-8s %-20s %s\n", t[i].name, t[i].qemu, have ? path : "(not built)");
	}
	return 0;
}

static int cmd_selftest(const char *dir, int force_qemu, int argc, char **argv)
{
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	const char *names[16];
	unsigned count = 0;
	if (argc == 0 || (argc == 1 && strcmp(argv[0], "all") == 0)) {
		for (unsigned i = 0; i < n; i++)
			names[count++] = t[i].name;
	} else {
		for (int i = 0; i < argc && count < 16; i++)
			names[count++] = argv[i];
	}
	int failed = 0, broken = 0;
	for (unsigned i = 0; i < count; i++) {
		struct sbx_selftest_result r;
		struct sbx_err e;
		if (sbx_agent_selftest(dir, names[i], force_qemu, &r, &e) != 0) {
			printf("FAIL %-8s %s: %s\n", names[i], sbx_err_class_name(e.cls), e.msg);
			broken++;
			continue;
		}
		printf("%s %-8s %-6s %6.2f s\n", r.passed ? "ok  " : "FAIL", names[i],
		       r.via_qemu ? "qemu" : "native", r.proc.seconds);
		if (!r.passed) {
			fputs(r.proc.output, stdout);
			failed++;
		}
		sbx_proc_result_free(&r.proc);
	}
	printf("%u passed, %d failed\n", count - (unsigned)(failed + broken), failed + broken);
	return broken ? 3 : failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX];
	int i = 1;
	const char *dir_opt = NULL;
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--agent-dir") == 0 && i + 1 < argc) {
			dir_opt = argv[i + 1];
			i += 2;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "sbx: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	struct sbx_err e;
	if (dir_opt != NULL) {
		snprintf(dir, sizeof dir, "%s", dir_opt);
	} else if (sbx_agent_dir(dir, sizeof dir, &e) != 0) {
		fprintf(stderr, "sbx: %s\n", e.msg);
		return 3;
	}
	const char *cmd = argv[i++];
	if (strcmp(cmd, "version") == 0) {
		printf("sbx %s\n", sbx_version());
		return 0;
	}
	if (strcmp(cmd, "arches") == 0)
		return cmd_arches(dir);
	if (strcmp(cmd, "selftest") == 0) {
		int force_qemu = 0;
		if (i < argc && strcmp(argv[i], "--qemu") == 0) {
			force_qemu = 1;
			i++;
		}
		return cmd_selftest(dir, force_qemu, argc - i, argv + i);
	}
	fprintf(stderr, "sbx: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
