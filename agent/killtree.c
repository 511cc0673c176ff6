/* The /proc walk behind "every process of the run". Memory is transient: one array of
 * (pid, ppid, start) for the processes alive at the walk, freed before returning, so ten
 * thousand zombies or a fork storm cost one walk's worth and nothing after. */
#include "killtree.h"
#include "procstat.h"
#include "sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ent {
	pid_t pid, ppid;
	uint64_t start;
	char zombie;
	char mark; /* 0 unknown, 1 of the run, 2 not */
};

static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return (ssize_t)n;
}

/* Whether /proc/PID/environ holds the marker as a whole entry. Streams the file entry by
 * entry, keeping only as many bytes of each as the marker is long. Unreadable: no. */
static int has_marker(pid_t pid, const char *marker)
{
	char path[32], buf[4096], cur[64];
	size_t mlen = strlen(marker), clen = 0;
	int toolong = 0, found = 0;
	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && !found; i++) {
			if (buf[i] == '\0') {
				found = !toolong && clen == mlen && memcmp(cur, marker, mlen) == 0;
				clen = 0, toolong = 0;
			} else if (clen < mlen) {
				cur[clen++] = buf[i];
			} else {
				toolong = 1;
			}
		}
		if (found)
			break;
	}
	close(fd);
	return found || (!toolong && clen == mlen && memcmp(cur, marker, mlen) == 0);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = ((const struct ent *)a)->pid, y = ((const struct ent *)b)->pid;
	return (x > y) - (x < y);
}

static struct ent *find(struct ent *v, size_t n, pid_t pid)
{
	struct ent key = {.pid = pid};
	return bsearch(&key, v, n, sizeof *v, cmp_pid);
}

/* Marks v[i] by following parent links up to self (of the run) or to anything else (not),
 * then marks the whole path, so the walk is O(n log n) however deep the tree. */
static void resolve(struct ent *v, size_t n, struct ent *e, pid_t self)
{
	char res = 2;
	size_t steps = 0;
	for (struct ent *j = e;; steps++) {
		if (j->mark != 0) {
			res = j->mark;
			break;
		}
		if (j->ppid == self) {
			res = 1;
			break;
		}
		struct ent *up = j->ppid > 0 ? find(v, n, j->ppid) : NULL;
		if (up == NULL || steps > n) /* a cycle only in a torn snapshot */
			break;
		j = up;
	}
	for (struct ent *j = e; j != NULL && j->mark == 0;) {
		j->mark = res;
		j = j->ppid != self && j->ppid > 0 ? find(v, n, j->ppid) : NULL;
	}
}

static void send_sig(const struct ent *e, pid_t self, int sig, int *pidfd_ok)
{
	if (e->ppid == self) {
		kill(e->pid, sig);
		return;
	}
	int fd = -1;
	if (*pidfd_ok) {
		fd = sbx_pidfd_open(e->pid);
		if (fd < 0 && errno == ESRCH)
			return;
		if (fd < 0)
			*pidfd_ok = 0; /* ENOSYS, or refused by a seccomp profile */
	}
	/* With the pidfd held, the identity re-check cannot be raced by pid reuse; without
	 * one it narrows the window to a few microseconds. */
	uint64_t start;
	if (sbx_proc_stat(e->pid, &start, NULL, NULL) == 0 && start == e->start) {
		if (fd >= 0)
			sbx_pidfd_signal(fd, sig);
		else
			kill(e->pid, sig);
	}
	if (fd >= 0)
		close(fd);
}

static void visit_one(const struct ent *e, sbx_kt_visit visit, void *arg)
{
	char path[32], buf[256];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)e->pid);
	ssize_t n = read_file(path, buf, sizeof buf - 1);
	if (n < 0)
		n = 0;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	visit(arg, e->pid, buf);
}

int sbx_killtree(const struct sbx_kt *k, int sig1, int sig2, sbx_kt_visit visit, void *arg,
                 int *others)
{
	if (others != NULL)
		*others = 0;
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	struct ent *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == k->self)
			continue;
		struct ent e = {.pid = (pid_t)pid};
		char st;
		if (sbx_proc_stat(e.pid, &e.start, &e.ppid, &st) != 0)
			continue; /* gone since readdir */
		e.zombie = st == 'Z' || st == 'X';
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct ent *nv = realloc(v, nc * sizeof *nv);
			if (nv == NULL)
				break; /* signal what was seen; the next round sees more */
			v = nv, cap = nc;
		}
		v[n++] = e;
	}
	closedir(d);
	qsort(v, n, sizeof *v, cmp_pid);
	for (size_t i = 0; i < n; i++)
		resolve(v, n, &v[i], k->self);

	int found = 0, pidfd_ok = 1;
	for (size_t i = 0; i < n; i++) {
		struct ent *e = &v[i];
		if (e->zombie)
			continue;
		if (e->mark != 1 && (k->marker[0] == '\0' || !has_marker(e->pid, k->marker)))
			continue;
		found++;
		if (others != NULL && e->ppid != k->self)
			(*others)++;
		if (sig1 != 0)
			send_sig(e, k->self, sig1, &pidfd_ok);
		if (sig2 != 0)
			send_sig(e, k->self, sig2, &pidfd_ok);
		if (visit != NULL)
			visit_one(e, visit, arg);
	}
	free(v);
	return found;
}
