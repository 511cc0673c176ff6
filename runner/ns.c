/* The ns runner: sandboxes made of namespaces over an image folder, without a daemon. Create
 * forks a child that unshares the namespaces and forks the sandbox's PID 1, which mounts the
 * overlay (over the image idmapped for the sandbox's user namespace, runner/userns.h) and the
 * pseudo filesystems, pivots into it, joins the user namespace and execs `sbx-agent init`; the
 * state folder is renamed into place once that init runs. Remove kills the init (the kernel kills
 * the rest of the pid namespace) and deletes the layer. */
#include "ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "cgroup.h"
#include "execstore.h"
#include "confine.h"
#include "procstat.h"
#include "channel.h"
#include "runner.h"
#include "sbx.h"
#include "sys.h"
#include "userns.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

#define SANDBOX_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define INIT_FOREIGN "/.sbx/sbx-init"
#define ENTER_NAME "sbx-enter" /* in the state folder: the host's agent, for the channel */
#define REMOVE_WAIT_MS 10000

const char *sbx_ns_state_name(enum sbx_ns_state s)
{
	switch (s) {
	case SBX_NS_RUNNING:
		return "running";
	case SBX_NS_STOPPED:
		return "stopped";
	default:
		return "absent";
	}
}

/* ---- names and folders ---- */

static int check_name(const char *name, struct sbx_err *e)
{
	size_t n = strlen(name);
	if (n == 0 || n > 63 || name[0] == '.' || name[0] == '-')
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "bad sandbox name '%s' (1 to 63 of A-Z a-z 0-9 _ . -, not "
		                   "starting with . or -)",
		                   name);
	for (const char *p = name; *p != '\0'; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "bad sandbox name '%s' (1 to 63 of A-Z a-z 0-9 _ . -)",
			                   name);
	}
	return 0;
}

int sbx_ns_dir(char *out, size_t cap, struct sbx_err *e)
{
	const char *env = getenv("SBX_NS_DIR");
	const char *dir = env != NULL && env[0] != '\0' ? env : "/run/sbx/ns";
	if (dir[0] != '/')
		return sbx_err_set(e, SBX_EUSAGE, 0, "SBX_NS_DIR must be an absolute path");
	/* The overlay's option string cannot carry these; keep every layer path plain. */
	if (strpbrk(dir, ",:\\\n") != NULL)
		return sbx_err_set(
		        e, SBX_EUSAGE, 0,
		        "the state folder's path may not hold ',', ':', '\\' or newlines");
	if ((size_t)snprintf(out, cap, "%s", dir) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, 0, "SBX_NS_DIR is too long");
	size_t n = strlen(out);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

/* mkdir -p; the last component 0700 (layers hold the sandboxes' files). */
static int mkdir_p(const char *path, struct sbx_err *e)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, c == '\0' ? 0700 : 0755) != 0 && errno != EEXIST)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "mkdir %s", buf);
		if (c == '\0')
			break;
		*p = c;
	}
	return 0;
}

static int path_join(char *out, size_t cap, const char *a, const char *b, struct sbx_err *e)
{
	if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "%s/%s", a, b);
	return 0;
}

/* ---- the init process as /proc sees it ---- */

struct proc_info {
	char state;               /* R S D Z ... */
	unsigned long long start; /* field 22: start time in clock ticks after boot */
};

static int proc_stat(int64_t pid, struct proc_info *pi)
{
	uint64_t start;
	if (pid <= 0 || pid > INT_MAX || sbx_proc_stat((pid_t)pid, &start, NULL, &pi->state) != 0)
		return -1;
	pi->start = start;
	return 0;
}

static unsigned long long pidns_inode(const char *proc_dir)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "%s/ns/pid", proc_dir);
	return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* 1 when pid is a live process started at start in the pid namespace pidns (not ours). */
static int init_alive(int64_t pid, unsigned long long start, unsigned long long pidns)
{
	struct proc_info pi;
	if (pid <= 1 || proc_stat(pid, &pi) != 0 || pi.start != start || pi.state == 'Z' ||
	    pi.state == 'X')
		return 0;
	char dir[48];
	snprintf(dir, sizeof dir, "/proc/%lld", (long long)pid);
	unsigned long long ns = pidns_inode(dir);
	return ns != 0 && ns == pidns && ns != pidns_inode("/proc/self");
}

static int64_t mono_ms(void)
{
	return sbx_now_ns() / 1000000;
}

/* Kills a sandbox's init and waits until it has exited. The kernel ends PID 1 of a pid
 * namespace only after every other process of the namespace is gone, so "exited" means the
 * whole sandbox is. A pidfd makes the wait exact and immune to pid reuse. */
static int kill_init(int64_t pid, unsigned long long start, struct sbx_err *e)
{
	struct proc_info pi;
	if (proc_stat(pid, &pi) != 0 || pi.start != start)
		return 0;
	int fd = sbx_pidfd_open((pid_t)pid);
	if (fd >= 0 && (proc_stat(pid, &pi) != 0 || pi.start != start)) {
		close(fd); /* the pid was reused between the two looks */
		return 0;
	}
	if (fd < 0 && errno == ESRCH)
		return 0;
	kill((pid_t)pid, SIGKILL);
	int64_t end = mono_ms() + REMOVE_WAIT_MS;
	for (;;) {
		int64_t left = end - mono_ms();
		if (fd >= 0) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			int r = poll(&p, 1, left > 0 ? (int)left : 0);
			if (r > 0)
				break;
			if (r < 0 && errno == EINTR)
				continue;
		} else {
			if (proc_stat(pid, &pi) != 0 || pi.start != start || pi.state == 'Z' ||
			    pi.state == 'X')
				break;
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
		if (mono_ms() >= end) {
			if (fd >= 0)
				close(fd);
			return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT,
			                   "init %lld of the sandbox did not exit", (long long)pid);
		}
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* ---- the state file ---- */

struct state {
	int64_t pid, created_ns;
	unsigned long long start, pidns;
	char image[PATH_MAX];
	char arch[16];
	char qemu[64];   /* foreign architectures: the emulator's name in /.sbx, else "" */
	char cgroup[96]; /* its cgroup (cgroup.h), "" when it has none */
	int cg_v2;
	double disk_gib;   /* the writable layer's tmpfs size; 0: on the state folder's disk */
	int privileged;    /* 1: no boundary (sbx_ns_opts.privileged) */
	uint32_t uid, gid; /* host ids of root inside (its user namespace); 0: none */
	int ids_slot;      /* its claim (runner/userns.h); -1: none */
};

static int write_state(const char *dir, const char *name, const struct state *s, struct sbx_err *e)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	if (path_join(path, sizeof path, dir, "state", e) != 0 ||
	    path_join(tmp, sizeof tmp, dir, "state.tmp", e) != 0)
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "create %s", tmp);
	int n = dprintf(fd,
	                "name=%s\npid=%lld\nstarttime=%llu\npidns=%llu\nimage=%s\narch=%s\n"
	                "created_ns=%lld\nagent=%s\nqemu=%s\nprivileged=%d\ncgroup=%s\n"
	                "cgroup_v2=%d\ndisk_gib=%.6g\nuid=%u\ngid=%u\nids_slot=%d\n",
	                name, (long long)s->pid, s->start, s->pidns, s->image, s->arch,
	                (long long)s->created_ns, SBX_NS_AGENT, s->qemu, s->privileged, s->cgroup,
	                s->cg_v2, s->disk_gib, (unsigned)s->uid, (unsigned)s->gid, s->ids_slot);
	if (n < 0 || close(fd) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "write %s", tmp);
	if (rename(tmp, path) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "rename %s", tmp);
	return 0;
}

