/* The engines' inspect lines (inspect.h), parsed with host/json.c; nothing here does I/O. Every
 * string is bounded and NUL-free; anything else is a protocol error, never a guess. */
#include "inspect.h"

#include <math.h> /* isfinite */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

#define MAX_FIELDS 8

/* line split at tabs into at most MAX_FIELDS pieces; *n of them. */
static void split_tabs(const char *line, size_t len, const char *f[], size_t fl[], size_t *n)
{
	*n = 0;
	size_t start = 0;
	for (size_t i = 0; i <= len && *n < MAX_FIELDS; i++)
		if (i == len || line[i] == '\t') {
			f[*n] = line + start;
			fl[(*n)++] = i - start;
			start = i + 1;
		}
}

/* A 64-hex-digit id, docker's "sha256:" prefix dropped. */
static int take_id(const char *s, size_t len, char *out)
{
	if (len == 71 && strncmp(s, "sha256:", 7) == 0)
		s += 7, len -= 7;
	if (len != 64)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return -1;
	memcpy(out, s, 64);
	out[64] = '\0';
	return 0;
}

/* A JSON string into out (cap bytes with its NUL): -1 when j is not a string, holds a NUL or
 * does not fit. */
static int take_str(const struct sbx_json *j, char *out, size_t cap)
{
	size_t n;
	const char *s = sbx_json_str(j, &n);
	if (s == NULL || n != strlen(s) || n >= cap)
		return -1;
	memcpy(out, s, n + 1);
	return 0;
}

static int64_t int_or(const struct sbx_json *obj, const char *key, int64_t def)
{
	int64_t v;
	return sbx_json_int(sbx_json_get(obj, key), &v) == 0 ? v : def;
}

/* "1073741824", "10G", "512m", "1.5GiB": bytes (binary units, as the engines read them). */
static int parse_size(const char *s, double *bytes)
{
	double v = 0, scale = 1;
	int digits = 0, dot = 0;
	for (; (*s >= '0' && *s <= '9') || (*s == '.' && !dot); s++) {
		if (*s == '.') {
			dot = 1;
			continue;
		}
		digits++;
		if (dot)
			scale /= 10, v += (*s - '0') * scale;
		else
			v = v * 10 + (*s - '0');
	}
	if (digits == 0)
		return -1;
	if (*s == ' ')
		s++;
	static const char units[] = "bkmgtp";
	const char *u = *s != '\0' ? strchr(units, *s | 0x20) : NULL;
	if (*s != '\0' && u == NULL)
		return -1;
	if (u != NULL) {
		for (const char *k = units; k < u; k++)
			v *= 1024;
		s++;
		if (u != units && (*s | 0x20) == 'i')
			s++;
		if (u != units && (*s | 0x20) == 'b')
			s++;
	}
	*bytes = v;
	return *s == '\0' && isfinite(v) ? 0 : -1;
}

static void take_resources(const struct sbx_json *hc, struct sbx_resources *r)
{
	int64_t mem = int_or(hc, "Memory", 0);
	r->memory_mib = mem > 0 ? (mem + (1 << 20) - 1) >> 20 : 0;
	int64_t nano = int_or(hc, "NanoCpus", 0);
	int64_t quota = int_or(hc, "CpuQuota", 0), period = int_or(hc, "CpuPeriod", 0);
	if (nano > 0)
		r->cpu = (double)nano / 1e9;
	else if (quota > 0 && period > 0)
		r->cpu = (double)quota / (double)period;
	int64_t pids = int_or(hc, "PidsLimit", 0);
	r->pids = pids > 0 ? pids : 0;
	char size[32];
	double bytes;
	const struct sbx_json *so = sbx_json_get(hc, "StorageOpt");
	if (take_str(sbx_json_get(so, "size"), size, sizeof size) == 0 &&
	    parse_size(size, &bytes) == 0)
		r->disk_gib = bytes / (1024.0 * 1024 * 1024);
}

static int bad(struct sbx_err *e, const char *what)
{
	return sbx_err_set(e, SBX_EPROTOCOL, 0, "engine inspect: bad %s", what);
}

