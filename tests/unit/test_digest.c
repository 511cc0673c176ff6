/* Known-answer tests for shared/digest.c on the host (the agent runs the same vectors in its
 * selftest on every architecture), and the SHA-NI path against BearSSL's portable code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bearssl_hash.h>

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

/* splitmix64: a seeded, reproducible stream for the random cases. */
static uint64_t next_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static void digest_in_pieces(const uint8_t *p, size_t len, size_t piece, uint8_t out[32])
{
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	while (len > 0) {
		size_t n = len < piece ? len : piece;
		sbx_sha256_update(&s, p, n);
		p += n;
		len -= n;
	}
	sbx_sha256_final(&s, out);
}

/* FIPS 180-2 appendix B (and its 896-bit example from the NIST examples), through whichever
 * path new contexts take now, one-shot and in pieces that straddle block boundaries. */
static void check_fips_vectors(void)
{
	static const struct {
		const char *msg;
		size_t len;
		const char *hex;
	} v[] = {
	        {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	        {"abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
	         "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
	         112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
	};
	uint8_t d[SBX_SHA256_LEN];
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		assert_int_equal(strlen(v[i].msg), v[i].len);
		sbx_sha256(v[i].msg, v[i].len, d);
		assert_hex(d, v[i].hex);
		for (size_t piece = 1; piece <= 65; piece += 4) {
			digest_in_pieces((const uint8_t *)v[i].msg, v[i].len, piece, d);
			assert_hex(d, v[i].hex);
		}
	}
	uint8_t *a = malloc(1000000);
	assert_non_null(a);
	memset(a, 'a', 1000000);
	sbx_sha256(a, 1000000, d);
	assert_hex(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	digest_in_pieces(a, 1000000, 997, d);
	assert_hex(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(a);
}

/* Random lengths 0..10000 cut at random points into up to eight updates, against BearSSL's
 * br_sha256 fed the whole buffer at once. */
static void check_random_against_bearssl(uint64_t seed, int cases)
{
	enum { MAXLEN = 10000 };
	uint8_t *buf = malloc(MAXLEN);
	assert_non_null(buf);
	for (int c = 0; c < cases; c++) {
		size_t len = (size_t)(next_rand(&seed) % (MAXLEN + 1));
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)next_rand(&seed);

		br_sha256_context ref;
		uint8_t want[SBX_SHA256_LEN], got[SBX_SHA256_LEN];
		br_sha256_init(&ref);
		br_sha256_update(&ref, buf, len);
		br_sha256_out(&ref, want);

		struct sbx_sha256 s;
		sbx_sha256_init(&s);
		size_t at = 0;
		int cuts = (int)(next_rand(&seed) % 8);
		for (int k = 0; k < cuts && at < len; k++) {
			size_t n = (size_t)(next_rand(&seed) % (len - at + 1));
			/* Half the time a small piece, to exercise the partial-block buffer. */
			if (next_rand(&seed) & 1)
				n %= 70;
			sbx_sha256_update(&s, buf + at, n);
			at += n;
		}
		sbx_sha256_update(&s, buf + at, len - at);
		sbx_sha256_final(&s, got);
		if (memcmp(got, want, SBX_SHA256_LEN) != 0)
			fail_msg("case %d: length %zu, %d cuts", c, len, cuts);
	}
	free(buf);
}

/* sbx_sha256_update_copy: in pieces of random sizes between plain updates (so it starts at
 * every partial-block offset) and at odd alignments, the copy is byte for byte the source,
 * nothing past it is written, and the digest is BearSSL's of the same bytes; on both paths.
 * Then the promise it is for: a source that changes after the copy does not change the
 * digest of what was copied. */
static void check_update_copy(uint64_t seed, int cases)
{
	enum { MAXLEN = 20000 };
	uint8_t *src = malloc(MAXLEN + 16), *dst = malloc(MAXLEN + 32);
	assert_non_null(src);
	assert_non_null(dst);
	for (int c = 0; c < cases; c++) {
		size_t len = (size_t)(next_rand(&seed) % (MAXLEN + 1));
		size_t sa = (size_t)(next_rand(&seed) % 16), da = (size_t)(next_rand(&seed) % 16);
		for (size_t i = 0; i < len; i++)
			src[sa + i] = (uint8_t)next_rand(&seed);
		memset(dst, 0xa5, MAXLEN + 32);
		struct sbx_sha256 s;
		sbx_sha256_init(&s);
		size_t at = 0;
		while (at < len) {
			size_t n = (size_t)(next_rand(&seed) % (len - at + 1));
			if (next_rand(&seed) & 1)
				n %= 130;
			if (next_rand(&seed) % 3 == 0) {
				memcpy(dst + da + at, src + sa + at, n);
				sbx_sha256_update(&s, dst + da + at, n);
			} else {
				sbx_sha256_update_copy(&s, dst + da + at, src + sa + at, n);
			}
			at += n;
		}
		uint8_t want[SBX_SHA256_LEN], got[SBX_SHA256_LEN];
		sbx_sha256_final(&s, got);
		br_sha256_context ref;
		br_sha256_init(&ref);
		br_sha256_update(&ref, src + sa, len);
		br_sha256_out(&ref, want);
		if (memcmp(dst + da, src + sa, len) != 0 || memcmp(got, want, SBX_SHA256_LEN) != 0)
			fail_msg("case %d: length %zu, alignments %zu/%zu", c, len, sa, da);
		for (size_t i = 0; i < da; i++)
			assert_int_equal(dst[i], 0xa5);
		for (size_t i = da + len; i < MAXLEN + 32; i++)
			assert_int_equal(dst[i], 0xa5);
	}
	/* The digest is that of dst as it was written, whatever src becomes later. */
	for (size_t i = 0; i < 4096; i++)
		src[i] = (uint8_t)(i * 7);
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	sbx_sha256_update_copy(&s, dst, src, 4096);
	memset(src, 0, 4096);
	uint8_t got[SBX_SHA256_LEN], want[SBX_SHA256_LEN];
	sbx_sha256_final(&s, got);
	sbx_sha256(dst, 4096, want);
	assert_memory_equal(got, want, SBX_SHA256_LEN);
	free(src);
	free(dst);
}

static void sha256_update_copy(void **state)
{
	(void)state;
	sbx_sha256_force_portable(1);
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	assert_int_equal(sbx_sha256_fused_copy(&s), 0);
	check_update_copy(0xc0b1, 300);
	sbx_sha256_force_portable(0);
	sbx_sha256_init(&s);
	assert_int_equal(sbx_sha256_fused_copy(&s), sbx_sha256_is_fast());
	check_update_copy(0xc0b2, 1500);
}

static void sha256_fast_fips(void **state)
{
	(void)state;
	sbx_sha256_force_portable(0);
	if (!sbx_sha256_is_fast())
		skip(); /* no SHA extensions on this CPU: nothing to check beyond the portable test
		         */
	check_fips_vectors();
}

static void sha256_fast_against_bearssl(void **state)
{
	(void)state;
	sbx_sha256_force_portable(0);
	if (!sbx_sha256_is_fast())
		skip();
	check_random_against_bearssl(0x5b5a256, 3000);
}

static void sha256_portable_fips(void **state)
{
	(void)state;
	sbx_sha256_force_portable(1);
	assert_false(sbx_sha256_is_fast());
	check_fips_vectors();
	check_random_against_bearssl(0x9e3779b9, 200);
	sbx_sha256_force_portable(0);
}

/* A context keeps the path it was initialised with; final leaves it usable (it is const). */
static void sha256_context_keeps_path(void **state)
{
	(void)state;
	const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	for (int first = 0; first < 2; first++) {
		sbx_sha256_force_portable(first);
		struct sbx_sha256 s;
		sbx_sha256_init(&s);
		sbx_sha256_force_portable(!first);
		uint8_t d[SBX_SHA256_LEN];
		sbx_sha256_update(&s, "ab", 2);
		sbx_sha256_final(&s, d);
		assert_hex(d, "fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603");
		sbx_sha256_update(&s, "c", 1);
		sbx_sha256_final(&s, d);
		assert_hex(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		sbx_sha256_init(&s);
		sbx_sha256_update(&s, msg, 40);
		sbx_sha256_final(&s, d);
		sbx_sha256_update(&s, msg + 40, strlen(msg) - 40);
		sbx_sha256_final(&s, d);
		assert_hex(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	}
	sbx_sha256_force_portable(0);
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

/* sbx_unhex takes what sbx_hex writes, either case, and nothing else: the supervisor's
 * --key-hex used a copy of it, the CLI one with sscanf("%2x"), which also took " f" and "-1". */
static void unhex(void **state)
{
	(void)state;
	uint8_t b[4], back[4] = {0x00, 0x7f, 0xa5, 0xff};
	char h[9];
	sbx_hex(back, sizeof back, h);
	assert_string_equal(h, "007fa5ff");
	assert_int_equal(sbx_unhex(h, 8, b, sizeof b), 4);
	assert_memory_equal(b, back, 4);
	assert_int_equal(sbx_unhex("007FA5FF", 8, b, sizeof b), 4);
	assert_memory_equal(b, back, 4);
	assert_int_equal(sbx_unhex("", 0, b, sizeof b), 0);
	const char *bad[] = {"0", "0g", " f", "-1", "+1", "0x", "f\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(sbx_unhex(bad[i], strlen(bad[i]), b, sizeof b), -1);
	assert_int_equal(sbx_unhex("0011223344", 10, b, sizeof b), -1); /* 5 bytes into 4 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(sha256_vectors),
	        cmocka_unit_test(sha256_streaming_splits),
	        cmocka_unit_test(sha256_fast_fips),
	        cmocka_unit_test(sha256_fast_against_bearssl),
	        cmocka_unit_test(sha256_portable_fips),
	        cmocka_unit_test(sha256_context_keeps_path),
	        cmocka_unit_test(sha256_update_copy),
	        cmocka_unit_test(hmac_rfc4231),
	        cmocka_unit_test(hmac_streaming_equals_oneshot),
	        cmocka_unit_test(digest_equal),
	        cmocka_unit_test(unhex),
	};
	return cmocka_run_group_tests_name("digest", tests, NULL, NULL);
}
