/* The ns runner's cgroups (cgroup.h): files under /sys/fs/cgroup written and read as text. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG "/sys/fs/cgroup"
#define CPU_PERIOD 100000 /* us */

static int is_v2(void)
{
	struct stat st;
	return stat(CG "/cgroup.controllers", &st) == 0;
}

/* The folder of controller ctrl (v1) or the unified one (ctrl NULL), with rel. */
static int dir_of(int v2, const char *ctrl, const char *rel, char *out, size_t cap)
{
	int n = v2 ? snprintf(out, cap, CG "/%s", rel) : snprintf(out, cap, CG "/%s/%s", ctrl, rel);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int write_file(const char *dir, const char *file, const char *text)
{
	char p[512];
	if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, file) >= sizeof p)
		return (errno = ENAMETOOLONG), -1;
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, text, strlen(text));
	int err = errno;
	close(fd);
	errno = err;
	return w == (ssize_t)strlen(text) ? 0 : -1;
}

static int read_file(const char *dir, const char *file, char *out, size_t cap)
{
	char p[512];
	out[0] = '\0';
	if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, file) >= sizeof p)
		return -1;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, out, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

static int mkdir_ok(const char *p)
{
	return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

int sbx_cg_make(const char *name, const struct sbx_resources *r, struct sbx_cg *cg,
                struct sbx_err *e)
{
	memset(cg, 0, sizeof *cg);
	for (int i = 0; i < SBX_CG_FDS; i++)
		cg->procs[i] = -1;
	cg->v2 = is_v2();
	unsigned char rnd[4];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "getrandom");
	snprintf(cg->rel, sizeof cg->rel, "sbx/ns-%.60s-%02x%02x%02x%02x", name, rnd[0], rnd[1],
	         rnd[2], rnd[3]);
	const char *ctrls[SBX_CG_FDS] = {"freezer", NULL, NULL, NULL};
	int n = 1;
	if (r->memory_mib > 0)
		ctrls[n++] = "memory";
	if (r->pids > 0)
		ctrls[n++] = "pids";
	if (r->cpu > 0)
		ctrls[n++] = "cpu";
	char dir[256], buf[64];
	if (cg->v2) {
		/* The controllers enabled for sbx/ and its children. */
		if (mkdir_ok(CG "/sbx") != 0)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "mkdir " CG "/sbx");
		for (int i = 1; i < n; i++) {
			snprintf(buf, sizeof buf, "+%s", ctrls[i]);
			if (write_file(CG, "cgroup.subtree_control", buf) != 0 ||
			    write_file(CG "/sbx", "cgroup.subtree_control", buf) != 0)
				return sbx_err_set(
				        e, SBX_EUSAGE, errno,
				        "ns: cgroup v2 cannot enable the %s controller here",
				        ctrls[i]);
		}
		n = 1;
		ctrls[1] = ctrls[2] = ctrls[3] = NULL;
	}
	for (int i = 0; i < n; i++) {
		char top[128];
		snprintf(top, sizeof top, cg->v2 ? CG "/sbx" : CG "/%s/sbx", ctrls[i]);
		struct stat st;
		snprintf(dir, sizeof dir, CG "/%s", ctrls[i]);
		if (!cg->v2 && stat(dir, &st) != 0) {
			sbx_cg_remove(cg->v2, cg->rel, NULL);
			return sbx_err_set(e, SBX_EUSAGE, errno,
			                   "ns: this machine has no %s cgroup (" CG "/%s)",
			                   ctrls[i], ctrls[i]);
		}
		if (mkdir_ok(top) != 0 || dir_of(cg->v2, ctrls[i], cg->rel, dir, sizeof dir) != 0 ||
		    mkdir(dir, 0755) != 0) {
			int err = errno;
			sbx_cg_remove(cg->v2, cg->rel, NULL);
			return sbx_err_set(e, SBX_EUNAVAILABLE, err, "mkdir %s", dir);
		}
	}
	/* The limits, each in its controller's folder. */
	const char *what = NULL;
	int rc = 0;
	if (r->memory_mib > 0) {
		snprintf(buf, sizeof buf, "%lld", (long long)r->memory_mib << 20);
		dir_of(cg->v2, "memory", cg->rel, dir, sizeof dir);
		what = "memory_mib";
		rc = cg->v2 ? (write_file(dir, "memory.max", buf) != 0 ||
		               write_file(dir, "memory.swap.max", "0") != 0)
		            : (write_file(dir, "memory.limit_in_bytes", buf) != 0 ||
		               (write_file(dir, "memory.memsw.limit_in_bytes", buf) != 0 &&
		                errno != ENOENT));
	}
	if (rc == 0 && r->pids > 0) {
		snprintf(buf, sizeof buf, "%lld", (long long)r->pids);
		dir_of(cg->v2, "pids", cg->rel, dir, sizeof dir);
		what = "pids";
		rc = write_file(dir, "pids.max", buf) != 0;
	}
	if (rc == 0 && r->cpu > 0) {
		long long q = (long long)(r->cpu * CPU_PERIOD + 0.5);
		dir_of(cg->v2, "cpu", cg->rel, dir, sizeof dir);
		what = "cpu";
		if (q < 1000) {
			errno = ERANGE;
			rc = 1;
		} else if (cg->v2) {
			snprintf(buf, sizeof buf, "%lld %d", q, CPU_PERIOD);
			rc = write_file(dir, "cpu.max", buf) != 0;
		} else {
			snprintf(buf, sizeof buf, "%d", CPU_PERIOD);
			char qb[32];
			snprintf(qb, sizeof qb, "%lld", q);
			rc = write_file(dir, "cpu.cfs_period_us", buf) != 0 ||
			     write_file(dir, "cpu.cfs_quota_us", qb) != 0;
		}
	}
	if (rc != 0) {
		int err = errno;
		sbx_cg_remove(cg->v2, cg->rel, NULL);
		return sbx_err_set(e, SBX_EUSAGE, err, "ns: the cgroup refused %s", what);
	}
	for (int i = 0; i < n; i++) {
		char p[320];
		dir_of(cg->v2, ctrls[i], cg->rel, dir, sizeof dir);
		snprintf(p, sizeof p, "%s/cgroup.procs", dir);
		if ((cg->procs[cg->nprocs] = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
			int err = errno;
			sbx_cg_close(cg);
			sbx_cg_remove(cg->v2, cg->rel, NULL);
			return sbx_err_set(e, SBX_EUNAVAILABLE, err, "open %s", p);
		}
		cg->nprocs++;
	}
	return 0;
}

