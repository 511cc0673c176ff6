/* Payloads of TCP forwarding: FWD_LISTEN, OPEN, RESET (docs/forwarding.md, sections 2-3). */
#include "fwdmsg.h"

#include <string.h>

static int port_of(const struct sbx_field *f, uint16_t *out)
{
	int64_t v;
	if (sbx_field_i64(f, &v) < 0 || v < 1 || v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

int sbx_fwdmsg_listen_parse(const uint8_t *p, size_t len, struct sbx_fwd_listen *out,
                            struct sbx_err *e)
{
	memset(out, 0, sizeof *out);
	out->max_conn = SBX_FWD_MAX_CONN;
	int seen_ready = 0, seen_max = 0;
	struct sbx_msgr r;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag == SBX_T_FWD_PORT) {
			uint16_t port;
			if (port_of(&f, &port) < 0)
				return sbx_err_set(e, SBX_EUSAGE, 0,
				                   "forward: a port outside 1..65535");
			for (size_t i = 0; i < out->nports; i++)
				if (out->ports[i] == port)
					return sbx_err_set(e, SBX_EUSAGE, 0,
					                   "forward: port %u twice",
					                   (unsigned)port);
			if (out->nports == SBX_FWD_MAX_PORTS)
				return sbx_err_set(e, SBX_EUSAGE, 0, "forward: more than %d ports",
				                   SBX_FWD_MAX_PORTS);
			out->ports[out->nports++] = port;
		} else if (f.tag == SBX_T_READY_FILE) {
			if (seen_ready++ || f.len == 0 ||
			    sbx_field_str(&f, out->ready, sizeof out->ready) < 0)
				return sbx_err_set(
				        e, SBX_EUSAGE, 0,
				        "forward: a bad ready file (empty, NUL, too long, twice)");
		} else if (f.tag == SBX_T_MAX_CONN) {
			if (seen_max++ || sbx_field_i64(&f, &out->max_conn) < 0 ||
			    out->max_conn < 1 || out->max_conn > SBX_FWD_MAX_CONN_LIMIT)
				return sbx_err_set(e, SBX_EUSAGE, 0,
				                   "forward: connections outside 1..%d",
				                   SBX_FWD_MAX_CONN_LIMIT);
		}
	}
	if (rc < 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: malformed request");
	if (out->nports == 0)
		return sbx_err_set(e, SBX_EUSAGE, 0, "forward: no port");
	return 0;
}

void sbx_fwdmsg_listen_write(struct sbx_msgw *w, const struct sbx_fwd_listen *l)
{
	for (size_t i = 0; i < l->nports; i++)
		sbx_msgw_i64(w, SBX_T_FWD_PORT, l->ports[i]);
	if (l->ready[0] != '\0')
		sbx_msgw_str(w, SBX_T_READY_FILE, l->ready);
	if (l->max_conn != SBX_FWD_MAX_CONN)
		sbx_msgw_i64(w, SBX_T_MAX_CONN, l->max_conn);
}

static int addr_ok(const struct sbx_field *f)
{
	if (f->len == 0 || f->len > SBX_FWD_ADDR_MAX)
		return 0;
	for (uint32_t i = 0; i < f->len; i++) {
		uint8_t c = f->val[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == ':' || c == '-'))
			return 0;
	}
	return 1;
}

int sbx_fwdmsg_open_parse(const uint8_t *p, size_t len, enum sbx_fwd_from from,
                          struct sbx_fwd_open *out, struct sbx_err *e)
{
	memset(out, 0, sizeof *out);
	int seen_port = 0, seen_listener = 0, seen_addr = 0;
	struct sbx_msgr r;
	struct sbx_field f;
	int rc;
	sbx_msgr_init(&r, p, len);
	while ((rc = sbx_msgr_next(&r, &f)) == 1) {
		if (f.tag == SBX_T_FWD_PORT) {
			if (seen_port++ || port_of(&f, &out->port) < 0)
				return sbx_err_set(e, SBX_EPROTOCOL, 0,
				                   "OPEN: a bad or second port");
		} else if (f.tag == SBX_T_LISTENER && from == SBX_FWD_FROM_AGENT) {
			int64_t v;
			if (seen_listener++ || sbx_field_i64(&f, &v) < 0 || v < 1 ||
			    v >= (int64_t)SBX_FWD_AGENT_ID_BIT)
				return sbx_err_set(e, SBX_EPROTOCOL, 0,
				                   "OPEN: a bad or second listener");
			out->listener = (uint32_t)v;
		} else if (f.tag == SBX_T_ADDR && from == SBX_FWD_FROM_HOST) {
			if (seen_addr++ || !addr_ok(&f))
				return sbx_err_set(e, SBX_EPROTOCOL, 0,
				                   "OPEN: a bad or second address");
			memcpy(out->addr, f.val, f.len);
			out->addr[f.len] = '\0';
		}
	}
	if (rc < 0)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "OPEN: malformed payload");
	if (!seen_port)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "OPEN: no port");
	if (from == SBX_FWD_FROM_AGENT && !seen_listener)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "OPEN: no listener");
	if (from == SBX_FWD_FROM_HOST && !seen_addr)
		return sbx_err_set(e, SBX_EPROTOCOL, 0, "OPEN: no address");
	return 0;
}

void sbx_fwdmsg_open_write(struct sbx_msgw *w, enum sbx_fwd_from from, const struct sbx_fwd_open *o)
{
	if (from == SBX_FWD_FROM_AGENT)
		sbx_msgw_i64(w, SBX_T_LISTENER, o->listener);
	else
		sbx_msgw_str(w, SBX_T_ADDR, o->addr);
	sbx_msgw_i64(w, SBX_T_FWD_PORT, o->port);
}

void sbx_fwdmsg_reset_parse(const uint8_t *p, size_t len, struct sbx_fwd_reset *out)
{
	out->errnum = 0;
	out->msg[0] = '\0';
	int seen_errno = 0, seen_msg = 0;
	struct sbx_msgr r;
	struct sbx_field f;
	sbx_msgr_init(&r, p, len);
	while (sbx_msgr_next(&r, &f) == 1) {
		if (f.tag == SBX_T_ERRNO && !seen_errno++) {
			int64_t v;
			if (sbx_field_i64(&f, &v) == 0 && v >= 1 && v <= 4095)
				out->errnum = (int)v;
		} else if (f.tag == SBX_T_MESSAGE && !seen_msg++) {
			size_t n = f.len < SBX_FWD_RESET_MSG_MAX ? f.len : SBX_FWD_RESET_MSG_MAX;
			for (size_t i = 0; i < n; i++) {
				uint8_t c = f.val[i];
				out->msg[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
			}
			out->msg[n] = '\0';
		}
	}
}

void sbx_fwdmsg_reset_write(struct sbx_msgw *w, int errnum, const char *msg)
{
	if (errnum > 0)
		sbx_msgw_i64(w, SBX_T_ERRNO, errnum);
	if (msg != NULL && msg[0] != '\0') {
		size_t n = strlen(msg);
		sbx_msgw_bytes(w, SBX_T_MESSAGE, msg,
		               n < SBX_FWD_RESET_MSG_MAX ? n : SBX_FWD_RESET_MSG_MAX);
	}
}

int sbx_fwdmsg_id_ok(uint32_t id, enum sbx_fwd_from from)
{
	if (id == 0)
		return 0;
	return from == SBX_FWD_FROM_AGENT ? (id & SBX_FWD_AGENT_ID_BIT) != 0
	                                  : (id & SBX_FWD_AGENT_ID_BIT) == 0;
}
