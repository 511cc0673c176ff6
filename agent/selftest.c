/* The agent's self-test: a pax archive written in memory and read back field by field (set-id
 * mode, symlink, hard link, a name longer than ustar's 100 bytes, numeric owners, mtime), and
 * SHA-256 / HMAC-SHA256 known-answer vectors (FIPS 180-2, RFC 4231). */
#include "selftest.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../shared/digest.h"

struct member {
	const char *name;
	mode_t type; /* AE_IFREG, AE_IFLNK; a hard link is AE_IFREG with hardlink set */
	mode_t perm; /* permission and set-id bits */
	const char *data;
	const char *symlink;
	const char *hardlink;
};

#define LONG_DIR "a-directory-name-that-is-long-enough/"
/* The last component alone is past ustar's 100-byte name field, so no prefix split can hold
 * it and the writer must use a pax extended header. */
#define LONG_NAME                                                                                  \
	LONG_DIR LONG_DIR "a-file-name-that-no-ustar-prefix-split-can-hold-because-this-one-"      \
	                  "component-is-longer-than-one-hundred-bytes.txt"

static const struct member members[] = {
        {"bin/suid-tool", AE_IFREG, 04755, "#!/bin/sh\necho set-uid\n", NULL, NULL},
        {"link-to-tool", AE_IFLNK, 0777, NULL, "bin/suid-tool", NULL},
        {"hard-to-tool", AE_IFREG, 04755, NULL, NULL, "bin/suid-tool"},
        {LONG_NAME, AE_IFREG, 0640, "long name\n", NULL, NULL},
};
#define N_MEMBERS (sizeof members / sizeof members[0])

enum { UID = 1001, GID = 2002 };
static const time_t MTIME = 1700000000;

static int check(FILE *out, int ok, const char *what)
{
	fprintf(out, "%s %s\n", ok ? "ok  " : "FAIL", what);
	return ok ? 0 : 1;
}

static int write_archive(char *buf, size_t cap, size_t *used)
{
	struct archive *a = archive_write_new();
	if (a == NULL)
		return -1;
	int rc = -1;
	struct archive_entry *e = archive_entry_new();
	if (e == NULL)
		goto out;
	if (archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open_memory(a, buf, cap, used) != ARCHIVE_OK)
		goto out;
	for (size_t i = 0; i < N_MEMBERS; i++) {
		const struct member *m = &members[i];
		archive_entry_clear(e);
		archive_entry_set_pathname(e, m->name);
		archive_entry_set_filetype(e, m->type);
		archive_entry_set_perm(e, m->perm);
		archive_entry_set_uid(e, UID);
		archive_entry_set_gid(e, GID);
		archive_entry_set_mtime(e, MTIME, 0);
		size_t len = m->data ? strlen(m->data) : 0;
		archive_entry_set_size(e, (la_int64_t)len);
		if (m->symlink)
			archive_entry_set_symlink(e, m->symlink);
		if (m->hardlink)
			archive_entry_set_hardlink(e, m->hardlink);
		if (archive_write_header(a, e) != ARCHIVE_OK)
			goto out;
		if (len > 0 && archive_write_data(a, m->data, len) != (la_ssize_t)len)
			goto out;
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		goto out;
	rc = 0;
out:
	archive_entry_free(e);
	archive_write_free(a);
	return rc;
}

static int str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Reads the archive back and compares every member's fields; returns failures. */
static int read_archive(FILE *out, const char *buf, size_t len)
{
	int failed = 0;
	struct archive *a = archive_read_new();
	if (a == NULL)
		return check(out, 0, "libarchive: archive_read_new");
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
		archive_read_free(a);
		return check(out, 0, "libarchive: open the archive for reading");
	}
	struct archive_entry *e;
	size_t i = 0;
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (i >= N_MEMBERS) {
			failed += check(out, 0, "libarchive: no extra members");
			break;
		}
		const struct member *m = &members[i];
		char what[160];
		snprintf(what, sizeof what, "libarchive: member %zu (%.40s) fields", i, m->name);
		char bad[96] = "";
		if (!str_eq(archive_entry_pathname(e), m->name))
			strcat(bad, " name");
		if ((archive_entry_perm(e) & 07777) != m->perm)
			strcat(bad, " mode");
		if (archive_entry_uid(e) != UID || archive_entry_gid(e) != GID)
			strcat(bad, " owner");
		if (archive_entry_mtime(e) != MTIME)
			strcat(bad, " mtime");
		if (!str_eq(archive_entry_symlink(e), m->symlink))
			strcat(bad, " symlink");
		if (!str_eq(archive_entry_hardlink(e), m->hardlink))
			strcat(bad, " hardlink");
		if (m->hardlink == NULL && archive_entry_filetype(e) != m->type)
			strcat(bad, " type");
		/* The long name needs a pax extended header: proves the pax path was taken. */
		if (strlen(m->name) > 100 &&
		    archive_format(a) != ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE)
			strcat(bad, " pax-header");
		int ok = bad[0] == '\0';
		if (!ok)
			snprintf(what + strlen(what), sizeof what - strlen(what), ", wrong:%s",
			         bad);
		failed += check(out, ok, what);

		char data[128];
		la_ssize_t n = archive_read_data(a, data, sizeof data);
		size_t want = m->data ? strlen(m->data) : 0;
		snprintf(what, sizeof what, "libarchive: member %zu data (%zu bytes)", i, want);
		failed += check(out,
		                n == (la_ssize_t)want &&
		                        memcmp(data, m->data ? m->data : "", want) == 0,
		                what);
		i++;
	}
	failed += check(out, r == ARCHIVE_EOF && i == N_MEMBERS,
	                "libarchive: all members, clean end");
	archive_read_free(a);
	return failed;
}

