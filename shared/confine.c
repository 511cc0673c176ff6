/* The sandbox boundary of shared/confine.h: capabilities, no_new_privs and a classic BPF
 * seccomp filter written here (no libseccomp). The syscall numbers are each architecture's own,
 * from its C library's <sys/syscall.h> (every agent is built with its architecture's), plus a
 * table for the 32-bit ABI a 64-bit kernel also runs (i386 on x86_64, arm on aarch64). */
#include "confine.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAPBSET_DROP
#define PR_CAPBSET_DROP 24
#endif
#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS 38
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP 22
#endif
#define SECCOMP_MODE_FILTER 2
#define RET_ALLOW 0x7fff0000u
#define RET_ERRNO(e) (0x00050000u | (uint32_t)(e))

/* Classic BPF opcodes (linux/filter.h, which musl does not ship). */
#define LD_ABS 0x20 /* BPF_LD | BPF_W | BPF_ABS */
#define JEQ 0x15    /* BPF_JMP | BPF_JEQ | BPF_K */
#define JGE 0x35    /* BPF_JMP | BPF_JGE | BPF_K */
#define JSET 0x45   /* BPF_JMP | BPF_JSET | BPF_K */
#define RET 0x06    /* BPF_RET | BPF_K */
#define OFF_NR 0    /* struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] */
#define OFF_ARCH 4
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define OFF_ARG(i) (16 + 8 * (i) + 4) /* an argument's low 32 bits */
#else
#define OFF_ARG(i) (16 + 8 * (i))
#endif

/* Namespace flags of clone and unshare: without CAP_SYS_ADMIN only CLONE_NEWUSER would
 * succeed, and a new user namespace gives back every capability inside it. CLONE_NEWTIME
 * (0x80) shares its bit with clone's exit signal, so only unshare checks it. */
#define NS_FLAGS 0x7e020000u
#define CLONE_NEWTIME_ 0x80u

/* Calls of the kernel's newer ABI that carry one number on every architecture sbx supports;
 * older C library headers do not name them. */
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* The calls refused with EPERM (Docker's default profile refuses them too, or a capability
 * this boundary drops is their only use). ptrace stays: without CAP_SYS_PTRACE it reaches
 * only the sandbox's own processes with no more capabilities than the tracer's, as in
 * Docker. */
static const int native_deny[] = {
#ifdef SYS_init_module
        SYS_init_module,
#endif
#ifdef SYS_finit_module
        SYS_finit_module,
#endif
#ifdef SYS_delete_module
        SYS_delete_module,
#endif
#ifdef SYS_create_module
        SYS_create_module,
#endif
#ifdef SYS_kexec_load
        SYS_kexec_load,
#endif
#ifdef SYS_kexec_file_load
        SYS_kexec_file_load,
#endif
#ifdef SYS_open_by_handle_at
        SYS_open_by_handle_at,
#endif
#ifdef SYS_name_to_handle_at
        SYS_name_to_handle_at,
#endif
#ifdef SYS_bpf
        SYS_bpf,
#endif
#ifdef SYS_perf_event_open
        SYS_perf_event_open,
#endif
#ifdef SYS_keyctl
        SYS_keyctl,
#endif
#ifdef SYS_add_key
        SYS_add_key,
#endif
#ifdef SYS_request_key
        SYS_request_key,
#endif
#ifdef SYS_swapon
        SYS_swapon,
#endif
#ifdef SYS_swapoff
        SYS_swapoff,
#endif
#ifdef SYS_reboot
        SYS_reboot,
#endif
#ifdef SYS_settimeofday
        SYS_settimeofday,
#endif
#ifdef SYS_settimeofday_time32
        SYS_settimeofday_time32,
#endif
#ifdef SYS_stime
        SYS_stime,
#endif
#ifdef SYS_clock_settime
        SYS_clock_settime,
#endif
#ifdef SYS_clock_settime32
        SYS_clock_settime32,
#endif
#ifdef SYS_clock_settime64
        SYS_clock_settime64,
#endif
#ifdef SYS_clock_adjtime
        SYS_clock_adjtime,
#endif
#ifdef SYS_clock_adjtime64
        SYS_clock_adjtime64,
#endif
#ifdef SYS_adjtimex
        SYS_adjtimex,
#endif
#ifdef SYS_acct
        SYS_acct,
#endif
#ifdef SYS_pivot_root
        SYS_pivot_root,
#endif
#ifdef SYS_mount
        SYS_mount,
#endif
#ifdef SYS_umount
        SYS_umount,
#endif
#ifdef SYS_umount2
        SYS_umount2,
#endif
#ifdef SYS_fsopen
        SYS_fsopen,
#endif
#ifdef SYS_fsconfig
        SYS_fsconfig,
#endif
#ifdef SYS_fsmount
        SYS_fsmount,
#endif
#ifdef SYS_fspick
        SYS_fspick,
#endif
#ifdef SYS_move_mount
        SYS_move_mount,
#endif
#ifdef SYS_open_tree
        SYS_open_tree,
#endif
        SYS_mount_setattr,
#ifdef SYS_setns
        SYS_setns,
#endif
#ifdef SYS_lookup_dcookie
        SYS_lookup_dcookie,
#endif
#ifdef SYS_quotactl
        SYS_quotactl,
#endif
        SYS_quotactl_fd,
#ifdef SYS_iopl
        SYS_iopl,
#endif
#ifdef SYS_ioperm
        SYS_ioperm,
#endif
#ifdef SYS_vm86
        SYS_vm86,
#endif
#ifdef SYS_vm86old
        SYS_vm86old,
#endif
#ifdef SYS_syslog
        SYS_syslog,
#endif
#ifdef SYS_userfaultfd
        SYS_userfaultfd,
#endif
#ifdef SYS_io_uring_setup
        SYS_io_uring_setup,
#endif
#ifdef SYS_io_uring_enter
        SYS_io_uring_enter,
#endif
#ifdef SYS_io_uring_register
        SYS_io_uring_register,
#endif
#ifdef SYS_uselib
        SYS_uselib,
#endif
#ifdef SYS_nfsservctl
        SYS_nfsservctl,
#endif
#ifdef SYS__sysctl
        SYS__sysctl,
#endif
        -1};

