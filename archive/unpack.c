/* The unpack loop: libarchive's tar reader over a read callback that hashes (and tees) every
 * byte, each entry turned into a struct sbx_put_member for tree_put, file data written block by
 * block at its offset (so holes stay holes). libarchive reads any unknown tar type flag as a
 * regular file (POSIX says so); the bytes of each entry's headers are kept until the entry is
 * returned, so its real type flag is read from them and unknown types are refused instead. */
#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "member.h"
#include "wbehind.h"

#define CHUNK (256 * 1024)
/* libarchive nests at most 32 extension headers; the walks here follow a few more so that it
 * is libarchive that refuses. */
#define MAX_EXT_HEADERS 64
#define NO_PIN UINT64_MAX
/* Members at least this big have their data written by a second thread (archive/wbehind.h). */
#define WB_MIN (1 << 20)

struct unpack {
	const struct sbx_unpack_opts *o;
	struct sbx_unpack_stats *st;
	struct sbx_err *e;
	struct archive *a;
	struct sbx_sha256 sha;
	/* The window: stream bytes [base, base + len) that libarchive may still parse, or that
	 * an entry's header walk needs (everything from pin on). */
	unsigned char *win;
	unsigned char *retired; /* the window before it last grew: libarchive may still read the
	                           block it was given there until it asks for the next */
	size_t len, cap;
	uint64_t base, pin;
	uint64_t
	        given; /* the stream up to here was handed to libarchive; the rest was read ahead */
	int in_eof;
	int in_errno, tee_errno; /* a failed read (or tee write), for SBX_EUNAVAILABLE */
	int in_failed, tee_failed;
	struct sbx_wb *wb; /* made for the first big member; NULL: write here */
	int wb_tried;
	int only_seen; /* o->only: the one member was placed */
};

static int tee(struct unpack *u, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(u->o->tee_fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			u->tee_failed = 1;
			u->tee_errno = w < 0 ? errno : EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads up to CHUNK bytes from in_fd to the end of the window, hashing and teeing them.
 * Returns the count, 0 at EOF, -1 on failure. */
static ssize_t fill(struct unpack *u)
{
	if (u->in_eof)
		return 0;
	if (u->cap - u->len < CHUNK) {
		/* Not realloc: a read ahead (prescan) grows the window while libarchive holds a
		 * block of it. */
		size_t n = u->len + CHUNK;
		unsigned char *w = malloc(n);
		if (w == NULL) {
			u->in_failed = 1;
			u->in_errno = ENOMEM;
			return -1;
		}
		if (u->len > 0)
			memcpy(w, u->win, u->len);
		/* Only the window of the last in_read was handed out. */
		if (u->retired == NULL)
			u->retired = u->win;
		else
			free(u->win);
		u->win = w;
		u->cap = n;
	}
	ssize_t n;
	do
		n = read(u->o->in_fd, u->win + u->len, CHUNK);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		u->in_failed = 1;
		u->in_errno = errno;
		return -1;
	}
	if (n == 0) {
		u->in_eof = 1;
		return 0;
	}
	sbx_sha256_update(&u->sha, u->win + u->len, (size_t)n);
	if (u->o->tee_fd >= 0 && tee(u, u->win + u->len, (size_t)n) != 0)
		return -1;
	u->st->archive_bytes += (uint64_t)n;
	u->len += (size_t)n;
	return n;
}

/* libarchive's read callback. Bytes before what libarchive has consumed (and before the pin)
 * are never needed again: they leave the window. The previous block may be moved, which
 * libarchive allows: it holds on to a client block only until it asks for the next. Bytes
 * read ahead (prescan) are handed over before anything new is read. */
static la_ssize_t in_read(struct archive *a, void *ctx, const void **buf)
{
	struct unpack *u = ctx;
	free(u->retired);
	u->retired = NULL;
	la_int64_t consumed = archive_filter_bytes(a, 0);
	uint64_t keep = consumed > 0 ? (uint64_t)consumed : 0;
	if (u->pin < keep)
		keep = u->pin;
	if (keep > u->base) {
		uint64_t drop = keep - u->base;
		size_t d = drop < u->len ? (size_t)drop : u->len;
		memmove(u->win, u->win + d, u->len - d);
		u->len -= d;
		u->base += d;
	}
	if (u->given < u->base + u->len) {
		size_t at = (size_t)(u->given - u->base);
		*buf = u->win + at;
		u->given = u->base + u->len;
		return (la_ssize_t)(u->len - at);
	}
	size_t at = u->len;
	ssize_t n = fill(u);
	*buf = u->win + at;
	if (n > 0)
		u->given += (uint64_t)n;
	return n;
}

/* The window's bytes [off, off + n), or NULL when they are not all there. */
static const unsigned char *window_at(const struct unpack *u, uint64_t off, size_t n)
{
	if (off < u->base || off - u->base > u->len || u->len - (off - u->base) < n)
		return NULL;
	return u->win + (off - u->base);
}

/* A tar number field as libarchive reads it: base-256 when the top bit is set, else octal
 * after leading blanks. -1 when it does not fit. */
static int64_t tar_number(const unsigned char *p, size_t n)
{
	if (p[0] & 0x80) {
		if (p[0] != 0x80)
			return -1; /* negative, or past 2^63 */
		uint64_t v = 0;
		for (size_t i = 1; i < n; i++) {
			if (v >> 55)
				return -1;
			v = (v << 8) | p[i];
		}
		return v > INT64_MAX ? -1 : (int64_t)v;
	}
	size_t i = 0;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	int64_t v = 0;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > (INT64_MAX >> 3))
			return -1;
		v = (v << 3) | (p[i] - '0');
	}
	return v;
}

