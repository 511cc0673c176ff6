/* Known-answer tests for shared/digest.c on the host (the agent runs the same vectors in its
 * selftest on every architecture). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "digest.h"

static void assert_hex(const uint8_t d[SBX_SHA256_LEN], const char *want)
{
	char hex[SBX_SHA256_HEX_LEN];
	sbx_hex(d, SBX_SHA256_LEN, hex);
	assert_string_equal(hex, want);
}

static void sha256_vectors(void **state)
{
	(void)state;
	uint8_t d[SBX_SHA256_LEN];
	sbx_sha256("", 0, d);
	assert_hex(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sbx_sha256("abc", 3, d);
	assert_hex(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sbx_sha256(two, strlen(two), d);
	assert_hex(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* Feeding the same bytes in every split must give the one-shot digest. */
static void sha256_streaming_splits(void **state)
{
	(void)state;
	uint8_t buf[300];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	uint8_t want[SBX_SHA256_LEN], got[SBX_SHA256_LEN];
	sbx_sha256(buf, sizeof buf, want);
	for (size_t cut = 0; cut <= sizeof buf; cut++) {
		struct sbx_sha256 s;
		sbx_sha256_init(&s);
		sbx_sha256_update(&s, buf, cut);
		sbx_sha256_update(&s, buf + cut, sizeof buf - cut);
		sbx_sha256_final(&s, got);
		assert_memory_equal(got, want, SBX_SHA256_LEN);
	}
}

static void hmac_rfc4231(void **state)
{
	(void)state;
	uint8_t d[SBX_SHA256_LEN];
	uint8_t key[20];
	memset(key, 0x0b, sizeof key);
	sbx_hmac_sha256(key, sizeof key, "Hi There", 8, d);
	assert_hex(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	sbx_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
	assert_hex(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	/* Case 3: 20 x 0xaa key, 50 x 0xdd data. */
	uint8_t k3[20], m3[50];
	memset(k3, 0xaa, sizeof k3);
	memset(m3, 0xdd, sizeof m3);
	sbx_hmac_sha256(k3, sizeof k3, m3, sizeof m3, d);
	assert_hex(d, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}

static void hmac_streaming_equals_oneshot(void **state)
{
	(void)state;
	const char *msg = "receipt bytes arrive in pieces";
	uint8_t want[SBX_SHA256_LEN], got[SBX_SHA256_LEN];
	sbx_hmac_sha256("k", 1, msg, strlen(msg), want);
	struct sbx_hmac h;
	sbx_hmac_init(&h, "k", 1);
	sbx_hmac_update(&h, msg, 7);
	sbx_hmac_update(&h, msg + 7, strlen(msg) - 7);
	sbx_hmac_final(&h, got);
	assert_memory_equal(got, want, SBX_SHA256_LEN);
}

static void digest_equal(void **state)
{
	(void)state;
	uint8_t a[SBX_SHA256_LEN] = {0}, b[SBX_SHA256_LEN] = {0};
	assert_true(sbx_digest_equal(a, b));
	b[31] = 1;
	assert_false(sbx_digest_equal(a, b));
	b[31] = 0;
	b[0] = 0x80;
	assert_false(sbx_digest_equal(a, b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(sha256_vectors), cmocka_unit_test(sha256_streaming_splits),
	        cmocka_unit_test(hmac_rfc4231),   cmocka_unit_test(hmac_streaming_equals_oneshot),
	        cmocka_unit_test(digest_equal),
	};
	return cmocka_run_group_tests_name("digest", tests, NULL, NULL);
}
