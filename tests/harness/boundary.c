/* Probe for tests/containment.sh: tries one way out of a sandbox, as root inside it, and says
 * whether the kernel let it through. Prints "CHECK: allowed" or "CHECK: refused: ERROR" and
 * exits 0 when allowed, 1 when refused, 2 on a usage error. "Allowed" means the call reached
 * the kernel's own work (ENOSYS from a kernel built without the feature counts: nothing of
 * ours stood in the way). Usage: boundary CHECK [ARG]...
 *   mknod-read MAJOR MINOR MARKER   make a block node, open it, read MARKER's bytes at 0
 *   mount-tmpfs                     mount a tmpfs on /tmp/.probe-mnt
 *   open-by-handle                  name_to_handle_at + open_by_handle_at on a /dev/shm file
 *   bpf | perf | keyctl | init-module | clock-settime
 *   unshare-user-mount              unshare(NEWUSER|NEWNS), then mount a tmpfs
 *   write FILE DATA                 write DATA into FILE
 *   signal PID                      kill(PID, SIGCONT) (harmless) on a process of the test's
 *   ptrace PID                      PTRACE_SEIZE the process PID (detached at once)
 *   chroot-escape FILE MARKER       the classic: keep a descriptor of /, chroot into a folder,
 *                                   fchdir to the kept one, climb "..", chroot("."); then read
 *                                   MARKER at the start of FILE (a path outside the sandbox)
 *   procroot NAME DATA              for every process it can see, append DATA to
 *                                   /proc/PID/root/NAME (NAME exists only in another sandbox) */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const char *check;

static int allowed(void)
{
	printf("%s: allowed\n", check);
	return 0;
}

static int refused(const char *what)
{
	printf("%s: refused: %s: %s\n", check, what, strerror(errno));
	return 1;
}

/* A call that fails with anything but EPERM reached the kernel's own checks. */
static int reached(long rc, const char *what)
{
	return rc >= 0 || errno != EPERM ? allowed() : refused(what);
}

static int mknod_read(const char *maj, const char *min, const char *marker)
{
	const char *node = "/tmp/.probe-blk";
	unlink(node);
	if (mknod(node, S_IFBLK | 0600, makedev(atoi(maj), atoi(min))) != 0)
		return refused("mknod");
	int fd = open(node, O_RDONLY);
	if (fd < 0)
		return refused("open");
	char buf[256] = {0};
	size_t n = strlen(marker) < sizeof buf ? strlen(marker) : sizeof buf - 1;
	if (read(fd, buf, n) != (ssize_t)n || memcmp(buf, marker, n) != 0)
		return refused("read");
	return allowed();
}

static int mount_tmpfs(void)
{
	mkdir("/tmp/.probe-mnt", 0700);
	return mount("probe", "/tmp/.probe-mnt", "tmpfs", 0, NULL) == 0 ? allowed()
	                                                                : refused("mount");
}

static int open_by_handle(void)
{
	/* tmpfs exports handles (the overlay, without nfs_export, does not). */
	int f = open("/dev/shm/.probe-handle", O_WRONLY | O_CREAT, 0600);
	if (f < 0)
		return refused("create a file in /dev/shm");
	close(f);
	struct {
		unsigned int bytes;
		int type;
		unsigned char data[128];
	} h = {.bytes = 128};
	int mnt;
	if (syscall(SYS_name_to_handle_at, AT_FDCWD, "/dev/shm/.probe-handle", &h, &mnt, 0) != 0)
		return refused("name_to_handle_at");
	int dir = open("/dev/shm", O_RDONLY | O_DIRECTORY);
	if (syscall(SYS_open_by_handle_at, dir, &h, O_RDONLY) < 0)
		return refused("open_by_handle_at");
	return allowed();
}

static int bpf_map(void)
{
	/* union bpf_attr's map creation: type 2 (array), key 4, value 4, one entry. */
	uint32_t attr[32] = {2, 4, 4, 1};
	return reached(syscall(SYS_bpf, 0, attr, sizeof attr), "bpf");
}

static int perf(void)
{
	/* struct perf_event_attr: software (1) task clock (1), size 128, user space only. */
	unsigned char attr[128] = {0};
	uint32_t type = 1, size = sizeof attr;
	uint64_t config = 1, flags = (1u << 5) | (1u << 6); /* exclude_kernel, exclude_hv */
	memcpy(attr, &type, 4);
	memcpy(attr + 4, &size, 4);
	memcpy(attr + 8, &config, 8);
	memcpy(attr + 40, &flags, 8);
	return reached(syscall(SYS_perf_event_open, attr, 0, -1, -1, 0), "perf_event_open");
}

