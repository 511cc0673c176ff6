/* HELLO: version range, identity, kernel, capabilities found by trying them, and the SHA-256
 * of the agent's own binary (so the host can tell a stale injected copy). */
#include "hello.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "arch.h"
#include "digest.h"
#include "frame.h"
#include "proto.h"
#include "sys.h"
#include "version.h"

static int try_close(int fd)
{
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

int64_t sbx_hello_caps(int *cgroup_version)
{
	int64_t caps = 0;
	if (try_close(sbx_openat2(AT_FDCWD, ".", O_PATH | O_CLOEXEC, SBX_RESOLVE_BENEATH)))
		caps |= SBX_CAP_OPENAT2;
	if (try_close(sbx_pidfd_open(getpid())))
		caps |= SBX_CAP_PIDFD;
	int v = 0;
	if (prctl(PR_GET_CHILD_SUBREAPER, &v, 0, 0, 0) == 0)
		caps |= SBX_CAP_SUBREAPER;
	if (try_close(inotify_init1(IN_CLOEXEC)))
		caps |= SBX_CAP_INOTIFY;
	if (try_close(open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)))
		caps |= SBX_CAP_PTY;
	sigset_t none;
	sigemptyset(&none);
	if (try_close(signalfd(-1, &none, SFD_CLOEXEC)))
		caps |= SBX_CAP_SIGNALFD;
	if (try_close(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)))
		caps |= SBX_CAP_TIMERFD;

	struct statfs sf;
	*cgroup_version = 0;
	if (statfs("/sys/fs/cgroup", &sf) == 0) {
		if ((unsigned long)sf.f_type == 0x63677270ul) /* CGROUP2_SUPER_MAGIC */
			*cgroup_version = 2;
		else if ((unsigned long)sf.f_type == 0x01021994ul || /* tmpfs: v1 or hybrid */
		         (unsigned long)sf.f_type == 0x27e0ebul)     /* CGROUP_SUPER_MAGIC */
			*cgroup_version = 1;
	}
	return caps;
}

/* SHA-256 of /proc/self/exe; all zero when it cannot be read. */
static void self_digest(uint8_t out[SBX_SHA256_LEN])
{
	memset(out, 0, SBX_SHA256_LEN);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	uint8_t buf[16384];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return;
		}
		sbx_sha256_update(&s, buf, (size_t)n);
	}
	close(fd);
	sbx_sha256_final(&s, out);
}

void sbx_hello_write(struct sbx_msgw *w, uint64_t window)
{
	struct utsname u;
	if (uname(&u) != 0)
		strcpy(u.release, "unknown");
	int cg;
	int64_t caps = sbx_hello_caps(&cg);
	uint8_t digest[SBX_SHA256_LEN];
	self_digest(digest);

	sbx_msgw_i64(w, SBX_T_PROTO_MIN, SBX_PROTO_MIN);
	sbx_msgw_i64(w, SBX_T_PROTO_MAX, SBX_PROTO_MAX);
	sbx_msgw_str(w, SBX_T_AGENT_VERSION, SBX_VERSION);
	sbx_msgw_str(w, SBX_T_ARCH, sbx_arch_self());
	sbx_msgw_i64(w, SBX_T_FWD, 1); /* speaks OPEN and RESET (docs/forwarding.md) */
	sbx_msgw_i64(w, SBX_T_UID, getuid());
	sbx_msgw_i64(w, SBX_T_EUID, geteuid());
	sbx_msgw_i64(w, SBX_T_GID, getgid());
	sbx_msgw_i64(w, SBX_T_EGID, getegid());
	sbx_msgw_i64(w, SBX_T_PID, getpid());
	sbx_msgw_str(w, SBX_T_KERNEL, u.release);
	sbx_msgw_i64(w, SBX_T_CAPS, caps);
	sbx_msgw_i64(w, SBX_T_CGROUP, cg);
	sbx_msgw_bytes(w, SBX_T_SELF_SHA256, digest, sizeof digest);
	sbx_msgw_bytes(w, SBX_T_CANARY, SBX_CANARY, SBX_CANARY_LEN);
	sbx_msgw_i64(w, SBX_T_MAX_PAYLOAD, SBX_FRAME_MAX_PAYLOAD);
	sbx_msgw_i64(w, SBX_T_WINDOW, (int64_t)window);
}