/* The type flag of the entry libarchive just returned, read from its own header block: the
 * walk starts at the entry's first header and steps over the extension headers the way
 * libarchive does ('V' has no body it reads). -1 when the headers cannot be followed. */
static int raw_type(const struct unpack *u, uint64_t off, uint64_t consumed)
{
	for (int i = 0; i < MAX_EXT_HEADERS; i++) {
		const unsigned char *h = window_at(u, off, 512);
		if (h == NULL || off + 512 > consumed)
			return -1;
		int t = h[156];
		if (t == 'V') {
			off += 512;
			continue;
		}
		if (t != 'x' && t != 'g' && t != 'X' && t != 'L' && t != 'K' && t != 'A')
			return t;
		int64_t size = tar_number(h + 124, 12);
		if (size < 0 || size > SBX_UNPACK_EXT_MAX)
			return -1;
		off += 512 + (((uint64_t)size + 511) & ~(uint64_t)511);
	}
	return -1;
}

/* Type flags with a meaning libarchive keeps (it maps them to file types itself). Everything
 * else (GNU 'M' volume continuation, 'N' rename script, any unknown letter) is refused. */
static int known_type(int t)
{
	return t == '\0' || (t >= '0' && t <= '7') || t == 'S' || t == 'D';
}

static int member_type(struct archive_entry *en)
{
	if (archive_entry_hardlink(en) != NULL)
		return 'h';
	switch (archive_entry_filetype(en)) {
	case AE_IFREG:
		return 'f';
	case AE_IFDIR:
		return 'd';
	case AE_IFLNK:
		return 'l';
	case AE_IFIFO:
		return 'p';
	case AE_IFCHR:
		return 'c';
	case AE_IFBLK:
		return 'b';
	case AE_IFSOCK:
		return 's';
	default:
		return '?';
	}
}

static const char *arch_msg(struct archive *a)
{
	const char *m = archive_error_string(a);
	return m != NULL ? m : "unreadable";
}

/* A failure of libarchive: the input or the tee when one of them failed, else the archive. */
static int arch_fail(struct unpack *u, const char *where)
{
	if (u->in_failed)
		return sbx_err_set(u->e, SBX_EUNAVAILABLE, u->in_errno,
		                   "reading the archive stream");
	if (u->tee_failed)
		return sbx_err_set(u->e, SBX_EUNAVAILABLE, u->tee_errno,
		                   "writing the archive copy");
	return sbx_err_set(u->e, SBX_ETRANSFER, 0, "archive: %s%s", arch_msg(u->a), where);
}

