/* The public runner API (runner/sbx_runner.h) alone, as a program of a user's would drive it:
 * the table's rows, and two kinds end to end: "local" (open, probe) and "ns" (create from the
 * bundled BusyBox image, status, list, open, exec, remove, then absent). Includes nothing but
 * the installed headers. ns needs root and build/images (skipped otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx.h"
#include "sbx_runner.h"

static void every_row_has_a_name_a_parse_and_an_open(void **state)
{
	(void)state;
	int n = 0, creators = 0;
	for (const struct sbx_runner_class *const *c = sbx_runner_classes; *c != NULL; c++, n++) {
		assert_non_null((*c)->name);
		assert_non_null((*c)->parse);
		assert_non_null((*c)->open);
		creators += (*c)->create != NULL;
		/* A class is found by its own name. */
		char spec[64];
		snprintf(spec, sizeof spec, "%s:x", (*c)->name);
		const char *arg;
		struct sbx_err e;
		assert_ptr_equal(sbx_runner_class_of(spec, &arg, &e), *c);
		assert_string_equal(arg, "x");
	}
	assert_int_equal(n, 8); /* local qemu ns podman docker kubectl ssh via */
	assert_int_equal(creators, 3);
	struct sbx_err e;
	const char *arg;
	assert_null(sbx_runner_class_of("nosuch:x", &arg, &e));
	assert_int_equal(e.cls, SBX_EUSAGE);
	struct sbx_session *s;
	assert_int_equal(sbx_open("ns:../x", NULL, &s, &e), -1);
	assert_int_equal(e.cls, SBX_EUSAGE);
	assert_int_equal(sbx_open("qemu:vax", NULL, &s, &e), -1);
	assert_int_equal(e.cls, SBX_EUSAGE);
	char spec[64];
	assert_int_equal(sbx_sandbox_create("local", NULL, spec, sizeof spec, &e), -1);
}

static void local_opens_and_answers(void **state)
{
	(void)state;
	struct sbx_open_opts o = {.agent_dir = getenv("SBX_AGENT_DIR")};
	struct sbx_session *s;
	struct sbx_err e;
	if (sbx_open("local", &o, &s, &e) != 0)
		fail_msg("open local: %s", e.msg);
	enum sbx_kind k;
	assert_int_equal(sbx_kind(s, "/", &k, &e), 0);
	assert_int_equal(k, SBX_KIND_DIR);
	sbx_session_close(s);
}

static void ns_made_listed_used_and_removed(void **state)
{
	(void)state;
	const char *adir = getenv("SBX_AGENT_DIR");
	char image[4096];
	snprintf(image, sizeof image, "%s/../images/busybox-x86_64", adir ? adir : "build/agent");
	if (geteuid() != 0 || access(image, F_OK) != 0)
		skip();
	struct sbx_create_opts co = {.image = image, .agent_dir = adir};
	char spec[192];
	struct sbx_err e;
	if (sbx_sandbox_create("ns", &co, spec, sizeof spec, &e) != 0)
		fail_msg("create: %s", e.msg);
	assert_memory_equal(spec, "ns:", 3);
	struct sbx_sandbox sb;
	assert_int_equal(sbx_sandbox_status(spec, &sb, &e), 0);
	assert_true(sb.running);
	assert_string_equal(sb.kind, "ns");
	assert_string_equal(sb.arch, "x86_64");
	assert_true(sb.pid > 1);
	struct sbx_sandbox *v;
	size_t n, found = 0;
	assert_int_equal(sbx_sandbox_list("ns", &v, &n, &e), 0);
	for (size_t i = 0; i < n; i++)
		found += strcmp(v[i].spec, spec) == 0;
	free(v);
	assert_int_equal(found, 1);
	struct sbx_open_opts oo = {.agent_dir = adir};
	struct sbx_session *s;
	if (sbx_open(spec, &oo, &s, &e) != 0)
		fail_msg("open %s: %s", spec, e.msg);
	struct sbx_exec_opts x;
	sbx_exec_opts_init(&x);
	x.shell = "test -d /bin && test -x /.sbx/sbx-agent";
	struct sbx_exec_result r;
	assert_int_equal(sbx_exec(s, &x, &r, &e), 0);
	assert_int_equal(r.code, 0);
	sbx_session_close(s);
	assert_int_equal(sbx_sandbox_remove(spec, &e), 0);
	assert_int_equal(sbx_sandbox_status(spec, &sb, &e), 0);
	assert_string_equal(sb.state, "absent");
	assert_false(sb.running);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(every_row_has_a_name_a_parse_and_an_open),
	        cmocka_unit_test(local_opens_and_answers),
	        cmocka_unit_test(ns_made_listed_used_and_removed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
