/* The frame codec: a sans-I/O engine. Bytes go in, whole checked frames come out; frames go
 * out as a 16-byte header the caller writes before the payload. Layout (big-endian):
 *
 *   0  magic 'S' 'B'   2  type   3  flags   4  stream id (u32)   8  payload length (u32)
 *  12  CRC-32 (IEEE) of bytes 0..11
 *
 * The header check catches garbage and misframing before a length is trusted; the payload of
 * bulk streams is covered end to end by SHA-256 at a higher layer. See docs/protocol.md. */
#ifndef SBX_FRAME_H
#define SBX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define SBX_FRAME_HDR 16
#define SBX_FRAME_MAGIC0 0x53 /* 'S' */
#define SBX_FRAME_MAGIC1 0x42 /* 'B' */
/* The largest payload either side ever sends or accepts. */
#define SBX_FRAME_MAX_PAYLOAD (1u << 20)

enum sbx_frame_type {
	SBX_F_HELLO = 0x01,   /* agent -> host, stream 0: who the agent is */
	SBX_F_WELCOME = 0x02, /* host -> agent, stream 0: the version chosen */
	SBX_F_PING = 0x03,    /* host -> agent: echo the payload in a PONG on the same stream */
	SBX_F_PONG = 0x04,
	SBX_F_REQUEST = 0x10,  /* host -> agent: opens a stream with an operation */
	SBX_F_RESPONSE = 0x11, /* agent -> host: the operation's result; closes the stream */
	SBX_F_DATA = 0x12,     /* either way: bulk bytes on a channel of a stream, under credit */
	SBX_F_CREDIT = 0x13,   /* either way: the receiver allows more DATA on a channel */
	SBX_F_CANCEL = 0x14,   /* host -> agent: abandon the operation on this stream */
};

enum sbx_frame_flag {
	SBX_FL_END = 0x01, /* DATA: the last bytes of this channel */
};

struct sbx_frame {
	uint8_t type;
	uint8_t flags;
	uint32_t stream;
	uint32_t len;
	const uint8_t *payload; /* len bytes; valid until the next call into the decoder */
};

/* 1 when type is one this version knows. */
int sbx_frame_type_known(uint8_t type);

/* Writes the 16-byte header for a frame. */
void sbx_frame_header(uint8_t out[SBX_FRAME_HDR], uint8_t type, uint8_t flags, uint32_t stream,
                      uint32_t len);

/* CRC-32 (IEEE 802.3, reflected, as zlib computes it). */
uint32_t sbx_crc32(const void *data, size_t len);

enum sbx_dec_status {
	SBX_DEC_NEED = 0,   /* every byte given was consumed; feed more */
	SBX_DEC_FRAME = 1,  /* a whole frame is in *out; *used bytes of the input were consumed */
	SBX_DEC_ROOM = 2,   /* the frame being assembled needs a larger buffer (sbx_frame_dec_room
	                       bytes: give one with sbx_frame_dec_setbuf), then feed the rest */
	SBX_DEC_ERROR = -1, /* the stream is corrupt; the decoder stays in error */
};

enum sbx_dec_error {
	SBX_DEC_OK = 0,
	SBX_DEC_BAD_MAGIC,
	SBX_DEC_BAD_CHECK,
	SBX_DEC_TOO_LONG,
	SBX_DEC_UNKNOWN_TYPE,
};

struct sbx_frame_dec {
	uint8_t *buf; /* caller's buffer: header and payload of the frame being assembled */
	size_t cap;   /* its size */
	size_t max;   /* the longest payload accepted */
	size_t have;  /* bytes of the current frame in buf */
	uint32_t need_len;
	enum sbx_dec_error error;
	uint64_t frames; /* frames decoded so far */
};

/* buf must hold at least SBX_FRAME_HDR bytes; frames with longer payloads than buf holds are
 * refused. */
void sbx_frame_dec_init(struct sbx_frame_dec *d, uint8_t *buf, size_t cap);

/* A decoder whose buffer may be smaller than its longest frame (max payload bytes): a frame
 * that arrives whole is handed out in place, one that arrives in parts and does not fit makes
 * the decoder ask for room (SBX_DEC_ROOM). */
void sbx_frame_dec_init_max(struct sbx_frame_dec *d, uint8_t *buf, size_t cap, size_t max);

/* The bytes the frame being assembled needs in the buffer (0: none yet). */
size_t sbx_frame_dec_room(const struct sbx_frame_dec *d);

/* A new buffer of cap bytes holding the same first bytes as the old one (realloc'd): the
 * frame being assembled, if any, fits it. */
void sbx_frame_dec_setbuf(struct sbx_frame_dec *d, uint8_t *buf, size_t cap);

/* Consumes input until one frame is complete (SBX_DEC_FRAME, with *used the bytes taken, so
 * the caller calls again with the rest) or the input is exhausted (SBX_DEC_NEED, *used = len).
 * A frame's payload points into the decoder's buffer, or, when the whole frame was in `in`,
 * into `in` itself (no copy): either way it is valid only until the next call or until the
 * caller reuses `in`. */
enum sbx_dec_status sbx_frame_dec_feed(struct sbx_frame_dec *d, const uint8_t *in, size_t len,
                                       size_t *used, struct sbx_frame *out);

/* 1 when a frame is partly assembled: an end of input now means a truncated stream. */
int sbx_frame_dec_midframe(const struct sbx_frame_dec *d);

/* Streaming a payload past the decoder (the agent splices an upload's bytes from the
 * connection into a pipe without copying them, docs/transfers.md). While the current frame's
 * header is checked and its payload is still arriving, sbx_frame_dec_pending returns 1 and
 * fills *out with the header (len: the whole payload's length; payload: the *held bytes of it
 * taken so far); else 0. */
int sbx_frame_dec_pending(const struct sbx_frame_dec *d, struct sbx_frame *out, size_t *held);

/* Ends a pending frame for the decoder: the caller takes the rest of its payload (len - held
 * bytes) from the stream itself before it feeds anything more. */
void sbx_frame_dec_detach(struct sbx_frame_dec *d);

/* How many bytes the next read should take so that it stops at the end of the current frame,
 * or within its payload just after its header and `prefix` payload bytes, whichever comes
 * first (a read of that many never crosses into the next frame's payload). Never 0. */
size_t sbx_frame_dec_until(const struct sbx_frame_dec *d, size_t prefix);

/* Text for a decoder error. */
const char *sbx_dec_error_text(enum sbx_dec_error e);

#endif
