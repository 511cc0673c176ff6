/* The boundary a process of an ns sandbox lives behind: a capability set no larger than
 * Docker's default list, no_new_privs, and a seccomp filter of our own refusing what Docker's
 * default profile refuses (docs/runners.md, "The boundary"). Called in the sandbox's first
 * process before it execs init, and by `sbx-agent enter` before it execs anything in the
 * sandbox; no allocation, so it is safe between fork and exec. */
#ifndef SBX_CONFINE_H
#define SBX_CONFINE_H

#include <stdint.h>

/* The capabilities kept (bit N is capability N): Docker's default list, CHOWN DAC_OVERRIDE
 * FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL
 * AUDIT_WRITE. */
#define SBX_CONFINE_CAPS                                                                           \
	((1ull << 0) | (1ull << 1) | (1ull << 3) | (1ull << 4) | (1ull << 5) | (1ull << 6) |       \
	 (1ull << 7) | (1ull << 8) | (1ull << 10) | (1ull << 13) | (1ull << 18) | (1ull << 27) |   \
	 (1ull << 29) | (1ull << 31))

/* Drops every capability outside SBX_CONFINE_CAPS from the bounding, ambient, inheritable,
 * permitted and effective sets, sets no_new_privs and installs the filter. 0, or -1 with
 * errno (the process is then only partly confined: the caller must not go on). */
int sbx_confine(void);

/* Joins the user namespace userns_fd refers to as its root: uid and gid 0 there, no
 * supplementary groups. The caller still has to confine itself (joining gives every
 * capability inside, and the full bounding set). 0, or -1 with errno. */
int sbx_confine_userns(int userns_fd);

/* The filter alone, written into out (cap instructions, each 8 bytes: struct sock_filter);
 * returns the number of instructions, or -1 when cap is too small. */
struct sbx_bpf {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};
int sbx_confine_filter(struct sbx_bpf *out, int cap);

#endif
