/* Strict JSON (RFC 8259) for the host's session mode: a parser that turns one request line into
 * a tree, and a writer that builds one response line. Hostile input is bounded by the limits
 * below; nothing here does I/O, prints or exits. */
#ifndef SBX_JSON_H
#define SBX_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SBX_JSON_MAX_DEPTH 64          /* nested arrays/objects; the 65th level is refused */
#define SBX_JSON_MAX_INPUT (16u << 20) /* bytes of one document */
#define SBX_JSON_MAX_NODES (1u << 20)  /* values in one document, bounds the tree's memory */

enum sbx_json_type {
	SBX_JSON_NULL,
	SBX_JSON_BOOL,
	SBX_JSON_NUMBER,
	SBX_JSON_STRING,
	SBX_JSON_ARRAY,
	SBX_JSON_OBJECT,
};

struct sbx_json {
	enum sbx_json_type type;
	int boolean;           /* BOOL: 0 or 1 */
	int is_int;            /* NUMBER: integral and within int64, so i64 holds it exactly */
	int64_t i64;           /* NUMBER when is_int */
	double num;            /* NUMBER: always set (rounded for integers beyond 2^53) */
	char *str;             /* STRING: decoded bytes, valid UTF-8, may hold NUL; str[len] == 0 */
	size_t len;            /* STRING: bytes in str; ARRAY/OBJECT: entries in kids */
	struct sbx_json *kids; /* ARRAY: elements; OBJECT: members, in input order */
	char *key;             /* member of an OBJECT: its decoded name; key[keylen] == 0 */
	size_t keylen;
};

/* Parses exactly one JSON value (surrounding whitespace allowed) from text[0..len). On success
 * *out is a tree to release with sbx_json_free. On failure returns -1 with *out NULL and *e
 * set: SBX_EUSAGE with the byte offset for bad input, SBX_EUNAVAILABLE/ENOMEM when memory ran
 * out. Input must be UTF-8; strings decode to UTF-8 (surrogate pairs combined, lone surrogates
 * refused). Numbers beyond double's range are refused. */
int sbx_json_parse(const char *text, size_t len, struct sbx_json **out, struct sbx_err *e);

/* Releases a tree from sbx_json_parse; NULL is ignored. */
void sbx_json_free(struct sbx_json *j);

/* Member `key` of an object (compared as bytes, so a key holding NUL never matches), or NULL
 * when absent or obj is not an object. With duplicate keys the last one wins. */
const struct sbx_json *sbx_json_get(const struct sbx_json *obj, const char *key);

/* The string's bytes and length (len may be NULL), or NULL when j is not a string. Callers
 * that need a C string must check that len == strlen(result). */
const char *sbx_json_str(const struct sbx_json *j, size_t *len);

/* 0 and *out set, or -1 when j is not an integral number within int64. */
int sbx_json_int(const struct sbx_json *j, int64_t *out);

/* 0 and *out set, or -1 when j is not a number. */
int sbx_json_double(const struct sbx_json *j, double *out);

/* 0 and *out set to 0 or 1, or -1 when j is not true/false. */
int sbx_json_bool(const struct sbx_json *j, int *out);

/* Entries of an array or object; 0 for anything else. */
size_t sbx_json_len(const struct sbx_json *arr);

/* Entry i of an array or object, or NULL when out of range or not a container. */
const struct sbx_json *sbx_json_at(const struct sbx_json *arr, size_t i);

/* Writer for one JSON document on a single line. Commas are inserted automatically. Misuse
 * (a value in an object without a key, a key outside an object, unbalanced ends, a second
 * top-level value, depth past SBX_JSON_MAX_DEPTH, a non-finite double) and allocation failure
 * set `failed`, which is sticky: later calls do nothing and sbx_jw_text returns NULL. */
struct sbx_jw {
	char *buf;
	size_t len, cap;
	int failed;
	int depth;
	int keyed;  /* a key awaits its value */
	int in_str; /* between sbx_jw_str_begin and sbx_jw_str_end */
	unsigned char
	        more[SBX_JSON_MAX_DEPTH + 1];      /* level holds a value: the next needs a comma */
	unsigned char obj[SBX_JSON_MAX_DEPTH + 1]; /* level is an object */
};

