/* The pack walk: directory fds all the way down (openat with O_NOFOLLOW, fstatat without
 * following), one libarchive pax writer whose output callback hashes and writes. A regular
 * file is opened, then checked to be the same inode the walk saw, so a file swapped for a
 * link between the look and the read is refused instead of followed. */
#include "pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exclude.h"

struct pack {
	const struct sbx_pack_opts *o;
	struct sbx_pack_stats *st;
	struct sbx_err *e;
	struct archive *a;
	struct archive_entry_linkresolver *links;
	struct sbx_sha256 sha;
	int out_failed;
	int out_errno;
	char *buf; /* file data */
};

static la_ssize_t out_write(struct archive *a, void *ctx, const void *p, size_t n)
{
	(void)a;
	struct pack *k = ctx;
	const char *b = p;
	size_t left = n;
	while (left > 0) {
		ssize_t w = write(k->o->out_fd, b, left);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			k->out_failed = 1;
			k->out_errno = errno;
			return -1;
		}
		b += w;
		left -= (size_t)w;
	}
	sbx_sha256_update(&k->sha, p, n);
	k->st->archive_bytes += n;
	return (la_ssize_t)n;
}

static int arch_err(struct pack *k, const char *what, const char *name)
{
	if (k->out_failed)
		return sbx_err_set(k->e, SBX_EUNAVAILABLE, k->out_errno, "writing the archive");
	return sbx_err_set(k->e, SBX_ETRANSFER, 0, "%s %s: %s", what, name,
	                   archive_error_string(k->a) ? archive_error_string(k->a) : "failed");
}

static int excluded(const struct pack *k, const char *name)
{
	for (const char *const *x = k->o->exclude; x != NULL && *x != NULL; x++)
		if (sbx_exclude_match(*x, name))
			return 1;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's entry names, sorted; NULL-terminated, malloc'd. */
static char **list_dir(int dfd, struct sbx_err *e, const char *rel)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		sbx_err_set(e, SBX_ETRANSFER, errno, "cannot list %s", rel[0] ? rel : ".");
		return NULL;
	}
	size_t n = 0, cap = 16;
	char **v = malloc(cap * sizeof *v);
	struct dirent *de;
	while (v != NULL && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n + 2 > cap) {
			char **nv = realloc(v, (cap *= 2) * sizeof *v);
			if (nv == NULL) {
				for (size_t i = 0; i < n; i++)
					free(v[i]);
				free(v);
				v = NULL;
				break;
			}
			v = nv;
		}
		if ((v[n] = strdup(de->d_name)) != NULL)
			n++;
	}
	closedir(d);
	if (v == NULL) {
		sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "listing %s", rel);
		return NULL;
	}
	v[n] = NULL;
	qsort(v, n, sizeof *v, cmp_names);
	return v;
}

static void free_list(char **v)
{
	for (char **p = v; p != NULL && *p != NULL; p++)
		free(*p);
	free(v);
}

static void fill(struct archive_entry *en, const char *name, const struct stat *sb)
{
	archive_entry_clear(en);
	archive_entry_set_pathname(en, name);
	archive_entry_copy_stat(en, sb);
	/* Numeric owners only: a name lookup inside the sandbox means nothing on the host. */
	archive_entry_set_uname(en, NULL);
	archive_entry_set_gname(en, NULL);
	/* mtime is what travels; atime (which the packing itself changes) and ctime would only
	 * make two packs of the same tree differ. */
	archive_entry_unset_atime(en);
	archive_entry_unset_ctime(en);
	archive_entry_unset_birthtime(en);
}

static int put_file(struct pack *k, int dfd, const char *base, const char *name,
                    struct archive_entry *en, const struct stat *sb)
{
	struct archive_entry *spare = NULL;
	if (sb->st_nlink > 1) {
		archive_entry_linkify(k->links, &en, &spare);
		if (archive_entry_hardlink(en) != NULL) {
			k->st->hardlinks++;
			if (archive_write_header(k->a, en) != ARCHIVE_OK)
				return arch_err(k, "header of", name);
			return 0;
		}
	}
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat now;
	if (fd < 0 || fstat(fd, &now) != 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return sbx_err_set(k->e, SBX_ETRANSFER, err, "cannot read %s", name);
	}
	if (now.st_ino != sb->st_ino || now.st_dev != sb->st_dev || !S_ISREG(now.st_mode)) {
		close(fd);
		return sbx_err_set(k->e, SBX_ETRANSFER, 0, "%s changed while it was packed", name);
	}
	if (archive_write_header(k->a, en) != ARCHIVE_OK) {
		close(fd);
		return arch_err(k, "header of", name);
	}
	/* Exactly the size the header promised: a file that grows or shrinks meanwhile is
	 * refused rather than packed inconsistently. */
	int64_t left = sb->st_size;
	while (left > 0) {
		ssize_t n = read(fd, k->buf, left < 65536 ? (size_t)left : 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : 0;
			close(fd);
			return sbx_err_set(k->e, SBX_ETRANSFER, err,
			                   "%s shrank while it was packed", name);
		}
		if (archive_write_data(k->a, k->buf, (size_t)n) != n) {
			close(fd);
			return arch_err(k, "data of", name);
		}
		left -= n;
		k->st->data_bytes += (uint64_t)n;
	}
	close(fd);
	k->st->files++;
	return 0;
}

static int walk(struct pack *k, int dfd, const char *rel, int depth, struct archive_entry *en);

