/* The forwarding payloads (shared/fwdmsg.c, docs/forwarding.md): round trips, and every
 * refusal the host relies on when it reads the agent's OPEN and RESET. Shown able to fail:
 * with port_of's range check removed, open_refusals fails on port 0 and 65536; with addr_ok
 * returning 1, on the escape in ADDR; with the duplicate check of listen_parse removed, on
 * the doubled port. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fwdmsg.h"

static void listen_round_trip(void **state)
{
	(void)state;
	struct sbx_fwd_listen l;
	memset(&l, 0, sizeof l);
	l.ports[0] = 8080;
	l.ports[1] = 1;
	l.ports[2] = 65535;
	l.nports = 3;
	strcpy(l.ready, "/tmp/ready");
	l.max_conn = 7;
	uint8_t buf[512];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_FWD_LISTEN);
	sbx_fwdmsg_listen_write(&w, &l);
	assert_false(w.overflow);
	struct sbx_fwd_listen d;
	struct sbx_err e;
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, w.len, &d, &e), 0);
	assert_int_equal(d.nports, 3);
	assert_int_equal(d.ports[0], 8080);
	assert_int_equal(d.ports[2], 65535);
	assert_string_equal(d.ready, "/tmp/ready");
	assert_int_equal(d.max_conn, 7);

	/* defaults: no ready file, 1024 connections */
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_FWD_PORT, 80);
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, w.len, &d, &e), 0);
	assert_string_equal(d.ready, "");
	assert_int_equal(d.max_conn, SBX_FWD_MAX_CONN);
}

static int listen_of(int64_t a, int64_t b, const char *ready, int64_t max)
{
	uint8_t buf[256];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_FWD_PORT, a);
	if (b >= 0)
		sbx_msgw_i64(&w, SBX_T_FWD_PORT, b);
	if (ready != NULL)
		sbx_msgw_bytes(&w, SBX_T_READY_FILE, ready, strlen(ready) + (ready[0] == 'N'));
	if (max >= -1)
		sbx_msgw_i64(&w, SBX_T_MAX_CONN, max);
	struct sbx_fwd_listen d;
	struct sbx_err e;
	int rc = sbx_fwdmsg_listen_parse(buf, w.len, &d, &e);
	if (rc < 0)
		assert_int_equal(e.cls, SBX_EUSAGE);
	return rc;
}

static void listen_refusals(void **state)
{
	(void)state;
	assert_int_equal(listen_of(80, -1, NULL, -2), 0);
	assert_int_equal(listen_of(0, -1, NULL, -2), -1);
	assert_int_equal(listen_of(65536, -1, NULL, -2), -1);
	assert_int_equal(listen_of(80, 80, NULL, -2), -1);
	assert_int_equal(listen_of(80, -1, "", -2), -1);
	assert_int_equal(listen_of(80, -1, "N", -2), -1); /* "N" and its NUL */
	assert_int_equal(listen_of(80, -1, NULL, 0), -1);
	assert_int_equal(listen_of(80, -1, NULL, -1), -1);
	assert_int_equal(listen_of(80, -1, NULL, SBX_FWD_MAX_CONN_LIMIT + 1), -1);
	assert_int_equal(listen_of(80, -1, NULL, SBX_FWD_MAX_CONN_LIMIT), 0);

	/* no port at all, too many ports, a truncated field */
	uint8_t buf[2048];
	struct sbx_msgw w;
	struct sbx_fwd_listen d;
	struct sbx_err e;
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, 0, &d, &e), -1);
	sbx_msgw_init(&w, buf, sizeof buf);
	for (int i = 0; i <= SBX_FWD_MAX_PORTS; i++)
		sbx_msgw_i64(&w, SBX_T_FWD_PORT, 1000 + i);
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, w.len, &d, &e), -1);
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, w.len - 14, &d, &e), 0);
	assert_int_equal(d.nports, SBX_FWD_MAX_PORTS);
	assert_int_equal(sbx_fwdmsg_listen_parse(buf, 13, &d, &e), -1);
}

static int open_of(enum sbx_fwd_from from, const void *val, size_t vlen, uint16_t tag, int64_t port)
{
	uint8_t buf[512];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	if (tag != 0)
		sbx_msgw_bytes(&w, tag, val, vlen);
	if (port >= -1)
		sbx_msgw_i64(&w, SBX_T_FWD_PORT, port);
	struct sbx_fwd_open o;
	struct sbx_err e;
	int rc = sbx_fwdmsg_open_parse(buf, w.len, from, &o, &e);
	if (rc < 0)
		assert_int_equal(e.cls, SBX_EPROTOCOL);
	return rc;
}

static const uint8_t *be64(int64_t v, uint8_t b[8])
{
	for (int i = 7; i >= 0; i--) {
		b[i] = (uint8_t)v;
		v = (int64_t)((uint64_t)v >> 8);
	}
	return b;
}

static void open_round_trip(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct sbx_msgw w;
	struct sbx_fwd_open o = {.listener = 5, .port = 8080}, d;
	struct sbx_err e;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_open_write(&w, SBX_FWD_FROM_AGENT, &o);
	assert_int_equal(sbx_fwdmsg_open_parse(buf, w.len, SBX_FWD_FROM_AGENT, &d, &e), 0);
	assert_int_equal(d.listener, 5);
	assert_int_equal(d.port, 8080);
	/* the agent's OPEN carries no address: the host's parse of it as a host OPEN fails */
	assert_int_equal(sbx_fwdmsg_open_parse(buf, w.len, SBX_FWD_FROM_HOST, &d, &e), -1);

	strcpy(o.addr, "::1");
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_open_write(&w, SBX_FWD_FROM_HOST, &o);
	assert_int_equal(sbx_fwdmsg_open_parse(buf, w.len, SBX_FWD_FROM_HOST, &d, &e), 0);
	assert_string_equal(d.addr, "::1");
	assert_int_equal(d.port, 8080);
}