/* 0: read; -1 with errno ENOENT: no such sandbox; -1 otherwise: unreadable. */
static int read_state(const char *dir, struct state *s)
{
	char path[PATH_MAX], buf[3 * PATH_MAX];
	memset(s, 0, sizeof *s);
	s->ids_slot = -1;
	if ((size_t)snprintf(path, sizeof path, "%s/state", dir) >= sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		int err = errno;
		struct stat st;
		errno = err == ENOENT && stat(dir, &st) == 0 ? EBADMSG : err;
		return -1;
	}
	size_t len = 0;
	ssize_t n;
	while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	int have = 0;
	for (char *line = buf, *next; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		char *v = strchr(line, '=');
		if (v == NULL)
			continue;
		*v++ = '\0';
		if (strcmp(line, "pid") == 0)
			s->pid = strtoll(v, NULL, 10), have |= 1;
		else if (strcmp(line, "starttime") == 0)
			s->start = strtoull(v, NULL, 10), have |= 2;
		else if (strcmp(line, "pidns") == 0)
			s->pidns = strtoull(v, NULL, 10), have |= 4;
		else if (strcmp(line, "created_ns") == 0)
			s->created_ns = strtoll(v, NULL, 10);
		else if (strcmp(line, "image") == 0)
			snprintf(s->image, sizeof s->image, "%s", v);
		else if (strcmp(line, "arch") == 0)
			snprintf(s->arch, sizeof s->arch, "%s", v);
		else if (strcmp(line, "qemu") == 0)
			snprintf(s->qemu, sizeof s->qemu, "%s", v);
		else if (strcmp(line, "privileged") == 0)
			s->privileged = strcmp(v, "1") == 0;
		else if (strcmp(line, "cgroup") == 0 && strncmp(v, "sbx/ns-", 7) == 0 &&
		         strstr(v, "..") == NULL)
			snprintf(s->cgroup, sizeof s->cgroup, "%s", v);
		else if (strcmp(line, "cgroup_v2") == 0)
			s->cg_v2 = strcmp(v, "1") == 0;
		else if (strcmp(line, "disk_gib") == 0)
			s->disk_gib = strtod(v, NULL);
		else if (strcmp(line, "uid") == 0)
			s->uid = (uint32_t)strtoul(v, NULL, 10);
		else if (strcmp(line, "gid") == 0)
			s->gid = (uint32_t)strtoul(v, NULL, 10);
		else if (strcmp(line, "ids_slot") == 0)
			s->ids_slot = (int)strtol(v, NULL, 10);
	}
	if (have != 7) {
		errno = EBADMSG;
		return -1;
	}
	return 0;
}

/* A claim older than this that its sandbox does not hold is stale (runner/userns.h): a create
 * holds its claim for seconds before its state folder is in place. */
#define RECLAIM_AGE_S 600

/* Whether sandbox name of base holds id slot (its state says so), for sbx_userns_reclaim. A
 * state that cannot be read, but is there, holds it. */
static int claim_held(const char *base, const char *name, int slot)
{
	char dir[PATH_MAX];
	struct state st;
	if (strchr(name, '/') != NULL || name[0] == '.' ||
	    (size_t)snprintf(dir, sizeof dir, "%s/%s", base, name) >= sizeof dir)
		return 1;
	if (read_state(dir, &st) != 0)
		return errno != ENOENT;
	return st.ids_slot == slot;
}

/* ---- removing a tree without following links, at any depth ---- */

/* Empties the folder fd refers to (and closes fd). Iterative: it walks down into the first
 * non-empty subfolder and back up through "..", so depth costs neither stack nor fds. The
 * tree belongs to a sandbox that no longer runs, so nothing moves under the walk. */
static int empty_tree(int fd, const char *top, struct sbx_err *e)
{
	int depth = 0;
	for (;;) {
		int dfd = dup(fd);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (d == NULL) {
			int err = errno;
			if (dfd >= 0)
				close(dfd);
			close(fd);
			return sbx_err_set(e, SBX_EUNAVAILABLE, err, "read a folder under %s", top);
		}
		char sub[256] = "";
		int seen = 0, err = 0;
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			const char *n = de->d_name;
			if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
				continue;
			seen++;
			if (unlinkat(fd, n, 0) == 0)
				continue;
			if (errno == EISDIR && unlinkat(fd, n, AT_REMOVEDIR) == 0)
				continue;
			if (errno == ENOTEMPTY || errno == EEXIST) {
				snprintf(sub, sizeof sub, "%s", n);
				break;
			}
			err = errno;
			snprintf(sub, sizeof sub, "%s", n);
			break;
		}
		closedir(d);
		if (err != 0) {
			close(fd);
			return sbx_err_set(e, SBX_EUNAVAILABLE, err, "remove %s under %s", sub,
			                   top);
		}
		if (sub[0] != '\0') {
			int c = openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c < 0) {
				err = errno;
				close(fd);
				return sbx_err_set(e, SBX_EUNAVAILABLE, err, "open %s under %s",
				                   sub, top);
			}
			close(fd);
			fd = c;
			depth++;
			continue;
		}
		if (seen > 0)
			continue; /* entries went away while listed: look again */
		if (depth == 0) {
			close(fd);
			return 0;
		}
		int p = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		if (p < 0)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "walk back up under %s",
			                   top);
		fd = p;
		depth--;
	}
}

static int remove_tree(const char *path, struct sbx_err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
		                       : sbx_err_set(e, SBX_EUNAVAILABLE, errno, "open %s", path);
	if (empty_tree(fd, path, e) != 0)
		return -1;
	if (rmdir(path) != 0 && errno != ENOENT)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "rmdir %s", path);
	return 0;
}

/* Detaches every mount of this mount namespace at or under dir (none is ever made there by
 * this runner; this clears what a crash or a hand-made mount could leave). */
static void detach_mounts_under(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return;
	char *line = NULL, **found = NULL;
	size_t cap = 0, n = 0, dlen = strlen(dir);
	while (getline(&line, &cap, f) > 0) {
		/* id parent major:minor root MOUNTPOINT ... ; octal escapes for odd bytes */
		char *p = line;
		for (int i = 0; i < 4 && p != NULL; i++) {
			p = strchr(p, ' ');
			if (p != NULL)
				p++;
		}
		if (p == NULL)
			continue;
		char *end = strchr(p, ' ');
		if (end != NULL)
			*end = '\0';
		char *o = p;
		for (char *q = p; *q != '\0'; q++) {
			if (q[0] == '\\' && q[1] >= '0' && q[1] <= '3' && q[2] >= '0' &&
			    q[2] <= '7' && q[3] >= '0' && q[3] <= '7') {
				*o++ = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
				q += 3;
			} else {
				*o++ = *q;
			}
		}
		*o = '\0';
		if (strncmp(p, dir, dlen) != 0 || (p[dlen] != '\0' && p[dlen] != '/'))
			continue;
		char **g = realloc(found, (n + 1) * sizeof *found);
		if (g == NULL)
			break;
		found = g;
		if ((found[n] = strdup(p)) != NULL)
			n++;
	}
	free(line);
	fclose(f);
	/* Deepest (latest) first. */
	while (n > 0) {
		n--;
		umount2(found[n], MNT_DETACH);
		free(found[n]);
	}
	free(found);
}

