/* The seccomp filter of shared/confine.c, run by a small classic-BPF interpreter over
 * hand-made seccomp_data: refused calls, allowed ones, the argument checks, and every other
 * ABI (the 32-bit one, x32, a foreign AUDIT_ARCH) refused or filtered by its own numbers.
 * Shown able to fail: with the arch check removed from sbx_confine_filter (its native section
 * run for any arch), foreign_abi_refused fails: i386's unshare (310) with CLONE_NEWUSER passes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "confine.h"

#define ALLOW 0x7fff0000u
#define EPERM_ (0x00050000u | EPERM)
#define ENOSYS_ (0x00050000u | ENOSYS)
#define X86_64 0xC000003Eu
#define I386 0x40000003u
#define AARCH64 0xC00000B7u

struct data {
	int32_t nr;
	uint32_t arch;
	uint64_t ip;
	uint64_t args[6];
};

/* The subset of classic BPF the filter uses: absolute 32-bit loads, jeq/jge/jset with a
 * constant, ret with a constant. */
static uint32_t run(uint32_t arch, int nr, uint64_t arg0, uint64_t arg1)
{
	static struct sbx_bpf prog[512];
	int n = sbx_confine_filter(prog, 512);
	assert_true(n > 0 && n < 512);
	struct data d = {.nr = nr, .arch = arch, .args = {arg0, arg1}};
	unsigned char raw[sizeof d];
	memcpy(raw, &d, sizeof d);
	uint32_t a = 0;
	for (int pc = 0; pc < n; pc++) {
		const struct sbx_bpf *i = &prog[pc];
		switch (i->code) {
		case 0x20:
			assert_true(i->k + 4 <= sizeof raw);
			memcpy(&a, raw + i->k, 4);
			break;
		case 0x15:
			pc += a == i->k ? i->jt : i->jf;
			break;
		case 0x35:
			pc += a >= i->k ? i->jt : i->jf;
			break;
		case 0x45:
			pc += (a & i->k) != 0 ? i->jt : i->jf;
			break;
		case 0x06:
			return i->k;
		default:
			fail_msg("opcode %#x", i->code);
		}
	}
	fail_msg("fell off the end");
	return 0;
}

static void native_calls(void **state)
{
	(void)state;
	const int refused[] = {SYS_init_module,
	                       SYS_finit_module,
	                       SYS_delete_module,
	                       SYS_kexec_load,
	                       SYS_open_by_handle_at,
	                       SYS_name_to_handle_at,
	                       SYS_bpf,
	                       SYS_perf_event_open,
	                       SYS_keyctl,
	                       SYS_add_key,
	                       SYS_request_key,
	                       SYS_swapon,
	                       SYS_swapoff,
	                       SYS_reboot,
	                       SYS_settimeofday,
	                       SYS_clock_settime,
	                       SYS_clock_adjtime,
	                       SYS_adjtimex,
	                       SYS_acct,
	                       SYS_pivot_root,
	                       SYS_mount,
	                       SYS_umount2,
	                       SYS_setns,
	                       SYS_lookup_dcookie,
	                       SYS_quotactl,
	                       SYS_iopl,
	                       SYS_ioperm,
	                       SYS_syslog,
	                       SYS_userfaultfd};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		assert_int_equal(run(X86_64, refused[i], 0, 0), EPERM_);
	const int allowed[] = {SYS_read,   SYS_write, SYS_openat, SYS_getpid, SYS_execve,
	                       SYS_ptrace, SYS_kill,  SYS_chown,  SYS_mknod,  SYS_chroot};
	for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
		assert_int_equal(run(X86_64, allowed[i], 0, 0), ALLOW);
}

static void arguments(void **state)
{
	(void)state;
	/* clone: a thread or a fork passes; a new user (or any) namespace does not. */
	assert_int_equal(run(X86_64, SYS_clone, 0x003d0f00, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_clone, 17, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_clone, 0x10000000 | 17, 0), EPERM_);
	assert_int_equal(run(X86_64, SYS_clone, 0x20000 | 17, 0), EPERM_);
	assert_int_equal(run(X86_64, SYS_clone3, 0, 0), ENOSYS_);
	assert_int_equal(run(X86_64, SYS_unshare, 0x10000000, 0), EPERM_);
	assert_int_equal(run(X86_64, SYS_unshare, 0x80, 0), EPERM_);
	assert_int_equal(run(X86_64, SYS_unshare, 0x400, 0), ALLOW); /* CLONE_FILES */
	/* The high half of a 64-bit argument is not the flags'. */
	assert_int_equal(run(X86_64, SYS_unshare, 0x100000000ull, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_personality, 0xffffffff, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_personality, 0, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_personality, 8, 0), ALLOW);
	assert_int_equal(run(X86_64, SYS_personality, 0x0040000, 0), EPERM_); /* no ASLR */
}

static void foreign_abi_refused(void **state)
{
	(void)state;
	/* x32 (the x32 bit under x86_64's AUDIT_ARCH): every call. */
	assert_int_equal(run(X86_64, 0x40000000 | SYS_getpid, 0, 0), EPERM_);
	/* i386 through int 0x80: its own numbers (getpid 20, unshare 310, mount 21,
	 * open_by_handle_at 342, clock_settime64 404, keyctl 288). */
	assert_int_equal(run(I386, 20, 0, 0), ALLOW);
	assert_int_equal(run(I386, 310, 0x10000000, 0), EPERM_);
	assert_int_equal(run(I386, 310, 0x400, 0), ALLOW);
	assert_int_equal(run(I386, 120, 0x10000000 | 17, 0), EPERM_);
	const int i386_refused[] = {21, 342, 404, 288, 128, 357, 336};
	for (size_t i = 0; i < sizeof i386_refused / sizeof i386_refused[0]; i++)
		assert_int_equal(run(I386, i386_refused[i], 0, 0), EPERM_);
	/* Any other architecture: nothing, not even getpid (172 on aarch64). */
	assert_int_equal(run(AARCH64, 172, 0, 0), EPERM_);
	assert_int_equal(run(0, SYS_getpid, 0, 0), EPERM_);
}

int main(void)
{
#if !defined(__x86_64__)
	return 0; /* the data above is x86_64's */
#endif
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(native_calls),
	        cmocka_unit_test(arguments),
	        cmocka_unit_test(foreign_abi_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
