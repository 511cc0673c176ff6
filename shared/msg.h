/* Message payloads: a flat list of fields, each [u16 tag][u32 length][value], big-endian.
 * Integers are 8-byte two's complement; strings are bytes without a terminator; a repeated
 * tag is a list. Readers skip tags they do not know, so a newer peer can add fields without
 * breaking an older one (docs/protocol.md). Writer and reader never allocate (only
 * sbx_field_strdup does, by its name). */
#ifndef SBX_MSG_H
#define SBX_MSG_H

#include <stddef.h>
#include <stdint.h>

struct sbx_msgw {
	uint8_t *buf;
	size_t cap;
	size_t len;
	int overflow; /* set once a field did not fit; the message must not be sent */
};

void sbx_msgw_init(struct sbx_msgw *w, uint8_t *buf, size_t cap);
void sbx_msgw_bytes(struct sbx_msgw *w, uint16_t tag, const void *data, size_t len);
void sbx_msgw_str(struct sbx_msgw *w, uint16_t tag, const char *s);
void sbx_msgw_i64(struct sbx_msgw *w, uint16_t tag, int64_t v);

struct sbx_field {
	uint16_t tag;
	uint32_t len;
	const uint8_t *val;
};

struct sbx_msgr {
	const uint8_t *p;
	size_t len;
	size_t pos;
};

void sbx_msgr_init(struct sbx_msgr *r, const uint8_t *p, size_t len);

/* Next field: 1 when *f is filled, 0 at the clean end, -1 when the payload is malformed (a
 * field runs past the end). */
int sbx_msgr_next(struct sbx_msgr *r, struct sbx_field *f);

/* Field value helpers: an integer field must be exactly 8 bytes (-1 otherwise). */
int sbx_field_i64(const struct sbx_field *f, int64_t *out);

/* Copies a string field into out (cap bytes) with a NUL; -1 when it does not fit or holds a
 * NUL byte (names and paths never do). */
int sbx_field_str(const struct sbx_field *f, char *out, size_t cap);

/* Finds the first field with tag; 1 found, 0 absent, -1 malformed payload. */
int sbx_msg_find(const uint8_t *p, size_t len, uint16_t tag, struct sbx_field *f);

/* A refusal as a RESPONSE payload, over whatever w held: STATUS cls (enum sbx_err_class),
 * ERRNO err, MESSAGE msg. */
void sbx_msgw_error(struct sbx_msgw *w, int cls, int err, const char *msg);

/* A string field as a malloc'd C string; NULL when it holds a NUL byte or memory runs out. */
char *sbx_field_strdup(const struct sbx_field *f);

#endif
