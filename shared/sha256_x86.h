/* SHA-256 compression with the x86 SHA extensions (SHA-NI), for digest.c's fast path.
 * Built on x86_64 only; elsewhere the file is a stub whose probe always says "unavailable". */
#ifndef SBX_SHA256_X86_H
#define SBX_SHA256_X86_H

#include <stddef.h>
#include <stdint.h>

/* 1 where sha256_x86.c carries the real code, so callers can let the compiler drop the fast
 * path entirely on other architectures. */
#if defined(__x86_64__)
#define SBX_SHA256_X86 1
#else
#define SBX_SHA256_X86 0
#endif

/* Returns 1 when this CPU has SHA, SSSE3 and SSE4.1 (asked of cpuid; about a microsecond under
 * a hypervisor, so callers ask once), 0 otherwise and always 0 off x86_64. */
int sbx_sha256_x86_available(void);

/* Runs the SHA-256 compression function over n 64-byte blocks at data, updating the eight
 * state words in FIPS 180-4 order (a..h). Only call it after sbx_sha256_x86_available() said 1;
 * the stub on other architectures leaves the state untouched. */
void sbx_sha256_x86_blocks(uint32_t state[8], const uint8_t *data, size_t n);

/* The same over n blocks at src, each also stored at dst (64 n bytes; dst and src must not
 * overlap) from the very loads the rounds use. */
void sbx_sha256_x86_blocks_copy(uint32_t state[8], uint8_t *dst, const uint8_t *src, size_t n);

#endif
