/* libFuzzer target for the host unpack: the input after its first byte is the archive stream
 * (through a memfd), unpacked into a fresh folder; the first byte picks SBX_PUT_DATA or
 * SBX_PUT_KEEP, the forced O_NOFOLLOW walk and make_readable. Beside the folder sit a `victim`
 * file and an `outside/` folder (the names hostile seeds aim at, "../outside/x"); after every
 * run they must be as they were and nothing else may have appeared beside the folder, else
 * the run traps. The folder is removed by fd after each run, never following a link. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unpack.h"

static char g_base[64]; /* /tmp/sbx-fuzz-unpack-PID: victim, outside/keep, run/ */
static int g_base_fd = -1;
static struct stat g_victim, g_outside, g_keep;

static void put_file(int dfd, const char *name, const char *data)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		abort();
	close(fd);
}

/* Removes everything under dfd (the fd is consumed), depth first, by fd; directories are
 * opened with O_NOFOLLOW and made searchable first (a member may have mode 0). */
static void empty_dir(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (d == NULL)
		abort();
	rewinddir(d); /* a dup shares the offset of a stream read before */
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0)
			continue;
		int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			abort();
		fchmod(sub, 0700);
		empty_dir(sub);
		if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) != 0)
			abort();
		rewinddir(d);
	}
	closedir(d);
}

static int same(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_mode == b->st_mode && a->st_nlink == b->st_nlink &&
	       a->st_size == b->st_size && a->st_uid == b->st_uid && a->st_gid == b->st_gid &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static size_t entries(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		__builtin_trap();
	DIR *d = fdopendir(fd);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void check_outside(void)
{
	struct stat st;
	if (fstatat(g_base_fd, "victim", &st, AT_SYMLINK_NOFOLLOW) != 0 || !same(&st, &g_victim) ||
	    fstatat(g_base_fd, "outside", &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !same(&st, &g_outside) ||
	    fstatat(g_base_fd, "outside/keep", &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !same(&st, &g_keep) || entries(g_base_fd, "outside") != 1 ||
	    entries(g_base_fd, ".") != 3)
		__builtin_trap();
}

/* libFuzzer leaves through exit(): the folder goes with it. */
static void remove_base(void)
{
	empty_dir(dup(g_base_fd));
	close(g_base_fd);
	rmdir(g_base);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(g_base, sizeof g_base, "/tmp/sbx-fuzz-unpack-%d", (int)getpid());
	if (mkdir(g_base, 0755) != 0 && errno != EEXIST)
		abort();
	g_base_fd = open(g_base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g_base_fd < 0)
		abort();
	empty_dir(dup(g_base_fd));
	put_file(g_base_fd, "victim", "victim bytes\n");
	if (mkdirat(g_base_fd, "outside", 0755) != 0)
		abort();
	int out = openat(g_base_fd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put_file(out, "keep", "keep bytes\n");
	close(out);
	if (fstatat(g_base_fd, "victim", &g_victim, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fstatat(g_base_fd, "outside", &g_outside, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fstatat(g_base_fd, "outside/keep", &g_keep, AT_SYMLINK_NOFOLLOW) != 0)
		abort();
	atexit(remove_base);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int in = memfd_create("archive", MFD_CLOEXEC);
	if (in < 0)
		abort();
	size_t left = size - 1;
	const uint8_t *p = data + 1;
	while (left > 0) {
		ssize_t w = write(in, p, left);
		if (w <= 0)
			abort();
		p += w;
		left -= (size_t)w;
	}
	lseek(in, 0, SEEK_SET);
	if (mkdirat(g_base_fd, "run", 0700) != 0)
		abort();
	int root = openat(g_base_fd, "run", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		abort();
	struct sbx_unpack_opts o = {.in_fd = in,
	                            .root_fd = root,
	                            .mode = (data[0] & 1) ? SBX_PUT_KEEP : SBX_PUT_DATA,
	                            .force_walk = (data[0] >> 1) & 1,
	                            .readable = (data[0] >> 2) & 1,
	                            .tee_fd = -1,
	                            .max_members = 10000,
	                            /* a file's archive: exactly one regular file "f" or refused */
	                            .only = (data[0] >> 3) & 1 ? "f" : NULL};
	struct sbx_unpack_stats st;
	struct sbx_err e;
	int rc = sbx_unpack(&o, &st, &e);
	close(in);
	/* The whole stream is read on success; never more than was sent. */
	if (st.archive_bytes > size - 1 || (rc == 0 && st.archive_bytes != size - 1))
		__builtin_trap();
	if (rc != 0 && e.cls != SBX_ETRANSFER)
		__builtin_trap();
	if (rc == 0 && o.only != NULL) {
		struct stat fst;
		DIR *d = fdopendir(dup(root));
		int n = 0;
		for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;)
			n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
		if (d != NULL)
			closedir(d);
		if (n != 1 || fstatat(root, "f", &fst, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(fst.st_mode))
			__builtin_trap();
	}
	check_outside();
	fchmod(root, 0700);
	empty_dir(root);
	if (unlinkat(g_base_fd, "run", AT_REMOVEDIR) != 0)
		abort();
	return 0;
}