int sbx_inspect_ctr(const char *line, size_t len, struct sbx_podman_status *st, struct sbx_err *e)
{
	memset(st, 0, sizeof *st);
	const char *f[MAX_FIELDS];
	size_t fl[MAX_FIELDS], n;
	split_tabs(line, len, f, fl, &n);
	if (n != 8)
		return bad(e, "line (not 8 fields)");
	if (take_id(f[0], fl[0], st->id) != 0)
		return bad(e, "container id");
	struct sbx_json *j[7] = {0};
	int rc = 0;
	for (int i = 0; i < 7 && rc == 0; i++)
		if (sbx_json_parse(f[i + 1], fl[i + 1], &j[i], e) != 0)
			rc = bad(e, "JSON field");
	if (rc != 0)
		goto out;
	const struct sbx_json *name = j[0], *state = j[1], *created = j[2], *image_id = j[3],
	                      *image = j[4], *labels = j[5], *hc = j[6];
	char nm[80];
	size_t ilen;
	const char *iid = sbx_json_str(image_id, &ilen);
	if (take_str(name, nm, sizeof nm) != 0 || strlen(nm + (nm[0] == '/')) >= sizeof st->name) {
		rc = bad(e, "name");
		goto out;
	}
	snprintf(st->name, sizeof st->name, "%s", nm + (nm[0] == '/'));
	if (state == NULL || state->type != SBX_JSON_OBJECT ||
	    take_str(sbx_json_get(state, "Status"), st->state, sizeof st->state) != 0) {
		rc = bad(e, "state");
		goto out;
	}
	if (sbx_json_bool(sbx_json_get(state, "Paused"), &st->paused) != 0)
		st->paused = 0;
	st->pid = int_or(state, "Pid", 0);
	if (st->pid < 0)
		st->pid = 0;
	size_t clen;
	const char *c = sbx_json_str(created, &clen);
	if (c == NULL || sbx_inspect_time(c, clen, &st->created_ns) != 0 || st->created_ns < 0)
		st->created_ns = 0;
	if (iid == NULL || take_id(iid, ilen, st->image_id) != 0)
		st->image_id[0] = '\0';
	if (take_str(image, st->image, sizeof st->image) != 0) {
		rc = bad(e, "image");
		goto out;
	}
	if (labels != NULL && labels->type == SBX_JSON_OBJECT) {
		const struct sbx_json *a = sbx_json_get(labels, "sbx.arch");
		const struct sbx_json *g = sbx_json_get(labels, "sbx.agent");
		if (take_str(a, st->arch, sizeof st->arch) != 0)
			st->arch[0] = '\0';
		st->made = g != NULL;
		if (take_str(g, st->agent, sizeof st->agent) != 0 || st->agent[0] != '/')
			st->agent[0] = '\0';
	}
	if (hc == NULL || hc->type != SBX_JSON_OBJECT) {
		rc = bad(e, "HostConfig");
		goto out;
	}
	take_resources(hc, &st->res);
	int64_t swap = int_or(hc, "MemorySwap", 0);
	st->swap_mib = swap > 0 ? (swap + (1 << 20) - 1) >> 20 : 0;
	st->exists = 1;
out:
	for (int i = 0; i < 7; i++)
		sbx_json_free(j[i]);
	return rc;
}

int sbx_inspect_img(const char *line, size_t len, struct sbx_podman_image *im, struct sbx_err *e)
{
	memset(im, 0, sizeof *im);
	const char *f[MAX_FIELDS];
	size_t fl[MAX_FIELDS], n;
	split_tabs(line, len, f, fl, &n);
	if (n != 5)
		return bad(e, "image line (not 5 fields)");
	if (take_id(f[0], fl[0], im->id) != 0)
		return bad(e, "image id");
	struct sbx_json *j[4] = {0};
	int rc = 0;
	for (int i = 0; i < 4 && rc == 0; i++)
		if (sbx_json_parse(f[i + 1], fl[i + 1], &j[i], e) != 0)
			rc = bad(e, "JSON field");
	if (rc != 0)
		goto out;
	const struct sbx_json *tags = j[0], *created = j[1], *size = j[2], *labels = j[3];
	for (size_t i = 0; tags->type == SBX_JSON_ARRAY && i < tags->len && im->ntags < 4; i++)
		if (take_str(sbx_json_at(tags, i), im->tags[im->ntags], sizeof im->tags[0]) == 0)
			im->ntags++;
	size_t clen;
	const char *c = sbx_json_str(created, &clen);
	if (c == NULL || sbx_inspect_time(c, clen, &im->created_ns) != 0 || im->created_ns < 0)
		im->created_ns = 0;
	if (sbx_json_int(size, &im->size) != 0 || im->size < 0)
		im->size = 0;
	char t[72];
	if (take_str(sbx_json_get(labels, "sbx.tarball"), t, sizeof t) == 0 &&
	    take_id(t, strlen(t), im->tarball) != 0)
		im->tarball[0] = '\0';
out:
	for (int i = 0; i < 4; i++)
		sbx_json_free(j[i]);
	return rc;
}

/* n decimal digits at s, or -1. */
static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int sbx_inspect_time(const char *s, size_t len, int64_t *ns)
{
	if (len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') ||
	    s[13] != ':' || s[16] != ':')
		return -1;
	int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2), h = digits(s + 11, 2),
	    mi = digits(s + 14, 2), se = digits(s + 17, 2);
	if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
	    se < 0 || se > 60)
		return -1;
	size_t i = 19;
	int64_t frac = 0;
	if (i < len && s[i] == '.') {
		int nd = 0;
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, nd++)
			if (nd < 9)
				frac = frac * 10 + (s[i] - '0');
		if (nd == 0)
			return -1;
		for (; nd < 9; nd++)
			frac *= 10;
	}
	int64_t off = 0;
	if (i + 1 == len && s[i] == 'Z') {
		i++;
	} else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -1;
		off = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
		i += 6;
	}
	if (i != len)
		return -1;
	int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
	if (secs < -(INT64_MAX / 1000000000) + 1 || secs > INT64_MAX / 1000000000 - 1)
		return -1; /* outside what ns since the epoch can hold (years 1677..2262) */
	*ns = secs * 1000000000 + frac;
	return 0;
}
