/* The protocol engine of a session, sans-I/O (engine.h). */
#include "engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

/* The decoder's buffer when no frame is being assembled in parts: frames that arrive whole are
 * decoded in place, so an idle session holds no more than this. */
#define DEC_FLOOR 1024

int sbx_engine_init(struct sbx_engine *g, int64_t timeout_ns, int64_t now)
{
	memset(g, 0, sizeof *g);
	g->state = SBX_ENGINE_HELLO;
	g->next_id = 1;
	g->timeout_ns = timeout_ns;
	g->hello_deadline_ns = now + timeout_ns;
	g->last_rx_ns = now;
	sbx_outq_init(&g->out);
	g->decbuf = malloc(DEC_FLOOR);
	if (g->decbuf == NULL)
		return -1;
	g->deccap = DEC_FLOOR;
	sbx_frame_dec_init_max(&g->dec, g->decbuf, g->deccap, SBX_FRAME_MAX_PAYLOAD);
	return 0;
}

static void stream_free(struct sbx_stream *p)
{
	free(p->resp);
	free(p);
}

void sbx_engine_free(struct sbx_engine *g)
{
	while (g->streams != NULL) {
		struct sbx_stream *p = g->streams;
		g->streams = p->next;
		stream_free(p);
	}
	sbx_outq_free(&g->out);
	free(g->decbuf);
	g->decbuf = NULL;
}

