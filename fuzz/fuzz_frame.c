/* libFuzzer target for the frame decoder and the message field reader: the same bytes fed
 * whole and in pieces (sizes drawn from the input) must give the same frames and the same
 * verdict, no frame may exceed the decoder's buffer, and every payload's fields must stay
 * inside it. */
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

static void run(const uint8_t *data, size_t size, const uint8_t *cuts, size_t ncuts,
                struct seen *out)
{
	static uint8_t buf[CAP];
	struct sbx_frame_dec d;
	sbx_frame_dec_init(&d, buf, sizeof buf);
	memset(out, 0, sizeof *out);
	size_t pos = 0, k = 0;
	while (pos < size && !out->error) {
		size_t piece = ncuts ? (size_t)cuts[k++ % ncuts] + 1 : size;
		if (piece > size - pos)
			piece = size - pos;
		size_t off = 0;
		while (off < piece) {
			size_t used;
			struct sbx_frame f;
			enum sbx_dec_status st =
			        sbx_frame_dec_feed(&d, data + pos + off, piece - off, &used, &f);
			if (used > piece - off)
				__builtin_trap();
			off += used;
			if (st == SBX_DEC_ERROR) {
				out->error = 1 + (int)d.error;
				break;
			}
			if (st == SBX_DEC_FRAME) {
				if (f.len > CAP - SBX_FRAME_HDR || !sbx_frame_type_known(f.type))
					__builtin_trap();
				check_fields(f.payload, f.len);
				if (out->n < MAXF) {
					uint32_t sum = 0;
					for (uint32_t i = 0; i < f.len; i++)
						sum = sum * 31 + f.payload[i];
					out->type[out->n] = f.type;
					out->flags[out->n] = f.flags;
					out->stream[out->n] = f.stream;
					out->len[out->n] = f.len;
					out->sum[out->n] = sum;
				}
				out->n++;
			} else if (used == 0) {
				__builtin_trap(); /* NEED must consume everything */
			}
		}
		pos += piece;
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
	struct seen whole, pieces;
	run(stream, len, NULL, 0, &whole);
	run(stream, len, cuts, ncuts, &pieces);
	if (memcmp(&whole, &pieces, sizeof whole) != 0)
		__builtin_trap();
	return 0;
}