int sbx_cg_join(const struct sbx_cg *cg)
{
	for (int i = 0; i < cg->nprocs; i++)
		if (write(cg->procs[i], "0", 1) != 1)
			return -1;
	return 0;
}

void sbx_cg_close(struct sbx_cg *cg)
{
	for (int i = 0; i < cg->nprocs; i++)
		if (cg->procs[i] >= 0)
			close(cg->procs[i]), cg->procs[i] = -1;
}

static void nap_ms(int ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

int sbx_cg_frozen(int v2, const char *rel)
{
	char dir[256], v[256];
	if (dir_of(v2, "freezer", rel, dir, sizeof dir) != 0)
		return -1;
	if (v2) {
		/* cgroup.events is "populated N\nfrozen N": read it whole. */
		char p[320], all[256];
		snprintf(p, sizeof p, "%s/cgroup.events", dir);
		FILE *f = fopen(p, "re");
		if (f == NULL)
			return -1;
		size_t k = fread(all, 1, sizeof all - 1, f);
		fclose(f);
		all[k] = '\0';
		return strstr(all, "frozen 1") != NULL;
	}
	if (read_file(dir, "freezer.state", v, sizeof v) != 0)
		return -1;
	return strcmp(v, "FROZEN") == 0 || strcmp(v, "FREEZING") == 0;
}

int sbx_cg_freeze(int v2, const char *rel, int on, struct sbx_err *e)
{
	char dir[256], v[64];
	if (dir_of(v2, "freezer", rel, dir, sizeof dir) != 0)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "cgroup");
	if (write_file(dir, v2 ? "cgroup.freeze" : "freezer.state",
	               v2 ? (on ? "1" : "0") : (on ? "FROZEN" : "THAWED")) != 0)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "%s %s", on ? "freeze" : "thaw",
		                   dir);
	for (int i = 0; i < 500; i++) {
		if (v2) {
			if (sbx_cg_frozen(1, rel) == on)
				return 0;
		} else if (read_file(dir, "freezer.state", v, sizeof v) == 0 &&
		           strcmp(v, on ? "FROZEN" : "THAWED") == 0) {
			return 0;
		} else if (on && strcmp(v, "FREEZING") == 0) {
			/* v1 may need the state written again while tasks are in transit. */
			write_file(dir, "freezer.state", "FROZEN");
		}
		nap_ms(10);
	}
	return sbx_err_set(e, SBX_EUNAVAILABLE, ETIMEDOUT, "%s did not become %s", dir,
	                   on ? "frozen" : "thawed");
}