/* ---- create ---- */

/* Finds prog in $PATH (or the usual folders). */
static int find_in_path(const char *prog, char *out, size_t cap)
{
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof buf, "%s:/usr/local/bin:/usr/bin:/bin", path != NULL ? path : "");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d != NULL;
	     d = strtok_r(NULL, ":", &save)) {
		if ((size_t)snprintf(out, cap, "%s/%s", d, prog) < cap && access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* The architecture an image folder declares in its .sbx-image (key=value lines written by
 * images/build.sh: "arch=aarch64"); 0 when it declares a known one, written to out. */
static int image_arch(const char *image, char *out, size_t cap)
{
	char path[PATH_MAX], buf[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/.sbx-image", image) >= sizeof path)
		return -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (char *line = buf, *next; line != NULL; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (strncmp(line, "arch=", 5) == 0 && sbx_arch_by_name(line + 5) != NULL) {
			snprintf(out, cap, "%s", line + 5);
			return 0;
		}
	}
	return -1;
}

/* What the sandbox's first process reports on the pipe: the stage that failed and its errno;
 * or, from the intermediate child, the host pid of that first process (stage 0). */
enum stage {
	ST_PID = 0,
	ST_UNSHARE,
	ST_FORK,
	ST_PRIVATE,
	ST_OVERLAY,
	ST_MOUNTPOINT,
	ST_PROC,
	ST_SYS,
	ST_DEV,
	ST_DEVNODE,
	ST_SHM,
	ST_MASK,
	ST_PIVOT,
	ST_HOSTNAME,
	ST_LOOPBACK,
	ST_CONFINE,
	ST_EXEC,
	ST_CGROUP,
	ST_IDMAP,
	ST_USERNS,
	ST_LAST = ST_USERNS
};

static const char *const stage_text[] = {
        [ST_UNSHARE] =
                "unshare the mount, pid, uts, ipc and network namespaces (or join the network one)",
        [ST_FORK] = "fork the sandbox's first process",
        [ST_PRIVATE] = "make the sandbox's mounts private",
        [ST_OVERLAY] = "mount the overlay (image, upper and work folders)",
        [ST_MOUNTPOINT] = "prepare /proc, /dev and /sys in the image (one is not a folder?)",
        [ST_PROC] = "mount /proc",
        [ST_SYS] = "mount /sys",
        [ST_DEV] = "mount the /dev tmpfs",
        [ST_DEVNODE] = "bind the host's device nodes into /dev",
        [ST_SHM] = "mount /dev/shm",
        [ST_MASK] = "mask /proc and /sys paths, make /proc/sys and others read-only",
        [ST_PIVOT] = "pivot_root into the overlay",
        [ST_HOSTNAME] = "set the hostname",
        [ST_LOOPBACK] = "bring the loopback interface up",
        [ST_CONFINE] = "confine the sandbox's init (capabilities, no_new_privs, seccomp)",
        [ST_EXEC] = "start the sandbox's init",
        [ST_CGROUP] = "move the sandbox's first process into its cgroup",
        [ST_IDMAP] = "mount the image idmapped for the sandbox's user namespace (its "
                     "filesystem must support idmapped mounts; else --privileged)",
        [ST_USERNS] = "join the sandbox's user namespace",
};

struct report {
	int32_t stage, err, pid;
};

/* Everything the first process needs, prepared before fork (it makes no allocation). */
struct plan {
	const char *dir;         /* the state folder (being created) */
	const char *ovl;         /* overlay options, with "volatile" */
	const char *ovl2;        /* the same without it (kernels before 5.10) */
	const char *name;        /* hostname */
	const char *init;        /* the init's path inside the sandbox */
	const struct sbx_cg *cg; /* joined before anything forks, with a cgroup namespace of its
	                            own; NULL: none */
	int serve;               /* init is also the resident agent (a native sandbox) */
	int privileged;          /* 1: init keeps every capability, no filter */
	const char *image;       /* the lower layer, mounted idmapped at "lower" when userns_fd
	                            is a namespace */
	int userns_fd;           /* the sandbox's user namespace (runner/userns.h); -1: none */
	int net_fd;              /* its network namespace, owned by it; -1: a new one */
	uint32_t uid, gid;       /* the host ids of its root */
	int report_fd;
};

static void report(int fd, int stage, int err, int pid)
{
	struct report r = {stage, err, pid};
	ssize_t w = write(fd, &r, sizeof r);
	(void)w;
}

/* Makes rel (relative to the overlay root) a folder: created when missing; an existing
 * non-folder (a symlink could point the mount outside) is refused. */
static int mountpoint_dir(const char *rel)
{
	struct stat st;
	if (lstat(rel, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
	if (errno != ENOENT)
		return -1;
	return mkdir(rel, 0755);
}

static int loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (rc == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	int err = errno;
	close(s);
	errno = err;
	return rc;
}

/* What runc masks and makes read-only (its defaults), for the same reasons: the kernel's
 * memory, keys, timers and scheduler of the whole machine, the SysRq trigger, firmware
 * tables; and the machine-wide settings under /proc/sys and the like, which the capabilities
 * mostly guard already. Paths relative to the new root; one the kernel lacks is skipped. */
static const char *const masked_files[] = {
        "proc/kcore",       "proc/keys",          "proc/timer_list", "proc/sysrq-trigger",
        "proc/sched_debug", "proc/latency_stats", "proc/timer_stats"};
static const char *const masked_dirs[] = {"proc/acpi", "proc/asound", "proc/scsi", "sys/firmware",
                                          "sys/devices/virtual/powercap"};
static const char *const readonly_dirs[] = {"proc/sys", "proc/bus", "proc/fs", "proc/irq"};
#define RO_FLAGS (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* Masks and read-only paths, before the pivot. A masked file is a read-only bind of an
 * empty file (reads see nothing, writes fail with EROFS, where /dev/null would swallow
 * them); its tmpfs is detached at once, so nothing names it. */
static int mask_paths(void)
{
	struct stat st;
	if (mount("sbx-mask", "../mask", "tmpfs", RO_FLAGS & ~MS_RDONLY, "size=4k,mode=0700") != 0)
		return -1;
	int f = open("../mask/empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (f < 0)
		return -1;
	close(f);
	for (size_t i = 0; i < sizeof masked_files / sizeof masked_files[0]; i++)
		if (lstat(masked_files[i], &st) == 0 &&
		    (mount("../mask/empty", masked_files[i], NULL, MS_BIND, NULL) != 0 ||
		     mount(NULL, masked_files[i], NULL, MS_REMOUNT | MS_BIND | RO_FLAGS, NULL) !=
		             0))
			return -1;
	if (umount2("../mask", MNT_DETACH) != 0)
		return -1;
	for (size_t i = 0; i < sizeof masked_dirs / sizeof masked_dirs[0]; i++)
		if (lstat(masked_dirs[i], &st) == 0 && S_ISDIR(st.st_mode) &&
		    mount("sbx-mask", masked_dirs[i], "tmpfs", RO_FLAGS, "size=4k,mode=0555") != 0)
			return -1;
	for (size_t i = 0; i < sizeof readonly_dirs / sizeof readonly_dirs[0]; i++)
		if (lstat(readonly_dirs[i], &st) == 0 &&
		    (mount(readonly_dirs[i], readonly_dirs[i], NULL, MS_BIND | MS_REC, NULL) != 0 ||
		     mount(NULL, readonly_dirs[i], NULL, MS_REMOUNT | MS_BIND | RO_FLAGS, NULL) !=
		             0))
			return -1;
	return 0;
}

/* The sandbox's first process, PID 1 of the new pid namespace, still seeing the host's
 * filesystem in its own mount namespace. Never returns. */
static void first_process(const struct plan *p)
{
	int fd = p->report_fd, stage;
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	umask(022);
	setsid();
	/* The caller's ignored signals (sbx ignores SIGPIPE) would outlive exec in init. */
	for (int sig = 1; sig < 65; sig++)
		signal(sig, SIG_DFL);
	stage = ST_DEVNODE;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		goto fail;
	stage = ST_PRIVATE;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		goto fail;
	/* The layer's paths are relative to the state folder, so the sandbox's /proc/mounts
	 * does not show where its layer lives on the host. */
	stage = ST_OVERLAY;
	if (chdir(p->dir) != 0)
		goto fail;
	/* nodev on every mount the sandbox writes: a device node there (its user namespace
	 * already refuses mknod) cannot be opened. */
	unsigned long nodev = p->privileged ? 0 : MS_NODEV;
	stage = ST_IDMAP;
	if (p->userns_fd >= 0 && sbx_userns_idmap(p->image, p->userns_fd, "lower") != 0)
		goto fail;
	stage = ST_OVERLAY;
	if (mount("overlay", "root", "overlay", nodev, p->ovl) != 0 &&
	    (errno != EINVAL || mount("overlay", "root", "overlay", nodev, p->ovl2) != 0))
		goto fail;
	if (chdir("root") != 0)
		goto fail;
	stage = ST_MOUNTPOINT;
	if (mountpoint_dir("proc") != 0 || mountpoint_dir("dev") != 0 || mountpoint_dir("sys") != 0)
		goto fail;
	stage = ST_PROC;
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		goto fail;
	/* sysfs mounted from inside the new network namespace shows only its devices (lo). */
	stage = ST_SYS;
	if (mount("sysfs", "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		goto fail;
	/* Its own cgroup, read-only, as the root of /sys/fs/cgroup (the cgroup namespace roots
	 * it there): the supervisor's OOM evidence (agent/oom.c) reads memory.oom_control or
	 * memory.events from it. v1: one folder per controller of a tmpfs. */
	if (p->cg != NULL) {
		const unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
		if (p->cg->v2) {
			if (mount("cgroup2", "sys/fs/cgroup", "cgroup2", ro, NULL) != 0)
				goto fail;
		} else {
			static const char *const ctrls[] = {"memory", "pids", "cpu", "freezer"};
			if (mount("tmpfs", "sys/fs/cgroup", "tmpfs",
			          MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=64k") != 0)
				goto fail;
			for (size_t i = 0; i < sizeof ctrls / sizeof ctrls[0]; i++) {
				char d[32];
				memcpy(d, "sys/fs/cgroup/", 15);
				strcat(d, ctrls[i]);
				if (mkdir(d, 0755) != 0 ||
				    mount("cgroup", d, "cgroup", ro, ctrls[i]) != 0)
					goto fail;
			}
			if (mount(NULL, "sys/fs/cgroup", NULL, MS_REMOUNT | ro,
			          "mode=755,size=64k") != 0)
				goto fail;
		}
	}
	stage = ST_DEV;
	/* The folders the sandbox writes belong to its root (the mapped ids when it has a user
	 * namespace). The nodes below are bind mounts of the host's, each with its own flags. */
	char opt[80];
	snprintf(opt, sizeof opt, "mode=755,size=1m,uid=%u,gid=%u", (unsigned)p->uid,
	         (unsigned)p->gid);
	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_STRICTATIME | nodev, opt) != 0)
		goto fail;
	stage = ST_DEVNODE;
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		char host[32], here[32];
		memcpy(host, "/dev/", 6);
		memcpy(here, "dev/", 5);
		strcat(host, nodes[i]);
		strcat(here, nodes[i]);
		int f = open(here, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (f < 0)
			goto fail;
		close(f);
		if (mount(host, here, NULL, MS_BIND, NULL) != 0)
			goto fail;
	}
	if (symlink("/proc/self/fd", "dev/fd") != 0 ||
	    symlink("/proc/self/fd/0", "dev/stdin") != 0 ||
	    symlink("/proc/self/fd/1", "dev/stdout") != 0 ||
	    symlink("/proc/self/fd/2", "dev/stderr") != 0)
		goto fail;
	stage = ST_SHM;
	snprintf(opt, sizeof opt, "mode=1777,size=65536k,uid=%u,gid=%u", (unsigned)p->uid,
	         (unsigned)p->gid);
	if (mkdir("dev/shm", 01777) != 0 || chmod("dev/shm", 01777) != 0 ||
	    mount("shm", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opt) != 0)
		goto fail;
	/* A private devpts is optional: without it the sandbox has no ptys. */
	if (mkdir("dev/pts", 0755) == 0) {
		if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		          "newinstance,ptmxmode=0666,mode=0620") == 0)
			(void)symlink("pts/ptmx", "dev/ptmx");
		else
			(void)rmdir("dev/pts");
	}
	stage = ST_MASK;
	if (!p->privileged && mask_paths() != 0)
		goto fail;
	stage = ST_PIVOT;
	if (syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 ||
	    chdir("/") != 0)
		goto fail;
	stage = ST_HOSTNAME;
	if (sethostname(p->name, strlen(p->name)) != 0)
		goto fail;
	stage = ST_LOOPBACK;
	if (loopback_up() != 0)
		goto fail;
	/* Last of the set-up: every namespace above stays owned by the host's, so the sandbox's
	 * root, with all its capabilities inside, has none over its mounts, network or
	 * hostname. */
	stage = ST_USERNS;
	if (p->userns_fd >= 0 && sbx_confine_userns(p->userns_fd) != 0)
		goto fail;
	stage = ST_EXEC;
	/* Nothing of the caller's stays open in the sandbox: the report pipe closes on exec,
	 * which tells the creator the init runs. */
	if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
		goto fail;
	sbx_close_from(3, 1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* The boundary before any code of the sandbox's runs: init, its keeper and
	 * supervisors, and everything they start inherit it. */
	stage = ST_CONFINE;
	if (!p->privileged && sbx_confine() != 0)
		goto fail;
	stage = ST_EXEC;
	/* --serve: init is also the resident agent, so a session costs a forked serve (confined
	 * as init is) and no channel process (sbx_runner_resident); not in a foreign
	 * architecture's sandbox, whose sessions are that architecture's agent under QEMU. */
	char *const argv[] = {"sbx-agent", "init", p->serve ? "--serve" : NULL, NULL};
	char *const envp[] = {SANDBOX_PATH, NULL};
	execve(p->init, argv, envp);
fail:
	report(fd, stage, errno, 0);
	_exit(1);
}

/* The sandbox's secret, made now and handed to its init's keeper before anything else runs
 * there (docs/supervision.md, "Trust"); init binds its socket as it starts, so a moment is
 * allowed for that. */
static int give_secret(const char *name, int64_t pid, struct sbx_err *e)
{
	char id[80];
	uint8_t secret[SBX_SECRET_LEN];
	snprintf(id, sizeof id, "ns:%s", name);
	if (sbx_secret_new(id, secret, e) != 0)
		return -1;
	int64_t end = mono_ms() + 2000;
	int rc;
	while ((rc = sbx_keeper_setup_at((pid_t)pid, secret, e)) != 0 &&
	       e->cls == SBX_EUNAVAILABLE && mono_ms() < end) {
		struct timespec t = {0, 1000000};
		nanosleep(&t, NULL);
	}
	memset(secret, 0, sizeof secret);
	if (rc != 0)
		sbx_secret_forget(id, NULL);
	return rc;
}

/* Starts the sandbox's processes; *pid receives its init's host pid. */
static int start(const struct plan *plan0, int64_t *pid, struct sbx_err *e)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	struct plan plan = *plan0;
	plan.report_fd = pfd[1];
	pid_t c = fork();
	if (c < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "fork");
	}
	if (c == 0) {
		/* The intermediate child: its children are born in the new pid namespace. The
		 * first one is reparented away when this one exits, so the sandbox outlives
		 * its creator like a daemon. */
		close(pfd[0]);
		if (plan.cg != NULL && sbx_cg_join(plan.cg) != 0) {
			report(pfd[1], ST_CGROUP, errno, 0);
			_exit(1);
		}
		if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
		            (plan.net_fd < 0 ? CLONE_NEWNET : 0) |
		            (plan.cg != NULL ? CLONE_NEWCGROUP : 0)) != 0 ||
		    (plan.net_fd >= 0 && setns(plan.net_fd, CLONE_NEWNET) != 0)) {
			report(pfd[1], ST_UNSHARE, errno, 0);
			_exit(1);
		}
		pid_t g = fork();
		if (g < 0) {
			report(pfd[1], ST_FORK, errno, 0);
			_exit(1);
		}
		if (g == 0)
			first_process(&plan);
		report(pfd[1], ST_PID, 0, g);
		_exit(0);
	}
	close(pfd[1]);
	struct report r, failure = {-1, 0, 0};
	*pid = 0;
	for (;;) {
		ssize_t n = read(pfd[0], &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof r)
			break;
		if (r.stage == ST_PID)
			*pid = r.pid;
		else if (failure.stage < 0)
			failure = r;
	}
	close(pfd[0]);
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (failure.stage > 0 && failure.stage <= ST_LAST)
		return sbx_err_set(e, SBX_EUNAVAILABLE, failure.err, "cannot %s",
		                   stage_text[failure.stage]);
	if (*pid <= 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "the sandbox's first process vanished");
	return 0;
}

int sbx_ns_create(const char *image_dir, const char *name, const struct sbx_ns_opts *o,
                  char *name_out, size_t cap, struct sbx_err *e)
{
	static const struct sbx_ns_opts none = {0};
	if (o == NULL)
		o = &none;
	if (geteuid() != 0)
		return sbx_err_set(e, SBX_EUSAGE, EPERM, "the ns runner needs root");
	char gen[16];
	if (name == NULL) {
		static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
		unsigned char rnd[6];
		if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "getrandom");
		memcpy(gen, "sbx-", 5);
		for (int i = 0; i < 6; i++)
			gen[4 + i] = abc[rnd[i] % 36];
		gen[10] = '\0';
		name = gen;
	}
	if (check_name(name, e) != 0)
		return -1;

	/* The image: a real folder, named by a plain absolute path. */
	struct state s;
	memset(&s, 0, sizeof s);
	s.ids_slot = -1;
	struct stat ist;
	if (realpath(image_dir, s.image) == NULL || stat(s.image, &ist) != 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "image %s", image_dir);
	if (!S_ISDIR(ist.st_mode))
		return sbx_err_set(e, SBX_EUSAGE, ENOTDIR, "image %s", image_dir);
	if (strpbrk(s.image, ",:\\\n") != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "image path %s holds ',', ':', '\\' or a newline (the overlay "
		                   "cannot take it)",
		                   s.image);

	/* The agents: the image's architecture for the channel; init is always this
	 * machine's (it runs before anything could emulate another architecture). */
	const char *self = sbx_arch_self();
	char declared[16];
	const char *arch = o->arch;
	if (arch == NULL)
		arch = image_arch(s.image, declared, sizeof declared) == 0 ? declared : self;
	const struct sbx_arch *a = sbx_arch_by_name(arch);
	if (a == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "unknown architecture '%s'", arch);
	snprintf(s.arch, sizeof s.arch, "%s", a->name);
	int foreign = strcmp(a->name, self) != 0;
	char adir[PATH_MAX], agent[PATH_MAX], native[PATH_MAX], qemu[PATH_MAX];
	if (o->agent_dir != NULL)
		snprintf(adir, sizeof adir, "%s", o->agent_dir);
	else if (sbx_agent_dir(adir, sizeof adir, e) != 0)
		return -1;
	if (o->agent != NULL)
		snprintf(agent, sizeof agent, "%s", o->agent);
	else if (sbx_agent_path(adir, a->name, agent, sizeof agent, e) != 0)
		return -1;
	/* The channel's way in (sbx-agent enter) is this machine's agent, kept in the state
	 * folder where the sandbox cannot reach it. */
	if (sbx_agent_path(adir, self, native, sizeof native, e) != 0) {
		if (foreign || o->agent == NULL)
			return -1;
		snprintf(native, sizeof native, "%s", agent);
	}
	if (foreign) {
		if (find_in_path(a->qemu, qemu, sizeof qemu) != 0)
			return sbx_err_set(e, SBX_EUSAGE, 0,
			                   "a %s sandbox needs %s on this machine", a->name,
			                   a->qemu);
		snprintf(s.qemu, sizeof s.qemu, "%s", a->qemu);
	}

	char base[PATH_MAX], final[PATH_MAX], tmp[PATH_MAX];
	if (sbx_ns_dir(base, sizeof base, e) != 0 || mkdir_p(base, e) != 0 ||
	    path_join(final, sizeof final, base, name, e) != 0)
		return -1;
	struct stat fst;
	if (lstat(final, &fst) == 0)
		return sbx_err_set(e, SBX_EUSAGE, EEXIST, "sandbox %s already exists", name);
	if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.new-XXXXXX", base, name) >= sizeof tmp)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "state folder");
	if (mkdtemp(tmp) == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "create a state folder in %s", base);

	/* The writable layer: its root takes the image root's mode and owner (the overlay
	 * shows the upper root's), and starts with the agent in /.sbx. */
	char upper[PATH_MAX], work[PATH_MAX], root[PATH_MAX], mask[PATH_MAX], dotsbx[PATH_MAX];
	char layer[PATH_MAX], lower[PATH_MAX];
	char ovl[PATH_MAX + 64], ovl2[PATH_MAX + 64];
	int64_t pid = 0;
	int userns_fd = -1, net_fd = -1;
	struct sbx_cg cg = {.procs = {-1, -1, -1, -1}};
	const struct sbx_resources *res = &o->res;
	int limited = res->cpu > 0 || res->memory_mib > 0 || res->pids > 0;
	/* Its own range of host ids (runner/userns.h): root inside is s.uid outside. */
	if (!o->privileged) {
		struct sbx_userns u;
		/* Every range taken: the claims nothing holds any more are given back first. */
		if (sbx_userns_claim(base, name, &u, e) != 0 &&
		    (e->errnum != ENOSPC ||
		     sbx_userns_reclaim(base, claim_held, RECLAIM_AGE_S) <= 0 ||
		     sbx_userns_claim(base, name, &u, e) != 0))
			goto fail;
		s.ids_slot = u.slot;
		s.uid = u.uid;
		s.gid = u.gid;
		if ((userns_fd = sbx_userns_make(&u, &net_fd, e)) < 0)
			goto fail;
	}
	/* The disk bound: the writable layer on a tmpfs of that size (in the state folder). */
	const char *up = "upper", *wk = "work";
	if (res->disk_gib > 0) {
		char opt[64];
		snprintf(opt, sizeof opt, "mode=0700,size=%lldk",
		         (long long)(res->disk_gib * 1024 * 1024 + 0.5));
		if (path_join(layer, sizeof layer, tmp, "layer", e) != 0)
			goto fail;
		if (mkdir(layer, 0700) != 0 ||
		    mount("tmpfs", layer, "tmpfs", MS_NOSUID, opt) != 0) {
			sbx_err_set(e, SBX_EUNAVAILABLE, errno, "mount the layer's tmpfs (%s)",
			            opt);
			goto fail;
		}
		up = "layer/upper", wk = "layer/work";
		s.disk_gib = res->disk_gib;
	}
	/* Every sandbox gets a cgroup when it can (its freezer is what pause uses); one asked
	 * for limits fails without it. */
	struct sbx_err cge;
	if (sbx_cg_make(name, res, &cg, &cge) == 0) {
		snprintf(s.cgroup, sizeof s.cgroup, "%s", cg.rel);
		s.cg_v2 = cg.v2;
	} else if (limited) {
		*e = cge;
		goto fail;
	}
	if (path_join(upper, sizeof upper, tmp, up, e) != 0 ||
	    path_join(work, sizeof work, tmp, wk, e) != 0 ||
	    path_join(root, sizeof root, tmp, "root", e) != 0 ||
	    path_join(mask, sizeof mask, tmp, "mask", e) != 0 ||
	    path_join(dotsbx, sizeof dotsbx, upper, ".sbx", e) != 0)
		goto fail;
	/* The upper layer holds the ids as the host sees them: the mapped ones. */
	uid_t ru = ist.st_uid < SBX_USERNS_IDS ? s.uid + ist.st_uid : ist.st_uid;
	gid_t rg = ist.st_gid < SBX_USERNS_IDS ? s.gid + ist.st_gid : ist.st_gid;
	if (path_join(lower, sizeof lower, tmp, "lower", e) != 0)
		goto fail;
	if (mkdir(upper, 0700) != 0 || chown(upper, ru, rg) != 0 ||
	    chmod(upper, ist.st_mode & 07777) != 0 || mkdir(work, 0700) != 0 ||
	    mkdir(root, 0700) != 0 || mkdir(mask, 0700) != 0 || mkdir(dotsbx, 0700) != 0 ||
	    (userns_fd >= 0 && mkdir(lower, 0700) != 0) || chown(dotsbx, s.uid, s.gid) != 0 ||
	    chmod(dotsbx, 0755) != 0) {
		sbx_err_set(e, SBX_EUNAVAILABLE, errno, "prepare the layer in %s", tmp);
		goto fail;
	}
	/* The programs: links to one shared copy each (runner/execstore.c), but for a sandbox
	 * whose root is the host's, which could write through a link into every sandbox. */
	char store[PATH_MAX];
	if (path_join(store, sizeof store, base, ".exec", e) != 0)
		goto fail;
	if (o->privileged
	            ? sbx_exec_copy(agent, dotsbx, "sbx-agent", s.uid, s.gid, e) != 0 ||
	                      (foreign &&
	                       (sbx_exec_copy(native, dotsbx, "sbx-init", s.uid, s.gid, e) != 0 ||
	                        sbx_exec_copy(qemu, dotsbx, a->qemu, s.uid, s.gid, e) != 0))
	            : sbx_exec_place(native, store, tmp, ENTER_NAME, 0, 0, e) != 0 ||
	                      sbx_exec_place(agent, store, dotsbx, "sbx-agent", s.uid, s.gid, e) !=
	                              0 ||
	                      (foreign && (sbx_exec_place(native, store, dotsbx, "sbx-init", s.uid,
	                                                  s.gid, e) != 0 ||
	                                   sbx_exec_place(qemu, store, dotsbx, a->qemu, s.uid,
	                                                  s.gid, e) != 0)))
		goto fail;
	/* With a user namespace the lower layer is the image's idmapped view, mounted at
	 * "lower" by the first process. */
	const char *lo = userns_fd >= 0 ? "lower" : s.image;
	snprintf(ovl, sizeof ovl, "lowerdir=%s,upperdir=%s,workdir=%s,volatile", lo, up, wk);
	snprintf(ovl2, sizeof ovl2, "lowerdir=%s,upperdir=%s,workdir=%s", lo, up, wk);

	struct plan plan = {.dir = tmp,
	                    .ovl = ovl,
	                    .ovl2 = ovl2,
	                    .name = name,
	                    .init = foreign ? INIT_FOREIGN : SBX_NS_AGENT,
	                    .cg = s.cgroup[0] != '\0' ? &cg : NULL,
	                    .serve = !foreign,
	                    .privileged = o->privileged,
	                    .image = s.image,
	                    .userns_fd = userns_fd,
	                    .net_fd = net_fd,
	                    .uid = s.uid,
	                    .gid = s.gid};
	s.privileged = o->privileged != 0;
	int started = start(&plan, &pid, e);
	sbx_cg_close(&cg);
	if (userns_fd >= 0) {
		close(userns_fd);
		close(net_fd);
	}
	userns_fd = net_fd = -1;
	if (started != 0)
		goto fail;
	struct proc_info pi;
	char pdir[48];
	snprintf(pdir, sizeof pdir, "/proc/%lld", (long long)pid);
	if (proc_stat(pid, &pi) != 0 || pi.state == 'Z') {
		sbx_err_set(e, SBX_EUNAVAILABLE, 0, "the sandbox's init exited at once");
		goto fail;
	}
	s.pid = pid;
	s.start = pi.start;
	s.pidns = pidns_inode(pdir);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	s.created_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	if (s.pidns == 0 || s.pidns == pidns_inode("/proc/self")) {
		sbx_err_set(e, SBX_EUNAVAILABLE, 0,
		            "the sandbox's init is not in a new pid namespace");
		goto fail;
	}
	if (write_state(tmp, name, &s, e) != 0 || give_secret(name, pid, e) != 0)
		goto fail;
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) != 0) {
		int err = errno;
		if (err == EINVAL || err == ENOSYS) {
			/* A filesystem without RENAME_NOREPLACE: the check above stands. */
			if (lstat(final, &fst) == 0)
				err = EEXIST;
			else if (rename(tmp, final) == 0)
				err = 0;
			else
				err = errno;
		}
		if (err != 0) {
			if (err == EEXIST)
				sbx_err_set(e, SBX_EUSAGE, EEXIST, "sandbox %s already exists",
				            name);
			else
				sbx_err_set(e, SBX_EUNAVAILABLE, err, "rename %s", tmp);
			goto fail;
		}
	}
	if (name_out != NULL && cap > 0)
		snprintf(name_out, cap, "%s", name);
	return 0;
fail:
	if (pid > 0 && proc_stat(pid, &pi) == 0)
		kill_init(pid, pi.start, NULL);
	sbx_cg_close(&cg);
	if (s.cgroup[0] != '\0')
		sbx_cg_remove(s.cg_v2, s.cgroup, NULL);
	if (userns_fd >= 0) {
		close(userns_fd);
		close(net_fd);
	}
	sbx_userns_release(base, s.ids_slot);
	detach_mounts_under(tmp);
	remove_tree(tmp, NULL);
	return -1;
}

