/* Architecture table and the compile-time name of the running build. */
#include "arch.h"

#include <string.h>

static const struct sbx_arch table[] = {
        {"x86_64", "qemu-x86_64-static", "x86_64 amd64"},
        {"aarch64", "qemu-aarch64-static", "aarch64 arm64"},
        {"armv7", "qemu-arm-static", "armv7l armv7 armv8l armhf"},
        {"i386", "qemu-i386-static", "i386 i486 i586 i686"},
        {"riscv64", "qemu-riscv64-static", "riscv64"},
        {"ppc64le", "qemu-ppc64le-static", "ppc64le"},
        {"s390x", "qemu-s390x-static", "s390x"},
};

const struct sbx_arch *sbx_arch_table(unsigned *n_out)
{
	*n_out = sizeof table / sizeof table[0];
	return table;
}

const struct sbx_arch *sbx_arch_by_name(const char *name)
{
	for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

/* Whole-word match of word in a space-separated list. */
static int in_list(const char *list, const char *word)
{
	size_t n = strlen(word);
	if (n == 0)
		return 0;
	for (const char *p = list; *p != '\0';) {
		size_t len = strcspn(p, " ");
		if (len == n && memcmp(p, word, n) == 0)
			return 1;
		p += len;
		p += strspn(p, " ");
	}
	return 0;
}

const struct sbx_arch *sbx_arch_by_machine(const char *machine)
{
	for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++)
		if (in_list(table[i].machines, machine))
			return &table[i];
	return NULL;
}

const char *sbx_arch_self(void)
{
#if defined(__x86_64__)
	return "x86_64";
#elif defined(__aarch64__)
	return "aarch64";
#elif defined(__arm__)
	return "armv7";
#elif defined(__i386__)
	return "i386";
#elif defined(__riscv) && __riscv_xlen == 64
	return "riscv64";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
	return "ppc64le";
#elif defined(__s390x__)
	return "s390x";
#else
#error "sbx has no agent for this architecture"
#endif
}