/* ---- the headers read ahead and bounded (SBX_UNPACK_*) ---- */

/* Reads ahead until the window holds the stream's bytes [off, off + n); NULL when the stream
 * ends (or fails) first. off is at or after the pin, so nothing there has left the window. */
static const unsigned char *ahead(struct unpack *u, uint64_t off, size_t n)
{
	while (u->base + u->len < off + n)
		if (fill(u) <= 0)
			return NULL;
	return window_at(u, off, n);
}

static int is_ext(int t)
{
	return t == 'x' || t == 'g' || t == 'X' || t == 'L' || t == 'K' || t == 'A';
}

struct ext_count {
	uint64_t offsets, sizes, other; /* GNU 0.0 records; 0.1 map pairs and SUN.holesdata */
	uint64_t acl;                   /* ACL entries (libarchive's list is quadratic to fill) */
	int gnu1;                       /* GNU.sparse.major or .minor: a map in the data */
};

static int key_is(const unsigned char *k, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(k, want, n) == 0;
}

static uint64_t count_byte(const unsigned char *p, size_t n, unsigned char c)
{
	uint64_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == c;
	return k;
}

/* ACL text: entries separated by commas or newlines. */
static uint64_t acl_entries(const unsigned char *p, size_t n)
{
	return count_byte(p, n, ',') + count_byte(p, n, '\n') + 1;
}

/* The sparse and ACL records of a pax header, parsed as libarchive's pax_header does (a
 * length, a space, KEY=VALUE, a newline); at the first malformed record it stops, as libarchive
 * does (which then warns: the entry is refused). Counts may be high, never low. */
static void pax_scan(const unsigned char *b, size_t n, struct ext_count *c)
{
	size_t pos = 0;
	while (pos < n) {
		size_t len = 0, i = pos;
		while (i < n && b[i] >= '0' && b[i] <= '9' && len <= 999999)
			len = len * 10 + (size_t)(b[i++] - '0');
		if (i >= n || b[i] != ' ' || len < i + 2 - pos || len > n - pos ||
		    b[pos + len - 1] != '\n')
			return;
		const unsigned char *k = b + i + 1, *end = b + pos + len - 1;
		const unsigned char *eq = memchr(k, '=', (size_t)(end - k));
		if (eq == NULL)
			return;
		size_t kn = (size_t)(eq - k), vn = (size_t)(end - eq - 1);
		if (key_is(k, kn, "GNU.sparse.offset"))
			c->offsets++;
		else if (key_is(k, kn, "GNU.sparse.numbytes"))
			c->sizes++;
		else if (key_is(k, kn, "GNU.sparse.map"))
			c->other += (count_byte(eq + 1, vn, ',') + 2) / 2;
		else if (key_is(k, kn, "SUN.holesdata"))
			c->other += count_byte(eq + 1, vn, ' ');
		else if (key_is(k, kn, "GNU.sparse.major") || key_is(k, kn, "GNU.sparse.minor"))
			c->gnu1 = 1;
		else if (kn > 11 && memcmp(k, "SCHILY.acl.", 11) == 0)
			c->acl += acl_entries(eq + 1, vn);
		pos += len;
	}
}

static uint64_t sparse_entries(const struct ext_count *c)
{
	return (c->offsets > c->sizes ? c->offsets : c->sizes) + c->other;
}

static int too_sparse(struct unpack *u, uint64_t nth, uint64_t n)
{
	return sbx_err_set(
	        u->e, SBX_ETRANSFER, 0,
	        "archive: entry %llu: a sparse map of %s%llu entries (the limit is %u)",
	        (unsigned long long)nth, n > SBX_UNPACK_SPARSE_MAX ? "more than " : "",
	        (unsigned long long)(n > SBX_UNPACK_SPARSE_MAX ? SBX_UNPACK_SPARSE_MAX : n),
	        SBX_UNPACK_SPARSE_MAX);
}

