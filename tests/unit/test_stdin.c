/* A job's stdin on the agent (agent/stdin.c): bytes reach the pipe in the order the host sent
 * them whichever way each piece took (written at once, held in the ring, spliced from the
 * connection, read into the ring while the pipe was full); a closed reader drops bytes and
 * still returns their credit; the end closes the pipe only once the ring is empty. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto.h"
#include "stdin.h"

#define TOTAL (3u * 1024u * 1024u)

static uint8_t *pattern(size_t n)
{
	uint8_t *p = malloc(n);
	assert_non_null(p);
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
	return p;
}

/* A small pipe (one page when the kernel allows) so that it fills at once. */
static void small_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
}

static size_t drain(int fd, uint8_t *out, size_t have, size_t cap)
{
	for (;;) {
		ssize_t n = read(fd, out + have, cap - have);
		if (n <= 0)
			return have;
		have += (size_t)n;
	}
}

/* The host's stream: sent in frames whose payloads go either through sbx_stdin_data (a frame
 * the decoder assembled) or stay in the connection for sbx_stdin_take; the reader drains the
 * pipe only now and then, so every path meets a full pipe. */
static void every_way_keeps_the_order(void **state)
{
	(void)state;
	uint8_t *src = pattern(TOTAL), *got = malloc(TOTAL), scratch[4096];
	assert_non_null(got);
	int sv[2], p[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	int big = 1 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	small_pipe(p);
	struct sbx_stdin in;
	sbx_stdin_init(&in, p[1], 0);
	size_t sent = 0, have = 0;
	uint64_t granted = 0, g;
	int spliced_any = 0, ringed_any = 0;
	for (int k = 0; sent < TOTAL; k++) {
		size_t n = 1000 + (size_t)(k * 7919) % 60000;
		if (n > TOTAL - sent)
			n = TOTAL - sent;
		/* The host sends only within its credit. */
		uint64_t credit = SBX_WINDOW_DEFAULT - (sent - granted);
		while (credit == 0) {
			have = drain(p[0], got, have, TOTAL);
			sbx_stdin_pump(&in, &g);
			granted += g;
			credit = SBX_WINDOW_DEFAULT - (sent - granted);
		}
		if (n > credit)
			n = (size_t)credit;
		assert_int_equal(sbx_stdin_expect(&in, n), 0);
		if (k % 3 == 0) {
			assert_int_equal(sbx_stdin_data(&in, src + sent, n, &g), 0);
			granted += g;
		} else {
			assert_int_equal(write(sv[1], src + sent, n), (ssize_t)n);
			uint64_t left = n;
			enum sbx_stdin_how how = k % 3 == 1 ? SBX_STDIN_SPLICE : SBX_STDIN_RING;
			while (left > 0) {
				size_t ring_before = in.len;
				ssize_t t = sbx_stdin_take(&in, sv[0], left, how, scratch,
				                           sizeof scratch, &g);
				if (t < 0) {
					/* Only a full pipe stops a splice: the bytes are there. */
					assert_int_equal(errno, EAGAIN);
					assert_int_equal(how, SBX_STDIN_SPLICE);
					how = SBX_STDIN_RING;
					continue;
				}
				assert_true(t > 0);
				if (in.len > ring_before)
					ringed_any = 1;
				else
					spliced_any = 1;
				granted += g;
				left -= (uint64_t)t;
			}
		}
		sent += n;
		/* The reader and the pump at uneven times, so a splice meets a ring that still
		 * holds bytes while the pipe has room. */
		if ((k * 31) % 5 < 2)
			have = drain(p[0], got, have, TOTAL);
		if ((k * 17) % 7 < 3) {
			sbx_stdin_pump(&in, &g);
			granted += g;
		}
	}
	in.end = 1;
	while (in.fd >= 0) {
		have = drain(p[0], got, have, TOTAL);
		sbx_stdin_pump(&in, &g);
		granted += g;
	}
	have = drain(p[0], got, have, TOTAL);
	assert_int_equal(read(p[0], scratch, 1), 0); /* closed once the ring was empty */
	assert_int_equal(have, TOTAL);
	assert_memory_equal(got, src, TOTAL);
	assert_true(spliced_any && ringed_any);
	/* Every byte consumed; credit comes back in quarters of the window. */
	assert_true(granted <= TOTAL && TOTAL - granted < SBX_WINDOW_DEFAULT / 4);
	sbx_stdin_free(&in);
	close(p[0]), close(sv[0]), close(sv[1]);
	free(src), free(got);
}

/* A reader that went away: a splice meets EPIPE, the rest is read and dropped, its credit
 * returned; data after that is dropped too. */
static void closed_reader_drops_and_returns_credit(void **state)
{
	(void)state;
	uint8_t *src = pattern(TOTAL), scratch[65536];
	int sv[2], p[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	small_pipe(p);
	close(p[0]);
	struct sbx_stdin in;
	sbx_stdin_init(&in, p[1], 0);
	uint64_t granted = 0, g;
	size_t n = 200000;
	assert_int_equal(sbx_stdin_expect(&in, n), 0);
	assert_int_equal(write(sv[1], src, n), (ssize_t)n);
	uint64_t left = n;
	while (left > 0) {
		ssize_t t = sbx_stdin_take(&in, sv[0], left, SBX_STDIN_SPLICE, scratch,
		                           sizeof scratch, &g);
		assert_true(t > 0);
		left -= (uint64_t)t;
		granted += g;
	}
	assert_int_equal(in.fd, -1);
	assert_int_equal(sbx_stdin_expect(&in, SBX_WINDOW_DEFAULT - n), 0);
	assert_int_equal(sbx_stdin_data(&in, src, SBX_WINDOW_DEFAULT - n, &g), 0);
	granted += g;
	assert_int_equal(granted, SBX_WINDOW_DEFAULT); /* all of it, the last quarter too */
	assert_int_equal(in.len, 0);
	/* Past the window is refused. */
	assert_int_equal(sbx_stdin_expect(&in, SBX_WINDOW_DEFAULT + 1), -1);
	sbx_stdin_free(&in);
	close(sv[0]), close(sv[1]);
	free(src);
}

/* The ring, written while the pipe is full, drains in order; EPIPE on a pump drops what is
 * held and returns its credit. */
static void pump_after_full_pipe(void **state)
{
	(void)state;
	uint8_t *src = pattern(1 << 20), *got = malloc(1 << 20);
	int p[2];
	small_pipe(p);
	struct sbx_stdin in;
	sbx_stdin_init(&in, p[1], 0);
	uint64_t g, granted = 0;
	assert_int_equal(sbx_stdin_expect(&in, 1 << 20), 0);
	assert_int_equal(sbx_stdin_data(&in, src, 1 << 20, &g), 0);
	granted += g;
	assert_true(in.len > 0); /* the pipe took a page or so; the rest waits */
	size_t have = 0;
	while (in.len > 0) {
		have = drain(p[0], got, have, 1 << 20);
		sbx_stdin_pump(&in, &g);
		granted += g;
	}
	have = drain(p[0], got, have, 1 << 20);
	assert_int_equal(have, 1 << 20);
	assert_memory_equal(got, src, 1 << 20);
	/* Held bytes, then the reader goes: the pump drops them and returns their credit. */
	assert_int_equal(sbx_stdin_expect(&in, 1 << 20), 0);
	assert_int_equal(sbx_stdin_data(&in, src, 1 << 20, &g), 0);
	granted += g;
	close(p[0]);
	sbx_stdin_pump(&in, &g);
	granted += g;
	assert_int_equal(in.fd, -1);
	assert_int_equal(in.len, 0);
	assert_int_equal(granted, 2u << 20);
	sbx_stdin_free(&in);
	free(src), free(got);
}

/* The sink (a payload past the decoder): spliced while the pipe takes it, waiting on the pipe
 * when it is full, turned to the ring once it stays full SBX_SINK_STALL_NS, dropped when the
 * job is gone; the frame's END reaches stdin with its last byte. Shown able to fail: with the
 * stall never turning to the ring (sbx_sink_pipe's ring = left <= 0 removed) it fails. */
static void sink_splices_stalls_and_drops(void **state)
{
	(void)state;
	size_t n = 200000;
	uint8_t *src = pattern(n), *got = malloc(n), scratch[4096];
	int sv[2], p[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	small_pipe(p);
	struct sbx_stdin in;
	sbx_stdin_init(&in, p[1], 0);
	assert_int_equal(sbx_stdin_expect(&in, n), 0);
	assert_int_equal(write(sv[1], src, n), (ssize_t)n);
	struct sbx_sink k;
	memset(&k, 0, sizeof k);
	sbx_sink_begin(&k, 7, n, 1);
	uint64_t g;
	size_t have = 0;
	int stalled = 0, timeout = -1;
	while (k.left > 0) {
		assert_int_equal(sbx_sink_step(&k, sv[0], &in, scratch, sizeof scratch, &g), 0);
		if (k.pipe_wait_ns == 0)
			continue;
		/* The pipe is full: the loop would poll it, not the connection. */
		assert_int_equal(sbx_sink_pipe(&k, &in, &timeout), p[1]);
		assert_true(timeout >= 0 && timeout <= SBX_SINK_STALL_NS / 1000000);
		if (!stalled) {
			have = drain(p[0], got, have,
			             n); /* the reader takes some: splice goes on */
			stalled = 1;
			k.pipe_wait_ns = 0;
			continue;
		}
		k.pipe_wait_ns -= SBX_SINK_STALL_NS; /* it stays full: the rest goes to the ring */
		assert_int_equal(sbx_sink_pipe(&k, &in, &timeout), -1);
		assert_true(k.ring);
	}
	assert_true(stalled && k.ring && in.end);
	while (in.fd >= 0) {
		have = drain(p[0], got, have, n);
		sbx_stdin_pump(&in, &g);
	}
	have = drain(p[0], got, have, n);
	assert_int_equal(have, n);
	assert_memory_equal(got, src, n);
	/* The job gone (in NULL): the payload is read and dropped; the connection's end is 1. */
	assert_int_equal(write(sv[1], src, 1000), 1000);
	sbx_sink_begin(&k, 8, 1000, 0);
	while (k.left > 0)
		assert_int_equal(sbx_sink_step(&k, sv[0], NULL, scratch, sizeof scratch, &g), 0);
	close(sv[1]);
	sbx_sink_begin(&k, 9, 10, 0);
	assert_int_equal(sbx_sink_step(&k, sv[0], NULL, scratch, sizeof scratch, &g), 1);
	sbx_stdin_free(&in);
	close(sv[0]), close(p[0]);
	free(src), free(got);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* as in the agent: a closed reader is EPIPE */
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(every_way_keeps_the_order),
	        cmocka_unit_test(closed_reader_drops_and_returns_credit),
	        cmocka_unit_test(pump_after_full_pipe),
	        cmocka_unit_test(sink_splices_stalls_and_drops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
