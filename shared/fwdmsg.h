/* Payloads of TCP forwarding (docs/forwarding.md): the FWD_LISTEN request, the OPEN frame
 * both ways and the RESET frame, written and read with every bound checked, since the host
 * reads the agent's OPEN and RESET as an attacker's bytes. Sans-I/O: no allocation, no
 * sockets; the agent, the host and fuzz/fuzz_fwdmsg.c drive the same code. */
#ifndef SBX_FWDMSG_H
#define SBX_FWDMSG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "msg.h"
#include "proto.h"

#define SBX_FWD_READY_MAX 4095 /* bytes of a READY_FILE path */

struct sbx_fwd_listen {
	uint16_t ports[SBX_FWD_MAX_PORTS];
	size_t nports;
	char ready[SBX_FWD_READY_MAX + 1]; /* "" when no ready file is asked for */
	int64_t max_conn;                  /* 1..SBX_FWD_MAX_CONN_LIMIT */
};

/* Reads a FWD_LISTEN request's fields (OP may be among them and is skipped, as are unknown
 * tags). Refused with SBX_EUSAGE: no port, a port outside 1..65535, a duplicate, more than
 * SBX_FWD_MAX_PORTS, an empty or NUL-holding or too long READY_FILE, MAX_CONN outside
 * 1..SBX_FWD_MAX_CONN_LIMIT, a second READY_FILE or MAX_CONN, a malformed payload.
 * Returns 0 or -1 with *e set. */
int sbx_fwdmsg_listen_parse(const uint8_t *p, size_t len, struct sbx_fwd_listen *out,
                            struct sbx_err *e);
/* Writes the fields (not OP) of *l; w->overflow says when it did not fit. */
void sbx_fwdmsg_listen_write(struct sbx_msgw *w, const struct sbx_fwd_listen *l);

/* An OPEN frame. From the agent: listener and port (the inside port it accepted on). From the
 * host: addr (a literal or "localhost") and port. */
struct sbx_fwd_open {
	uint32_t listener; /* agent -> host only; a host stream id, so 1..2^31-1 */
	uint16_t port;
	char addr[SBX_FWD_ADDR_MAX + 1]; /* host -> agent only */
};

enum sbx_fwd_from {
	SBX_FWD_FROM_HOST = 0,
	SBX_FWD_FROM_AGENT = 1,
};

/* Reads an OPEN payload sent by `from`. Every field the sender must give is required, given
 * once, in range; ADDR holds only [0-9A-Za-z.:-] (an IPv4/IPv6 literal or a name such as
 * localhost), so it can be shown and never carries an escape. Returns 0, or -1 with *e
 * (SBX_EPROTOCOL) set. */
int sbx_fwdmsg_open_parse(const uint8_t *p, size_t len, enum sbx_fwd_from from,
                          struct sbx_fwd_open *out, struct sbx_err *e);
void sbx_fwdmsg_open_write(struct sbx_msgw *w, enum sbx_fwd_from from,
                           const struct sbx_fwd_open *o);

/* A RESET: the errno (0 when absent or outside 1..4095) and the reason, cut to
 * SBX_FWD_RESET_MSG_MAX bytes with control bytes shown as '?'. Never fails on content: a
 * RESET always resets; a malformed payload gives errnum 0 and an empty message. */
struct sbx_fwd_reset {
	int errnum;
	char msg[SBX_FWD_RESET_MSG_MAX + 1];
};
void sbx_fwdmsg_reset_parse(const uint8_t *p, size_t len, struct sbx_fwd_reset *out);
void sbx_fwdmsg_reset_write(struct sbx_msgw *w, int errnum, const char *msg);

/* 1 when id may be a connection stream opened by `from`: nonzero, and bit 31 set exactly for
 * the agent's ids. Whether it is already open is the caller's table's business. */
int sbx_fwdmsg_id_ok(uint32_t id, enum sbx_fwd_from from);

#endif
