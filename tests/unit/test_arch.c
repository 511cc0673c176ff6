/* The architecture table: names, uname -m mapping, and the host's own name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/utsname.h>

#include <cmocka.h>

#include "arch.h"

static void seven_arches_in_order(void **state)
{
	(void)state;
	unsigned n;
	const struct sbx_arch *t = sbx_arch_table(&n);
	const char *want[] = {"x86_64", "aarch64", "armv7", "i386", "riscv64", "ppc64le", "s390x"};
	assert_int_equal(n, 7);
	for (unsigned i = 0; i < n; i++) {
		assert_string_equal(t[i].name, want[i]);
		assert_ptr_equal(sbx_arch_by_name(want[i]), &t[i]);
		assert_non_null(strstr(t[i].qemu, "qemu-"));
	}
	assert_null(sbx_arch_by_name("mips"));
	assert_null(sbx_arch_by_name(""));
}

static void machine_names(void **state)
{
	(void)state;
	struct {
		const char *machine, *arch;
	} cases[] = {
	        {"x86_64", "x86_64"}, {"aarch64", "aarch64"}, {"arm64", "aarch64"},
	        {"armv7l", "armv7"},  {"armv8l", "armv7"},    {"i686", "i386"},
	        {"i386", "i386"},     {"riscv64", "riscv64"}, {"ppc64le", "ppc64le"},
	        {"s390x", "s390x"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct sbx_arch *a = sbx_arch_by_machine(cases[i].machine);
		assert_non_null(a);
		assert_string_equal(a->name, cases[i].arch);
	}
	/* No prefix or substring matches: "arm" alone, "ppc64" (big-endian), "x86". */
	assert_null(sbx_arch_by_machine("arm"));
	assert_null(sbx_arch_by_machine("ppc64"));
	assert_null(sbx_arch_by_machine("x86"));
	assert_null(sbx_arch_by_machine("mips64"));
	assert_null(sbx_arch_by_machine(""));
}

static void self_matches_uname(void **state)
{
	(void)state;
	struct utsname u;
	assert_int_equal(uname(&u), 0);
	const struct sbx_arch *a = sbx_arch_by_machine(u.machine);
	assert_non_null(a);
	assert_string_equal(a->name, sbx_arch_self());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(seven_arches_in_order),
	        cmocka_unit_test(machine_names),
	        cmocka_unit_test(self_matches_uname),
	};
	return cmocka_run_group_tests_name("arch", tests, NULL, NULL);
}