/* ---- status, remove, list, channel ---- */

static int lookup(const char *name, struct sbx_ns_status *st, struct state *s, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	char base[PATH_MAX];
	if (check_name(name, e) != 0 || sbx_ns_dir(base, sizeof base, e) != 0 ||
	    path_join(st->dir, sizeof st->dir, base, name, e) != 0)
		return -1;
	if (read_state(st->dir, s) != 0) {
		if (errno == ENOENT) {
			st->state = SBX_NS_ABSENT;
			return 0;
		}
		if (errno == EBADMSG) {
			st->state = SBX_NS_STOPPED; /* a folder without a readable state */
			return 0;
		}
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "read %s/state", st->dir);
	}
	st->pid = s->pid;
	st->created_ns = s->created_ns;
	snprintf(st->image, sizeof st->image, "%s", s->image);
	snprintf(st->arch, sizeof st->arch, "%s", s->arch);
	st->state = init_alive(s->pid, s->start, s->pidns) ? SBX_NS_RUNNING : SBX_NS_STOPPED;
	st->paused = st->state == SBX_NS_RUNNING && s->cgroup[0] != '\0' &&
	             sbx_cg_frozen(s->cg_v2, s->cgroup) == 1;
	if (s->cgroup[0] != '\0')
		sbx_cg_limits(s->cg_v2, s->cgroup, &st->res);
	st->res.disk_gib = s->disk_gib;
	return 0;
}

