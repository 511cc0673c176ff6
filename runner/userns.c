/* User namespaces of the ns runner (runner/userns.h): the range a sandbox maps to, the
 * namespace holding that map, and the idmapped view of its image. */
#include "userns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The mount API of Linux 5.12 and later; older C library headers do not name it (the numbers
 * are the same on every architecture). */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#define OPEN_TREE_CLONE_ 1
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x4
#define MOUNT_ATTR_IDMAP_ 0x00100000
#define AT_RECURSIVE_ 0x8000

struct mount_attr_ {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct range {
	uint32_t start, count;
};

/* Root's first range of at least SBX_USERNS_IDS ids in a subordinate-id file ("root:START:COUNT"
 * or "0:START:COUNT"); 0 when there is one. */
static int sub_range(const char *path, struct range *r)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	char line[256];
	int found = -1;
	while (found != 0 && fgets(line, sizeof line, f) != NULL) {
		char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL)
			continue;
		*c1 = '\0';
		if (strcmp(line, "root") != 0 && strcmp(line, "0") != 0)
			continue;
		char *end;
		unsigned long long s = strtoull(c1 + 1, &end, 10), n;
		if (end != c2 || (n = strtoull(c2 + 1, &end, 10)) < SBX_USERNS_IDS ||
		    (*end != '\n' && *end != '\0') || s > UINT32_MAX || n > UINT32_MAX ||
		    s + n > UINT32_MAX)
			continue;
		*r = (struct range){(uint32_t)s, (uint32_t)n};
		found = 0;
	}
	fclose(f);
	return found;
}

/* Where this process's next claim looks first: after its last claim, or at the lowest slot
 * it gave back since; the lowest free slot, then, while only this process claims. */
static uint32_t claim_hint;

/* The uid and gid ranges the slots cut, and how many slots. */
static uint32_t ranges(struct range *ur, struct range *gr)
{
	*ur = (struct range){SBX_USERNS_BASE, SBX_USERNS_IDS * SBX_USERNS_SLOTS};
	*gr = *ur;
	struct range su, sg;
	if (sub_range("/etc/subuid", &su) == 0 && sub_range("/etc/subgid", &sg) == 0)
		*ur = su, *gr = sg;
	uint32_t slots = (ur->count < gr->count ? ur->count : gr->count) / SBX_USERNS_IDS;
	return slots > SBX_USERNS_SLOTS ? SBX_USERNS_SLOTS : slots;
}

int sbx_userns_claim(const char *base, const char *name, struct sbx_userns *u, struct sbx_err *e)
{
	u->slot = -1;
	struct range ur, gr;
	uint32_t slots = ranges(&ur, &gr);
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof dir, "%s/.ids", base) >= sizeof dir)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "%s/.ids", base);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "mkdir %s", dir);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "open %s", dir);
	/* A claim is a link naming its sandbox, made or refused at once (EEXIST): two creates
	 * at the same time never take the same range. The search starts at this process's hint
	 * and wraps around, so a thousand creates in one process try one slot each, not half
	 * a thousand (taken slots below the hint are not tried again). */
	uint32_t from = __atomic_load_n(&claim_hint, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t k = (from + i) % slots;
		char slot[16];
		snprintf(slot, sizeof slot, "%u", (unsigned)k);
		if (symlinkat(name, dfd, slot) == 0) {
			close(dfd);
			__atomic_store_n(&claim_hint, k + 1, __ATOMIC_RELAXED);
			*u = (struct sbx_userns){ur.start + k * SBX_USERNS_IDS,
			                         gr.start + k * SBX_USERNS_IDS, (int)k};
			return 0;
		}
		if (errno != EEXIST) {
			int err = errno;
			close(dfd);
			return sbx_err_set(e, SBX_EUNAVAILABLE, err, "claim %s/%s", dir, slot);
		}
	}
	close(dfd);
	return sbx_err_set(e, SBX_EUNAVAILABLE, ENOSPC,
	                   "every one of the %u id ranges is taken (%s)", (unsigned)slots, dir);
}

/* A slot given back: the next claim of this process looks there first if it is below. */
static void lower_hint(uint32_t slot)
{
	uint32_t h = __atomic_load_n(&claim_hint, __ATOMIC_RELAXED);
	while (slot < h && !__atomic_compare_exchange_n(&claim_hint, &h, slot, 0, __ATOMIC_RELAXED,
	                                                __ATOMIC_RELAXED))
		;
}

void sbx_userns_release(const char *base, int slot)
{
	char path[PATH_MAX];
	if (slot >= 0 &&
	    (size_t)snprintf(path, sizeof path, "%s/.ids/%d", base, slot) < sizeof path &&
	    unlink(path) == 0)
		lower_hint((uint32_t)slot);
}

/* Marks in used[] the slot of every id of a range that a process's real, effective, saved or
 * file-system uid (gid) in a /proc status line falls in. */
static void mark_ids(const char *line, const struct range *r, uint32_t slots, uint8_t *used)
{
	const char *p = strchr(line, ':');
	for (int i = 0; p != NULL && i < 4; i++) {
		char *end;
		unsigned long v = strtoul(p + 1, &end, 10);
		if (end == p + 1)
			break;
		if (v >= r->start && v - r->start < (unsigned long)slots * SBX_USERNS_IDS) {
			uint32_t k = (uint32_t)((v - r->start) / SBX_USERNS_IDS);
			used[k / 8] |= (uint8_t)(1u << (k % 8));
		}
		p = end;
	}
}