static void open_refusals(void **state)
{
	(void)state;
	uint8_t b[8];
	enum sbx_fwd_from A = SBX_FWD_FROM_AGENT, H = SBX_FWD_FROM_HOST;
	assert_int_equal(open_of(A, be64(1, b), 8, SBX_T_LISTENER, 80), 0);
	assert_int_equal(open_of(A, be64(1, b), 8, SBX_T_LISTENER, 0), -1);
	assert_int_equal(open_of(A, be64(1, b), 8, SBX_T_LISTENER, 65536), -1);
	assert_int_equal(open_of(A, be64(1, b), 8, SBX_T_LISTENER, -2), -1); /* no port */
	assert_int_equal(open_of(A, be64(0, b), 8, SBX_T_LISTENER, 80), -1);
	assert_int_equal(open_of(A, be64(0x80000000, b), 8, SBX_T_LISTENER, 80), -1);
	assert_int_equal(open_of(A, be64(-1, b), 8, SBX_T_LISTENER, 80), -1);
	assert_int_equal(open_of(A, be64(1, b), 7, SBX_T_LISTENER, 80), -1);
	assert_int_equal(open_of(A, NULL, 0, 0, 80), -1); /* no listener */
	assert_int_equal(open_of(H, "127.0.0.1", 9, SBX_T_ADDR, 80), 0);
	assert_int_equal(open_of(H, "localhost", 9, SBX_T_ADDR, 80), 0);
	assert_int_equal(open_of(H, "", 0, SBX_T_ADDR, 80), -1);
	assert_int_equal(open_of(H, "a\x1b[2Jb", 6, SBX_T_ADDR, 80), -1);
	assert_int_equal(open_of(H, "a\0b", 3, SBX_T_ADDR, 80), -1);
	assert_int_equal(open_of(H, "a/b", 3, SBX_T_ADDR, 80), -1);
	char longa[SBX_FWD_ADDR_MAX + 1];
	memset(longa, 'a', sizeof longa);
	assert_int_equal(open_of(H, longa, SBX_FWD_ADDR_MAX, SBX_T_ADDR, 80), 0);
	assert_int_equal(open_of(H, longa, SBX_FWD_ADDR_MAX + 1, SBX_T_ADDR, 80), -1);

	/* a second port */
	uint8_t buf[64];
	struct sbx_msgw w;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_LISTENER, 3);
	sbx_msgw_i64(&w, SBX_T_FWD_PORT, 80);
	sbx_msgw_i64(&w, SBX_T_FWD_PORT, 81);
	struct sbx_fwd_open o;
	struct sbx_err e;
	assert_int_equal(sbx_fwdmsg_open_parse(buf, w.len, A, &o, &e), -1);
}

static void reset_messages(void **state)
{
	(void)state;
	uint8_t buf[1024];
	struct sbx_msgw w;
	struct sbx_fwd_reset r;
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_reset_write(&w, ECONNREFUSED, "connect 127.0.0.1:9: Connection refused");
	sbx_fwdmsg_reset_parse(buf, w.len, &r);
	assert_int_equal(r.errnum, ECONNREFUSED);
	assert_string_equal(r.msg, "connect 127.0.0.1:9: Connection refused");

	sbx_fwdmsg_reset_parse(buf, 0, &r);
	assert_int_equal(r.errnum, 0);
	assert_string_equal(r.msg, "");

	/* hostile: an errno out of range, escapes, a message far too long */
	char big[600];
	memset(big, 'x', sizeof big);
	big[0] = '\x1b';
	big[599] = '\0';
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_msgw_i64(&w, SBX_T_ERRNO, 1 << 20);
	sbx_msgw_str(&w, SBX_T_MESSAGE, big);
	sbx_fwdmsg_reset_parse(buf, w.len, &r);
	assert_int_equal(r.errnum, 0);
	assert_int_equal(strlen(r.msg), SBX_FWD_RESET_MSG_MAX);
	assert_int_equal(r.msg[0], '?');
	/* the writer cuts too */
	sbx_msgw_init(&w, buf, sizeof buf);
	sbx_fwdmsg_reset_write(&w, 0, big);
	assert_int_equal(w.len, 6 + SBX_FWD_RESET_MSG_MAX);
}

static void stream_ids(void **state)
{
	(void)state;
	assert_false(sbx_fwdmsg_id_ok(0, SBX_FWD_FROM_HOST));
	assert_false(sbx_fwdmsg_id_ok(0, SBX_FWD_FROM_AGENT));
	assert_true(sbx_fwdmsg_id_ok(1, SBX_FWD_FROM_HOST));
	assert_false(sbx_fwdmsg_id_ok(1, SBX_FWD_FROM_AGENT));
	assert_true(sbx_fwdmsg_id_ok(0x80000001u, SBX_FWD_FROM_AGENT));
	assert_false(sbx_fwdmsg_id_ok(0x80000001u, SBX_FWD_FROM_HOST));
	assert_true(sbx_fwdmsg_id_ok(0x7fffffffu, SBX_FWD_FROM_HOST));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(listen_round_trip), cmocka_unit_test(listen_refusals),
	        cmocka_unit_test(open_round_trip),   cmocka_unit_test(open_refusals),
	        cmocka_unit_test(reset_messages),    cmocka_unit_test(stream_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