/* GNU sparse 1.0: the map's first line (at most 100 bytes, as libarchive reads it) is its
 * entry count. */
static int gnu1_count(struct unpack *u, uint64_t data, uint64_t nth)
{
	const unsigned char *p = NULL;
	size_t n = 0;
	while (n < 100 && (p = ahead(u, data, n + 1)) != NULL && p[n++] != '\n')
		;
	if (p == NULL || n == 0)
		return 0; /* short: libarchive says so */
	if (p[0] == '#')
		return sbx_err_set(
		        u->e, SBX_ETRANSFER, 0,
		        "archive: entry %llu: a sparse map that starts with comment lines",
		        (unsigned long long)nth);
	uint64_t k = 0;
	for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++)
		if ((k = k * 10 + (uint64_t)(p[i] - '0')) > SBX_UNPACK_SPARSE_MAX)
			return too_sparse(u, nth, k);
	return 0;
}

/* Before libarchive reads the entry whose headers start at hp (the nth): every extension
 * header's size, their total, and the sparse map are checked on the raw bytes, read ahead into
 * the window (the pin holds them; libarchive then reads them from there). 0 when libarchive
 * may go on (it reports what is malformed), -1 with *e past a bound or when reading failed. */
static int prescan(struct unpack *u, uint64_t hp, uint64_t nth)
{
	uint64_t off = hp, total = 0;
	struct ext_count c = {0};
	for (int i = 0; i < MAX_EXT_HEADERS; i++) {
		const unsigned char *h = ahead(u, off, 512);
		if (h == NULL)
			break;
		int t = h[156];
		if (t == 'V') {
			off += 512;
			continue;
		}
		if (!is_ext(t)) {
			uint64_t data = off + 512;
			if (t == 'S' && memcmp(h + 257, "ustar  \0", 8) == 0) {
				/* Old GNU: 4 entries in the header, 21 in each extension block. */
				c.other += 4;
				int more = h[482] != 0;
				while (more) {
					if (sparse_entries(&c) > SBX_UNPACK_SPARSE_MAX)
						return too_sparse(u, nth, sparse_entries(&c));
					const unsigned char *x = ahead(u, data, 512);
					if (x == NULL)
						break;
					c.other += 21;
					more = x[504] != 0;
					data += 512;
				}
			}
			if (sparse_entries(&c) > SBX_UNPACK_SPARSE_MAX)
				return too_sparse(u, nth, sparse_entries(&c));
			if (c.gnu1 && gnu1_count(u, data, nth) != 0)
				return -1;
			break;
		}
		int64_t size = tar_number(h + 124, 12);
		if (size < 0 || size > SBX_UNPACK_EXT_MAX)
			return sbx_err_set(u->e, SBX_ETRANSFER, 0,
			                   "archive: entry %llu: an extension header of %lld bytes "
			                   "(the limit is %u)",
			                   (unsigned long long)nth, (long long)size,
			                   SBX_UNPACK_EXT_MAX);
		total += (uint64_t)size;
		if (total > SBX_UNPACK_EXT_TOTAL)
			return sbx_err_set(
			        u->e, SBX_ETRANSFER, 0,
			        "archive: entry %llu: extension headers of more than %u bytes "
			        "together (the limit)",
			        (unsigned long long)nth, SBX_UNPACK_EXT_TOTAL);
		if (t == 'x' || t == 'X' || t == 'A') {
			const unsigned char *b = ahead(u, off + 512, (size_t)size);
			if (b == NULL)
				break;
			if (t == 'A')
				c.acl += acl_entries(b, (size_t)size);
			else
				pax_scan(b, (size_t)size, &c);
			if (sparse_entries(&c) > SBX_UNPACK_SPARSE_MAX)
				return too_sparse(u, nth, sparse_entries(&c));
			if (c.acl > SBX_UNPACK_ACL_MAX)
				return sbx_err_set(
				        u->e, SBX_ETRANSFER, 0,
				        "archive: entry %llu: more than %u ACL entries (the "
				        "limit)",
				        (unsigned long long)nth, SBX_UNPACK_ACL_MAX);
		}
		off += 512 + (((uint64_t)size + 511) & ~(uint64_t)511);
	}
	if (u->in_failed || u->tee_failed)
		return arch_fail(u, "");
	return 0;
}

