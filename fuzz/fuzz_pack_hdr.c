/* libFuzzer target, differential: every header archive/pack_hdr.c writes must be byte for byte
 * what libarchive's pax writer (hdrcharset=BINARY, as archive/pack.c sets it) writes for the
 * same member; the run traps when they differ or when libarchive refuses a member pack_hdr took.
 * Input: a type byte (regular, folder, symlink), uid, gid, size, mtime seconds and nanoseconds,
 * permission bits, then the name and the link target separated by a NUL. */
#include <archive.h>
#include <archive_entry.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pack_hdr.h"

struct sink {
	unsigned char buf[4096];
	size_t len;
	int done; /* the headers are compared: the rest is not kept */
};

static la_ssize_t collect(struct archive *a, void *ctx, const void *p, size_t n)
{
	(void)a;
	struct sink *s = ctx;
	if (s->done)
		return (la_ssize_t)n;
	if (n > sizeof s->buf - s->len)
		abort();
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return (la_ssize_t)n;
}

static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i<n && * left> 0; i++, (*p)++, (*left)--)
		v |= (uint64_t) * *p << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t left = size;
	unsigned kind = (unsigned)take(&p, &left, 1) % 3;
	struct stat st;
	memset(&st, 0, sizeof st);
	/* Values around every limit pack_hdr checks. */
	st.st_uid = (uid_t)(take(&p, &left, 4) % (1u << 19));
	st.st_gid = (gid_t)(take(&p, &left, 4) % (1u << 19));
	uint64_t sz = take(&p, &left, 5) % ((uint64_t)1 << 34);
	int64_t sec = (int64_t)(take(&p, &left, 5) % ((uint64_t)1 << 33)) - ((int64_t)1 << 31);
	long nsec = (long)(take(&p, &left, 4) % 1000000000u);
	unsigned perm = (unsigned)take(&p, &left, 2) & 07777;
	st.st_mode = (kind == 0 ? S_IFREG : kind == 1 ? S_IFDIR : S_IFLNK) | perm;
	st.st_size = kind == 0 ? (off_t)sz : 0;
	st.st_mtim.tv_sec = sec;
	st.st_mtim.tv_nsec = nsec;
	char name[256], target[256];
	size_t n = 0;
	while (left > 0 && *p != 0 && n < sizeof name - 1)
		name[n++] = (char)*p++, left--;
	name[n] = '\0';
	if (left > 0)
		p++, left--;
	size_t t = 0;
	while (left > 0 && *p != 0 && t < sizeof target - 1)
		target[t++] = (char)*p++, left--;
	target[t] = '\0';
	if (n == 0 || (kind == 2 && t == 0))
		return 0;

	unsigned char mine[SBX_PACK_HDR_MAX];
	size_t got = sbx_pack_hdr(name, kind == 2 ? target : NULL, &st, mine);
	if (got == 0)
		return 0; /* libarchive writes that one */

	struct sink s = {.len = 0};
	struct archive *a = archive_write_new();
	struct archive_entry *en = archive_entry_new();
	if (a == NULL || en == NULL || archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open2(a, &s, NULL, collect, NULL, NULL) != ARCHIVE_OK)
		abort();
	archive_entry_set_pathname(en, name);
	archive_entry_copy_stat(en, &st);
	archive_entry_set_uname(en, NULL);
	archive_entry_set_gname(en, NULL);
	archive_entry_unset_atime(en);
	archive_entry_unset_ctime(en);
	archive_entry_unset_birthtime(en);
	if (kind == 2)
		archive_entry_set_symlink(en, target);
	if (archive_write_header(a, en) != ARCHIVE_OK)
		abort(); /* pack_hdr wrote a member libarchive refuses */
	if (s.len != got || memcmp(s.buf, mine, got) != 0)
		abort();
	s.done = 1; /* closing pads out the member's data, never written here */
	archive_entry_free(en);
	archive_write_free(a);
	return 0;
}
