/* SHA-256 compression (FIPS 180-4, section 6.2.2) on the SHA-NI instructions: sha256rnds2 runs
 * two rounds, sha256msg1/msg2 extend the message schedule four words at a time. The target
 * attribute enables them for these functions only, so the file builds with the default flags
 * and the rest of the program never executes them on a CPU that lacks them. */
#include "sha256_x86.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

/* FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes. */
static const uint32_t k256[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
};

/* cpuid leaf 1 ECX and leaf 7 (subleaf 0) EBX feature bits (Intel SDM vol. 2A, CPUID). */
#define CPUID1_ECX_SSSE3 (1u << 9)
#define CPUID1_ECX_SSE41 (1u << 19)
#define CPUID7_EBX_SHA (1u << 29)

int sbx_sha256_x86_available(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	if ((c & CPUID1_ECX_SSSE3) == 0 || (c & CPUID1_ECX_SSE41) == 0)
		return 0;
	/* __get_cpuid_count checks the highest leaf first, so old CPUs answer 0 here. */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b & CPUID7_EBX_SHA) != 0;
}

/*
 * sha256rnds2 keeps the working variables in two registers, lanes listed high to low:
 * {A, B, E, F} and {C, D, G, H}. It takes the W[t] + K[t] of its two rounds from the low two
 * lanes of its third operand and returns the new {A, B, E, F}; the new {C, D, G, H} is the old
 * {A, B, E, F}, so two calls that swap the registers' roles advance four rounds.
 *
 * The schedule W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] for four t at once:
 * sha256msg1 adds s0 of the next word to each of W[t-16..t-13], the W[t-7..t-4] are added by
 * hand (they straddle two registers), and sha256msg2 adds s1(W[t-2]), where for the upper two
 * lanes W[t-2] is one of the words it is computing.
 */
/* The compression over n blocks; when dst is not NULL each block is also stored there, from
 * the same loads the rounds use, so what is hashed is what is copied. */
static inline __attribute__((always_inline, target("sha,sse4.1,ssse3"))) void
blocks(uint32_t state[8], const uint8_t *data, size_t n, uint8_t *dst)
{
	/* Message words are big-endian: swap the bytes within each 32-bit lane. */
	const __m128i bswap = _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);

	/* From a..h in memory to the {A, B, E, F} / {C, D, G, H} layout. */
	__m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0x1b);
	__m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1b);
	__m128i abef = _mm_unpackhi_epi64(efgh, abcd);
	__m128i cdgh = _mm_unpacklo_epi64(efgh, abcd);

	for (; n > 0; n--, data += 64) {
		const __m128i abef_in = abef, cdgh_in = cdgh;
		__m128i m0 = _mm_loadu_si128((const __m128i *)(data + 0));
		__m128i m1 = _mm_loadu_si128((const __m128i *)(data + 16));
		__m128i m2 = _mm_loadu_si128((const __m128i *)(data + 32));
		__m128i m3 = _mm_loadu_si128((const __m128i *)(data + 48));
		if (dst != NULL) {
			_mm_storeu_si128((__m128i *)(dst + 0), m0);
			_mm_storeu_si128((__m128i *)(dst + 16), m1);
			_mm_storeu_si128((__m128i *)(dst + 32), m2);
			_mm_storeu_si128((__m128i *)(dst + 48), m3);
			dst += 64;
		}
		/* w0..w3 hold the sixteen schedule words W[t..t+15] of the next four groups. */
		__m128i w0 = _mm_shuffle_epi8(m0, bswap);
		__m128i w1 = _mm_shuffle_epi8(m1, bswap);
		__m128i w2 = _mm_shuffle_epi8(m2, bswap);
		__m128i w3 = _mm_shuffle_epi8(m3, bswap);

		/* Unrolled whatever the optimisation level: rolled (-O2, -Os) the rounds ran 15-20%
		 * slower here (1.19-1.25 GB/s against 1.42 GB/s, docs/transfers.md). */
#pragma GCC unroll 16
		for (int g = 0; g < 16; g++) {
			__m128i wk =
			        _mm_add_epi32(w0, _mm_loadu_si128((const __m128i *)&k256[4 * g]));
			cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
			abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0e));
			/* Shift W[t+4..t+19] in; from g = 12 on, W[63] is already there. */
			__m128i next = w3;
			if (g < 12) {
				next = _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1),
				                     _mm_alignr_epi8(w3, w2, 4));
				next = _mm_sha256msg2_epu32(next, w3);
			}
			w0 = w1;
			w1 = w2;
			w2 = w3;
			w3 = next;
		}
		abef = _mm_add_epi32(abef, abef_in);
		cdgh = _mm_add_epi32(cdgh, cdgh_in);
	}

	/* Back to a..h. */
	abcd = _mm_shuffle_epi32(_mm_unpackhi_epi64(cdgh, abef), 0x1b);
	efgh = _mm_shuffle_epi32(_mm_unpacklo_epi64(cdgh, abef), 0x1b);
	_mm_storeu_si128((__m128i *)&state[0], abcd);
	_mm_storeu_si128((__m128i *)&state[4], efgh);
}

__attribute__((target("sha,sse4.1,ssse3"))) void
sbx_sha256_x86_blocks(uint32_t state[8], const uint8_t *data, size_t n)
{
	blocks(state, data, n, NULL);
}

__attribute__((target("sha,sse4.1,ssse3"))) void
sbx_sha256_x86_blocks_copy(uint32_t state[8], uint8_t *dst, const uint8_t *src, size_t n)
{
	blocks(state, src, n, dst);
}

#else

int sbx_sha256_x86_available(void)
{
	return 0; /* unavailable: no SHA-NI off x86_64 */
}

void sbx_sha256_x86_blocks(uint32_t state[8], const uint8_t *data, size_t n)
{
	(void)state;
	(void)data;
	(void)n;
}

void sbx_sha256_x86_blocks_copy(uint32_t state[8], uint8_t *dst, const uint8_t *src, size_t n)
{
	(void)state;
	(void)dst;
	(void)src;
	(void)n;
}

#endif
