/* libFuzzer target for the host's protocol engine alone (host/engine.c, sans-I/O): the input's
 * first two bytes draw how it is cut and how the clock moves, the rest is the byte stream an
 * agent sends. Once HELLO is taken, the streams fuzz_host opens are opened in its order (1-4
 * requests, 5 an exec job, 6-10 requests, 11 a download job, 12 a ping), so its seeds answer
 * them here too. Output credit is returned at once or later, as the input says. Checked: no
 * crash, leak or sanitizer report; DATA only reaches a job on a channel its OP sends on and
 * never past its window; each answer is told once, with its bytes; a broken engine stays
 * broken and takes nothing more; the time to tick is never in the past; what the engine
 * queues to send is drained as a writer would. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "engine.h"
#include "msg.h"

#define NSTREAMS 12

struct ctx {
	struct sbx_engine *g;
	int delay; /* return credit later */
	uint64_t owed[NSTREAMS + 1][SBX_CH_COUNT];
	uint64_t got[NSTREAMS + 1][SBX_CH_COUNT];
	int answered[NSTREAMS + 1];
};

static struct ctx C;

static void on_data(struct sbx_stream *p, int ch, const uint8_t *b, size_t n, int end)
{
	(void)end;
	if (p->id > NSTREAMS || p->kind != SBX_STREAM_JOB || !(p->out_chans & (1u << ch)))
		__builtin_trap();
	if (n > 0) { /* what was handed over is readable, both ends */
		volatile uint8_t x = b[0];
		x = b[n - 1];
		(void)x;
	}
	C.got[p->id][ch] += n;
	if (C.owed[p->id][ch] + n > (uint64_t)SBX_WINDOW_DEFAULT)
		__builtin_trap(); /* more unreturned bytes than the window */
	if (C.delay)
		C.owed[p->id][ch] += n;
	else
		sbx_engine_consumed(C.g, p, ch, n);
}

static void on_done(struct sbx_stream *p)
{
	if (p->id > NSTREAMS || C.answered[p->id]++ != 0 || p->resp == NULL || !p->done)
		__builtin_trap();
}

static void on_credit(struct sbx_stream *p)
{
	if (p->kind != SBX_STREAM_JOB)
		__builtin_trap();
}

static const struct sbx_stream_ops ops = {on_data, on_done, on_credit};

static struct sbx_stream *streams[NSTREAMS + 1];

static void open_streams(struct sbx_engine *g)
{
	static const int ops_of[NSTREAMS + 1] = {0,
	                                         SBX_OP_KIND,
	                                         SBX_OP_STAT,
	                                         SBX_OP_RESOLVE,
	                                         SBX_OP_LANDS_CLEAR,
	                                         SBX_OP_EXEC,
	                                         SBX_OP_SUP_STATUS,
	                                         SBX_OP_SUP_READ,
	                                         SBX_OP_SUP_READ,
	                                         SBX_OP_SUP_READ,
	                                         SBX_OP_KIND,
	                                         SBX_OP_DOWNLOAD,
	                                         0};
	for (int i = 1; i <= NSTREAMS; i++) {
		int kind = i == 12             ? SBX_STREAM_PING
		           : i == 5 || i == 11 ? SBX_STREAM_JOB
		                               : SBX_STREAM_REQ;
		struct sbx_stream *p = sbx_engine_stream(g, kind);
		if (p == NULL)
			__builtin_trap();
		if (p->id != (uint32_t)i)
			__builtin_trap();
		p->ops = &ops;
		streams[i] = p;
		if (kind == SBX_STREAM_PING) {
			sbx_engine_send(g, SBX_LANE_CTRL, SBX_F_PING, 0, p->id, NULL, 0, "12345678",
			                8, NULL);
			continue;
		}
		uint8_t req[32];
		struct sbx_msgw w;
		sbx_msgw_init(&w, req, sizeof req);
		sbx_msgw_i64(&w, SBX_T_OP, ops_of[i]);
		if (sbx_engine_request(g, p, req, w.len, NULL) != 0)
			__builtin_trap();
	}
}

/* What a writer does: everything queued goes out. */
static void drain(struct sbx_engine *g)
{
	struct iovec iov[16];
	int n;
	while ((n = sbx_outq_iov(&g->out, iov, 16)) > 0) {
		size_t len = 0;
		for (int i = 0; i < n; i++)
			len += iov[i].iov_len;
		sbx_outq_advance(&g->out, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	unsigned cut = data[0], clock = data[1];
	data += 2;
	size -= 2;
	struct sbx_engine g;
	memset(&C, 0, sizeof C);
	memset(streams, 0, sizeof streams);
	C.g = &g;
	C.delay = cut & 1;
	int64_t now = 1000000000, timeout = 30000000000LL;
	if (sbx_engine_init(&g, timeout, now) != 0)
		return 0;
	int opened = 0, broke = 0;
	size_t at = 0, piece = (cut >> 1) + 1;
	while (at < size) {
		size_t n = size - at < piece ? size - at : piece;
		int rc = sbx_engine_feed(&g, data + at, n, now);
		at += n;
		if (broke && rc != -1)
			__builtin_trap(); /* broken stays broken */
		if (rc != 0)
			broke = 1;
		if (rc == 0 && g.state == SBX_ENGINE_OPEN && !opened) {
			open_streams(&g);
			opened = 1;
		}
		/* Return what was held back, now and then. */
		if (C.delay && (at & 3) == 0)
			for (int i = 1; i <= NSTREAMS; i++)
				for (int ch = 0; ch < SBX_CH_COUNT; ch++)
					if (C.owed[i][ch] > 0 && streams[i] != NULL &&
					    g.state != SBX_ENGINE_BROKEN) {
						sbx_engine_consumed(&g, streams[i], ch,
						                    C.owed[i][ch]);
						C.owed[i][ch] = 0;
					}
		/* The clock moves as the input says, up to past every deadline. */
		now += (int64_t)(clock & 7) * (timeout / 16);
		int64_t d = sbx_engine_deadline(&g, now);
		if (d < INT64_MAX && d + timeout < now && g.state != SBX_ENGINE_BROKEN)
			__builtin_trap(); /* a deadline long past is always acted on by tick */
		if (sbx_engine_tick(&g, now) != 0)
			broke = 1;
		drain(&g);
	}
	if (broke && g.state != SBX_ENGINE_BROKEN)
		__builtin_trap();
	/* Releasing in any order frees everything (checked by the leak detector). */
	for (int i = NSTREAMS; i >= 1; i--)
		if (streams[i] != NULL)
			sbx_engine_release(&g, streams[i]);
	if (g.state != SBX_ENGINE_BROKEN)
		sbx_engine_eof(&g);
	sbx_engine_free(&g);
	return 0;
}
