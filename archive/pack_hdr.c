/* Plain pax headers (archive/pack_hdr.h), field by field as libarchive 3.6's
 * archive_write_set_format_pax.c and archive_write_set_format_ustar.c lay them out. */
#include "pack_hdr.h"

#include <stdint.h>
#include <string.h>

/* ustar offsets */
#define H_NAME 0
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_SUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_MAGIC 257
#define H_DEVMAJOR 329
#define H_DEVMINOR 337

/* The longest name kept here: "PaxHeader/" must fit in front of its last component within the
 * 100 bytes of the 'x' header's name field. */
#define NAME_MAX_PLAIN 90

static int printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

static void octal(unsigned char *p, int digits, uint64_t v)
{
	for (int i = digits - 1; i >= 0; i--, v >>= 3)
		p[i] = (unsigned char)('0' + (v & 7));
}

/* The ustar header: libarchive's template, the fields, the checksum. */
static void ustar(unsigned char *h, const char *name, size_t nlen, const char *link, size_t llen,
                  unsigned mode, uint64_t uid, uint64_t gid, uint64_t size, uint64_t mtime,
                  char type)
{
	memset(h, 0, 512);
	memcpy(h + H_NAME, name, nlen);
	static const unsigned char idfield[8] = {'0', '0', '0', '0', '0', '0', ' ', 0};
	memcpy(h + H_MODE, idfield, 8);
	memcpy(h + H_UID, idfield, 8);
	memcpy(h + H_GID, idfield, 8);
	memcpy(h + H_DEVMAJOR, idfield, 8);
	memcpy(h + H_DEVMINOR, idfield, 8);
	octal(h + H_MODE, 6, mode & 07777);
	octal(h + H_UID, 6, uid);
	octal(h + H_GID, 6, gid);
	octal(h + H_SIZE, 11, size);
	h[H_SIZE + 11] = ' ';
	octal(h + H_MTIME, 11, mtime);
	h[H_MTIME + 11] = ' ';
	memset(h + H_SUM, ' ', 8);
	h[H_TYPE] = (unsigned char)type;
	if (llen > 0)
		memcpy(h + H_LINK, link, llen);
	memcpy(h + H_MAGIC,
	       "ustar\0"
	       "00",
	       8);
	/* Nothing is set past the device fields: the rest of the block counts as zeros. */
	unsigned sum = 0;
	for (int i = 0; i < H_DEVMINOR + 8; i++)
		sum += h[i];
	octal(h + H_SUM, 6, sum);
	h[H_SUM + 6] = 0;
}

/* v in decimal at p, no NUL; the count of digits. */
static size_t decimal(unsigned char *p, uint64_t v)
{
	unsigned char t[20];
	size_t n = 0;
	do
		t[n++] = (unsigned char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (size_t i = 0; i < n; i++)
		p[i] = t[n - 1 - i];
	return n;
}

/* One pax record, "LEN key=value\n", where LEN counts the whole record. */
static size_t record(unsigned char *out, const char *key, size_t klen, const unsigned char *value,
                     size_t vlen)
{
	size_t body = 1 + klen + 1 + vlen + 1; /* " key=value\n" */
	size_t digits = 1;
	for (size_t t = body; t >= 10; t /= 10)
		digits++;
	size_t next_ten = 1;
	for (size_t i = 0; i < digits; i++)
		next_ten *= 10;
	if (body + digits >= next_ten)
		digits++;
	unsigned char *p = out + decimal(out, body + digits);
	*p++ = ' ';
	memcpy(p, key, klen);
	p += klen;
	*p++ = '=';
	memcpy(p, value, vlen);
	p += vlen;
	*p++ = '\n';
	return (size_t)(p - out);
}

size_t sbx_pack_hdr(const char *name, const char *target, const struct stat *st,
                    unsigned char out[SBX_PACK_HDR_MAX])
{
	char type;
	uint64_t size = 0;
	if (S_ISREG(st->st_mode)) {
		type = '0';
		size = (uint64_t)st->st_size;
	} else if (S_ISDIR(st->st_mode)) {
		type = '5';
	} else if (S_ISLNK(st->st_mode) && target != NULL) {
		type = '2';
	} else {
		return 0;
	}
	size_t nlen = strlen(name), llen = target != NULL ? strlen(target) : 0;
	const char *slash = strrchr(name, '/');
	size_t dlen = slash != NULL ? (size_t)(slash - name) + 1 : 0;
	/* libarchive cuts a last component longer than 87 bytes in the 'x' header's name. */
	if (nlen == 0 || nlen > NAME_MAX_PLAIN || nlen - dlen > 87 || nlen == dlen ||
	    name[nlen - 1] == '/' || !printable(name, nlen) || strcmp(name, ".") == 0 ||
	    (nlen >= 2 && strcmp(name + nlen - 2, "/.") == 0) || llen > 100 ||
	    !printable(target != NULL ? target : "", llen) || (uint64_t)st->st_uid >= (1u << 18) ||
	    (uint64_t)st->st_gid >= (1u << 18) || size >= ((uint64_t)1 << 33) ||
	    st->st_mtim.tv_sec < 0 || st->st_mtim.tv_sec >= 0x7fffffff || st->st_mtim.tv_nsec < 0 ||
	    st->st_mtim.tv_nsec >= 1000000000)
		return 0;

	/* The records: always hdrcharset, mtime only with nanoseconds. */
	unsigned char *rec = out + 512;
	size_t rlen = record(rec, "hdrcharset", 10, (const unsigned char *)"BINARY", 6);
	long ns = st->st_mtim.tv_nsec;
	if (ns != 0) {
		/* "S.F": the nanoseconds as nine digits, trailing zeros dropped. */
		unsigned char t[32];
		size_t n = decimal(t, (uint64_t)st->st_mtim.tv_sec);
		t[n++] = '.';
		for (int i = 8; i >= 0; i--, ns /= 10)
			t[n + (size_t)i] = (unsigned char)('0' + ns % 10);
		n += 9;
		while (t[n - 1] == '0')
			n--;
		rlen += record(rec + rlen, "mtime", 5, t, n);
	}
	size_t padded = (rlen + 511) & ~(size_t)511;
	memset(rec + rlen, 0, padded - rlen);

	/* The 'x' header: named DIR/PaxHeader/BASE, the member's permissions without set-id and
	 * sticky bits, its ids, mtime in seconds. */
	char xname[NAME_MAX_PLAIN + 16];
	memcpy(xname, name, dlen);
	memcpy(xname + dlen, "PaxHeader/", 10);
	memcpy(xname + dlen + 10, name + dlen, nlen - dlen);
	unsigned perm = (unsigned)st->st_mode & 0777;
	ustar(out, xname, nlen + 10, NULL, 0, perm, st->st_uid, st->st_gid, rlen,
	      (uint64_t)st->st_mtim.tv_sec, 'x');

	/* The member's own header: a folder's name ends in '/'. */
	char mname[NAME_MAX_PLAIN + 2];
	memcpy(mname, name, nlen);
	if (type == '5')
		mname[nlen++] = '/';
	ustar(out + 512 + padded, mname, nlen, target, llen, (unsigned)st->st_mode, st->st_uid,
	      st->st_gid, size, (uint64_t)st->st_mtim.tv_sec, type);
	return 512 + padded + 512;
}
