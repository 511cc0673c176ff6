/* libFuzzer target for the keeper's answers (agent/keeper.c): any request bytes, as a process
 * of the sandbox could send them on the keeper's socket. Invariants: no crash, an answer that
 * is a message with a STATUS, and never a launch: the fuzzer does not know the secret, so no
 * run request it makes can carry a MAC that verifies (the launch is stubbed to trap). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "keeper.h"
#include "proto.h"

void sbx_supctl_run(const uint8_t *req, size_t len, const uint8_t *key, size_t key_len,
                    struct sbx_msgw *w)
{
	(void)req, (void)len, (void)key, (void)key_len, (void)w;
	__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sbx_keeper k;
	/* A keeper with its secret, unless the input's first byte asks for a fresh one (so SETUP
	 * is reached too). */
	if (size > 0 && data[0] == 0xff) {
		memset(&k, 0, sizeof k);
		data++, size--;
	} else if (!k.have) {
		memset(k.secret, 0xa5, sizeof k.secret);
		k.have = 1;
	}
	uint8_t out[8192];
	struct sbx_msgw w;
	sbx_msgw_init(&w, out, sizeof out);
	sbx_keeper_answer(&k, data, size, &w);
	struct sbx_field f;
	int64_t st;
	if (w.overflow || sbx_msg_find(out, w.len, SBX_T_STATUS, &f) != 1 ||
	    sbx_field_i64(&f, &st) != 0)
		__builtin_trap();
	return 0;
}