int sbx_ns_status(const char *name, struct sbx_ns_status *st, struct sbx_err *e)
{
	struct state s;
	return lookup(name, st, &s, e);
}

int sbx_ns_remove(const char *name, struct sbx_err *e)
{
	struct sbx_ns_status st;
	struct state s;
	if (lookup(name, &st, &s, e) != 0)
		return -1;
	if (st.state == SBX_NS_ABSENT)
		return 0;
	/* Thawed first: a frozen init takes no SIGKILL until it runs again. */
	if (st.paused)
		sbx_cg_freeze(s.cg_v2, s.cgroup, 0, NULL);
	if (st.state == SBX_NS_RUNNING && kill_init(s.pid, s.start, e) != 0)
		return -1;
	if (s.cgroup[0] != '\0' && sbx_cg_remove(s.cg_v2, s.cgroup, e) != 0)
		return -1;
	detach_mounts_under(st.dir);
	/* Out of the name first (status says absent at once, the name is free again), then
	 * deleted; a concurrent remove that lost the rename has nothing left to do. */
	char base[PATH_MAX], trash[PATH_MAX];
	if (sbx_ns_dir(base, sizeof base, e) != 0)
		return -1;
	if ((size_t)snprintf(trash, sizeof trash, "%s/.%s.rm-XXXXXX", base, name) >= sizeof trash)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "state folder");
	if (mkdtemp(trash) == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "create %s", trash);
	if (rename(st.dir, trash) != 0) {
		int err = errno;
		rmdir(trash);
		if (err == ENOENT)
			return 0;
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "rename %s", st.dir);
	}
	if (remove_tree(trash, e) != 0) {
		/* Back under its name, so status shows it and a later remove retries. */
		rename(trash, st.dir);
		return -1;
	}
	sbx_userns_release(base, s.ids_slot);
	char store[PATH_MAX];
	if (path_join(store, sizeof store, base, ".exec", e) == 0)
		sbx_exec_prune(store);
	return 0;
}

