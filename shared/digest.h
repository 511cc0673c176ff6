/* SHA-256 and HMAC-SHA256 over BearSSL, the digests every transfer and receipt carries.
 * Streaming contexts are plain structs the caller owns; nothing allocates. */
#ifndef SBX_DIGEST_H
#define SBX_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include <bearssl_hash.h>
#include <bearssl_hmac.h>

#define SBX_SHA256_LEN 32
#define SBX_SHA256_HEX_LEN 65 /* 64 hex digits and a NUL */

struct sbx_sha256 {
	br_sha256_context ctx;
};

void sbx_sha256_init(struct sbx_sha256 *s);
void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t len);
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

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void sbx_hex(const uint8_t *bytes, size_t n, char *out);

/* Compares two digests in time independent of where they differ; returns 1 when equal. */
int sbx_digest_equal(const uint8_t a[SBX_SHA256_LEN], const uint8_t b[SBX_SHA256_LEN]);

#endif
