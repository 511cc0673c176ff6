/* libFuzzer target for shared/utf8.c and the JSON writer's strings, over arbitrary bytes:
 * the validator agrees with a plain decoder; the terminal escape leaves no C0, DEL, C1 or
 * invalid byte, is the identity on clean text, and truncates to a prefix of itself; a cut tail
 * is a prefix of something valid; a JSON string written whole or in parts (cut where
 * sbx_utf8_cut_tail says) is the same valid document, with no raw control or C1 character. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "utf8.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)

/* Reference validity: decode by the bit patterns, then refuse overlongs, surrogates and code
 * points past U+10FFFF (written differently from utf8.c's table on purpose). */
static int ref_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t c = s[i], cp, min;
		size_t k;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* No byte < 0x20 (but newline and tab with lines), no DEL, no U+0080-U+009F, valid UTF-8. */
static int terminal_safe(const uint8_t *s, size_t n, int lines)
{
	if (!sbx_utf8_valid(s, n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if ((s[i] < 0x20 && !(lines && (s[i] == '\n' || s[i] == '\t'))) || s[i] == 0x7f)
			return 0;
		if (s[i] == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f)
			return 0;
	}
	return 1;
}

static void check_escape(const uint8_t *d, size_t n, unsigned flags)
{
	size_t need = sbx_esc(NULL, 0, d, n, flags);
	char *out = malloc(need + 1);
	CHECK(out != NULL);
	CHECK(sbx_esc(out, need + 1, d, n, flags) == need);
	CHECK(strlen(out) == need);
	CHECK(terminal_safe((const uint8_t *)out, need, flags & SBX_ESC_LINES));
	CHECK(sbx_esc_clean(d, n, flags) == (need == n && memcmp(out, d, n) == 0));
	if (terminal_safe(d, n, flags & SBX_ESC_LINES))
		CHECK(need == n && memcmp(out, d, n) == 0);
	/* A smaller buffer holds a prefix that is itself safe (no escape cut in two). */
	size_t cap = n % (need + 1) + 1;
	char *small = malloc(cap);
	CHECK(small != NULL);
	sbx_esc(small, cap, d, n, flags);
	size_t sl = strlen(small);
	CHECK(sl < cap && memcmp(small, out, sl) == 0);
	CHECK(terminal_safe((const uint8_t *)small, sl, flags & SBX_ESC_LINES));
	free(small);
	free(out);
}

/* The JSON string of d: parses, holds no raw control, DEL or C1, equals d when d is valid. */
static void check_json(const uint8_t *d, size_t n)
{
	struct sbx_jw whole, parts;
	sbx_jw_init(&whole);
	sbx_jw_strn(&whole, d, n);
	size_t wl;
	const char *wt = sbx_jw_text(&whole, &wl);
	CHECK(wt != NULL);
	CHECK(terminal_safe((const uint8_t *)wt, wl, 0));
	struct sbx_json *j;
	struct sbx_err e;
	CHECK(sbx_json_parse(wt, wl, &j, &e) == 0);
	CHECK(j->type == SBX_JSON_STRING);
	if (sbx_utf8_valid(d, n))
		CHECK(j->len == n && memcmp(j->str, d, n) == 0);
	sbx_json_free(j);

	/* In parts: cut every 1 + d[0] % 7 bytes, keeping a cut tail for the next part. */
	size_t step = n > 0 ? 1 + d[0] % 7 : 1, have = 0;
	char *acc = malloc(wl + 1);
	CHECK(acc != NULL);
	sbx_jw_init(&parts);
	sbx_jw_str_begin(&parts);
	for (size_t start = 0, end = 0; end < n;) {
		end = end + step < n ? end + step : n;
		size_t keep = end < n ? sbx_utf8_cut_tail(d + start, end - start) : 0;
		sbx_jw_str_add(&parts, d + start, end - keep - start);
		start = end - keep;
		size_t fl;
		const char *f = sbx_jw_flush(&parts, &fl);
		CHECK(f != NULL && have + fl <= wl);
		memcpy(acc + have, f, fl);
		have += fl;
	}
	sbx_jw_str_end(&parts);
	size_t tl;
	const char *t = sbx_jw_text(&parts, &tl);
	CHECK(t != NULL && have + tl == wl);
	memcpy(acc + have, t, tl);
	CHECK(memcmp(acc, wt, wl) == 0);
	free(acc);
	sbx_jw_free(&parts);
	sbx_jw_free(&whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	CHECK(sbx_utf8_valid(d, n) == ref_valid(d, n));
	size_t k = sbx_utf8_seq(d, n);
	CHECK(k <= 4 && k <= n);
	if (k > 0)
		CHECK(ref_valid(d, k));
	size_t cut = sbx_utf8_cut_tail(d, n);
	CHECK(cut <= 3 && cut <= n);
	if (cut > 0) {
		/* The tail begins a sequence some continuation bytes would complete. */
		int completes = 0;
		for (unsigned b = 0x80; b <= 0xbf && !completes; b++) {
			uint8_t probe[4];
			memcpy(probe, d + n - cut, cut);
			for (size_t i = cut; i < 4; i++)
				probe[i] = (uint8_t)b;
			size_t q = sbx_utf8_seq(probe, 4);
			completes = q > cut;
		}
		CHECK(completes);
	}
	check_escape(d, n, 0);
	check_escape(d, n, SBX_ESC_LINES);
	check_json(d, n);
	return 0;
}