void sbx_jw_init(struct sbx_jw *w);
void sbx_jw_free(struct sbx_jw *w);
/* Starts a new document, keeping the buffer (one response per line in a session). */
void sbx_jw_reset(struct sbx_jw *w);

void sbx_jw_obj_begin(struct sbx_jw *w);
void sbx_jw_obj_end(struct sbx_jw *w);
void sbx_jw_arr_begin(struct sbx_jw *w);
void sbx_jw_arr_end(struct sbx_jw *w);
void sbx_jw_key(struct sbx_jw *w, const char *name);
void sbx_jw_keyn(struct sbx_jw *w, const void *name, size_t len);
void sbx_jw_str(struct sbx_jw *w, const char *s);
/* Arbitrary bytes as a string: valid UTF-8 passes through; C0 controls, DEL and C1 controls
 * (U+0080-U+009F) are escaped (\n, \u001b, \u007f, \u009b...); each byte that is not part
 * of valid UTF-8 becomes U+FFFD, so the document is valid JSON whatever the bytes. Binary data
 * that must survive exactly goes through sbx_jw_b64 instead. */
void sbx_jw_strn(struct sbx_jw *w, const void *bytes, size_t len);
/* Bytes as a base64 string (standard alphabet, padded). */
void sbx_jw_b64(struct sbx_jw *w, const void *bytes, size_t len);
/* One string value written in parts, for text too large to hold at once: sbx_jw_str_begin,
 * any number of sbx_jw_str_add (escaped as sbx_jw_strn; a part that ends inside a UTF-8
 * sequence turns the cut bytes into U+FFFD, so end parts where sbx_utf8_cut_tail says) or
 * sbx_jw_b64_add (base64; every part but the last a multiple of 3 bytes), then
 * sbx_jw_str_end. Any other call in between is misuse. */
void sbx_jw_str_begin(struct sbx_jw *w);
void sbx_jw_str_add(struct sbx_jw *w, const void *bytes, size_t len);
void sbx_jw_b64_add(struct sbx_jw *w, const void *bytes, size_t len);
void sbx_jw_str_end(struct sbx_jw *w);
void sbx_jw_int(struct sbx_jw *w, int64_t v);
/* Shortest of %.15g..%.17g that reads back as d; non-finite d is misuse. */
void sbx_jw_double(struct sbx_jw *w, double d);
void sbx_jw_bool(struct sbx_jw *w, int b);
void sbx_jw_null(struct sbx_jw *w);

/* A member: sbx_jw_key then the value (kstr: a NULL s is null; kb64: as sbx_jw_b64). The
 * container and part-wise forms write the key and open the value: arrays, objects and strings
 * are then written and ended as above. */
void sbx_jw_kstr(struct sbx_jw *w, const char *key, const char *s);
void sbx_jw_kstrn(struct sbx_jw *w, const char *key, const void *bytes, size_t len);
void sbx_jw_kb64(struct sbx_jw *w, const char *key, const void *bytes, size_t len);
void sbx_jw_kint(struct sbx_jw *w, const char *key, int64_t v);
void sbx_jw_kbool(struct sbx_jw *w, const char *key, int b);
void sbx_jw_kdouble(struct sbx_jw *w, const char *key, double d);
void sbx_jw_karr_begin(struct sbx_jw *w, const char *key);
void sbx_jw_kobj_begin(struct sbx_jw *w, const char *key);
void sbx_jw_kstr_begin(struct sbx_jw *w, const char *key);

/* The finished document, NUL-terminated, without a trailing newline; NULL when the writer
 * failed or the document is incomplete (no value yet, or containers left open). */
const char *sbx_jw_text(const struct sbx_jw *w, size_t *len);

/* The bytes written since the start or the last flush, so a large document can leave in
 * pieces (the caller writes them out at once: they are valid until the next call on w). The
 * document's state is kept; sbx_jw_text then gives only what came after. NULL (and *len 0)
 * when the writer failed. */
const char *sbx_jw_flush(struct sbx_jw *w, size_t *len);

/* Decodes standard padded base64 into a malloc'd buffer (*out, freed by the caller; never
 * NULL on success, even for empty input). Returns -1 for bad length, a character outside the
 * alphabet, misplaced padding, non-zero padding bits, or allocation failure. */
int sbx_b64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen);

#endif
