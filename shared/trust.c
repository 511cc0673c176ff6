/* The sandbox secret's derivations (see trust.h). */
#include "trust.h"

#include "digest.h"

/* Labels of one length, none a prefix of another. */
static const char auth_label[16] = "sbx-auth-v1\0\0\0\0";
static const char mac_label[16] = "sbx-run-mac-v1\0";
static const char key_label[16] = "sbx-run-key-v1\0";

static void mac2(const uint8_t secret[SBX_SECRET_LEN], const char label[16], const void *data,
                 size_t len, uint8_t out[SBX_MAC_LEN])
{
	struct sbx_hmac h;
	sbx_hmac_init(&h, secret, SBX_SECRET_LEN);
	sbx_hmac_update(&h, label, 16);
	sbx_hmac_update(&h, data, len);
	sbx_hmac_final(&h, out);
}

void sbx_trust_auth(const uint8_t secret[SBX_SECRET_LEN], const uint8_t nonce[SBX_NONCE_LEN],
                    uint8_t out[SBX_MAC_LEN])
{
	mac2(secret, auth_label, nonce, SBX_NONCE_LEN, out);
}

void sbx_trust_run_mac(const uint8_t secret[SBX_SECRET_LEN], const uint8_t *req, size_t len,
                       uint8_t out[SBX_MAC_LEN])
{
	mac2(secret, mac_label, req, len, out);
}

void sbx_trust_run_key(const uint8_t secret[SBX_SECRET_LEN], const uint8_t nonce[SBX_NONCE_LEN],
                       uint8_t out[SBX_MAC_LEN])
{
	mac2(secret, key_label, nonce, SBX_NONCE_LEN, out);
}

int sbx_trust_equal(const uint8_t a[SBX_MAC_LEN], const uint8_t b[SBX_MAC_LEN])
{
	return sbx_digest_equal(a, b);
}