/* Only one warning is harmless: a pax name that is not text in this (C) locale, which
 * libarchive then hands over as the bytes stored. Any other warning (malformed pax records,
 * an unknown sparse format, too many extension headers) means libarchive read the entry
 * differently from what the archive says: refused. */
static int harmless_warning(struct archive *a)
{
	const char *m = archive_error_string(a);
	return m != NULL && strstr(m, " can't be converted from ") != NULL;
}

/* Streams the entry's data into fd at the offsets libarchive gives (holes are skipped), then
 * sets the size. */
/* One data block at its offset: queued for the writer thread when there is one, else
 * written here. */
static int put_block(struct sbx_wb *wb, int fd, const char *p, size_t n, off_t at)
{
	if (wb != NULL)
		return sbx_wb_write(wb, fd, at, p, n) == 0 ? 0 : errno;
	return sbx_pwrite_all(fd, p, n, at);
}

/* The member's data blocks; *end: the end of the last block. */
static int data_blocks(struct unpack *u, struct sbx_wb *wb, int fd, int64_t size, int64_t *end,
                       const char *name)
{
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int r = archive_read_data_block(u->a, &buf, &n, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK)
			return arch_fail(u, " (reading data)");
		if (off < 0 || (uint64_t)off > (uint64_t)size || n > (uint64_t)(size - off))
			return sbx_err_set(u->e, SBX_ETRANSFER, 0,
			                   "archive: a data block of %s lies beyond its size",
			                   name);
		int err = put_block(wb, fd, buf, n, (off_t)off);
		if (err != 0)
			return sbx_err_set(u->e, SBX_ETRANSFER, err,
			                   "member %s: cannot write its data", name);
		u->st->data_bytes += n;
		if (off + (int64_t)n > *end)
			*end = off + (int64_t)n;
	}
}

static int put_data(struct unpack *u, struct archive_entry *en, int fd, const char *name)
{
	int64_t size = archive_entry_size(en);
	int64_t end = 0;
	if (size < 0)
		return sbx_err_set(u->e, SBX_ETRANSFER, 0, "archive: %s has no size", name);
	if (size >= WB_MIN && !u->wb_tried) {
		u->wb_tried = 1;
		u->wb = sbx_wb_new();
	}
	struct sbx_wb *wb = size >= WB_MIN ? u->wb : NULL;
	int rc = data_blocks(u, wb, fd, size, &end, name);
	/* Every byte written before anything else is done to the file, on every path: fd is
	 * closed after this, and its number may be reused. */
	if (wb != NULL && sbx_wb_drain(wb) != 0 && rc == 0)
		rc = sbx_err_set(u->e, SBX_ETRANSFER, errno, "member %s: cannot write its data",
		                 name);
	if (rc == 0 && end < size && ftruncate(fd, (off_t)size) != 0)
		rc = sbx_err_set(u->e, SBX_ETRANSFER, errno, "member %s: cannot set its size",
		                 name);
	return rc;
}

static unsigned readable_mode(unsigned mode, int type)
{
	mode |= 0444;
	if (type == 'd' || (mode & 0111))
		mode |= 0111;
	return mode;
}

static const char *kind_of(int type)
{
	switch (type) {
	case 'd':
		return "folder";
	case 'l':
		return "symlink";
	case 'h':
		return "hard link";
	default:
		return "special file";
	}
}

