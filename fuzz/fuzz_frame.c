/* libFuzzer target for the frame decoder and the message field reader: the same bytes fed
 * whole, in pieces (sizes drawn from the input) and the agent's upload way (reads up to
 * sbx_frame_dec_until, payloads detached) must give the same frames and the same verdict, no
 * frame may exceed the decoder's buffer, and every payload's fields must stay inside it. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "frame.h"
#include "msg.h"

#define CAP (SBX_FRAME_HDR + 4096)
#define MAXF 64

struct seen {
	int n;
	int error;
	uint8_t type[MAXF], flags[MAXF];
	uint32_t stream[MAXF], len[MAXF], sum[MAXF];
};

static void check_fields(const uint8_t *p, uint32_t len)
{
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, p, len);
	int rc;
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.val < p || f.val + f.len > p + len)
			__builtin_trap();
		if (f.tag == 32) /* nested messages are parsed the same way */
			check_fields(f.val, f.len);
	}
}

static void record(struct seen *out, const struct sbx_frame *f, uint32_t sum)
{
	if (out->n < MAXF) {
		out->type[out->n] = f->type;
		out->flags[out->n] = f->flags;
		out->stream[out->n] = f->stream;
		out->len[out->n] = f->len;
		out->sum[out->n] = sum;
	}
	out->n++;
}

static uint32_t sum_of(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sum = sum * 31 + p[i];
	return sum;
}

/* Feeds one read's bytes; 1 when a frame came out of them. */
static int feed(struct sbx_frame_dec *d, const uint8_t *p, size_t piece, struct seen *out)
{
	size_t off = 0;
	int emitted = 0;
	while (off < piece) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st = sbx_frame_dec_feed(d, p + off, piece - off, &used, &f);
		if (used > piece - off)
			__builtin_trap();
		off += used;
		if (st == SBX_DEC_ERROR) {
			out->error = 1 + (int)d->error;
			break;
		}
		if (st == SBX_DEC_FRAME) {
			if (f.len > CAP - SBX_FRAME_HDR || !sbx_frame_type_known(f.type))
				__builtin_trap();
			check_fields(f.payload, f.len);
			record(out, &f, sum_of(0, f.payload, f.len));
			emitted = 1;
		} else if (used == 0) {
			__builtin_trap(); /* NEED must consume everything */
		}
	}
	return emitted;
}

/* Reads of the sizes the cuts give (all at once without cuts); or, detached, the agent's way
 * during uploads: reads that stop sbx_frame_dec_until(prefix) bytes on, and payloads (those
 * the cuts pick) taken past the decoder once their header is in. */
static void run(const uint8_t *data, size_t size, const uint8_t *cuts, size_t ncuts, int detached,
                struct seen *out)
{
	static uint8_t buf[CAP];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	memset(out, 0, sizeof *out);
	size_t pos = 0, k = 0;
	while (pos < size && !out->error) {
		uint8_t c = ncuts ? cuts[k++ % ncuts] : 0;
		size_t prefix = c & 7;
		int had_header = d.have >= SBX_FRAME_HDR;
		size_t piece = detached ? sbx_frame_dec_until(&d, prefix)
		               : ncuts  ? (size_t)c + 1
		                        : size;
		if (piece == 0)
			__builtin_trap();
		int whole = piece <= size - pos;
		if (!whole)
			piece = size - pos;
		int emitted = feed(&d, data + pos, piece, out);
		pos += piece;
		if (out->error || !detached)
			continue;
		/* A read of exactly sbx_frame_dec_until after the header never runs into the next
		 * frame. */
		if (whole && had_header && !(emitted && d.have == 0) &&
		    d.have != SBX_FRAME_HDR + prefix)
			__builtin_trap();
		struct sbx_frame f;
		size_t held;
		if (!(c & 8) || !sbx_frame_dec_pending(&d, &f, &held))
			continue;
		if (held > f.len)
			__builtin_trap();
		size_t rest = f.len - held;
		if (rest > size - pos)
			break; /* cut inside the payload: as the whole run, no frame */
		uint32_t sum = sum_of(sum_of(0, f.payload, held), data + pos, rest);
		sbx_frame_dec_detach(&d);
		if (sbx_frame_dec_midframe(&d))
			__builtin_trap();
		pos += rest;
		record(out, &f, sum);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The first bytes choose the cuts; the rest is the stream. */
	size_t ncuts = size > 0 ? data[0] % 8 : 0;
	if (size < 1 + ncuts)
		return 0;
	const uint8_t *cuts = data + 1;
	const uint8_t *stream = data + 1 + ncuts;
	size_t len = size - 1 - ncuts;
	struct seen whole, pieces, detached;
	run(stream, len, NULL, 0, 0, &whole);
	run(stream, len, cuts, ncuts, 0, &pieces);
	if (memcmp(&whole, &pieces, sizeof whole) != 0)
		__builtin_trap();
	run(stream, len, cuts, ncuts, 1, &detached);
	if (memcmp(&whole, &detached, sizeof whole) != 0)
		__builtin_trap();
	return 0;
}
