/* Parsing of `sbx forward`'s --out and --in arguments. */
#include "fwdspec.h"

#include <string.h>

/* A decimal port lo..65535 in s[0..n), no sign, no leading '+', at most 5 digits. */
static int port_of(const char *s, size_t n, long lo, uint16_t *out)
{
	if (n == 0 || n > 5)
		return -1;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < lo || v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

/* A host name or literal in s[0..n): [0-9A-Za-z.-]+, or [v6] in brackets. */
static int host_of(const char *s, size_t n, char out[SBX_FWD_ADDR_MAX + 1])
{
	int v6 = n >= 2 && s[0] == '[' && s[n - 1] == ']';
	if (v6) {
		s++;
		n -= 2;
	}
	if (n == 0 || n > SBX_FWD_ADDR_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
		         (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || (v6 && c == ':');
		if (!ok)
			return -1;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

int sbx_fwdspec_parse(const char *arg, enum sbx_fwd_dir dir, const char *default_host,
                      struct sbx_fwd_spec *out, struct sbx_err *e)
{
	char shown[64];
	memset(out, 0, sizeof *out);
	out->dir = dir;
	const char *opt = dir == SBX_FWD_OUT ? "--out" : "--in";
	const char *what = dir == SBX_FWD_OUT ? "PORT[:HOST:PORT]" : "LPORT:ADDR:PORT";
	const char *c1 = strchr(arg, ':');
	const char *c2 = strrchr(arg, ':');
	if (dir == SBX_FWD_OUT && c1 == NULL) {
		if (port_of(arg, strlen(arg), 1, &out->inside) < 0 ||
		    host_of(default_host, strlen(default_host), out->host) < 0)
			goto bad;
		out->outside = out->inside;
		return 0;
	}
	if (c1 == NULL || c1 == c2)
		goto bad;
	uint16_t first, last;
	if (port_of(arg, (size_t)(c1 - arg), dir == SBX_FWD_IN ? 0 : 1, &first) < 0 ||
	    port_of(c2 + 1, strlen(c2 + 1), 1, &last) < 0 ||
	    host_of(c1 + 1, (size_t)(c2 - c1 - 1), out->host) < 0)
		goto bad;
	if (dir == SBX_FWD_OUT) {
		out->inside = first;
		out->outside = last;
	} else {
		out->outside = first;
		out->inside = last;
	}
	return 0;
bad:
	return sbx_err_set(e, SBX_EUSAGE, 0, "%s %s: expected %s (ports 1..65535%s)", opt,
	                   sbx_err_show(arg, shown, sizeof shown), what,
	                   dir == SBX_FWD_IN ? ", LPORT 0 picks one" : "");
}
