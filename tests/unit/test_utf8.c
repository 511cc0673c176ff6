/* shared/utf8.c: the validator against RFC 3629's edge cases, cut tails, and the terminal
 * escape (every C0, DEL, C1 and invalid byte visible; clean text unchanged; snprintf-like
 * truncation that never cuts an escape). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static void validator(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		size_t seq;
	} cases[] = {
	        {"a", 1},
	        {"\xc2\x80", 2},
	        {"\xdf\xbf", 2},
	        {"\xe0\xa0\x80", 3},
	        {"\xed\x9f\xbf", 3},
	        {"\xef\xbf\xbf", 3},
	        {"\xf0\x90\x80\x80", 4},
	        {"\xf4\x8f\xbf\xbf", 4},
	        {"\x80", 0},             /* stray continuation */
	        {"\xc0\xaf", 0},         /* overlong '/' */
	        {"\xc1\xbf", 0},         /* overlong */
	        {"\xe0\x9f\xbf", 0},     /* overlong 3-byte */
	        {"\xed\xa0\x80", 0},     /* surrogate U+D800 */
	        {"\xf0\x8f\xbf\xbf", 0}, /* overlong 4-byte */
	        {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
	        {"\xf5\x80\x80\x80", 0},
	        {"\xff", 0},
	        {"\xe2\x82", 0}, /* cut short */
	        {"\xe2\x28\xa1", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = strlen(cases[i].s);
		assert_int_equal(sbx_utf8_seq(cases[i].s, n), cases[i].seq);
		assert_int_equal(sbx_utf8_valid(cases[i].s, n), cases[i].seq == n);
	}
	assert_int_equal(sbx_utf8_seq("", 0), 0);
	assert_true(sbx_utf8_valid("", 0));
	/* Every code point encodes, validates and decodes back. */
	for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
		if (cp >= 0xd800 && cp <= 0xdfff)
			continue;
		uint8_t b[4];
		size_t k = sbx_utf8_put(b, cp);
		assert_int_equal(sbx_utf8_seq(b, k), k);
		assert_int_equal(sbx_utf8_decode(b, k), cp);
	}
}

static void cut_tail(void **state)
{
	(void)state;
	assert_int_equal(sbx_utf8_cut_tail("ab", 2), 0);
	assert_int_equal(sbx_utf8_cut_tail("a\xe2", 2), 1);
	assert_int_equal(sbx_utf8_cut_tail("a\xe2\x82", 3), 2);
	assert_int_equal(sbx_utf8_cut_tail("a\xe2\x82\xac", 4), 0);
	assert_int_equal(sbx_utf8_cut_tail("\xf0\x9f\x98", 3), 3);
	assert_int_equal(sbx_utf8_cut_tail("\xf0", 1), 1);
	assert_int_equal(sbx_utf8_cut_tail("\xe0", 1), 1);
	assert_int_equal(sbx_utf8_cut_tail("\xe0\x80", 2), 0); /* can never be valid */
	assert_int_equal(sbx_utf8_cut_tail("\xed\xa0", 2), 0); /* a surrogate's start */
	assert_int_equal(sbx_utf8_cut_tail("\xf4\x90", 2), 0); /* past U+10FFFF */
	assert_int_equal(sbx_utf8_cut_tail("\x80\x80\x80", 3), 0);
	assert_int_equal(sbx_utf8_cut_tail("\xff", 1), 0);
	assert_int_equal(sbx_utf8_cut_tail("", 0), 0);
}

static void esc_is(const char *in, size_t n, unsigned flags, const char *want)
{
	char out[256];
	n = n == SIZE_MAX ? strlen(in) : n;
	size_t len = sbx_esc(out, sizeof out, in, n, flags);
	assert_string_equal(out, want);
	assert_int_equal(len, strlen(want));
	assert_int_equal(sbx_esc_clean(in, n, flags),
	                 strlen(want) == n && memcmp(in, want, n) == 0);
}

/* The sequences a hostile agent would send: ESC [ 2J, OSC 52 (clipboard), CSI as a raw byte
 * and as U+009B, a NUL, invalid UTF-8, and a line break that would forge a second line. */
static void escape(void **state)
{
	(void)state;
	esc_is("plain / t\xc3\xa9xt \xe2\x82\xac", SIZE_MAX, 0, "plain / t\xc3\xa9xt \xe2\x82\xac");
	esc_is("\x1b[2J", SIZE_MAX, 0, "\\x1b[2J");
	esc_is("\x1b]52;c;aGk=\x07", SIZE_MAX, 0, "\\x1b]52;c;aGk=\\x07");
	esc_is("\x9b"
	       "31m",
	       SIZE_MAX, 0, "\\x9b31m");
	esc_is("\xc2\x9b"
	       "31m",
	       SIZE_MAX, 0, "\\u009b31m");
	esc_is("\xc2\x80\xc2\x9f\xc2\xa0", SIZE_MAX, 0, "\\u0080\\u009f\xc2\xa0");
	esc_is("a\0b", 3, 0, "a\\x00b");
	esc_is("\x7f", SIZE_MAX, 0, "\\x7f");
	esc_is("\xff\xfe\xe2\x82", SIZE_MAX, 0, "\\xff\\xfe\\xe2\\x82");
	esc_is("\xed\xa0\x80", SIZE_MAX, 0, "\\xed\\xa0\\x80");
	esc_is("one\nsbx: two\r\t", SIZE_MAX, 0, "one\\x0asbx: two\\x0d\\x09");
	esc_is("one\nsbx: two\r\t", SIZE_MAX, SBX_ESC_LINES, "one\nsbx: two\\x0d\t");
	esc_is("back\\slash", SIZE_MAX, 0, "back\\slash");
}

static void truncation(void **state)
{
	(void)state;
	char out[8];
	/* "ab" then "\x1b" (4 bytes) does not fit in 5 + NUL: it is left out whole. */
	size_t n = sbx_esc(out, 6,
	                   "ab\x1b"
	                   "cd",
	                   5, 0);
	assert_int_equal(n, 8);
	assert_string_equal(out, "ab");
	n = sbx_esc(out, sizeof out,
	            "ab\x1b"
	            "cd",
	            5, 0);
	assert_string_equal(out, "ab\\x1bc");
	assert_int_equal(sbx_esc(NULL, 0, "\xc2\x9b", 2, 0), 6);
	/* A multi-byte character is not cut either. */
	n = sbx_esc(out, 3, "a\xe2\x82\xac", 4, 0);
	assert_string_equal(out, "a");
	assert_int_equal(n, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(validator),
	        cmocka_unit_test(cut_tail),
	        cmocka_unit_test(escape),
	        cmocka_unit_test(truncation),
	};
	return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