/* One ABI's part of the filter. */
struct abi {
	uint32_t audit_arch; /* AUDIT_ARCH_* (linux/audit.h) */
	const int *deny;     /* ends with -1 */
	int clone, clone_flags_arg, unshare, personality;
	int below; /* every number from it up is refused (x32 on x86_64); 0: none */
};

#if defined(__x86_64__) && !defined(__ILP32__)
#define NATIVE_ARCH 0xC000003Eu
#define X32_BIT 0x40000000
/* i386's numbers (musl's arch/i386/bits/syscall.h.in), for int 0x80 from a 32-bit program. */
static const int compat_deny[] = {128, 350, 129, 127, 283, 342, 341, 357, 336, 288, 286, 287, 87,
                                  115, 88,  79,  25,  264, 404, 343, 405, 124, 51,  217, 21,  22,
                                  52,  430, 431, 432, 433, 429, 428, 442, 346, 253, 131, 443, 110,
                                  101, 166, 113, 103, 374, 425, 426, 427, 86,  169, 149, -1};
static const struct abi compat = {0x40000003u, compat_deny, 120, 0, 310, 136, 0};
#define HAVE_COMPAT 1
#elif defined(__aarch64__)
#define NATIVE_ARCH 0xC00000B7u
/* arm's numbers (musl's arch/arm/bits/syscall.h.in), for a 32-bit program on arm64. */
static const int compat_deny[] = {128, 379, 129, 347, 401, 371, 370, 386, 364, 311, 309, 310,
                                  87,  115, 88,  79,  262, 404, 372, 405, 124, 51,  218, 21,
                                  52,  430, 431, 432, 433, 429, 428, 442, 375, 249, 131, 443,
                                  103, 388, 425, 426, 427, 86,  169, 149, -1};
static const struct abi compat = {0x40000028u, compat_deny, 120, 0, 337, 136, 0};
#define HAVE_COMPAT 1
#elif defined(__i386__)
#define NATIVE_ARCH 0x40000003u
#elif defined(__arm__)
#define NATIVE_ARCH 0x40000028u
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define NATIVE_ARCH 0xC0000015u
#elif defined(__s390x__)
#define NATIVE_ARCH 0x80000016u
#elif defined(__riscv) && __riscv_xlen == 64
#define NATIVE_ARCH 0xC00000F3u
#else
#error "no seccomp architecture for this target (shared/confine.c)"
#endif

/* s390's clone takes (stack, flags, ...): its flags are the second argument. */
#if defined(__s390x__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

#ifndef X32_BIT
#define X32_BIT 0
#endif

static const struct abi native = {NATIVE_ARCH, native_deny,     SYS_clone, CLONE_FLAGS_ARG,
                                  SYS_unshare, SYS_personality, X32_BIT};

struct prog {
	struct sbx_bpf *p;
	int n, cap;
};

static void emit(struct prog *g, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (g->n < g->cap)
		g->p[g->n] = (struct sbx_bpf){code, jt, jf, k};
	g->n++;
}

/* A refused call: "if nr == k, refuse". */
static void refuse(struct prog *g, uint32_t nr, uint32_t ret)
{
	emit(g, JEQ, 0, 1, nr);
	emit(g, RET, 0, 0, ret);
}