void sbx_cg_limits(int v2, const char *rel, struct sbx_resources *r)
{
	char dir[256], v[64];
	memset(r, 0, sizeof *r);
	if (dir_of(v2, "memory", rel, dir, sizeof dir) == 0 &&
	    read_file(dir, v2 ? "memory.max" : "memory.limit_in_bytes", v, sizeof v) == 0) {
		long long b = strtoll(v, NULL, 10);
		if (b > 0 && b < (1LL << 50))
			r->memory_mib = b >> 20;
	}
	if (dir_of(v2, "pids", rel, dir, sizeof dir) == 0 &&
	    read_file(dir, "pids.max", v, sizeof v) == 0 && strcmp(v, "max") != 0)
		r->pids = strtoll(v, NULL, 10);
	if (dir_of(v2, "cpu", rel, dir, sizeof dir) == 0) {
		long long q = -1, p = CPU_PERIOD;
		if (v2 && read_file(dir, "cpu.max", v, sizeof v) == 0 && strncmp(v, "max", 3) != 0)
			sscanf(v, "%lld %lld", &q, &p);
		else if (!v2 && read_file(dir, "cpu.cfs_quota_us", v, sizeof v) == 0) {
			q = strtoll(v, NULL, 10);
			if (read_file(dir, "cpu.cfs_period_us", v, sizeof v) == 0)
				p = strtoll(v, NULL, 10);
		}
		if (q > 0 && p > 0)
			r->cpu = (double)q / (double)p;
	}
}

static const char *const all_ctrls[] = {"freezer", "memory", "pids", "cpu"};

int sbx_cg_dirs(int v2, const char *rel, char dirs[][256], int max)
{
	int n = 0;
	struct stat st;
	for (size_t i = 0; i < (v2 ? 1 : 4) && n < max; i++)
		if (dir_of(v2, all_ctrls[i], rel, dirs[n], 256) == 0 && stat(dirs[n], &st) == 0 &&
		    S_ISDIR(st.st_mode))
			n++;
	return n;
}

int sbx_cg_remove(int v2, const char *rel, struct sbx_err *e)
{
	const char *const *ctrls = all_ctrls;
	char dir[256];
	int rc = 0;
	if (rel[0] == '\0')
		return 0;
	if (sbx_cg_frozen(v2, rel) == 1)
		sbx_cg_freeze(v2, rel, 0, NULL);
	for (size_t i = 0; i < (v2 ? 1 : 4); i++) {
		if (dir_of(v2, ctrls[i], rel, dir, sizeof dir) != 0)
			continue;
		int k = 0;
		while (rmdir(dir) != 0 && errno == EBUSY && k++ < 200)
			nap_ms(10);
		if (errno != 0 && errno != ENOENT && access(dir, F_OK) == 0)
			rc = sbx_err_set(e, SBX_EUNAVAILABLE, errno, "rmdir %s", dir);
		errno = 0;
	}
	return rc;
}