static void ids_in_use(const struct range *ur, const struct range *gr, uint32_t slots,
                       uint8_t *used)
{
	DIR *d = opendir("/proc");
	if (d == NULL) {
		memset(used, 0xff, (SBX_USERNS_SLOTS + 7) / 8); /* unknown: all in use */
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[64], line[256];
		snprintf(path, sizeof path, "/proc/%.20s/status", de->d_name);
		FILE *f = fopen(path, "re");
		if (f == NULL)
			continue;
		/* A zombie (a removed sandbox's init not reaped yet) runs nothing: its ids are
		 * free. State comes before Uid and Gid in the file. */
		while (fgets(line, sizeof line, f) != NULL)
			if (strncmp(line, "State:\tZ", 8) == 0)
				break;
			else if (strncmp(line, "Uid:", 4) == 0)
				mark_ids(line, ur, slots, used);
			else if (strncmp(line, "Gid:", 4) == 0)
				mark_ids(line, gr, slots, used);
		fclose(f);
	}
	closedir(d);
}

int sbx_userns_reclaim(const char *base, sbx_userns_held_fn held, int64_t min_age_s)
{
	struct range ur, gr;
	uint32_t slots = ranges(&ur, &gr);
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof dir, "%s/.ids", base) >= sizeof dir)
		return -1;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	/* One reclaimer at a time: a stale claim has no owner left to release it, so between
	 * this pass's checks and its unlink only another reclaimer could change it. */
	if (flock(dfd, LOCK_EX) != 0) {
		close(dfd);
		return -1;
	}
	uint8_t used[(SBX_USERNS_SLOTS + 7) / 8] = {0};
	ids_in_use(&ur, &gr, slots, used);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int freed = 0;
	for (uint32_t k = 0; k < slots; k++) {
		if (used[k / 8] & (1u << (k % 8)))
			continue;
		char slot[16], name[PATH_MAX];
		snprintf(slot, sizeof slot, "%u", (unsigned)k);
		struct stat st;
		if (fstatat(dfd, slot, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode) ||
		    now.tv_sec - st.st_mtim.tv_sec < min_age_s)
			continue;
		ssize_t n = readlinkat(dfd, slot, name, sizeof name - 1);
		if (n <= 0)
			continue;
		name[n] = '\0';
		if (held(base, name, (int)k))
			continue;
		if (unlinkat(dfd, slot, 0) == 0) {
			freed++;
			lower_hint(k);
		}
	}
	close(dfd); /* the lock with it */
	return freed;
}

static int write_map(pid_t pid, const char *file, uint32_t start)
{
	char path[64], map[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	int n = snprintf(map, sizeof map, "0 %u %u\n", (unsigned)start, SBX_USERNS_IDS);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int ok = write(fd, map, (size_t)n) == n;
	int err = errno;
	close(fd);
	errno = err;
	return ok ? 0 : -1;
}

int sbx_userns_make(const struct sbx_userns *u, int *net_fd, struct sbx_err *e)
{
	*net_fd = -1;
	/* ready: the child has its namespace; done: the map is written and the namespace held,
	 * the child may go. */
	int ready[2], done[2];
	if (pipe2(ready, O_CLOEXEC) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "pipe");
	if (pipe2(done, O_CLOEXEC) != 0) {
		int err = errno;
		close(ready[0]);
		close(ready[1]);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "pipe");
	}
	pid_t c = fork();
	if (c == 0) {
		close(ready[0]);
		close(done[1]);
		char b =
		        unshare(CLONE_NEWUSER) == 0 && unshare(CLONE_NEWNET) == 0 ? 0 : (char)errno;
		ssize_t r = write(ready[1], &b, 1) == 1 && b == 0 ? read(done[0], &b, 1) : 0;
		_exit(r < 0);
	}
	int err = errno, fd = -1;
	close(ready[1]);
	close(done[0]);
	const char *what = "fork";
	int waits = 0; /* the child has its namespace and waits for a byte on done */
	if (c > 0) {
		char b = 0;
		what = "make a user namespace";
		if (read(ready[0], &b, 1) != 1)
			err = EPIPE;
		else if (b != 0)
			err = b;
		else
			waits = 1;
	}
	if (waits) {
		if (write_map(c, "uid_map", u->uid) != 0 || write_map(c, "gid_map", u->gid) != 0) {
			err = errno, what = "write the user namespace's map";
		} else {
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/ns/user", (int)c);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
				err = errno, what = "open the user namespace";
			snprintf(path, sizeof path, "/proc/%d/ns/net", (int)c);
			if (fd >= 0 && (*net_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
				err = errno, what = "open the network namespace";
				close(fd);
				fd = -1;
			}
		}
	}
	/* The child goes on a byte, not on the pipe's end: a process another thread of ours
	 * forked meanwhile holds a copy of done[1] until it execs, so the end may not come. */
	if (waits) {
		char go = 0;
		if (write(done[1], &go, 1) != 1)
			kill(c, SIGKILL);
	}
	close(ready[0]);
	close(done[1]);
	if (c > 0)
		while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
			;
	if (fd < 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "%s (host ids %u and up)", what,
		                   (unsigned)u->uid);
	return fd;
}

int sbx_userns_idmap(const char *src, int userns_fd, const char *dst)
{
	int t = (int)syscall(SYS_open_tree, AT_FDCWD, src,
	                     OPEN_TREE_CLONE_ | O_CLOEXEC | AT_RECURSIVE_);
	if (t < 0)
		return -1;
	struct mount_attr_ a = {.attr_set = MOUNT_ATTR_IDMAP_, .userns_fd = (uint64_t)userns_fd};
	int rc = syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE_, &a, sizeof a) ==
	                                 0 &&
	                         syscall(SYS_move_mount, t, "", AT_FDCWD, dst,
	                                 MOVE_MOUNT_F_EMPTY_PATH_) == 0
	                 ? 0
	                 : -1;
	int err = errno;
	close(t);
	errno = err;
	return rc;
}
