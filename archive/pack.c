/* The pack walk: directory fds all the way down (openat with O_NOFOLLOW, fstatat without
 * following), one stream buffer that hashes and writes, fed by libarchive's pax writer
 * (unblocked) and, for plain members, by archive/pack_hdr.c's identical headers. A regular
 * file is opened, then checked to be the same inode the walk saw, so a file swapped for a
 * link between the look and the read is refused instead of followed. Files with holes give
 * libarchive their data map (SEEK_DATA/SEEK_HOLE) and travel as GNU sparse 1.0 members. */
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
#include "mapread.h"
#include "member.h"
#include "pack_hdr.h"

/* The stream buffer: what is hashed and written at once. 256 KiB rather than 64 halves the
 * wake-ups of the reader at the pipe's other end (the agent's relay: 12,600 context switches
 * of the agent per 1 GiB download against 6,400); a download of 50,000 x 1 KiB files 0.615 s
 * -> 0.547 s median, 1 GiB unchanged (docs/transfers.md). */
#define PACK_BUF (256 * 1024)
/* A plain file's data this large is read through a mapping when the options allow it
 * (archive/mapread.h). */
#define MAP_MIN (1 << 20)
/* A file with more data regions than this is packed dense: the map itself would be large. */
#define PACK_MAX_EXTENTS 65536

struct pack {
	const struct sbx_pack_opts *o;
	struct sbx_pack_stats *st;
	struct sbx_err *e;
	struct archive *a;
	struct archive_entry_linkresolver *links;
	struct sbx_exclude *ex; /* o->exclude, built once */
	struct sbx_sha256 sha;
	int out_failed;
	int out_errno;
	char *buf;         /* file data */
	char *zeros;       /* PACK_BUF zero bytes: a hole fed to the writer, which stores none */
	unsigned char *ob; /* PACK_BUF bytes of stream not yet written */
	size_t on;
	size_t hashed; /* ob[0, hashed) is hashed already (a mapped read hashes as it copies) */
	struct sbx_mapread map;
	struct extent {
		int64_t off, len;
	} * ext; /* the data regions of the file being packed */
	size_t next, cap;
};

/* The stream so far, hashed and written to out_fd. */
static int flush_out(struct pack *k)
{
	const unsigned char *b = k->ob;
	size_t left = k->on;
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
	sbx_sha256_update(&k->sha, k->ob + k->hashed, k->on - k->hashed);
	k->st->archive_bytes += k->on;
	k->on = k->hashed = 0;
	return 0;
}

/* Room for n (at most PACK_BUF) more bytes at the end of the buffer, written out first when
 * short of it: the caller fills them in place and commits what it filled (k->on += used). */
static unsigned char *room(struct pack *k, size_t n)
{
	if (k->out_failed || (PACK_BUF - k->on < n && flush_out(k) != 0))
		return NULL;
	return k->ob + k->on;
}

/* Every byte of the stream goes through the buffer, in order: libarchive's (it writes
 * unblocked) copied in here, the plain headers and data written in place (room). */
static int emit(struct pack *k, const void *p, size_t n)
{
	const unsigned char *b = p;
	while (n > 0) {
		unsigned char *to = room(k, 1);
		if (to == NULL)
			return -1;
		size_t c = PACK_BUF - k->on < n ? PACK_BUF - k->on : n;
		memcpy(to, b, c);
		k->on += c;
		b += c;
		n -= c;
	}
	return 0;
}

static la_ssize_t out_write(struct archive *a, void *ctx, const void *p, size_t n)
{
	(void)a;
	return emit(ctx, p, n) == 0 ? (la_ssize_t)n : -1;
}

/* A member's headers without libarchive when it is plain (archive/pack_hdr.h): 1 when
 * written, 0 when libarchive is to write them, -1 when the stream failed. */
static int plain_header(struct pack *k, const char *name, const char *target, const struct stat *sb)
{
	if (k->o->libarchive_only)
		return 0;
	/* Written in place; left uncommitted when the member is not plain after all. */
	unsigned char *h = room(k, SBX_PACK_HDR_MAX);
	if (h == NULL)
		return -1;
	size_t n = sbx_pack_hdr(name, target, sb, h);
	k->on += n;
	return n > 0;
}