int sbx_ns_pause(const char *name, int pause, struct sbx_err *e)
{
	struct sbx_ns_status st;
	struct state s;
	if (lookup(name, &st, &s, e) != 0)
		return -1;
	if (st.state != SBX_NS_RUNNING)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "ns sandbox %s is %s", name,
		                   sbx_ns_state_name(st.state));
	if (s.cgroup[0] == '\0')
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "ns sandbox %s has no cgroup (made before sbx gave them, or "
		                   "this machine has no freezer)",
		                   name);
	return sbx_cg_freeze(s.cg_v2, s.cgroup, pause, e);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sbx_ns_list(char ***names, size_t *n, struct sbx_err *e)
{
	*names = NULL;
	*n = 0;
	char base[PATH_MAX];
	if (sbx_ns_dir(base, sizeof base, e) != 0)
		return -1;
	DIR *d = opendir(base);
	if (d == NULL)
		return errno == ENOENT ? 0
		                       : sbx_err_set(e, SBX_EUNAVAILABLE, errno, "open %s", base);
	char **v = NULL;
	size_t len = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || check_name(de->d_name, NULL) != 0)
			continue;
		char **g = realloc(v, (len + 1) * sizeof *v);
		if (g == NULL || (g[len] = strdup(de->d_name)) == NULL) {
			v = g != NULL ? g : v;
			for (size_t i = 0; i < len; i++)
				free(v[i]);
			free(v);
			closedir(d);
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "listing %s", base);
		}
		v = g;
		len++;
	}
	closedir(d);
	if (len > 0)
		qsort(v, len, sizeof *v, cmp_str);
	*names = v;
	*n = len;
	return 0;
}

