/* SHA-256 and HMAC-SHA256, the digests every transfer and receipt carries: SHA-256 on the x86
 * SHA extensions where the CPU has them, BearSSL otherwise and for HMAC. Streaming contexts are
 * plain structs the caller owns; nothing allocates. */
#ifndef SBX_DIGEST_H
#define SBX_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include <bearssl_hash.h>
#include <bearssl_hmac.h>

#include "hex.h" /* sbx_hex */

#define SBX_SHA256_LEN 32
#define SBX_SHA256_HEX_LEN 65 /* 64 hex digits and a NUL */

/* A context remembers at init which code hashes it, so it stays consistent whatever
 * sbx_sha256_force_portable() does afterwards. The fields are private to digest.c. */
struct sbx_sha256 {
	int fast;
	union {
		br_sha256_context br;
		struct {
			uint32_t h[8];
			uint8_t buf[64];
			uint64_t len; /* bytes hashed so far */
		} own;
	} u;
};

void sbx_sha256_init(struct sbx_sha256 *s);
void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t len);
/* Copies len bytes from src to dst (not overlapping) and hashes them, as memcpy then
 * sbx_sha256_update(dst) would, except that on the SHA extensions the whole blocks are read
 * once: hashed from the same loads that store them. Either way the bytes hashed are the bytes
 * in dst, even when src changes meanwhile (a file mapped while it is written). */
void sbx_sha256_update_copy(struct sbx_sha256 *s, void *dst, const void *src, size_t len);
/* 1 when s fuses the copy into the hash (the SHA extensions); 0: a plain copy, then a hash. */
int sbx_sha256_fused_copy(const struct sbx_sha256 *s);
/* Writes the digest of the bytes so far; s is left as it was, so updates may go on. */
void sbx_sha256_final(const struct sbx_sha256 *s, uint8_t out[SBX_SHA256_LEN]);

/* One-shot SHA-256 of a buffer. */
void sbx_sha256(const void *data, size_t len, uint8_t out[SBX_SHA256_LEN]);

struct sbx_hmac {
	br_hmac_key_context key;
	br_hmac_context ctx;
};

void sbx_hmac_init(struct sbx_hmac *h, const void *key, size_t key_len);
void sbx_hmac_update(struct sbx_hmac *h, const void *data, size_t len);
void sbx_hmac_final(struct sbx_hmac *h, uint8_t out[SBX_SHA256_LEN]);

/* One-shot HMAC-SHA256. */
void sbx_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                     uint8_t out[SBX_SHA256_LEN]);

/* For tests and benches: on != 0 sends contexts initialised from now on to BearSSL's portable
 * code; on == 0 lets them take the fastest path the CPU allows again. sbx_sha256_is_fast()
 * says which path the next sbx_sha256_init() takes (1: SHA extensions). */
void sbx_sha256_force_portable(int on);
int sbx_sha256_is_fast(void);

/* Compares two digests in time independent of where they differ; returns 1 when equal. */
int sbx_digest_equal(const uint8_t a[SBX_SHA256_LEN], const uint8_t b[SBX_SHA256_LEN]);

#endif
