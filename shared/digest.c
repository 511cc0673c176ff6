/* SHA-256 / HMAC-SHA256: the one place sbx names BearSSL's hash API, and the choice between it
 * and the SHA-NI block function (sha256_x86.c) for plain SHA-256. HMAC stays on BearSSL: it
 * only ever covers receipts of a few hundred bytes. */
#include "digest.h"

#include <stdatomic.h>
#include <string.h>

#include "sha256_x86.h"

/* Which code new contexts use. What the CPU allows is a fact of the process, and cpuid costs
 * about a microsecond under a hypervisor, so it is asked once, on the first init; atomics only
 * because a host library's callers may init contexts from several threads. */
enum { PATH_UNKNOWN, PATH_PORTABLE, PATH_FAST };
static atomic_int cpu_path;
static atomic_int forced_portable;

int sbx_sha256_is_fast(void)
{
	if (!SBX_SHA256_X86)
		return 0;
	int p = atomic_load_explicit(&cpu_path, memory_order_relaxed);
	if (p == PATH_UNKNOWN) {
		p = sbx_sha256_x86_available() ? PATH_FAST : PATH_PORTABLE;
		atomic_store_explicit(&cpu_path, p, memory_order_relaxed);
	}
	return p == PATH_FAST && !atomic_load_explicit(&forced_portable, memory_order_relaxed);
}

void sbx_sha256_force_portable(int on)
{
	atomic_store_explicit(&forced_portable, on != 0, memory_order_relaxed);
}

/* SBX_SHA256_X86 is a constant: off x86_64 the compiler drops the fast path below. */
static int uses_fast(const struct sbx_sha256 *s)
{
	return SBX_SHA256_X86 && s->fast;
}

void sbx_sha256_init(struct sbx_sha256 *s)
{
	/* FIPS 180-4, 5.3.3. */
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	s->fast = sbx_sha256_is_fast();
	if (!uses_fast(s)) {
		br_sha256_init(&s->u.br);
		return;
	}
	memcpy(s->u.own.h, h0, sizeof h0);
	s->u.own.len = 0;
}

void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t len)
{
	if (!uses_fast(s)) {
		br_sha256_update(&s->u.br, data, len);
		return;
	}
	if (len == 0)
		return;
	const uint8_t *p = data;
	size_t used = (size_t)(s->u.own.len & 63);
	s->u.own.len += len;
	if (used > 0) {
		size_t take = 64 - used < len ? 64 - used : len;
		memcpy(s->u.own.buf + used, p, take);
		p += take;
		len -= take;
		if (used + take < 64)
			return;
		sbx_sha256_x86_blocks(s->u.own.h, s->u.own.buf, 1);
	}
	/* Whole blocks straight from the caller's buffer: no copy on the bulk path. */
	size_t whole = len / 64;
	if (whole > 0) {
		sbx_sha256_x86_blocks(s->u.own.h, p, whole);
		p += whole * 64;
		len -= whole * 64;
	}
	if (len > 0)
		memcpy(s->u.own.buf, p, len);
}

int sbx_sha256_fused_copy(const struct sbx_sha256 *s)
{
	return uses_fast(s);
}

void sbx_sha256_update_copy(struct sbx_sha256 *s, void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *p = src;
	if (!uses_fast(s) || len == 0) {
		memcpy(d, p, len);
		sbx_sha256_update(s, d, len);
		return;
	}
	/* A partial block first, from what was stored; then whole blocks fused; the tail
	 * stored, then buffered from there. */
	size_t used = (size_t)(s->u.own.len & 63);
	if (used > 0) {
		size_t take = 64 - used < len ? 64 - used : len;
		memcpy(d, p, take);
		sbx_sha256_update(s, d, take);
		d += take;
		p += take;
		len -= take;
	}
	size_t whole = len / 64;
	if (whole > 0) {
		sbx_sha256_x86_blocks_copy(s->u.own.h, d, p, whole);
		s->u.own.len += whole * 64;
		d += whole * 64;
		p += whole * 64;
		len -= whole * 64;
	}
	if (len > 0) {
		memcpy(d, p, len);
		sbx_sha256_update(s, d, len);
	}
}

static void put32be(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void sbx_sha256_final(const struct sbx_sha256 *s, uint8_t out[SBX_SHA256_LEN])
{
	if (!uses_fast(s)) {
		br_sha256_out(&s->u.br, out);
		return;
	}
	/* Pad a copy (FIPS 180-4, 5.1.1): 0x80, zeros, then the length in bits as 64 bits
	 * big-endian ending a block. */
	uint32_t h[8];
	uint8_t block[128];
	memcpy(h, s->u.own.h, sizeof h);
	size_t used = (size_t)(s->u.own.len & 63);
	size_t total = used < 56 ? 64 : 128;
	memcpy(block, s->u.own.buf, used);
	block[used] = 0x80;
	memset(block + used + 1, 0, total - used - 1 - 8);
	uint64_t bits = s->u.own.len * 8;
	put32be(block + total - 8, (uint32_t)(bits >> 32));
	put32be(block + total - 4, (uint32_t)bits);
	sbx_sha256_x86_blocks(h, block, total / 64);
	for (size_t i = 0; i < 8; i++)
		put32be(out + 4 * i, h[i]);
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

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

ssize_t sbx_unhex(const char *hex, size_t n, uint8_t *out, size_t cap)
{
	if (n % 2 != 0 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	return (ssize_t)(n / 2);
}

int sbx_digest_equal(const uint8_t a[SBX_SHA256_LEN], const uint8_t b[SBX_SHA256_LEN])
{
	uint8_t diff = 0;
	for (size_t i = 0; i < SBX_SHA256_LEN; i++)
		diff |= (uint8_t)(a[i] ^ b[i]);
	return diff == 0;
}
