/* One copy of each program in a store, hard-linked into every sandbox that runs it.
 *
 * A copy per sandbox cost each one the program's pages anew (about 340 KiB of PSS for the
 * agent: its page cache is the copy's own). A hard link shares the inode, and with it the
 * page cache, between all sandboxes. The linked file belongs to the host's root, mode 0755:
 * a user namespace does not map the host's root, so a sandbox's root can run and read it but
 * not write, truncate, chmod or chown it (what it can do is unlink its own link and put a
 * file of its own there, which changes only its own sandbox: the impersonated agent of the
 * threat model). A sandbox whose root is the host's (--privileged) must never get a link:
 * the caller gives it a copy.
 *
 * An entry is named after its source's identity (device, inode, size, mtime and ctime): a
 * rebuilt program is a new entry. Entries no sandbox links any more (link count 1) are
 * removed when a new entry is made and when a sandbox is removed. Two creates making the same entry
 * at once each copy to a name of its own and rename into place: either copy serves. */
#include "execstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int join(char *out, size_t cap, const char *a, const char *b, struct sbx_err *e)
{
	if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "%s/%s", a, b);
	return 0;
}

int sbx_exec_copy(const char *src, const char *dir, const char *name, uid_t uid, gid_t gid,
                  struct sbx_err *e)
{
	char dst[PATH_MAX];
	if (join(dst, sizeof dst, dir, name, e) != 0)
		return -1;
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "open %s", src);
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
	if (out < 0) {
		int err = errno;
		close(in);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "create %s", dst);
	}
	int err = 0;
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n > 0)
			continue;
		if (n == 0)
			break;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
			err = errno;
			break;
		}
		/* Across filesystems on older kernels: plain copies. */
		char buf[65536];
		ssize_t r;
		while ((r = read(in, buf, sizeof buf)) > 0)
			if (write(out, buf, (size_t)r) != r) {
				err = errno ? errno : EIO;
				break;
			}
		if (r < 0)
			err = errno;
		break;
	}
	if (err == 0 && (fchown(out, uid, gid) != 0 || fchmod(out, 0755) != 0))
		err = errno;
	close(in);
	if (close(out) != 0 && err == 0)
		err = errno;
	if (err != 0) {
		unlink(dst);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "copy %s to %s", src, dst);
	}
	return 0;
}

/* Removes the entries of store no sandbox links (but keep, the one just made). */
static void prune(const char *store, const char *keep)
{
	DIR *d = opendir(store);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (de->d_name[0] == '.' || strcmp(de->d_name, keep) == 0 ||
		    strstr(de->d_name, ".new-"))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_nlink == 1)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

void sbx_exec_prune(const char *store)
{
	prune(store, "");
}

/* Makes store/key, a copy of src owned by the host's root. */
static int make_entry(const char *src, const char *store, const char *key, struct sbx_err *e)
{
	static atomic_uint seq;
	char tmp[NAME_MAX + 1], from[PATH_MAX], to[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%.100s.new-%ld-%u", key, (long)getpid(),
	         atomic_fetch_add(&seq, 1));
	if (mkdir(store, 0700) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "make %s", store);
	if (sbx_exec_copy(src, store, tmp, 0, 0, e) != 0)
		return -1;
	if (join(from, sizeof from, store, tmp, e) != 0 || join(to, sizeof to, store, key, e) != 0)
		return -1;
	if (rename(from, to) != 0) {
		int err = errno;
		unlink(from);
		return sbx_err_set(e, SBX_EUNAVAILABLE, err, "rename %s", from);
	}
	prune(store, key);
	return 0;
}

int sbx_exec_place(const char *src, const char *store, const char *dir, const char *name, uid_t uid,
                   gid_t gid, struct sbx_err *e)
{
	struct stat st;
	if (stat(src, &st) != 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "stat %s", src);
	char key[NAME_MAX + 1], entry[PATH_MAX], dst[PATH_MAX];
	snprintf(key, sizeof key, "%llx-%llx-%llx-%lld.%09ld-%lld.%09ld",
	         (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
	         (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	         (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	if (join(entry, sizeof entry, store, key, e) != 0 ||
	    join(dst, sizeof dst, dir, name, e) != 0)
		return -1;
	/* A prune beside this create may take an entry between its making and its link: then
	 * it is made again. */
	for (int tries = 0; tries < 4; tries++) {
		if (link(entry, dst) == 0)
			return 0;
		if (errno == EXDEV)
			return sbx_exec_copy(src, dir, name, uid, gid, e);
		if (errno != ENOENT)
			return sbx_err_set(e, SBX_EUNAVAILABLE, errno, "link %s to %s", entry, dst);
		if (make_entry(src, store, key, e) != 0)
			return -1;
	}
	return sbx_err_set(e, SBX_EUNAVAILABLE, ENOENT, "link %s to %s", entry, dst);
}
