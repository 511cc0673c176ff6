/* archive/wbehind.c: what is queued lands at its offsets, across several fds and chunks
 * larger and smaller than a slot, whatever order the writer threads finish in; after a drain a
 * write over the same bytes wins; a failed write is reported (by a later write or by the
 * drain) and then cleared; freeing drains. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "wbehind.h"

#define BIG (5 * 1024 * 1024 + 123)

static int tmp_file(char *path, size_t cap)
{
	snprintf(path, cap, "/tmp/sbx-wb-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	return fd;
}

static void check_file(int fd, const unsigned char *want, size_t n)
{
	unsigned char *got = malloc(n + 1);
	assert_non_null(got);
	assert_int_equal(pread(fd, got, n + 1, 0), (ssize_t)n);
	assert_memory_equal(got, want, n);
	free(got);
}

static void order_and_offsets(void **state)
{
	(void)state;
	char pa[64], pb[64];
	int a = tmp_file(pa, sizeof pa), b = tmp_file(pb, sizeof pb);
	unsigned char *wa = malloc(BIG), *wb = malloc(BIG), *chunk = malloc(BIG);
	assert_non_null(wa);
	assert_non_null(wb);
	assert_non_null(chunk);
	struct sbx_wb *w = sbx_wb_new();
	assert_non_null(w);
	/* Chunks of uneven sizes (1 byte to 700 KiB), alternating between two files; the source
	 * buffer is overwritten right after each call, as libarchive's block is. */
	size_t off = 0;
	unsigned seed = 7;
	while (off < BIG) {
		size_t n = (seed = seed * 1103515245u + 12345u) % (700 * 1024) + 1;
		if (n > BIG - off)
			n = BIG - off;
		for (size_t i = 0; i < n; i++)
			chunk[i] = (unsigned char)(off + i * 31 + seed);
		memcpy(wa + off, chunk, n);
		assert_int_equal(sbx_wb_write(w, a, (off_t)off, chunk, n), 0);
		for (size_t i = 0; i < n; i++)
			chunk[i] = (unsigned char)~chunk[i];
		memcpy(wb + off, chunk, n);
		assert_int_equal(sbx_wb_write(w, b, (off_t)off, chunk, n), 0);
		memset(chunk, 0xee, n);
		off += n;
	}
	/* After a drain, a write over the same bytes wins. */
	assert_int_equal(sbx_wb_drain(w), 0);
	memset(chunk, 'Z', 300000);
	memcpy(wa + 1000, chunk, 300000);
	assert_int_equal(sbx_wb_write(w, a, 1000, chunk, 300000), 0);
	assert_int_equal(sbx_wb_drain(w), 0);
	check_file(a, wa, BIG);
	check_file(b, wb, BIG);
	sbx_wb_free(w);
	close(a);
	close(b);
	unlink(pa);
	unlink(pb);
	free(wa);
	free(wb);
	free(chunk);
}

static void failure_reported_then_cleared(void **state)
{
	(void)state;
	char p[64];
	int fd = tmp_file(p, sizeof p);
	int ro = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	struct sbx_wb *w = sbx_wb_new();
	assert_non_null(w);
	static unsigned char buf[1 << 20];
	memset(buf, 'x', sizeof buf);
	/* Writes to a read-only fd fail in the thread: a later write or the drain says so. */
	int failed = 0, err = 0;
	for (int i = 0; i < 64 && !failed; i++)
		if (sbx_wb_write(w, ro, (off_t)i << 20, buf, sizeof buf) != 0)
			failed = 1, err = errno;
	if (!failed && sbx_wb_drain(w) != 0)
		failed = 1, err = errno;
	else if (failed)
		assert_int_equal(sbx_wb_drain(w), -1); /* the drain still reports it once */
	assert_true(failed);
	assert_int_equal(err, EBADF);
	/* Cleared: the writer works again. */
	assert_int_equal(sbx_wb_write(w, fd, 0, "hello", 5), 0);
	assert_int_equal(sbx_wb_drain(w), 0);
	check_file(fd, (const unsigned char *)"hello", 5);
	sbx_wb_free(w);
	close(ro);
	close(fd);
	unlink(p);
}

static void free_drains(void **state)
{
	(void)state;
	char p[64];
	int fd = tmp_file(p, sizeof p);
	struct sbx_wb *w = sbx_wb_new();
	assert_non_null(w);
	static unsigned char buf[3 << 20];
	memset(buf, 'q', sizeof buf);
	assert_int_equal(sbx_wb_write(w, fd, 0, buf, sizeof buf), 0);
	sbx_wb_free(w);
	check_file(fd, buf, sizeof buf);
	sbx_wb_free(NULL);
	close(fd);
	unlink(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(order_and_offsets),
	        cmocka_unit_test(failure_reported_then_cleared),
	        cmocka_unit_test(free_drains),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
