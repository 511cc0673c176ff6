/* The forward specifications of `sbx forward` (docs/forwarding.md): `--out PORT[:HOST:PORT]`
 * and `--in LPORT:ADDR:PORT`, parsed into one struct, every port and name checked. A HOST or
 * ADDR that holds ':' (IPv6) is written in brackets: `--in 0:[::1]:80`. Pure: no sockets. */
#ifndef SBX_FWDSPEC_H
#define SBX_FWDSPEC_H

#include <stdint.h>

#include "err.h"
#include "proto.h"

enum sbx_fwd_dir {
	SBX_FWD_OUT = 1, /* listen inside on `inside`, connect on the host to host:outside */
	SBX_FWD_IN = 2,  /* listen on the host on 127.0.0.1:outside (0 picks), connect inside to
	                    host:inside */
};

struct sbx_fwd_spec {
	enum sbx_fwd_dir dir;
	uint16_t inside;                 /* 1..65535 */
	uint16_t outside;                /* --out: 1..65535; --in: 0..65535 */
	char host[SBX_FWD_ADDR_MAX + 1]; /* --out: where the host connects; --in: ADDR inside */
};

/* Parses the argument of --out (dir SBX_FWD_OUT; a bare PORT connects to
 * default_host:PORT) or --in. Returns 0, or -1 with *e (SBX_EUSAGE) naming what is wrong. */
int sbx_fwdspec_parse(const char *arg, enum sbx_fwd_dir dir, const char *default_host,
                      struct sbx_fwd_spec *out, struct sbx_err *e);

#endif
