/* libFuzzer target for the forwarding payloads (shared/fwdmsg.h): any bytes as a FWD_LISTEN
 * request, an OPEN from either side and a RESET. Whatever is taken is in range (ports
 * 1..65535 and distinct, listener below bit 31, ADDR of [0-9A-Za-z.:-] only, a RESET's
 * message bounded and without control bytes) and writes back to an equal value. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fwdmsg.h"

static void trap_unless(int ok)
{
	if (!ok)
		__builtin_trap();
}

static void listen_case(const uint8_t *data, size_t size)
{
	struct sbx_fwd_listen l, d;
	struct sbx_err e;
	if (sbx_fwdmsg_listen_parse(data, size, &l, &e) < 0) {
		trap_unless(e.cls == SBX_EUSAGE);
		return;
	}
	trap_unless(l.nports >= 1 && l.nports <= SBX_FWD_MAX_PORTS);
	for (size_t i = 0; i < l.nports; i++) {
		trap_unless(l.ports[i] >= 1);
		for (size_t j = 0; j < i; j++)
			trap_unless(l.ports[i] != l.ports[j]);
	}
	trap_unless(l.max_conn >= 1 && l.max_conn <= SBX_FWD_MAX_CONN_LIMIT);
	static uint8_t buf[64 * 14 + SBX_FWD_READY_MAX + 64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_listen_write(&w, &l);
	trap_unless(!w.overflow);
	trap_unless(sbx_fwdmsg_listen_parse(buf, w.len, &d, &e) == 0);
	trap_unless(d.nports == l.nports && d.max_conn == l.max_conn &&
	            memcmp(d.ports, l.ports, l.nports * sizeof l.ports[0]) == 0 &&
	            strcmp(d.ready, l.ready) == 0);
}

static void open_case(const uint8_t *data, size_t size, enum sbx_fwd_from from)
{
	struct sbx_fwd_open o, d;
	struct sbx_err e;
	if (sbx_fwdmsg_open_parse(data, size, from, &o, &e) < 0) {
		trap_unless(e.cls == SBX_EPROTOCOL);
		return;
	}
	trap_unless(o.port >= 1);
	if (from == SBX_FWD_FROM_AGENT) {
		trap_unless(o.listener >= 1 && o.listener < SBX_FWD_AGENT_ID_BIT);
	} else {
		size_t n = strlen(o.addr);
		trap_unless(n >= 1 && n <= SBX_FWD_ADDR_MAX);
		trap_unless(strspn(o.addr, "0123456789abcdefghijklmnopqrstuvwxyz"
		                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ.:-") == n);
	}
	uint8_t buf[SBX_FWD_ADDR_MAX + 64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_open_write(&w, from, &o);
	trap_unless(!w.overflow);
	trap_unless(sbx_fwdmsg_open_parse(buf, w.len, from, &d, &e) == 0);
	trap_unless(d.port == o.port && d.listener == o.listener && strcmp(d.addr, o.addr) == 0);
}

static void reset_case(const uint8_t *data, size_t size)
{
	struct sbx_fwd_reset r, d;
	sbx_fwdmsg_reset_parse(data, size, &r);
	trap_unless(r.errnum >= 0 && r.errnum <= 4095);
	size_t n = strlen(r.msg);
	trap_unless(n <= SBX_FWD_RESET_MSG_MAX);
	for (size_t i = 0; i < n; i++)
		trap_unless((unsigned char)r.msg[i] >= 0x20 && r.msg[i] != 0x7f);
	uint8_t buf[SBX_FWD_RESET_MSG_MAX + 64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_reset_write(&w, r.errnum, r.msg);
	trap_unless(!w.overflow);
	sbx_fwdmsg_reset_parse(buf, w.len, &d);
	trap_unless(d.errnum == r.errnum && strcmp(d.msg, r.msg) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	listen_case(data, size);
	open_case(data, size, SBX_FWD_FROM_AGENT);
	open_case(data, size, SBX_FWD_FROM_HOST);
	reset_case(data, size);
	return 0;
}
