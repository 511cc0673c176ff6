/* libFuzzer target for the engines' inspect lines (runner/inspect.c): any bytes as a container
 * line and as an image line, and the invariants runner/podman.c relies on: every string it
 * keeps is NUL-terminated within its field, ids are 64 hex digits, sizes and times are not
 * negative. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "inspect.h"

static void hex_or_empty(const char *s)
{
	size_t n = strnlen(s, 72);
	if (n == 72 || (n != 0 && n != 64) || strspn(s, "0123456789abcdef") != n)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_podman_status st;
	struct sbx_podman_image im;
	struct sbx_err e;
	if (sbx_inspect_ctr((const char *)data, size, &st, &e) == 0) {
		hex_or_empty(st.id);
		hex_or_empty(st.image_id);
		if (st.id[0] == '\0' || !st.exists || st.pid < 0 || st.created_ns < 0 ||
		    strnlen(st.name, sizeof st.name) == sizeof st.name ||
		    strnlen(st.state, sizeof st.state) == sizeof st.state ||
		    strnlen(st.image, sizeof st.image) == sizeof st.image ||
		    strnlen(st.arch, sizeof st.arch) == sizeof st.arch ||
		    strnlen(st.agent, sizeof st.agent) == sizeof st.agent ||
		    (st.agent[0] != '\0' && st.agent[0] != '/') || st.res.memory_mib < 0 ||
		    st.res.pids < 0 || !(st.res.cpu >= 0) || !(st.res.disk_gib >= 0))
			__builtin_trap();
	}
	if (sbx_inspect_img((const char *)data, size, &im, &e) == 0) {
		hex_or_empty(im.id);
		hex_or_empty(im.tarball);
		if (im.id[0] == '\0' || im.ntags < 0 || im.ntags > 4 || im.size < 0 ||
		    im.created_ns < 0)
			__builtin_trap();
		for (int i = 0; i < im.ntags; i++)
			if (strnlen(im.tags[i], sizeof im.tags[i]) == sizeof im.tags[i])
				__builtin_trap();
	}
	int64_t ns;
	(void)sbx_inspect_time((const char *)data, size, &ns);
	return 0;
}