static int init_module_(void)
{
	static char image[64];
	return reached(syscall(SYS_init_module, image, sizeof image, ""), "init_module");
}

static int clock_set(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t); /* the time it is: nothing changes when allowed */
	return syscall(SYS_clock_settime, CLOCK_REALTIME, &t) == 0 ? allowed()
	                                                           : refused("clock_settime");
}

static int unshare_user_mount(void)
{
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
		return refused("unshare");
	return mount_tmpfs();
}

static int write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return refused("open");
	if (write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		return refused("write");
	return allowed();
}

static int read_marker(const char *path, const char *marker)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return refused("open the file outside");
	char buf[256] = {0};
	size_t n = strlen(marker) < sizeof buf ? strlen(marker) : sizeof buf - 1;
	ssize_t got = read(fd, buf, n);
	close(fd);
	if (got != (ssize_t)n || memcmp(buf, marker, n) != 0)
		return refused("read the marker");
	return allowed();
}

static int chroot_escape(const char *path, const char *marker)
{
	const char *jail = "/tmp/.probe-jail";
	mkdir("/tmp", 01777);
	mkdir(jail, 0700);
	int kept = open("/", O_RDONLY | O_DIRECTORY);
	if (kept < 0)
		return refused("open /");
	if (chroot(jail) != 0)
		return refused("chroot into the jail");
	if (fchdir(kept) != 0)
		return refused("fchdir");
	for (int i = 0; i < 256; i++)
		if (chdir("..") != 0)
			return refused("chdir ..");
	if (chroot(".") != 0)
		return refused("chroot .");
	return read_marker(path, marker);
}

static int signal_pid(const char *pid)
{
	return kill(atoi(pid), SIGCONT) == 0 ? allowed() : refused("kill");
}

static int ptrace_pid(const char *pid)
{
	if (ptrace(PTRACE_SEIZE, atoi(pid), 0, 0) != 0)
		return refused("ptrace");
	ptrace(PTRACE_DETACH, atoi(pid), 0, 0);
	return allowed();
}

/* Every process this one can see, its root's NAME opened to append: a sandbox that sees
 * another's processes (a shared pid namespace, or /proc of the host) reaches its files. */
static int procroot(const char *name, const char *data)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return refused("opendir /proc");
	int seen = 0, wrote = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		seen++;
		char path[4096];
		snprintf(path, sizeof path, "/proc/%s/root/%s", e->d_name, name);
		int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (write(fd, data, strlen(data)) == (ssize_t)strlen(data))
			wrote++;
		close(fd);
	}
	closedir(d);
	if (wrote == 0) {
		printf("%s: refused: no process among the %d seen has it\n", check, seen);
		return 1;
	}
	return allowed();
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	check = argv[1];
	if (strcmp(check, "mknod-read") == 0 && argc == 5)
		return mknod_read(argv[2], argv[3], argv[4]);
	if (strcmp(check, "mount-tmpfs") == 0)
		return mount_tmpfs();
	if (strcmp(check, "open-by-handle") == 0)
		return open_by_handle();
	if (strcmp(check, "bpf") == 0)
		return bpf_map();
	if (strcmp(check, "perf") == 0)
		return perf();
	if (strcmp(check, "keyctl") == 0) /* KEYCTL_GET_KEYRING_ID of the session keyring */
		return reached(syscall(SYS_keyctl, 0, -3, 1), "keyctl");
	if (strcmp(check, "init-module") == 0)
		return init_module_();
	if (strcmp(check, "clock-settime") == 0)
		return clock_set();
	if (strcmp(check, "unshare-user-mount") == 0)
		return unshare_user_mount();
	if (strcmp(check, "write") == 0 && argc == 4)
		return write_file(argv[2], argv[3]);
	if (strcmp(check, "signal") == 0 && argc == 3)
		return signal_pid(argv[2]);
	if (strcmp(check, "ptrace") == 0 && argc == 3)
		return ptrace_pid(argv[2]);
	if (strcmp(check, "chroot-escape") == 0 && argc == 4)
		return chroot_escape(argv[2], argv[3]);
	if (strcmp(check, "procroot") == 0 && argc == 4)
		return procroot(argv[2], argv[3]);
	fprintf(stderr, "boundary: unknown check or arguments: %s\n", check);
	return 2;
}
