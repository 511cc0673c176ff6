/* The host's readers of the agent's terminal-session answers (host/ptymsg.c): a status, an
 * attach's offsets, a listing and a stream's end, from arbitrary bytes. The first 16 bytes
 * are the `since` offsets an attach is checked against. Nothing may crash, and what is
 * accepted must be consistent (checked below). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "ptymsg.h"

static int64_t i64_at(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)(v >> 2); /* non-negative, as the API sends */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 16)
		return 0;
	int64_t since = i64_at(data), since_err = i64_at(data + 8);
	data += 16;
	size -= 16;
	struct sbx_err e;
	struct sbx_pty_info st;
	if (sbx_ptymsg_info(data, size, &st, &e) == 0) {
		if (strlen(st.id) != SBX_PTY_ID_LEN || st.base > st.head || st.base < 0 ||
		    st.head - st.base > st.retain)
			abort();
	}
	struct sbx_pty_attach_info ai;
	if (sbx_ptymsg_attach(data, size, since, since_err, &ai, &e) == 0) {
		if (ai.start < 0 || ai.start > ai.st.head || ai.lost < 0 ||
		    (ai.lost > 0 && ai.start - ai.lost != since))
			abort();
	}
	struct sbx_pty_info *v;
	size_t n;
	if (sbx_ptymsg_list(data, size, SBX_PTY_MAX, &v, &n, &e) == 0) {
		if (n > SBX_PTY_MAX)
			abort();
		free(v);
	}
	int code;
	if (sbx_ptymsg_end(data, size, &code, &e) == 1 && (code < 0 || code > 255))
		abort();
	return 0;
}