static int arch_err(struct pack *k, const char *what, const char *name)
{
	if (k->out_failed)
		return sbx_err_set(k->e, SBX_EUNAVAILABLE, k->out_errno, "writing the archive");
	return sbx_err_set(k->e, SBX_ETRANSFER, 0, "%s %s: %s", what, name,
	                   archive_error_string(k->a) ? archive_error_string(k->a) : "failed");
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

/* The data regions of fd (size bytes) into k->ext by SEEK_DATA/SEEK_HOLE. Returns the number
 * of regions when the file has holes, 0 when it is dense or the filesystem cannot tell (then it
 * is packed as before), or more than PACK_MAX_EXTENTS regions. A file of one hole only gives
 * 0 regions and 1 is returned with k->next = 0 ("sparse, no data"). */
static size_t data_map(struct pack *k, int fd, const struct stat *sb)
{
	k->next = 0;
	/* Blocks that cover the size: no room for a hole (and nothing to ask). */
	if (sb->st_size == 0 || (int64_t)sb->st_blocks * 512 >= (int64_t)sb->st_size)
		return 0;
	off_t pos = 0;
	while (pos < sb->st_size) {
		off_t d = lseek(fd, pos, SEEK_DATA);
		if (d < 0) {
			if (errno == ENXIO)
				break; /* only a hole from pos to the end */
			return 0;      /* EINVAL: no hole support here */
		}
		if (d >= sb->st_size)
			break;
		off_t h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return 0;
		if (h > sb->st_size)
			h = sb->st_size; /* the file grew meanwhile: the size seen is what goes */
		if (h <= d)
			return 0;
		if (k->next == k->cap) {
			size_t n = k->cap ? k->cap * 2 : 64;
			if (n > PACK_MAX_EXTENTS)
				return 0;
			struct extent *x = realloc(k->ext, n * sizeof *x);
			if (x == NULL)
				return 0;
			k->ext = x;
			k->cap = n;
		}
		k->ext[k->next++] = (struct extent){.off = d, .len = h - d};
		pos = h;
	}
	if (k->next == 1 && k->ext[0].off == 0 && k->ext[0].len == sb->st_size)
		return 0; /* no hole after all */
	return k->next > 0 ? k->next : 1;
}

/* Feeds n bytes of a hole to the writer, which skips them (they are a hole in its map). */
static int feed_hole(struct pack *k, int64_t n, const char *name)
{
	while (n > 0) {
		size_t c = n < PACK_BUF ? (size_t)n : PACK_BUF;
		if (archive_write_data(k->a, k->zeros, c) != (la_ssize_t)c)
			return arch_err(k, "data of", name);
		n -= (int64_t)c;
	}
	return 0;
}

static int shrank(struct pack *k, int err, const char *name)
{
	return sbx_err_set(k->e, SBX_ETRANSFER, err, "%s shrank while it was packed", name);
}

/* Raw data through the mapping, hashed as it is copied into the buffer: *len left when the
 * mapping could not be made (the caller reads the rest), 0 when done, -1 when the file shrank
 * or the stream failed. */
static int copy_mapped(struct pack *k, int fd, int64_t *off, int64_t *len, const char *name)
{
	while (*len > 0) {
		unsigned char *to = room(k, 1);
		if (to == NULL)
			return arch_err(k, "data of", name);
		size_t c = PACK_BUF - k->on;
		if ((uint64_t)*len < c)
			c = (size_t)*len;
		/* What precedes in the buffer is hashed first: the stream is hashed in order. */
		sbx_sha256_update(&k->sha, k->ob + k->hashed, k->on - k->hashed);
		k->hashed = k->on;
		if (sbx_mapread_copy(&k->map, fd, (off_t)*off, c, &k->sha, to) != 0)
			return errno == ENODATA ? shrank(k, 0, name) : 0;
		k->on += c;
		k->hashed = k->on;
		*off += (int64_t)c;
		*len -= (int64_t)c;
		k->st->data_bytes += c;
	}
	return 0;
}

/* Copies len bytes at off; exactly those: a file that shrinks meanwhile is refused rather than
 * packed inconsistently. */
static int copy_data(struct pack *k, int fd, int64_t off, int64_t len, int raw, const char *name)
{
	if (raw && k->map.on && len >= MAP_MIN && copy_mapped(k, fd, &off, &len, name) != 0)
		return -1;
	while (len > 0) {
		/* Raw data is read straight into the stream buffer (no copy), the rest into buf
		 * for libarchive. */
		unsigned char *to = raw ? room(k, 1) : (unsigned char *)k->buf;
		if (to == NULL)
			return arch_err(k, "data of", name);
		size_t cap = raw ? PACK_BUF - k->on : PACK_BUF;
		ssize_t n = pread(fd, to, (uint64_t)len < cap ? (size_t)len : cap, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return shrank(k, n < 0 ? errno : 0, name);
		if (raw)
			k->on += (size_t)n;
		else if (archive_write_data(k->a, k->buf, (size_t)n) != n)
			return arch_err(k, "data of", name);
		off += n;
		len -= n;
		k->st->data_bytes += (uint64_t)n;
	}
	return 0;
}

/* A regular file (sb: its lstat). A plain one (one link, no holes) goes out with its headers
 * and data written here; any other through libarchive (en). */
static int put_file(struct pack *k, int dfd, const char *base, const char *name,
                    struct archive_entry *en, const struct stat *sb)
{
	struct archive_entry *spare = NULL;
	if (sb->st_nlink > 1) {
		fill(en, name, sb);
		archive_entry_linkify(k->links, &en, &spare);
		if (archive_entry_hardlink(en) != NULL) {
			k->st->hardlinks++;
			if (archive_write_header(k->a, en) != ARCHIVE_OK ||
			    archive_write_finish_entry(k->a) != ARCHIVE_OK)
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
	int sparse = data_map(k, fd, sb) > 0;
	int rc = -1;
	int plain = !sparse && sb->st_nlink == 1 ? plain_header(k, name, NULL, sb) : 0;
	if (plain < 0) {
		arch_err(k, "header of", name);
		goto out;
	}
	if (plain) {
		size_t pad = (size_t)(-sb->st_size & 511);
		unsigned char *z = NULL;
		if (copy_data(k, fd, 0, sb->st_size, 1, name) != 0 || (z = room(k, pad)) == NULL) {
			if (k->out_failed)
				arch_err(k, "data of", name);
			goto out;
		}
		memset(z, 0, pad);
		k->on += pad;
		k->st->files++;
		rc = 0;
		goto out;
	}
	if (sb->st_nlink == 1)
		fill(en, name, sb);
	for (size_t i = 0; sparse && i < k->next; i++)
		archive_entry_sparse_add_entry(en, k->ext[i].off, k->ext[i].len);
	if (sparse && k->next == 0) /* all hole: the map says so with one empty region */
		archive_entry_sparse_add_entry(en, sb->st_size, 0);
	if (archive_write_header(k->a, en) != ARCHIVE_OK) {
		arch_err(k, "header of", name);
		goto out;
	}
	if (!sparse) {
		if (copy_data(k, fd, 0, sb->st_size, 0, name) != 0)
			goto out;
	} else {
		/* The writer takes the whole file, holes included, and stores only the data
		 * regions; it emits the map with the first write, so there is always one. */
		if (archive_write_data(k->a, k->zeros, 0) != 0) {
			arch_err(k, "data of", name);
			goto out;
		}
		int64_t pos = 0;
		for (size_t i = 0; i < k->next; i++) {
			if (feed_hole(k, k->ext[i].off - pos, name) != 0 ||
			    copy_data(k, fd, k->ext[i].off, k->ext[i].len, 0, name) != 0)
				goto out;
			pos = k->ext[i].off + k->ext[i].len;
		}
	}
	/* Its padding out now: what follows may not come through libarchive. */
	if (archive_write_finish_entry(k->a) != ARCHIVE_OK) {
		arch_err(k, "data of", name);
		goto out;
	}
	k->st->files++;
	rc = 0;
out:
	sbx_mapread_unmap(&k->map);
	close(fd);
	return rc;
}

static int walk(struct pack *k, int dfd, const char *rel, int depth, struct archive_entry *en);

/* One entry of directory dfd, named base, whose member name is name. */
static int put(struct pack *k, int dfd, const char *base, const char *name, int depth,
               struct archive_entry *en)
{
	if (sbx_exclude_test(k->ex, name)) {
		k->st->excluded++;
		return 0;
	}
	struct stat sb;
	if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return sbx_err_set(k->e, SBX_ETRANSFER, errno, "cannot stat %s", name);
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
		/* A symlink with more names (a hard link to it) goes out once; its other names
		 * as hard links to the first, as GNU tar writes them. */
		if (sb.st_nlink > 1) {
			struct archive_entry *spare = NULL;
			fill(en, name, &sb);
			archive_entry_set_symlink(en, t);
			archive_entry_linkify(k->links, &en, &spare);
			if (archive_entry_hardlink(en) != NULL) {
				free(t);
				k->st->hardlinks++;
				return archive_write_header(k->a, en) == ARCHIVE_OK &&
				                       archive_write_finish_entry(k->a) ==
				                               ARCHIVE_OK
				               ? 0
				               : arch_err(k, "header of", name);
			}
		}
		k->st->symlinks++;
		int plain = plain_header(k, name, t, &sb);
		if (plain == 0) {
			fill(en, name, &sb);
			archive_entry_set_symlink(en, t);
		}
		free(t);
		return plain > 0 || (plain == 0 && archive_write_header(k->a, en) == ARCHIVE_OK &&
		                     archive_write_finish_entry(k->a) == ARCHIVE_OK)
		               ? 0
		               : arch_err(k, "header of", name);
	}
	if (S_ISDIR(sb.st_mode)) {
		int plain = plain_header(k, name, NULL, &sb);
		if (plain == 0)
			fill(en, name, &sb);
		if (plain < 0 || (plain == 0 && (archive_write_header(k->a, en) != ARCHIVE_OK ||
		                                 archive_write_finish_entry(k->a) != ARCHIVE_OK)))
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

/* as_name: one plain top-level entry (looked up directly, never through a path), and a
 * member name that stays under the root, stored normalized in *out (malloc'd). */
static int check_as_name(const struct sbx_pack_opts *o, char **out, struct sbx_err *e)
{
	const char *n = o->names != NULL ? o->names[0] : NULL;
	if (n == NULL || o->names[1] != NULL)
		return sbx_err_set(e, SBX_EUSAGE, 0, "pack: as_name needs exactly one name");
	if (n[0] == '\0' || strchr(n, '/') != NULL || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0,
		                   "pack: with as_name the name must be one path component");
	size_t len = strlen(o->as_name);
	const char *why;
	if ((*out = malloc(len + 1)) == NULL)
		return sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "packing");
	if (sbx_member_name(o->as_name, *out, len + 1, &why) != 0) {
		free(*out);
		*out = NULL;
		return sbx_err_set(e, SBX_EUSAGE, 0, "pack: as_name: %s", why);
	}
	return 0;
}

int sbx_pack(const struct sbx_pack_opts *o, struct sbx_pack_stats *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	struct pack k = {.o = o, .st = st, .e = e};
	sbx_sha256_init(&k.sha);
	/* Mapped reads save anything only where the hash and the copy fuse (the SHA
	 * extensions); a begin that fails leaves k.map off (on = 0): pread as before. */
	k.map.fd = -1;
	if (o->map_files && sbx_sha256_fused_copy(&k.sha))
		sbx_mapread_begin(&k.map);
	k.a = archive_write_new();
	k.links = archive_entry_linkresolver_new();
	struct archive_entry *en = archive_entry_new();
	k.buf = malloc(PACK_BUF);
	k.zeros = calloc(1, PACK_BUF);
	k.ob = malloc(PACK_BUF);
	char *as = NULL;
	int rc = -1;
	if (o->as_name != NULL && check_as_name(o, &as, e) != 0)
		goto out;
	if (sbx_exclude_new(&k.ex, o->exclude, e) != 0)
		goto out;
	if (k.a == NULL || k.links == NULL || en == NULL || k.buf == NULL || k.zeros == NULL ||
	    k.ob == NULL) {
		sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "packing");
		goto out;
	}
	archive_entry_linkresolver_set_strategy(k.links, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
	/* Names are bytes, not text: hdrcharset=BINARY keeps non-UTF-8 names exact (this
	 * libarchive has no iconv to translate them, and translating would change them). */
	if (archive_write_set_format_pax(k.a) != ARCHIVE_OK ||
	    archive_write_set_format_option(k.a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(k.a, 0) != ARCHIVE_OK || /* emit() blocks */
	    archive_write_set_bytes_in_last_block(k.a, 512) != ARCHIVE_OK ||
	    archive_write_open2(k.a, &k, NULL, out_write, NULL, NULL) != ARCHIVE_OK) {
		arch_err(&k, "opening", "the archive");
		goto out;
	}
	if (as != NULL ? put(&k, o->root_fd, o->names[0], as, 0, en) != 0
	               : walk(&k, o->root_fd, "", 0, en) != 0)
		goto out;
	if (archive_write_close(k.a) != ARCHIVE_OK || flush_out(&k) != 0) {
		arch_err(&k, "closing", "the archive");
		goto out;
	}
	sbx_sha256_final(&k.sha, st->sha256);
	rc = 0;
out:
	sbx_mapread_end(&k.map);
	sbx_exclude_free(k.ex);
	free(as);
	free(k.ext);
	free(k.zeros);
	free(k.buf);
	if (en != NULL)
		archive_entry_free(en);
	if (k.links != NULL)
		archive_entry_linkresolver_free(k.links);
	/* After a failure libarchive's free still closes, through emit(): into the buffer, which
	 * is then dropped unwritten. */
	if (k.a != NULL)
		archive_write_free(k.a);
	free(k.ob);
	return rc;
}
