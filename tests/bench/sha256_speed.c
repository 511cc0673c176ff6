/* make bench-sha256: SHA-256 throughput of the SHA-NI path and of BearSSL's portable code side
 * by side, each over 256 MiB fed in 1 MiB updates (a transfer's chunk size, cache-resident, so
 * the figure is the hash and not the memory). Every figure is measured in this run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "digest.h"

#define CHUNK (1u << 20)
#define TOTAL (256u << 20)

/* Hashes TOTAL bytes; returns MB/s (10^6 bytes per second), the best of three runs. */
static double speed(const uint8_t *buf, uint8_t out[SBX_SHA256_LEN])
{
	double best = 0;
	for (int run = 0; run < 3; run++) {
		double t0 = fixture_now();
		struct sbx_sha256 s;
		sbx_sha256_init(&s);
		for (size_t done = 0; done < TOTAL; done += CHUNK)
			sbx_sha256_update(&s, buf, CHUNK);
		sbx_sha256_final(&s, out);
		double mbs = TOTAL / 1e6 / (fixture_now() - t0);
		if (mbs > best)
			best = mbs;
	}
	return best;
}

int main(void)
{
	uint8_t *buf = malloc(CHUNK);
	if (buf == NULL) {
		fprintf(stderr, "sha256_speed: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < CHUNK; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 8));

	uint8_t fast_d[SBX_SHA256_LEN], port_d[SBX_SHA256_LEN];
	sbx_sha256_force_portable(0);
	int have_fast = sbx_sha256_is_fast();
	double fast = have_fast ? speed(buf, fast_d) : 0;
	sbx_sha256_force_portable(1);
	double port = speed(buf, port_d);
	sbx_sha256_force_portable(0);
	free(buf);

	printf("sha256 over %u MiB in %u KiB updates (best of 3)\n", TOTAL >> 20, CHUNK >> 10);
	if (have_fast)
		printf("  SHA-NI   %8.0f MB/s\n", fast);
	else
		printf("  SHA-NI   unavailable on this CPU\n");
	printf("  portable %8.0f MB/s (BearSSL)\n", port);
	if (have_fast) {
		printf("  speedup  %8.1fx\n", fast / port);
		if (memcmp(fast_d, port_d, SBX_SHA256_LEN) != 0) {
			fprintf(stderr, "sha256_speed: the two paths disagree\n");
			return 1;
		}
	}
	return 0;
}
