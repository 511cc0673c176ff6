/* UTF-8 validity, encoding and the terminal escape (utf8.h). The validator follows RFC 3629's
 * table of well-formed sequences: the second byte's range depends on the first, which rules
 * out overlongs, surrogates and code points past U+10FFFF without decoding. */
#include "utf8.h"

#include <string.h>

size_t sbx_utf8_seq(const void *sv, size_t n)
{
	const uint8_t *s = sv;
	if (n == 0)
		return 0;
	uint8_t c = s[0], lo = 0x80, hi = 0xbf;
	size_t need;
	if (c < 0x80)
		return 1;
	if (c < 0xc2)
		return 0;
	if (c < 0xe0) {
		need = 2;
	} else if (c < 0xf0) {
		need = 3;
		lo = c == 0xe0 ? 0xa0 : lo;
		hi = c == 0xed ? 0x9f : hi;
	} else if (c < 0xf5) {
		need = 4;
		lo = c == 0xf0 ? 0x90 : lo;
		hi = c == 0xf4 ? 0x8f : hi;
	} else {
		return 0;
	}
	if (n < need || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < need; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return need;
}

int sbx_utf8_valid(const void *sv, size_t n)
{
	const uint8_t *s = sv;
	size_t i = 0;
	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = sbx_utf8_seq(s + i, n - i);
		if (k == 0)
			return 0;
		i += k;
	}
	return 1;
}

uint32_t sbx_utf8_decode(const void *sv, size_t len)
{
	const uint8_t *s = sv;
	static const uint8_t lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	uint32_t cp = s[0] & lead_mask[len];
	for (size_t i = 1; i < len; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

size_t sbx_utf8_put(uint8_t o[4], uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

size_t sbx_utf8_cut_tail(const void *sv, size_t n)
{
	const uint8_t *s = sv;
	/* A cut sequence starts at most 3 bytes from the end; it is a prefix of a valid one when
	 * completing it with the smallest allowed continuation bytes makes it valid. */
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		const uint8_t *p = s + n - back;
		if ((*p & 0xc0) == 0x80)
			continue; /* a continuation byte: the lead is further back */
		if (*p < 0xc2 || *p > 0xf4)
			return 0;
		size_t need = *p < 0xe0 ? 2 : *p < 0xf0 ? 3 : 4;
		if (back >= need)
			return 0; /* complete (valid or not): nothing to keep */
		uint8_t probe[4];
		memcpy(probe, p, back);
		for (size_t i = back; i < need; i++)
			probe[i] = 0x80;
		/* The second byte's lower bound is above 0x80 after 0xe0 and 0xf0. */
		if (back == 1 && (*p == 0xe0 || *p == 0xf0))
			probe[1] = *p == 0xe0 ? 0xa0 : 0x90;
		return sbx_utf8_seq(probe, need) == need ? back : 0;
	}
	return 0;
}

/* The escaped form of the unit at s[0..n): its text in unit[] (at most 6 bytes), and the
 * number of input bytes it covers. */
static size_t esc_unit(const uint8_t *s, size_t n, unsigned flags, char unit[6], size_t *ulen)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t c = s[0];
	if (c >= 0x20 && c < 0x7f) {
		unit[0] = (char)c;
		*ulen = 1;
		return 1;
	}
	if ((flags & SBX_ESC_LINES) && (c == '\n' || c == '\t')) {
		unit[0] = (char)c;
		*ulen = 1;
		return 1;
	}
	size_t k = c >= 0x80 ? sbx_utf8_seq(s, n) : 0;
	if (k == 0) {
		memcpy(unit, "\\x", 2);
		unit[2] = hex[c >> 4];
		unit[3] = hex[c & 15];
		*ulen = 4;
		return 1;
	}
	if (k == 2 && c == 0xc2 && s[1] <= 0x9f) {
		memcpy(unit, "\\u00", 4);
		unit[4] = hex[s[1] >> 4];
		unit[5] = hex[s[1] & 15];
		*ulen = 6;
		return 2;
	}
	memcpy(unit, s, k);
	*ulen = k;
	return k;
}

size_t sbx_esc(char *out, size_t cap, const void *in, size_t n, unsigned flags)
{
	const uint8_t *s = in;
	size_t total = 0, w = 0;
	int full = 0;
	for (size_t i = 0; i < n;) {
		char unit[6];
		size_t ulen;
		i += esc_unit(s + i, n - i, flags, unit, &ulen);
		if (!full && cap > 0 && w + ulen < cap) {
			memcpy(out + w, unit, ulen);
			w += ulen;
		} else {
			full = 1;
		}
		total += ulen;
	}
	if (cap > 0)
		out[w] = '\0';
	return total;
}

int sbx_esc_clean(const void *in, size_t n, unsigned flags)
{
	const uint8_t *s = in;
	for (size_t i = 0; i < n;) {
		char unit[6];
		size_t ulen, used = esc_unit(s + i, n - i, flags, unit, &ulen);
		if (ulen != used || memcmp(unit, s + i, used) != 0)
			return 0;
		i += used;
	}
	return 1;
}
