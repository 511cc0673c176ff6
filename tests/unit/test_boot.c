/* The injection dialog's engine (runner/boot_dialog.c): the two ways it ends well (an agent
 * already there; the agent sent), the channel's own chatter, and every way a sandbox's shell
 * can say something wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "boot.h"

static enum sbx_boot_act line(struct sbx_boot_dialog *d, const char *s, struct sbx_err *e)
{
	return sbx_boot_line(d, s, strlen(s), e);
}

static void agent_already_there(void **state)
{
	(void)state;
	struct sbx_boot_dialog d;
	struct sbx_err e;
	sbx_boot_init(&d);
	assert_int_equal(line(&d, "Defaulted container \"main\" out of: main, side", &e),
	                 SBX_BOOT_MORE);
	assert_int_equal(line(&d, "sbx-machine:aarch64", &e), SBX_BOOT_MACHINE);
	assert_string_equal(d.arch, "aarch64");
	assert_int_equal(line(&d, "sbx-exec:/.sbx-agent-0123456789ab", &e), SBX_BOOT_RUNS);
	assert_string_equal(d.path, "/.sbx-agent-0123456789ab");
	assert_int_equal(d.sent, 0);
	assert_int_equal(d.state, SBX_BOOT_DONE);
	/* Whatever follows is the agent's, not the dialog's. */
	assert_int_equal(line(&d, "sbx-exec:/x", &e), SBX_BOOT_FAIL);
}

static void agent_sent(void **state)
{
	(void)state;
	struct sbx_boot_dialog d;
	struct sbx_err e;
	sbx_boot_init(&d);
	assert_int_equal(line(&d, "sbx-machine:x86_64\r", &e), SBX_BOOT_MACHINE);
	assert_string_equal(d.arch, "x86_64");
	assert_int_equal(line(&d, "sbx-send\r", &e), SBX_BOOT_SEND);
	assert_int_equal(d.sent, 1);
	assert_int_equal(line(&d, "sbx-exec:/var/tmp/.sbx-agent-0123456789ab", &e), SBX_BOOT_RUNS);
	assert_string_equal(d.path, "/var/tmp/.sbx-agent-0123456789ab");
}

static void machine_names_map(void **state)
{
	(void)state;
	const char *m[][2] = {{"armv7l", "armv7"}, {"i686", "i386"}, {"ppc64le", "ppc64le"}};
	for (size_t i = 0; i < 3; i++) {
		struct sbx_boot_dialog d;
		struct sbx_err e;
		char l[64];
		sbx_boot_init(&d);
		snprintf(l, sizeof l, "sbx-machine:%s", m[i][0]);
		assert_int_equal(line(&d, l, &e), SBX_BOOT_MACHINE);
		assert_string_equal(d.arch, m[i][1]);
	}
}

static void refusals(void **state)
{
	(void)state;
	struct {
		const char *lines[3];
		enum sbx_err_class cls;
	} cases[] = {
	        {{"sbx-machine:mips"}, SBX_EUSAGE},
	        {{"sbx-machine:"}, SBX_EUNAVAILABLE},
	        {{"sbx-send"}, SBX_EUNAVAILABLE}, /* before the machine */
	        {{"sbx-exec:/tmp/a"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-exec:tmp/relative"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-exec:/tmp/../etc/x"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-exec:/tmp/.."}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-exec:"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-machine:x86_64"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-send", "sbx-send"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-send", "sbx-fail:nowhere"}, SBX_EUNAVAILABLE},
	        {{"sbx-machine:x86_64", "sbx-what"}, SBX_EUNAVAILABLE},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct sbx_boot_dialog d;
		struct sbx_err e;
		sbx_boot_init(&d);
		enum sbx_boot_act a = SBX_BOOT_MORE;
		for (int k = 0; k < 3 && cases[i].lines[k] != NULL; k++)
			a = line(&d, cases[i].lines[k], &e);
		assert_int_equal(a, SBX_BOOT_FAIL);
		assert_int_equal(e.cls, cases[i].cls);
		assert_int_equal(d.state, SBX_BOOT_FAILED);
		assert_true(e.msg[0] != '\0');
	}
	/* A dotted name that is not ".." is a name. */
	struct sbx_boot_dialog d;
	struct sbx_err e;
	sbx_boot_init(&d);
	line(&d, "sbx-machine:x86_64", &e);
	assert_int_equal(line(&d, "sbx-exec:/tmp/..x/.sbx-agent-1", &e), SBX_BOOT_RUNS);
}

static void chatter_is_bounded(void **state)
{
	(void)state;
	struct sbx_boot_dialog d;
	struct sbx_err e;
	sbx_boot_init(&d);
	for (int i = 0; i < 64; i++)
		assert_int_equal(line(&d, "noise", &e), SBX_BOOT_MORE);
	assert_int_equal(line(&d, "noise", &e), SBX_BOOT_FAIL);
}

static void reply_line(void **state)
{
	(void)state;
	uint8_t sha[SBX_SHA256_LEN];
	for (int i = 0; i < SBX_SHA256_LEN; i++)
		sha[i] = (uint8_t)(0xa0 + i);
	char buf[64];
	size_t n = sbx_boot_reply(sha, 280208, buf, sizeof buf);
	assert_int_equal(n, strlen(".sbx-agent-a0a1a2a3a4a5 280208\n"));
	assert_memory_equal(buf, ".sbx-agent-a0a1a2a3a4a5 280208\n", n);
	assert_int_equal(sbx_boot_reply(sha, 280208, buf, 20), 0);
	char name[SBX_AGENT_NAME_LEN];
	sbx_agent_name(sha, name);
	assert_string_equal(name, ".sbx-agent-a0a1a2a3a4a5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(agent_already_there), cmocka_unit_test(agent_sent),
	        cmocka_unit_test(machine_names_map),   cmocka_unit_test(refusals),
	        cmocka_unit_test(chatter_is_bounded),  cmocka_unit_test(reply_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
