/* The seven architectures sbx ships an agent for: names, how the kernel calls them
 * (uname -m), and the QEMU user-mode binary that runs them on another machine. */
#ifndef SBX_ARCH_H
#define SBX_ARCH_H

struct sbx_arch {
	const char *name;     /* sbx's name: the folder under build/agent/ */
	const char *qemu;     /* qemu-*-static that runs it */
	const char *machines; /* space-separated `uname -m` values that mean this architecture */
};

/* The table, in a fixed order; n_out receives its length. */
const struct sbx_arch *sbx_arch_table(unsigned *n_out);

/* Looks up an architecture by sbx name; NULL when unknown. */
const struct sbx_arch *sbx_arch_by_name(const char *name);

/* Maps a `uname -m` value (x86_64, aarch64, armv7l, armv8l, i686, riscv64, ppc64le, s390x,
 * ...) to an architecture; NULL when sbx has no agent for it. */
const struct sbx_arch *sbx_arch_by_machine(const char *machine);

/* The architecture this code was compiled for (from the compiler's predefined macros). */
const char *sbx_arch_self(void);

#endif