/* One entry of directory dfd, named base, whose member name is name. */
static int put(struct pack *k, int dfd, const char *base, const char *name, int depth,
               struct archive_entry *en)
{
	if (excluded(k, name)) {
		k->st->excluded++;
		return 0;
	}
	struct stat sb;
	if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return sbx_err_set(k->e, SBX_ETRANSFER, errno, "cannot stat %s", name);
	fill(en, name, &sb);
	if (S_ISREG(sb.st_mode))
		return put_file(k, dfd, base, name, en, &sb);
	if (S_ISLNK(sb.st_mode)) {
		/* Link targets can be as long as a path; read until it fits. */
		size_t cap = 256;
		char *t = NULL;
		ssize_t n;
		for (;;) {
			char *nt = realloc(t, cap);
			if (nt == NULL) {
				free(t);
				return sbx_err_set(k->e, SBX_ETRANSFER, ENOMEM, "link %s", name);
			}
			t = nt;
			n = readlinkat(dfd, base, t, cap);
			if (n < 0 || (size_t)n < cap)
				break;
			cap *= 2;
		}
		if (n < 0) {
			free(t);
			return sbx_err_set(k->e, SBX_ETRANSFER, errno, "cannot read link %s", name);
		}
		t[n] = '\0';
		archive_entry_set_symlink(en, t);
		free(t);
		k->st->symlinks++;
		return archive_write_header(k->a, en) == ARCHIVE_OK
		               ? 0
		               : arch_err(k, "header of", name);
	}
	if (S_ISDIR(sb.st_mode)) {
		if (archive_write_header(k->a, en) != ARCHIVE_OK)
			return arch_err(k, "header of", name);
		k->st->dirs++;
		int sub = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return sbx_err_set(k->e, SBX_ETRANSFER, errno, "cannot open %s", name);
		struct stat now;
		if (fstat(sub, &now) != 0 || now.st_ino != sb.st_ino || now.st_dev != sb.st_dev) {
			close(sub);
			return sbx_err_set(k->e, SBX_ETRANSFER, 0, "%s changed while it was packed",
			                   name);
		}
		int rc = walk(k, sub, name, depth + 1, en);
		close(sub);
		return rc;
	}
	/* FIFOs, devices, sockets: never packed. */
	if (k->o->skip_unsafe) {
		k->st->skipped++;
		return 0;
	}
	return sbx_err_set(k->e, SBX_ETRANSFER, 0, "%s is a %s: refused (skip_unsafe skips it)",
	                   name,
	                   S_ISFIFO(sb.st_mode)   ? "FIFO"
	                   : S_ISSOCK(sb.st_mode) ? "socket"
	                   : S_ISCHR(sb.st_mode)  ? "character device"
	                   : S_ISBLK(sb.st_mode)  ? "block device"
	                                          : "special file");
}

static int walk(struct pack *k, int dfd, const char *rel, int depth, struct archive_entry *en)
{
	char **names = list_dir(dfd, k->e, rel);
	if (names == NULL)
		return -1;
	int rc = 0;
	for (char **p = names; rc == 0 && *p != NULL; p++) {
		if (depth == 0 && k->o->names != NULL) {
			int wanted = 0;
			for (const char *const *w = k->o->names; *w != NULL; w++)
				wanted |= strcmp(*w, *p) == 0;
			if (!wanted)
				continue;
		}
		size_t rl = strlen(rel), nl = strlen(*p);
		char *name = malloc(rl + nl + 2);
		if (name == NULL) {
			rc = sbx_err_set(k->e, SBX_ETRANSFER, ENOMEM, "name");
			break;
		}
		if (rl > 0) {
			memcpy(name, rel, rl);
			name[rl] = '/';
			memcpy(name + rl + 1, *p, nl + 1);
		} else {
			memcpy(name, *p, nl + 1);
		}
		rc = put(k, dfd, *p, name, depth, en);
		free(name);
	}
	free_list(names);
	return rc;
}

int sbx_pack(const struct sbx_pack_opts *o, struct sbx_pack_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	struct pack k = {.o = o, .st = st, .e = e};
	sbx_sha256_init(&k.sha);
	k.a = archive_write_new();
	k.links = archive_entry_linkresolver_new();
	struct archive_entry *en = archive_entry_new();
	k.buf = malloc(65536);
	int rc = -1;
	if (k.a == NULL || k.links == NULL || en == NULL || k.buf == NULL) {
		sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "packing");
		goto out;
	}
	archive_entry_linkresolver_set_strategy(k.links, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
	/* Names are bytes, not text: hdrcharset=BINARY keeps non-UTF-8 names exact (this
	 * libarchive has no iconv to translate them, and translating would change them). */
	if (archive_write_set_format_pax(k.a) != ARCHIVE_OK ||
	    archive_write_set_format_option(k.a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(k.a, 65536) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(k.a, 512) != ARCHIVE_OK ||
	    archive_write_open2(k.a, &k, NULL, out_write, NULL, NULL) != ARCHIVE_OK) {
		arch_err(&k, "opening", "the archive");
		goto out;
	}
	if (walk(&k, o->root_fd, "", 0, en) != 0)
		goto out;
	if (archive_write_close(k.a) != ARCHIVE_OK) {
		arch_err(&k, "closing", "the archive");
		goto out;
	}
	sbx_sha256_final(&k.sha, st->sha256);
	rc = 0;
out:
	free(k.buf);
	if (en != NULL)
		archive_entry_free(en);
	if (k.links != NULL)
		archive_entry_linkresolver_free(k.links);
	if (k.a != NULL)
		archive_write_free(k.a);
	return rc;
}