/* The calls of one ABI, the accumulator holding the number; ends in a return on every path. */
static void section(struct prog *g, const struct abi *a)
{
	emit(g, LD_ABS, 0, 0, OFF_NR);
	if (a->below != 0) {
		emit(g, JGE, 0, 1, (uint32_t)a->below);
		emit(g, RET, 0, 0, RET_ERRNO(EPERM));
	}
	for (const int *d = a->deny; *d >= 0; d++)
		refuse(g, (uint32_t)*d, RET_ERRNO(EPERM));
	/* clone3's flags are in memory a filter cannot read: ENOSYS makes the C library fall
	 * back to clone, whose flags it can. */
	refuse(g, SYS_clone3, RET_ERRNO(ENOSYS));
	emit(g, JEQ, 0, 4, (uint32_t)a->clone);
	emit(g, LD_ABS, 0, 0, OFF_ARG(a->clone_flags_arg));
	emit(g, JSET, 0, 1, NS_FLAGS);
	emit(g, RET, 0, 0, RET_ERRNO(EPERM));
	emit(g, RET, 0, 0, RET_ALLOW);
	emit(g, JEQ, 0, 4, (uint32_t)a->unshare);
	emit(g, LD_ABS, 0, 0, OFF_ARG(0));
	emit(g, JSET, 0, 1, NS_FLAGS | CLONE_NEWTIME_);
	emit(g, RET, 0, 0, RET_ERRNO(EPERM));
	emit(g, RET, 0, 0, RET_ALLOW);
	/* personality: only the values Docker allows (Linux, PER_LINUX32, UNAME26, both, the
	 * query); the others turn off address randomisation or change the ABI's meaning. */
	static const uint32_t persona[] = {0, 8, 0x20000, 0x20008, 0xffffffffu};
	const int np = (int)(sizeof persona / sizeof persona[0]);
	emit(g, JEQ, 0, (uint8_t)(np + 3), (uint32_t)a->personality);
	emit(g, LD_ABS, 0, 0, OFF_ARG(0));
	for (int i = 0; i < np; i++)
		emit(g, JEQ, (uint8_t)(np - i), 0, persona[i]);
	emit(g, RET, 0, 0, RET_ERRNO(EPERM));
	emit(g, RET, 0, 0, RET_ALLOW);
	emit(g, RET, 0, 0, RET_ALLOW);
}

/* "if arch == a's, its section", patched once the section's length is known (at most 255
 * instructions: a classic BPF jump's reach). */
static int arch_section(struct prog *g, const struct abi *a)
{
	int at = g->n;
	emit(g, JEQ, 0, 0, a->audit_arch);
	section(g, a);
	int len = g->n - at - 1;
	if (len > 255)
		return -1;
	if (at < g->cap)
		g->p[at].jf = (uint8_t)len;
	return 0;
}

int sbx_confine_filter(struct sbx_bpf *out, int cap)
{
	struct prog g = {out, 0, cap};
	emit(&g, LD_ABS, 0, 0, OFF_ARCH);
	if (arch_section(&g, &native) != 0)
		return -1;
#ifdef HAVE_COMPAT
	if (arch_section(&g, &compat) != 0)
		return -1;
#endif
	/* Any other ABI the kernel might run (x32 under another AUDIT_ARCH, a future one): no
	 * call at all, so nothing passes by speaking another architecture's numbers. */
	emit(&g, RET, 0, 0, RET_ERRNO(EPERM));
	return g.n <= cap ? g.n : -1;
}

int sbx_confine_userns(int userns_fd)
{
	if (setns(userns_fd, CLONE_NEWUSER) != 0 || setgroups(0, NULL) != 0 ||
	    setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
		return -1;
	return 0;
}

/* struct __user_cap_header_struct / __user_cap_data_struct (linux/capability.h), version 3. */
struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};

int sbx_confine(void)
{
	for (int c = 0; c < 64; c++)
		if ((SBX_CONFINE_CAPS >> c & 1) == 0 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 &&
		    errno != EINVAL)
			return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
		return -1;
	struct cap_header h = {0x20080522, 0};
	struct cap_data d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	/* Inheritable empty (as Docker since CVE-2022-24769): root's execs get the bounding
	 * set anyway, and a file capability cannot add to it. */
	for (int i = 0; i < 2; i++) {
		uint32_t keep = (uint32_t)(SBX_CONFINE_CAPS >> (32 * i));
		d[i].effective &= keep;
		d[i].permitted &= keep;
		d[i].inheritable = 0;
	}
	if (syscall(SYS_capset, &h, d) != 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	struct sbx_bpf f[400];
	int n = sbx_confine_filter(f, (int)(sizeof f / sizeof f[0]));
	if (n < 0)
		return errno = E2BIG, -1;
	struct {
		unsigned short len;
		struct sbx_bpf *filter;
	} prog = {(unsigned short)n, f};
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}