int sbx_ns_argv(const char *name, char ***argv_template, struct sbx_err *e)
{
	*argv_template = NULL;
	struct sbx_ns_status st;
	struct state s;
	if (lookup(name, &st, &s, e) != 0)
		return -1;
	if (st.state == SBX_NS_ABSENT)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOENT, "no sandbox %s (in %s)", name,
		                   st.dir);
	if (st.state != SBX_NS_RUNNING)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ESRCH,
		                   "sandbox %s is stopped (its init %lld is gone)", name,
		                   (long long)s.pid);
	char pid[24], qemu[80], enter[PATH_MAX];
	snprintf(pid, sizeof pid, "%lld", (long long)s.pid);
	snprintf(qemu, sizeof qemu, "/.sbx/%s", s.qemu);
	if (path_join(enter, sizeof enter, st.dir, ENTER_NAME, e) != 0)
		return -1;
	/* The host's environment stays out (env -i). nsenter's --root and --wd without a value
	 * take init's root and cwd: "--wd=/" would name the host's / and leave the chroot. A
	 * confined sandbox is entered by sbx-agent enter instead, which drops to the boundary
	 * before it execs the layer's agent. */
	const char *words[40];
	size_t k = 0;
	/* The session's processes join the sandbox's cgroup first (enter and nsenter join
	 * namespaces only): its limits and its freezer hold them as they hold init's. */
	char cgd[SBX_CG_FDS][256];
	int ncg = s.cgroup[0] != '\0' ? sbx_cg_dirs(s.cg_v2, s.cgroup, cgd, SBX_CG_FDS) : 0;
	if (ncg > 0) {
		words[k++] = "/bin/sh";
		words[k++] = "-c";
		words[k++] = "while [ \"$1\" != -- ]; do echo $$ >\"$1/cgroup.procs\" || exit 125; "
		             "shift; done; shift; exec \"$@\"";
		words[k++] = "sh";
		for (int i = 0; i < ncg; i++)
			words[k++] = cgd[i];
		words[k++] = "--";
	}
	words[k++] = "env";
	words[k++] = "-i";
	words[k++] = SANDBOX_PATH;
	words[k++] = "HOME=/root";
	if (!s.privileged) {
		words[k++] = enter;
		words[k++] = "enter";
		words[k++] = pid;
	} else {
		static const char *const ns_words[] = {"nsenter", "--target", NULL,    "--mount",
		                                       "--uts",   "--ipc",    "--net", "--pid",
		                                       "--root",  "--wd"};
		for (size_t i = 0; i < sizeof ns_words / sizeof ns_words[0]; i++)
			words[k++] = ns_words[i] != NULL ? ns_words[i] : pid;
		if (ncg > 0)
			words[k++] = "--cgroup";
	}
	if (s.qemu[0] != '\0')
		words[k++] = qemu;
	words[k++] = "{agent}";
	words[k++] = "serve";
	char **v = calloc(k + 1, sizeof *v);
	if (v == NULL)
		return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "argv");
	for (size_t i = 0; i < k; i++)
		if ((v[i] = strdup(words[i])) == NULL) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return sbx_err_set(e, SBX_EUNAVAILABLE, ENOMEM, "argv");
		}
	*argv_template = v;
	return 0;
}