/* A file's archive (o->only): this member must be that one file, once. */
static int only_member(struct unpack *u, const struct sbx_put_member *m)
{
	size_t len = strlen(m->name);
	char *norm = malloc(len + 1);
	if (norm == NULL)
		return sbx_err_set(u->e, SBX_ETRANSFER, ENOMEM, "member %s", m->name);
	int same =
	        sbx_member_name(m->name, norm, len + 1, NULL) == 0 && strcmp(norm, u->o->only) == 0;
	free(norm);
	if (!same)
		return sbx_err_set(u->e, SBX_ETRANSFER, 0,
		                   "member %s: a file's archive may hold only the one member %s",
		                   m->name, u->o->only);
	if (m->type != 'f')
		return sbx_err_set(u->e, SBX_ETRANSFER, 0,
		                   "member %s: a %s where the file %s must be a regular file",
		                   m->name, kind_of(m->type), u->o->only);
	if (u->only_seen)
		return sbx_err_set(u->e, SBX_ETRANSFER, 0,
		                   "member %s: the archive of a file holds it a second time",
		                   m->name);
	u->only_seen = 1;
	return 0;
}

/* One entry, just returned by libarchive. */
static int put_entry(struct unpack *u, struct sbx_put *p, struct archive_entry *en, int raw)
{
	const char *name = archive_entry_pathname(en);
	struct sbx_put_member m = {
	        .name = name != NULL ? name : "",
	        .type = known_type(raw) ? member_type(en) : raw,
	        .mode = (unsigned)archive_entry_mode(en) & 07777u,
	        .uid = (long long)archive_entry_uid(en),
	        .gid = (long long)archive_entry_gid(en),
	        .mtime_sec =
	                archive_entry_mtime_is_set(en) ? (long long)archive_entry_mtime(en) : 0,
	        .mtime_nsec = archive_entry_mtime_is_set(en) ? archive_entry_mtime_nsec(en) : 0,
	};
	if (m.type == 'h')
		m.link = archive_entry_hardlink(en);
	else if (m.type == 'l')
		m.link = archive_entry_symlink(en) != NULL ? archive_entry_symlink(en) : "";
	if (u->o->readable && (m.type == 'f' || m.type == 'd'))
		m.mode = readable_mode(m.mode, m.type);
	if (u->o->only != NULL && only_member(u, &m) != 0)
		return -1;
	int fd = -1;
	if (sbx_put_begin(p, &m, &fd, u->e) != 0)
		return -1;
	switch (m.type) {
	case 'f':
		if (put_data(u, en, fd, m.name) != 0) {
			close(fd);
			return -1;
		}
		if (sbx_put_end_file(p, fd, u->e) != 0)
			return -1;
		u->st->files++;
		break;
	case 'd':
		u->st->dirs += !sbx_member_is_root(m.name);
		break;
	case 'l':
		u->st->symlinks++;
		break;
	default:
		u->st->hardlinks++;
		break;
	}
	return 0;
}

/* The end: libarchive stopped at a block of zeros, or at the end of the input on a block
 * boundary (some writers omit the marker; a cut stream looks the same). Only two zero blocks
 * right after the last entry count as the end. */
static int check_end(struct unpack *u, uint64_t hp)
{
	la_int64_t c = archive_filter_bytes(u->a, 0);
	uint64_t consumed = c > 0 ? (uint64_t)c : 0;
	const unsigned char *z = consumed >= 1024 ? window_at(u, consumed - 1024, 1024) : NULL;
	int zero = z != NULL && consumed - 1024 >= hp;
	for (size_t i = 0; zero && i < 1024; i++)
		zero = z[i] == 0;
	if (!zero)
		return sbx_err_set(u->e, SBX_ETRANSFER, 0,
		                   "archive: truncated (no end-of-archive marker)");
	return 0;
}

/* Reads in_fd to its end, hashing and teeing: the digest covers what the sender sent. */
static int drain(struct unpack *u)
{
	for (;;) {
		u->len = 0;
		u->base = 0;
		ssize_t n = fill(u);
		if (n == 0)
			return 0;
		if (n < 0)
			return arch_fail(u, "");
	}
}

