/* archive/mapread.c: bytes copied through the mapping are the file's and hashed as they are
 * copied, across window boundaries; a file that ended before what is asked (short from the
 * start, or truncated under a window already mapped) is ENODATA from a caught SIGBUS, and the
 * next read works; a SIGBUS that is not the window's keeps its default action; end puts the
 * caller's disposition back; a file that cannot be mapped is an error with nothing done. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "digest.h"
#include "mapread.h"

static unsigned char pattern(size_t i)
{
	return (unsigned char)((i * 2654435761u) >> 11);
}

/* A file of n pattern bytes, open for reading and writing, already unlinked. */
static int file_of(size_t n)
{
	char path[] = "/tmp/sbx-mapread-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	unsigned char buf[65536];
	for (size_t at = 0; at < n;) {
		size_t c = n - at < sizeof buf ? n - at : sizeof buf;
		for (size_t i = 0; i < c; i++)
			buf[i] = pattern(at + i);
		assert_int_equal(pwrite(fd, buf, c, (off_t)at), (ssize_t)c);
		at += c;
	}
	return fd;
}

static void copies_across_windows(void **state)
{
	(void)state;
	size_t n = (9 << 20) + 123;
	int fd = file_of(n);
	unsigned char *got = malloc(n);
	assert_non_null(got);
	struct sbx_mapread m;
	assert_int_equal(sbx_mapread_begin(&m), 0);
	struct sbx_sha256 s;
	sbx_sha256_init(&s);
	/* Pieces of stepping sizes (up to 300 KiB), so some straddle a 2 MiB window's end. */
	size_t at = 0, step = 1;
	while (at < n) {
		size_t c = step % (300 * 1024) + 1;
		if (c > n - at)
			c = n - at;
		assert_int_equal(sbx_mapread_copy(&m, fd, (off_t)at, c, &s, got + at), 0);
		at += c;
		step = step * 7 + 4093;
	}
	sbx_mapread_end(&m);
	for (size_t i = 0; i < n; i++)
		if (got[i] != pattern(i))
			fail_msg("byte %zu", i);
	uint8_t want[SBX_SHA256_LEN], d[SBX_SHA256_LEN];
	sbx_sha256(got, n, want);
	sbx_sha256_final(&s, d);
	assert_memory_equal(d, want, sizeof d);
	free(got);
	close(fd);
}

static void a_short_file_is_enodata(void **state)
{
	(void)state;
	static unsigned char got[3 << 20];
	struct sbx_mapread m;
	struct sbx_sha256 s;
	assert_int_equal(sbx_mapread_begin(&m), 0);
	/* Shorter than asked from the start: the pages past its end fault. */
	int fd = file_of(65536);
	sbx_sha256_init(&s);
	errno = 0;
	assert_int_equal(sbx_mapread_copy(&m, fd, 0, 128 * 1024, &s, got), -1);
	assert_int_equal(errno, ENODATA);
	/* The next read works (the handler stays, a new window is made). */
	sbx_sha256_init(&s);
	assert_int_equal(sbx_mapread_copy(&m, fd, 4096, 8192, &s, got), 0);
	assert_int_equal(got[0], pattern(4096));
	close(fd);
	/* Truncated under a window already mapped (the first read made it). */
	fd = file_of(3 << 20);
	sbx_sha256_init(&s);
	assert_int_equal(sbx_mapread_copy(&m, fd, 0, 4096, &s, got), 0);
	assert_int_equal(ftruncate(fd, 8192), 0);
	errno = 0;
	assert_int_equal(sbx_mapread_copy(&m, fd, 1 << 20, 1 << 20, &s, got), -1);
	assert_int_equal(errno, ENODATA);
	sbx_mapread_end(&m);
	close(fd);
}

/* In a child: SIGBUS sent to the process, or a fault outside the window, takes the default
 * action while the handler is installed. */
static void other_sigbus_keeps_its_default(void **state)
{
	(void)state;
	for (int how = 0; how < 2; how++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct sbx_mapread m;
			if (sbx_mapread_begin(&m) != 0)
				_exit(2);
			if (how == 0) {
				raise(SIGBUS);
			} else {
				int fd = file_of(8192);
				volatile unsigned char *p =
				        mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
				if ((void *)p == MAP_FAILED || ftruncate(fd, 0) != 0)
					_exit(3);
				(void)p[100];
			}
			_exit(0);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st));
		assert_int_equal(WTERMSIG(st), SIGBUS);
	}
}

static volatile sig_atomic_t marked;
static void mark(int sig)
{
	(void)sig;
	marked = 1;
}

static void end_restores_the_disposition(void **state)
{
	(void)state;
	struct sigaction mine, now, was;
	memset(&mine, 0, sizeof mine);
	mine.sa_handler = mark;
	sigemptyset(&mine.sa_mask);
	assert_int_equal(sigaction(SIGBUS, &mine, &was), 0);
	struct sbx_mapread m;
	assert_int_equal(sbx_mapread_begin(&m), 0);
	assert_int_equal(sigaction(SIGBUS, NULL, &now), 0);
	assert_true(now.sa_handler != mark);
	sbx_mapread_end(&m);
	assert_int_equal(sigaction(SIGBUS, NULL, &now), 0);
	assert_true(now.sa_handler == mark);
	raise(SIGBUS);
	assert_int_equal(marked, 1);
	sigaction(SIGBUS, &was, NULL); /* cmocka's, if it had one */
}

static void unmappable_is_an_error(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	struct sbx_mapread m;
	assert_int_equal(sbx_mapread_begin(&m), 0);
	struct sbx_sha256 s, before;
	sbx_sha256_init(&s);
	sbx_sha256_update(&s, "abc", 3);
	before = s;
	unsigned char got[4096];
	errno = 0;
	assert_int_equal(sbx_mapread_copy(&m, p[0], 0, sizeof got, &s, got), -1);
	assert_true(errno != 0 && errno != ENODATA);
	uint8_t a[SBX_SHA256_LEN], b[SBX_SHA256_LEN];
	sbx_sha256_final(&s, a);
	sbx_sha256_final(&before, b);
	assert_memory_equal(a, b, sizeof a); /* nothing hashed */
	sbx_mapread_end(&m);
	close(p[0]);
	close(p[1]);
	/* Without begin nothing is mapped either. */
	memset(&m, 0, sizeof m);
	assert_int_equal(sbx_mapread_copy(&m, p[0], 0, 1, &s, got), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(copies_across_windows),
	        cmocka_unit_test(a_short_file_is_enodata),
	        cmocka_unit_test(other_sigbus_keeps_its_default),
	        cmocka_unit_test(end_restores_the_disposition),
	        cmocka_unit_test(unmappable_is_an_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
