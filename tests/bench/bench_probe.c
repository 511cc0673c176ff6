/* bench_probe RUNNER [N]: N `kind` probes of /tmp over one retained session through libsbx,
 * one request and its answer at a time (the session opened and HELLOed first, outside the
 * figure). Prints the channel the session uses ("exec", "direct" or "resident"), then
 * "N mean_us p50_us p99_us" on one line for tests/bench/runners.sh. Every answer must be
 * "dir". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fixture.h"
#include "sbx_runner.h"
#include "sbx.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_probe RUNNER [N]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 1000;
	if (n < 1 || n > 10000000)
		n = 1000;
	struct sbx_err e;
	struct sbx_session *s;
	if (fixture_open(&s, argv[1], 30, &e) != 0) {
		fprintf(stderr, "bench_probe: %s\n", e.msg);
		return 1;
	}
	double *t = malloc((size_t)n * sizeof *t), sum = 0;
	int bad = t == NULL;
	for (int i = 0; i < n && !bad; i++) {
		enum sbx_kind k;
		double a = fixture_now();
		if (sbx_kind(s, "/tmp", &k, &e) != 0 || k != SBX_KIND_DIR) {
			fprintf(stderr, "bench_probe: probe %d: %s\n", i, e.msg);
			bad = 1;
		}
		t[i] = fixture_now() - a;
		sum += t[i];
	}
	if (!bad) {
		qsort(t, (size_t)n, sizeof *t, fixture_cmp_doubles);
		printf("channel %s\n%d %.1f %.1f %.1f\n", sbx_session_channel(s), n, sum / n * 1e6,
		       t[n / 2] * 1e6, t[(int)(n * 0.99)] * 1e6);
	}
	free(t);
	sbx_session_close(s);
	return bad;
}
