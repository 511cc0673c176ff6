/* The line dialog of injection in one exec (runner/boot.h), without I/O: what each line of
 * the sandbox's shell means and what the host answers. Fed bytes from inside the sandbox, so
 * nothing it is told is trusted beyond its shape. */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "boot.h"
#include "hex.h"

#define MAX_CHATTER 64

void sbx_boot_init(struct sbx_boot_dialog *d)
{
	memset(d, 0, sizeof *d);
	d->state = SBX_BOOT_WANT_MACHINE;
}

static enum sbx_boot_act fail(struct sbx_boot_dialog *d, struct sbx_err *e, const char *why,
                              const char *line, size_t len)
{
	d->state = SBX_BOOT_FAILED;
	sbx_err_set(e, SBX_EUNAVAILABLE, 0, "agent delivery: %s%s%.*s", why, len ? ": " : "",
	            (int)(len > 120 ? 120 : len), line);
	return SBX_BOOT_FAIL;
}

static int starts(const char *line, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(line, word, n) == 0;
}

/* A path the script can have printed: absolute, no NUL or newline, no ".." component. The
 * line is not NUL-terminated: everything stays within len. */
static int plausible_path(const char *p, size_t len)
{
	if (len == 0 || len >= sizeof((struct sbx_boot_dialog *)0)->path || p[0] != '/')
		return 0;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\0' || p[i] == '\n' || p[i] == '\r')
			return 0;
		if (p[i] == '/' && len - i >= 3 && p[i + 1] == '.' && p[i + 2] == '.' &&
		    (len - i == 3 || p[i + 3] == '/'))
			return 0;
	}
	return 1;
}

enum sbx_boot_act sbx_boot_line(struct sbx_boot_dialog *d, const char *line, size_t len,
                                struct sbx_err *e)
{
	if (d->state == SBX_BOOT_DONE || d->state == SBX_BOOT_FAILED)
		return fail(d, e, "a line after the end", line, len);
	if (++d->lines > MAX_CHATTER)
		return fail(d, e, "too many lines before the agent", "", 0);
	if (len > 0 && line[len - 1] == '\r')
		len--; /* a channel that translates newlines */
	if (!starts(line, len, "sbx-"))
		return SBX_BOOT_MORE;
	if (d->state == SBX_BOOT_WANT_MACHINE) {
		if (!starts(line, len, "sbx-machine:"))
			return fail(d, e, "unexpected line", line, len);
		char m[64];
		size_t n = len - 12;
		if (n == 0 || n >= sizeof m)
			return fail(d, e, "bad machine", line, len);
		memcpy(m, line + 12, n);
		m[n] = '\0';
		const struct sbx_arch *a = sbx_arch_by_machine(m);
		if (a == NULL) {
			d->state = SBX_BOOT_FAILED;
			sbx_err_set(e, SBX_EUSAGE, 0, "no agent for machine '%s'", m);
			return SBX_BOOT_FAIL;
		}
		snprintf(d->arch, sizeof d->arch, "%s", a->name);
		d->state = SBX_BOOT_WANT_VERDICT;
		return SBX_BOOT_MACHINE;
	}
	if (starts(line, len, "sbx-exec:")) {
		if (!plausible_path(line + 9, len - 9))
			return fail(d, e, "bad path", line, len);
		memcpy(d->path, line + 9, len - 9);
		d->path[len - 9] = '\0';
		d->state = SBX_BOOT_DONE;
		return SBX_BOOT_RUNS;
	}
	if (d->state == SBX_BOOT_WANT_VERDICT && len == 8 && memcmp(line, "sbx-send", 8) == 0) {
		d->sent = 1;
		d->state = SBX_BOOT_WANT_EXEC;
		return SBX_BOOT_SEND;
	}
	if (starts(line, len, "sbx-fail:"))
		return fail(d, e, "the sandbox's shell gave up", line + 9, len - 9);
	return fail(d, e, "unexpected line", line, len);
}

void sbx_agent_name(const uint8_t sha[SBX_SHA256_LEN], char out[SBX_AGENT_NAME_LEN])
{
	memcpy(out, ".sbx-agent-", 11);
	sbx_hex(sha, 6, out + 11);
}

size_t sbx_boot_reply(const uint8_t sha[SBX_SHA256_LEN], uint64_t size, char *buf, size_t cap)
{
	char name[SBX_AGENT_NAME_LEN];
	sbx_agent_name(sha, name);
	int n = snprintf(buf, cap, "%s %llu\n", name, (unsigned long long)size);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
