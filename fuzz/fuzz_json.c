/* libFuzzer target for the JSON codec: whatever parses must write back (strings through
 * sbx_jw_strn, so the UTF-8 repair path runs) to one line that parses again to the same tree. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "json.h"

static void write_tree(struct sbx_jw *w, const struct sbx_json *j)
{
	switch (j->type) {
	case SBX_JSON_NULL:
		sbx_jw_null(w);
		break;
	case SBX_JSON_BOOL:
		sbx_jw_bool(w, j->boolean);
		break;
	case SBX_JSON_NUMBER:
		if (j->is_int)
			sbx_jw_int(w, j->i64);
		else
			sbx_jw_double(w, j->num);
		break;
	case SBX_JSON_STRING:
		sbx_jw_strn(w, j->str, j->len);
		break;
	case SBX_JSON_ARRAY:
		sbx_jw_arr_begin(w);
		for (size_t i = 0; i < j->len; i++)
			write_tree(w, &j->kids[i]);
		sbx_jw_arr_end(w);
		break;
	case SBX_JSON_OBJECT:
		sbx_jw_obj_begin(w);
		for (size_t i = 0; i < j->len; i++) {
			sbx_jw_keyn(w, j->kids[i].key, j->kids[i].keylen);
			write_tree(w, &j->kids[i]);
		}
		sbx_jw_obj_end(w);
		break;
	}
}

/* The parser only accepts valid UTF-8, so strings must survive the writer unchanged. An integer
 * is written as one and must come back exact; a number beyond int64 is written as its double,
 * which may then read back as integral (-9223372036854775809 becomes -2^63), so only the double
 * is compared. -0.0 reads as the integer 0, and == treats the two as equal. */
static int same(const struct sbx_json *a, const struct sbx_json *b)
{
	if (a->type != b->type || a->keylen != b->keylen ||
	    (a->keylen > 0 && memcmp(a->key, b->key, a->keylen) != 0))
		return 0;
	switch (a->type) {
	case SBX_JSON_BOOL:
		return a->boolean == b->boolean;
	case SBX_JSON_NUMBER:
		return a->num == b->num && (!a->is_int || (b->is_int && a->i64 == b->i64));
	case SBX_JSON_STRING:
		return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
	case SBX_JSON_ARRAY:
	case SBX_JSON_OBJECT:
		if (a->len != b->len)
			return 0;
		for (size_t i = 0; i < a->len; i++)
			if (!same(&a->kids[i], &b->kids[i]))
				return 0;
		return 1;
	default:
		return 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_json *j, *again;
	struct sbx_err e;
	if (sbx_json_parse((const char *)data, size, &j, &e) != 0)
		return 0;
	struct sbx_jw w;
	sbx_jw_init(&w);
	write_tree(&w, j);
	size_t len;
	const char *text = sbx_jw_text(&w, &len);
	if (text == NULL || memchr(text, '\n', len) != NULL)
		__builtin_trap();
	if (sbx_json_parse(text, len, &again, &e) != 0 || !same(j, again))
		__builtin_trap();
	sbx_json_free(again);
	sbx_json_free(j);
	sbx_jw_free(&w);
	return 0;
}
