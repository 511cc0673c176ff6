/* The agent's jobs (agent/job.c): a transfer job's output channel closed by a CANCEL that the
 * same poll round read first, then that round's readiness of the closed pipe handled. Nothing
 * is read or queued and the channel's credit stays as it was: the read of the closed fd once
 * returned the chunk's credit twice, and the host's next grant then overran the window (the
 * agent ended the session; test_ops's cancelled download saw it about once in ten runs). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "job.h"
#include "msg.h"
#include "outq.h"
#include "proto.h"
#include "splice.h"

static void output_after_cancel_in_the_same_round(void **state)
{
	(void)state;
	char dir[] = "/tmp/sbx-test-job-XXXXXX", p[64];
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof p, "%s/f", dir);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	static uint8_t blk[1 << 16];
	for (int i = 0; i < 64; i++)
		assert_int_equal(write(fd, blk, sizeof blk), (ssize_t)sizeof blk);
	close(fd);

	struct sbx_outq q;
	sbx_outq_init(&q);
	struct sbx_splice sp = {.r = -1, .w = -1};
	uint8_t *resp = malloc(SBX_FRAME_MAX_PAYLOAD);
	assert_non_null(resp);
	struct sbx_jobs js = {
	        .out = &q, .host_window = SBX_WINDOW_DEFAULT, .splice = &sp, .resp = resp};
	uint8_t req[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, req, sizeof req);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_DOWNLOAD);
	sbx_msgw_str(&w, SBX_T_PATH, dir);
	struct sbx_err e;
	assert_int_equal(sbx_job_xfer(&js, 7, 0, req, w.len, &e), 0);
	struct sbx_job *j = sbx_job_find(&js, 7);
	assert_non_null(j);
	struct pollfd pf = {j->fd_out, POLLIN, 0};
	assert_int_equal(poll(&pf, 1, 10000), 1); /* the archive is there to read */

	/* A normal round takes a chunk and queues it under its credit. */
	sbx_job_output(&js, j, SBX_CH_STDOUT, POLLIN);
	uint64_t avail = j->tx[SBX_CH_STDOUT].avail;
	size_t queued = q.bulk_bytes;
	assert_true(avail < SBX_WINDOW_DEFAULT);
	assert_true(queued > SBX_WINDOW_DEFAULT - avail); /* the payload and its frame's head */

	/* The CANCEL, then the same round's stale readiness. */
	sbx_job_kill(j);
	assert_int_equal(j->fd_out, -1);
	sbx_job_output(&js, j, SBX_CH_STDOUT, POLLIN);
	assert_int_equal(j->tx[SBX_CH_STDOUT].avail, avail);
	assert_int_equal(q.bulk_bytes, queued);
	sbx_job_output(&js, j, SBX_CH_STDOUT, POLLIN | POLLHUP);
	assert_int_equal(j->tx[SBX_CH_STDOUT].avail, avail);
	assert_int_equal(q.bulk_bytes, queued);

	sbx_job_free_all(&js);
	sbx_outq_free(&q);
	free(resp);
	snprintf(p, sizeof p, "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(output_after_cancel_in_the_same_round),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