static int run(struct unpack *u, struct sbx_put *p)
{
	struct archive *a = u->a;
	if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_set_format_option(a, "tar", "mac-ext", NULL) != ARCHIVE_OK ||
	    archive_read_open(a, u, NULL, in_read, NULL) != ARCHIVE_OK)
		return arch_fail(u, "");
	uint64_t count = 0;
	for (;;) {
		/* Skip what is left of the previous entry first, so the pin marks exactly where
		 * the next entry's headers begin. */
		if (count > 0 && archive_read_data_skip(a) != ARCHIVE_OK)
			return arch_fail(u, "");
		la_int64_t c = archive_filter_bytes(a, 0);
		u->pin = c > 0 ? (uint64_t)c : 0;
		if (prescan(u, u->pin, count + 1) != 0)
			return -1;
		struct archive_entry *en;
		int r = archive_read_next_header(a, &en);
		uint64_t hp = u->pin;
		if (r == ARCHIVE_EOF) {
			if (check_end(u, hp) != 0)
				return -1;
			break;
		}
		if (r != ARCHIVE_OK && !(r == ARCHIVE_WARN && harmless_warning(a)))
			return arch_fail(u, "");
		if ((uint64_t)archive_read_header_position(a) != hp)
			return sbx_err_set(
			        u->e, SBX_ETRANSFER, 0,
			        "archive: the entry's header is not where it was expected");
		c = archive_filter_bytes(a, 0);
		int raw = raw_type(u, hp, c > 0 ? (uint64_t)c : 0);
		u->pin = NO_PIN;
		if (raw < 0)
			return sbx_err_set(u->e, SBX_ETRANSFER, 0,
			                   "archive: the headers of entry %llu cannot be followed",
			                   (unsigned long long)count + 1);
		if (u->o->max_members > 0 && count >= u->o->max_members)
			return sbx_err_set(u->e, SBX_ETRANSFER, 0,
			                   "archive: more than %llu members",
			                   (unsigned long long)u->o->max_members);
		count++;
		if (put_entry(u, p, en, raw) != 0)
			return -1;
	}
	if (drain(u) != 0)
		return -1;
	if (u->o->only != NULL && !u->only_seen)
		return sbx_err_set(u->e, SBX_ETRANSFER, 0,
		                   "archive: no member %s (the archive of a file holds that file)",
		                   u->o->only);
	return sbx_put_finish(p, u->e);
}

int sbx_unpack(const struct sbx_unpack_opts *o, struct sbx_unpack_stats *st, struct sbx_err *e)
{
	struct sbx_unpack_stats local;
	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof *st);
	if (o == NULL || o->in_fd < 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "sbx_unpack: no input");
	struct unpack u = {.o = o, .st = st, .e = e, .pin = NO_PIN};
	sbx_sha256_init(&u.sha);
	struct sbx_put *p = NULL;
	if (sbx_put_open(&p, o->root_fd, o->mode, o->force_walk, e) != 0)
		return -1;
	/* libarchive turns pax names that are not marked BINARY from UTF-8 into the current
	 * locale's charset, and in a UTF-8 locale normalizes them to NFC. In the C locale that
	 * conversion fails for any non-ASCII byte and the stored bytes are used as they are:
	 * names arrive exactly as archived. uselocale is per thread: the caller's is restored. */
	locale_t c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	locale_t old = c_loc != (locale_t)0 ? uselocale(c_loc) : (locale_t)0;
	int rc = -1;
	u.a = archive_read_new();
	if (u.a == NULL)
		sbx_err_set(e, SBX_ETRANSFER, ENOMEM, "archive: cannot start reading");
	else
		rc = run(&u, p);
	if (u.a != NULL)
		archive_read_free(u.a);
	if (old != (locale_t)0)
		uselocale(old);
	if (c_loc != (locale_t)0)
		freelocale(c_loc);
	st->owners_kept = sbx_put_owners_kept(p);
	sbx_put_free(p);
	sbx_wb_free(u.wb);
	free(u.win);
	free(u.retired);
	sbx_sha256_final(&u.sha, st->sha256);
	return rc;
}
