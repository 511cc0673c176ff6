/* Finding the agent binaries and running their self-test, natively or under QEMU. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "sbx.h"
#include "version.h"

const char *sbx_version(void)
{
	return SBX_VERSION;
}

int sbx_agent_dir(char *out, size_t cap, struct sbx_err *e)
{
	const char *env = getenv("SBX_AGENT_DIR");
	if (env != NULL && env[0] != '\0') {
		if ((size_t)snprintf(out, cap, "%s", env) >= cap)
			return sbx_err_set(e, SBX_EUSAGE, 0, "SBX_AGENT_DIR is too long");
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "readlink /proc/self/exe");
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "odd executable path %s", exe);
	*slash = '\0';
	if ((size_t)snprintf(out, cap, "%s/../agent", exe) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "agent folder path is too long");
	return 0;
}

int sbx_agent_path(const char *dir, const char *arch, char *out, size_t cap, struct sbx_err *e)
{
	char def[PATH_MAX];
	if (dir == NULL) {
		if (sbx_agent_dir(def, sizeof def, e) != 0)
			return -1;
		dir = def;
	}
	if (sbx_arch_by_name(arch) == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture '%s'", arch);
	if ((size_t)snprintf(out, cap, "%s/%s/sbx-agent", dir, arch) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "agent path is too long");
	if (access(out, X_OK) != 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "no agent for %s at %s", arch, out);
	return 0;
}

int sbx_agent_selftest(const char *agent_dir, const char *arch, int force_qemu,
                       struct sbx_selftest_result *r, struct sbx_err *e)
{
	memset(r, 0, sizeof *r);
	const struct sbx_arch *a = sbx_arch_by_name(arch);
	if (a == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture '%s'", arch);
	char path[PATH_MAX];
	if (sbx_agent_path(agent_dir, arch, path, sizeof path, e) != 0)
		return -1;
	r->via_qemu = force_qemu || strcmp(arch, sbx_arch_self()) != 0;
	char *argv_native[] = {path, "selftest", NULL};
	char *argv_qemu[] = {(char *)a->qemu, path, "selftest", NULL};
	/* Emulated riscv64/s390x are slow at a million-byte hash; a minute is generous. */
	if (sbx_proc_capture(r->via_qemu ? argv_qemu : argv_native, 60.0, 64 * 1024, &r->proc, e) !=
	    0)
		return -1;
	r->passed = r->proc.how == SBX_PROC_EXITED && r->proc.code == 0 &&
	            strstr(r->proc.output, "selftest: passed\n") != NULL;
	return 0;
}