/* ---- the ns row of the runner table (sbx_runner.h) ---- */

static int ns_parse(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return arg == NULL ? sbx_err_set(e, SBX_EUSAGE, 0, "ns: needs a sandbox name")
	                   : check_name(arg, e);
}

static int ns_open(const struct sbx_runner_class *self, const char *arg,
                   const struct sbx_open_opts *o, struct sbx_session **s, struct sbx_err *e)
{
	(void)self;
	/* A paused sandbox's session is refused at once: a channel's processes would wait
	 * frozen (the resident agent's serve, a child of init, is in its cgroup), and so would
	 * every request. Then the resident agent (init's socket: no process on this side); an
	 * init that does not serve (made by an older sbx), and a sandbox of a foreign
	 * architecture (its sessions are that architecture's agent under QEMU, init is this
	 * machine's), through the exec channel. */
	struct sbx_ns_status st;
	struct state ss;
	if (lookup(arg, &st, &ss, e) != 0)
		return -1;
	if (st.paused)
		return sbx_err_set(e, SBX_EUNAVAILABLE, 0, "ns sandbox %s is paused", arg);
	if (st.state == SBX_NS_RUNNING && o->agent == NULL && ss.qemu[0] == '\0' &&
	    sbx_runner_resident((pid_t)ss.pid, o->agent_dir, o->timeout_s > 0 ? o->timeout_s : 30,
	                        s) == 0)
		return 0;
	char **tmpl;
	if (sbx_ns_argv(arg, &tmpl, e) != 0)
		return -1;
	/* The agent injected into the sandbox's layer at create, or --agent's path inside it. */
	int rc = sbx_runner_open_template((const char *const *)tmpl,
	                                  o->agent != NULL ? o->agent : SBX_NS_AGENT, o, s, e);
	sbx_words_free(tmpl);
	return rc;
}

static int ns_create(const struct sbx_runner_class *self, const struct sbx_create_opts *o,
                     char *arg_out, size_t cap, struct sbx_err *e)
{
	(void)self;
	if (o->engine_args != NULL && o->engine_args[0] != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "engine arguments are for podman and docker");
	if (o->image == NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "ns: create needs an image folder");
	struct sbx_ns_opts no = {.arch = o->arch,
	                         .agent_dir = o->agent_dir,
	                         .agent = o->agent,
	                         .res = o->resources,
	                         .privileged = o->privileged};
	return sbx_ns_create(o->image, o->name, &no, arg_out, cap, e);
}

static int ns_status(const struct sbx_runner_class *self, const char *arg, struct sbx_sandbox *sb,
                     struct sbx_err *e)
{
	(void)self;
	memset(sb, 0, sizeof *sb);
	struct sbx_ns_status st;
	if (sbx_ns_status(arg, &st, e) != 0)
		return -1;
	snprintf(sb->spec, sizeof sb->spec, "ns:%s", arg);
	sb->kind = "ns";
	snprintf(sb->state, sizeof sb->state, "%s", sbx_ns_state_name(st.state));
	sb->running = st.state == SBX_NS_RUNNING;
	sb->pid = st.pid;
	sb->created_ns = st.created_ns;
	snprintf(sb->image, sizeof sb->image, "%.1023s", st.image);
	snprintf(sb->arch, sizeof sb->arch, "%s", st.arch);
	sb->paused = st.paused;
	sb->running = sb->running && !st.paused;
	sb->resources = st.res;
	if (st.paused)
		snprintf(sb->state, sizeof sb->state, "paused");
	return 0;
}

static int ns_pause(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return sbx_ns_pause(arg, 1, e);
}

static int ns_resume(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return sbx_ns_pause(arg, 0, e);
}

static int ns_remove(const struct sbx_runner_class *self, const char *arg, struct sbx_err *e)
{
	(void)self;
	return sbx_ns_remove(arg, e);
}

static int ns_list(const struct sbx_runner_class *self, struct sbx_sandbox **out, size_t *n,
                   struct sbx_err *e)
{
	char **names;
	size_t k;
	if (sbx_ns_list(&names, &k, e) != 0)
		return -1;
	return sbx_runner_list_of(self, names, k, out, n, e);
}

const struct sbx_runner_class sbx_runner_ns = {.name = "ns",
                                               .arg = "NAME",
                                               .boundary = 1,
                                               .parse = ns_parse,
                                               .open = ns_open,
                                               .create = ns_create,
                                               .status = ns_status,
                                               .remove = ns_remove,
                                               .list = ns_list,
                                               .pause = ns_pause,
                                               .resume = ns_resume};