static int archive_checks(FILE *out)
{
	size_t cap = 64 * 1024, used = 0;
	char *buf = malloc(cap);
	if (buf == NULL)
		return check(out, 0, "libarchive: buffer");
	int failed =
	        check(out, write_archive(buf, cap, &used) == 0, "libarchive: write a pax archive");
	failed += check(out, used > 0 && used % 512 == 0,
	                "libarchive: archive is whole 512-byte blocks");
	if (failed == 0)
		failed += read_archive(out, buf, used);
	free(buf);
	return failed;
}

static int hex_is(const uint8_t d[SBX_SHA256_LEN], const char *want)
{
	char hex[SBX_SHA256_HEX_LEN];
	sbx_hex(d, SBX_SHA256_LEN, hex);
	return strcmp(hex, want) == 0;
}

static int digest_checks(FILE *out)
{
	int failed = 0;
	uint8_t d[SBX_SHA256_LEN];

	sbx_sha256("", 0, d);
	failed += check(
	        out, hex_is(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
	        "bearssl: sha256(\"\")");
	sbx_sha256("abc", 3, d);
	failed += check(
	        out, hex_is(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	        "bearssl: sha256(\"abc\")");

	/* A million 'a' fed in uneven pieces exercises the streaming path. */
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	char chunk[997];
	memset(chunk, 'a', sizeof chunk);
	size_t left = 1000000;
	while (left > 0) {
		size_t n = left < sizeof chunk ? left : sizeof chunk;
		sbx_sha256_update(&s, chunk, n);
		left -= n;
	}
	sbx_sha256_final(&s, d);
	failed += check(
	        out, hex_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
	        "bearssl: sha256(1,000,000 x 'a')");

	uint8_t key[20];
	memset(key, 0x0b, sizeof key);
	sbx_hmac_sha256(key, sizeof key, "Hi There", 8, d);
	failed += check(
	        out, hex_is(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
	        "bearssl: hmac-sha256 RFC 4231 case 1");
	sbx_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
	failed += check(
	        out, hex_is(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
	        "bearssl: hmac-sha256 RFC 4231 case 2");
	uint8_t longkey[131];
	memset(longkey, 0xaa, sizeof longkey);
	const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
	sbx_hmac_sha256(longkey, sizeof longkey, msg, strlen(msg), d);
	failed += check(
	        out, hex_is(d, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
	        "bearssl: hmac-sha256 RFC 4231 case 6 (key longer than a block)");
	return failed;
}

int sbx_selftest_run(FILE *out)
{
	int failed = archive_checks(out) + digest_checks(out);
	fprintf(out, "selftest: %s\n", failed == 0 ? "passed" : "FAILED");
	return failed;
}
