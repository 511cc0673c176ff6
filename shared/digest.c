/* SHA-256 / HMAC-SHA256 wrappers: the one place sbx names BearSSL's hash API. */
#include "digest.h"

void sbx_sha256_init(struct sbx_sha256 *s)
{
	br_sha256_init(&s->ctx);
}

void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t len)
{
	br_sha256_update(&s->ctx, data, len);
}

void sbx_sha256_final(const struct sbx_sha256 *s, uint8_t out[SBX_SHA256_LEN])
{
	br_sha256_out(&s->ctx, out);
}

void sbx_sha256(const void *data, size_t len, uint8_t out[SBX_SHA256_LEN])
{
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	sbx_sha256_update(&s, data, len);
	sbx_sha256_final(&s, out);
}

void sbx_hmac_init(struct sbx_hmac *h, const void *key, size_t key_len)
{
	br_hmac_key_init(&h->key, &br_sha256_vtable, key, key_len);
	br_hmac_init(&h->ctx, &h->key, 0);
}

void sbx_hmac_update(struct sbx_hmac *h, const void *data, size_t len)
{
	br_hmac_update(&h->ctx, data, len);
}

void sbx_hmac_final(struct sbx_hmac *h, uint8_t out[SBX_SHA256_LEN])
{
	br_hmac_out(&h->ctx, out);
}

void sbx_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                     uint8_t out[SBX_SHA256_LEN])
{
	struct sbx_hmac h;
	sbx_hmac_init(&h, key, key_len);
	sbx_hmac_update(&h, data, len);
	sbx_hmac_final(&h, out);
}

void sbx_hex(const uint8_t *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}

int sbx_digest_equal(const uint8_t a[SBX_SHA256_LEN], const uint8_t b[SBX_SHA256_LEN])
{
	uint8_t diff = 0;
	for (size_t i = 0; i < SBX_SHA256_LEN; i++)
		diff |= (uint8_t)(a[i] ^ b[i]);
	return diff == 0;
}
