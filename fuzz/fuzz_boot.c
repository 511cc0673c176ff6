/* libFuzzer target for the injection dialog (runner/boot_dialog.c): any bytes, split into
 * lines as the host reads them from a sandbox's shell, and the invariants the host relies on:
 * the machine is asked once and first, the agent's bytes at most once and only after it, a
 * path to run is absolute, NUL- and newline-free and fits, and nothing goes on after the end. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "boot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_boot_dialog d;
	struct sbx_err e;
	sbx_boot_init(&d);
	int machine = 0, send = 0, ended = 0;
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		enum sbx_boot_act a = sbx_boot_line(&d, p, len, &e);
		if (ended && a != SBX_BOOT_FAIL)
			__builtin_trap(); /* a line after RUNS or FAIL must fail */
		switch (a) {
		case SBX_BOOT_MACHINE:
			if (machine++ || send || d.arch[0] == '\0')
				__builtin_trap();
			break;
		case SBX_BOOT_SEND:
			if (!machine || send++ || !d.sent)
				__builtin_trap();
			break;
		case SBX_BOOT_RUNS: {
			size_t n = strnlen(d.path, sizeof d.path);
			if (!machine || n == 0 || n >= sizeof d.path || d.path[0] != '/' ||
			    strchr(d.path, '\n') != NULL || d.state != SBX_BOOT_DONE)
				__builtin_trap();
			ended = 1;
			break;
		}
		case SBX_BOOT_FAIL:
			if (d.state != SBX_BOOT_FAILED || e.msg[0] == '\0')
				__builtin_trap();
			ended = 1;
			break;
		case SBX_BOOT_MORE:
			break;
		}
		p += len + (nl != NULL);
	}
	char buf[64];
	uint8_t sha[SBX_SHA256_LEN] = {0};
	size_t n = sbx_boot_reply(sha, size, buf, sizeof buf);
	if (n == 0 || buf[n - 1] != '\n' || strncmp(buf, ".sbx-agent-000000000000 ", 24) != 0)
		__builtin_trap();
	return 0;
}