int sbx_engine_break(struct sbx_engine *g, enum sbx_err_class cls, int err, const char *fmt, ...)
{
	if (g->state != SBX_ENGINE_BROKEN) {
		g->state = SBX_ENGINE_BROKEN;
		g->err.cls = cls;
		g->err.errnum = err;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err.msg, sizeof g->err.msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static struct sbx_stream *find(struct sbx_engine *g, uint32_t id)
{
	for (struct sbx_stream *p = g->streams; p != NULL; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

struct sbx_stream *sbx_engine_stream(struct sbx_engine *g, int kind)
{
	struct sbx_stream *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->kind = kind;
	/* Ids are never reused while a stream is open (an abandoned one may live on). */
	do {
		p->id = g->next_id++;
		/* ids with bit 31 set are the agent's (forwarded connections, docs/forwarding.md)
		 */
		if (g->next_id == 0 || (g->next_id & SBX_FWD_AGENT_ID_BIT) != 0)
			g->next_id = 1;
	} while (find(g, p->id) != NULL);
	p->next = g->streams;
	g->streams = p;
	g->nstreams++;
	return p;
}

static void unlink_stream(struct sbx_engine *g, struct sbx_stream *p)
{
	for (struct sbx_stream **pp = &g->streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			g->nstreams--;
			return;
		}
}

void sbx_engine_release(struct sbx_engine *g, struct sbx_stream *p)
{
	if (p == NULL)
		return;
	/* A request still waiting for its answer stays known, so that the answer is not taken
	 * for one on a stream never opened. */
	if (!p->done && g->state != SBX_ENGINE_BROKEN && p->kind != SBX_STREAM_DETACHED) {
		p->abandoned = 1;
		p->ops = NULL;
		p->ctx = NULL;
		return;
	}
	unlink_stream(g, p);
	stream_free(p);
}

int sbx_engine_send(struct sbx_engine *g, enum sbx_lane lane, uint8_t type, uint8_t flags,
                    uint32_t stream, const void *pre, size_t prelen, const void *p, size_t len,
                    struct sbx_err *e)
{
	if (g->state == SBX_ENGINE_BROKEN) {
		if (e != NULL)
			*e = g->err;
		return -1;
	}
	if (sbx_outq_push(&g->out, lane, type, flags, stream, pre, prelen, p, len) != 0)
		return sbx_err_set(e, SBX_EUSAGE, ENOMEM, "frame too large or out of memory");
	return 0;
}

int sbx_engine_request(struct sbx_engine *g, struct sbx_stream *p, const uint8_t *req, size_t len,
                       struct sbx_err *e)
{
	if (p->kind == SBX_STREAM_JOB) {
		/* Which output channels the job may use: a command and a terminal session's stream
		 * both, a download its archive on stdout, an upload none. */
		struct sbx_field of;
		int64_t op = 0;
		if (sbx_msg_find(req, len, SBX_T_OP, &of) == 1)
			sbx_field_i64(&of, &op);
		p->out_chans = op == SBX_OP_EXEC || op == SBX_OP_PTY_STREAM
		                       ? 1u << SBX_CH_STDOUT | 1u << SBX_CH_STDERR
		               : op == SBX_OP_DOWNLOAD ? 1u << SBX_CH_STDOUT
		                                       : 0;
		for (int c = 0; c < SBX_CH_COUNT; c++)
			sbx_credit_rx_init(&p->rx[c], SBX_WINDOW_DEFAULT);
		sbx_credit_tx_init(&p->tx_in, (uint64_t)g->hello.window);
	}
	return sbx_engine_send(g, SBX_LANE_CTRL, SBX_F_REQUEST, 0, p->id, NULL, 0, req, len, e);
}

void sbx_engine_consumed(struct sbx_engine *g, struct sbx_stream *p, int ch, uint64_t n)
{
	uint64_t got = sbx_credit_rx_consumed(&p->rx[ch], n);
	if (got == 0)
		return;
	uint8_t c[5] = {(uint8_t)ch, (uint8_t)(got >> 24), (uint8_t)(got >> 16),
	                (uint8_t)(got >> 8), (uint8_t)got};
	sbx_engine_send(g, SBX_LANE_CTRL, SBX_F_CREDIT, 0, p->id, NULL, 0, c, 5, NULL);
}

int sbx_engine_idle(const struct sbx_engine *g)
{
	return g->streams == NULL && !sbx_frame_dec_midframe(&g->dec) && sbx_outq_empty(&g->out);
}

void sbx_engine_trim(struct sbx_engine *g)
{
	if (g->deccap > DEC_FLOOR && !sbx_frame_dec_midframe(&g->dec)) {
		uint8_t *b = realloc(g->decbuf, DEC_FLOOR);
		if (b != NULL) {
			g->decbuf = b;
			g->deccap = DEC_FLOOR;
			sbx_frame_dec_setbuf(&g->dec, b, DEC_FLOOR);
		}
	}
}

/* ---- what the agent sends ---- */

static int parse_hello(struct sbx_engine *g, const struct sbx_frame *f)
{
	struct sbx_hello *h = &g->hello;
	struct sbx_msgr r;
	struct sbx_field fl;
	int rc, canary_ok = 0;
	sbx_msgr_init(&r, f->payload, f->len);
	while ((rc = sbx_msgr_next(&r, &fl)) == 1) {
		int64_t v = 0;
		int is_int = sbx_field_i64(&fl, &v) == 0;
		switch (fl.tag) {
		case SBX_T_PROTO_MIN:
			h->proto_min = is_int ? v : 0;
			break;
		case SBX_T_PROTO_MAX:
			h->proto_max = is_int ? v : 0;
			break;
		case SBX_T_AGENT_VERSION:
			sbx_field_str(&fl, h->agent_version, sizeof h->agent_version);
			break;
		case SBX_T_ARCH:
			sbx_field_str(&fl, h->arch, sizeof h->arch);
			break;
		case SBX_T_KERNEL:
			sbx_field_str(&fl, h->kernel, sizeof h->kernel);
			break;
		case SBX_T_UID:
			h->uid = v;
			break;
		case SBX_T_EUID:
			h->euid = v;
			break;
		case SBX_T_GID:
			h->gid = v;
			break;
		case SBX_T_EGID:
			h->egid = v;
			break;
		case SBX_T_PID:
			h->pid = v;
			break;
		case SBX_T_CAPS:
			h->caps = v;
			break;
		case SBX_T_CGROUP:
			h->cgroup = (int)v;
			break;
		case SBX_T_MAX_PAYLOAD:
			h->max_payload = v;
			break;
		case SBX_T_WINDOW:
			h->window = v;
			break;
		case SBX_T_FWD:
			h->fwd = is_int && v == 1;
			break;
		case SBX_T_SELF_SHA256:
			if (fl.len == sizeof h->sha256)
				memcpy(h->sha256, fl.val, sizeof h->sha256);
			break;
		case SBX_T_CANARY:
			canary_ok = fl.len == SBX_CANARY_LEN &&
			            memcmp(fl.val, SBX_CANARY, SBX_CANARY_LEN) == 0;
			break;
		default:
			break;
		}
	}
	/* A HELLO that does not parse, or whose canary changed, came through a channel that
	 * rewrites bytes: the channel is unusable, not the agent wrong. */
	if (rc < 0 || !canary_ok)
		return sbx_engine_break(
		        g, SBX_EUNAVAILABLE, 0,
		        "the channel mangles bytes (a tty? use exec -i without -t)");
	h->proto = sbx_proto_choose(h->proto_min, h->proto_max, SBX_PROTO_MIN, SBX_PROTO_MAX);
	if (h->proto == 0)
		return sbx_engine_break(
		        g, SBX_EPROTOCOL, 0,
		        "protocol version mismatch: the agent speaks %lld..%lld, this host %d..%d",
		        (long long)h->proto_min, (long long)h->proto_max, SBX_PROTO_MIN,
		        SBX_PROTO_MAX);
	if (h->window < 4096 || h->window > (1 << 30))
		h->window = SBX_WINDOW_DEFAULT;
	g->state = SBX_ENGINE_OPEN;
	uint8_t buf[128];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_VERSION, h->proto);
	sbx_msgw_bytes(&w, SBX_T_CANARY, SBX_CANARY, SBX_CANARY_LEN);
	sbx_msgw_i64(&w, SBX_T_WINDOW, SBX_WINDOW_DEFAULT);
	return sbx_engine_send(g, SBX_LANE_CTRL, SBX_F_WELCOME, 0, 0, NULL, 0, buf, w.len, NULL);
}

static int on_data(struct sbx_engine *g, const struct sbx_frame *f)
{
	if (f->len < 1 || (f->payload[0] != SBX_CH_STDOUT && f->payload[0] != SBX_CH_STDERR))
		return sbx_engine_break(g, SBX_EPROTOCOL, 0, "DATA on an unknown channel");
	int ch = f->payload[0];
	struct sbx_stream *p = find(g, f->stream);
	if (p == NULL || p->kind != SBX_STREAM_JOB || p->done)
		return sbx_engine_break(g, SBX_EPROTOCOL, 0,
		                        "DATA on a stream that is not a command");
	if (!(p->out_chans & (1u << ch)) || p->out_end[ch])
		return sbx_engine_break(g, SBX_EPROTOCOL, 0, "DATA on a channel %s",
		                        p->out_end[ch] ? "after its END"
		                                       : "this job does not send on");
	uint64_t n = f->len - 1;
	if (sbx_credit_rx_received(&p->rx[ch], n) != 0)
		return sbx_engine_break(g, SBX_EPROTOCOL, 0, "the agent overran its output credit");
	int end = (f->flags & SBX_FL_END) != 0;
	if (end)
		p->out_end[ch] = 1;
	if (p->ops != NULL && p->ops->data != NULL)
		p->ops->data(p, ch, f->payload + 1, n, end);
	else
		sbx_engine_consumed(g, p, ch, n); /* nobody wants it: credited at once */
	return 0;
}

static int on_answer(struct sbx_engine *g, const struct sbx_frame *f, int64_t now)
{
	struct sbx_stream *p = find(g, f->stream);
	if (p == NULL || p->done)
		return sbx_engine_break(g, SBX_EPROTOCOL, 0, "an answer on a stream not open");
	if ((f->type == SBX_F_PONG) != (p->kind == SBX_STREAM_PING) || p->kind == SBX_STREAM_CONN)
		return sbx_engine_break(g, SBX_EPROTOCOL, 0, "the wrong kind of answer");
	if (p->kind == SBX_STREAM_DETACHED || p->abandoned) {
		unlink_stream(g, p);
		stream_free(p);
		return 0;
	}
	p->resp = malloc(f->len ? f->len : 1);
	if (p->resp == NULL)
		return sbx_engine_break(g, SBX_EUNAVAILABLE, ENOMEM, "no memory for a response");
	memcpy(p->resp, f->payload, f->len);
	p->resp_len = f->len;
	p->done = 1;
	p->done_ns = now;
	if (p->ops != NULL && p->ops->done != NULL)
		p->ops->done(p);
	return 0;
}

/* A connection stream of TCP forwarding: the agent's ids, or one the host opened. */
static int is_conn(struct sbx_engine *g, uint32_t id)
{
	if (id & SBX_FWD_AGENT_ID_BIT)
		return 1;
	struct sbx_stream *p = find(g, id);
	return p != NULL && p->kind == SBX_STREAM_CONN;
}

static int on_frame(struct sbx_engine *g, const struct sbx_frame *f, int64_t now)
{
	g->last_rx_ns = now;
	if (g->state == SBX_ENGINE_HELLO) {
		if (f->type != SBX_F_HELLO || f->stream != 0)
			return sbx_engine_break(g, SBX_EPROTOCOL, 0,
			                        "the agent did not start with HELLO on stream 0");
		return parse_hello(g, f);
	}
	if (f->type == SBX_FRAME_TYPE_OPEN || f->type == SBX_FRAME_TYPE_RESET ||
	    ((f->type == SBX_F_DATA || f->type == SBX_F_CREDIT) && is_conn(g, f->stream))) {
		if (g->fwd_frame == NULL)
			return sbx_engine_break(g, SBX_EPROTOCOL, 0,
			                        "a forwarding frame, and nothing is forwarded");
		return g->fwd_frame(g->fwd_ctx, f);
	}
	switch (f->type) {
	case SBX_F_PONG:
		if (f->stream == 0) {
			g->keepalive_sent_ns = 0;
			return 0;
		}
		return on_answer(g, f, now);
	case SBX_F_RESPONSE:
		return on_answer(g, f, now);
	case SBX_F_DATA:
		return on_data(g, f);
	case SBX_F_CREDIT: {
		struct sbx_stream *p = find(g, f->stream);
		if (f->len != 5 || f->payload[0] != SBX_CH_STDIN)
			return sbx_engine_break(g, SBX_EPROTOCOL, 0, "malformed CREDIT");
		uint64_t n = (uint64_t)f->payload[1] << 24 | (uint64_t)f->payload[2] << 16 |
		             (uint64_t)f->payload[3] << 8 | f->payload[4];
		if (p == NULL)
			return 0; /* a finished job's late credit */
		if (sbx_credit_tx_grant(&p->tx_in, n, (uint64_t)g->hello.window) != 0)
			return sbx_engine_break(g, SBX_EPROTOCOL, 0, "credit past any window");
		if (p->ops != NULL && p->ops->credit != NULL)
			p->ops->credit(p);
		return 0;
	}
	default:
		return sbx_engine_break(g, SBX_EPROTOCOL, 0,
		                        f->type == SBX_F_HELLO
		                                ? "the agent sent HELLO twice"
		                                : "the agent sent a frame only hosts "
		                                  "send");
	}
}

/* The decoder asks for a buffer that holds the frame it is assembling. */
static int grow(struct sbx_engine *g)
{
	size_t need = sbx_frame_dec_room(&g->dec);
	uint8_t *b = realloc(g->decbuf, need);
	if (b == NULL)
		return sbx_engine_break(g, SBX_EUNAVAILABLE, ENOMEM, "no memory for a frame");
	g->decbuf = b;
	g->deccap = need;
	sbx_frame_dec_setbuf(&g->dec, b, need);
	return 0;
}

int sbx_engine_feed(struct sbx_engine *g, const uint8_t *b, size_t n, int64_t now)
{
	if (g->state == SBX_ENGINE_BROKEN)
		return -1;
	if (g->seen < sizeof g->first) {
		size_t k = sizeof g->first - g->seen < n ? sizeof g->first - g->seen : n;
		memcpy(g->first + g->seen, b, k);
		g->seen += k;
	}
	size_t pos = 0;
	while (pos < n && g->state != SBX_ENGINE_BROKEN) {
		size_t used;
		struct sbx_frame f;
		enum sbx_dec_status st = sbx_frame_dec_feed(&g->dec, b + pos, n - pos, &used, &f);
		pos += used;
		if (st == SBX_DEC_ROOM) {
			if (grow(g) != 0)
				return -1;
			continue;
		}
		if (st == SBX_DEC_ERROR) {
			if (g->state != SBX_ENGINE_HELLO)
				return sbx_engine_break(g, SBX_EUNAVAILABLE, 0,
				                        "corrupt stream from the agent: %s",
				                        sbx_dec_error_text(g->dec.error));
			/* Show what the channel printed instead of frames. */
			char shown[sizeof g->first + 1];
			size_t k = 0;
			for (size_t i = 0; i < g->seen; i++)
				shown[k++] = g->first[i] >= 32 && g->first[i] < 127
				                     ? (char)g->first[i]
				                     : '.';
			shown[k] = '\0';
			return sbx_engine_break(
			        g, SBX_EUNAVAILABLE, 0,
			        "corrupt stream from the agent: %s; the channel sent "
			        "\"%s\"",
			        sbx_dec_error_text(g->dec.error), shown);
		}
		if (st == SBX_DEC_FRAME && on_frame(g, &f, now) != 0)
			return -1;
	}
	return g->state == SBX_ENGINE_BROKEN ? -1 : 0;
}

int sbx_engine_eof(struct sbx_engine *g)
{
	return sbx_engine_break(g, SBX_EUNAVAILABLE, 0, "%s",
	                        sbx_frame_dec_midframe(&g->dec)
	                                ? "the channel ended inside a frame (the agent was "
	                                  "killed?)"
	                        : g->state == SBX_ENGINE_OPEN ? "the agent closed the channel"
	                                                      : "the channel closed before the "
	                                                        "agent spoke");
}

/* ---- time ---- */

int sbx_engine_tick(struct sbx_engine *g, int64_t now)
{
	if (g->state == SBX_ENGINE_BROKEN)
		return -1;
	if (g->state == SBX_ENGINE_HELLO) {
		/* Never a keepalive before HELLO: the agent refuses any frame before WELCOME, and
		 * the HELLO has its own deadline. */
		if (now >= g->hello_deadline_ns)
			return sbx_engine_break(g, SBX_EUNAVAILABLE, ETIMEDOUT,
			                        "no HELLO from the agent before the deadline");
		return 0;
	}
	/* Keepalive: a silent agent gets a ping; no answer within the timeout breaks the
	 * session. */
	if (g->keepalive_sent_ns == 0 && now - g->last_rx_ns >= g->timeout_ns / 2) {
		sbx_engine_send(g, SBX_LANE_CTRL, SBX_F_PING, 0, 0, NULL, 0, NULL, 0, NULL);
		g->keepalive_sent_ns = now;
	}
	if (g->keepalive_sent_ns != 0 && now - g->keepalive_sent_ns > g->timeout_ns)
		return sbx_engine_break(g, SBX_EUNAVAILABLE, 0,
		                        "the agent stopped answering (no pong in the session "
		                        "timeout)");
	return 0;
}

int64_t sbx_engine_deadline(const struct sbx_engine *g, int64_t now)
{
	(void)now;
	if (g->state == SBX_ENGINE_BROKEN)
		return INT64_MAX;
	if (g->state == SBX_ENGINE_HELLO)
		return g->hello_deadline_ns;
	return g->keepalive_sent_ns != 0 ? g->keepalive_sent_ns + g->timeout_ns + 1
	                                 : g->last_rx_ns + g->timeout_ns / 2;
}
