/* GNU tar's --exclude (shared/exclude.h), sans-I/O. Each pattern becomes an automaton whose
 * states are its byte offsets: the element that glibc's fnmatch would read at that offset
 * (a literal byte, '?', a run of '*', a bracket expression), and where it leads. A bracket
 * is evaluated at build time for every byte exactly as fnmatch_loop.c reads it, its quirks
 * included, into a table byte -> next offset (the rest of the pattern can start at different
 * offsets for different bytes, so no token list would do). A name is then run through the
 * automaton once, with a fresh start at every component, as gnulib's exclude_fnmatch tries
 * each. */
#include "exclude.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE 0xffff   /* no next offset: the byte does not match */
#define CLASS_MAX 256 /* glibc's CHAR_CLASS_MAX_LENGTH */

enum { K_UNSET, K_LIT, K_ANY, K_STAR, K_BRACKET, K_NEVER, K_END };

struct elem {
	uint8_t kind;
	uint8_t lit;   /* K_LIT: the byte */
	uint16_t next; /* K_LIT, K_ANY: the next offset; K_STAR: the offset after the run */
	uint32_t br;   /* K_BRACKET: its table */
};

struct pat {
	const unsigned char *p; /* the pattern as fnmatch reads it (a literal: unescaped) */
	size_t n;
	int never;       /* a literal that can match nothing (the empty pattern) */
	struct elem *el; /* n + 1 */
	uint16_t (*br)[256];
	size_t nbr, capbr;
	int32_t *skip;       /* n + 1: the end of a bracket skipped from this offset, -2 unknown */
	uint16_t *cur, *nxt; /* the active states */
	uint32_t *mark;      /* n + 1: the step a state was last added in */
	uint32_t epoch;
};

struct sbx_exclude {
	struct pat *pats;
	size_t n;
};

/* ---- byte sets ------------------------------------------------------------------------------ */

struct set {
	uint64_t w[4];
};

static void set_add(struct set *s, unsigned c)
{
	s->w[c >> 6] |= (uint64_t)1 << (c & 63);
}

static void set_range(struct set *s, unsigned lo, unsigned hi)
{
	for (unsigned c = lo; c <= hi && c < 256; c++)
		set_add(s, c);
}

/* The C locale's classes (ASCII only); 0 for a name that is none of them. */
static int class_set(const char *name, struct set *s)
{
	memset(s, 0, sizeof *s);
	for (unsigned c = 1; c < 128; c++) {
		int up = c >= 'A' && c <= 'Z', lo = c >= 'a' && c <= 'z',
		    dig = c >= '0' && c <= '9';
		int graph = c >= 33 && c <= 126;
		int in = strcmp(name, "alnum") == 0   ? up || lo || dig
		         : strcmp(name, "alpha") == 0 ? up || lo
		         : strcmp(name, "blank") == 0 ? c == ' ' || c == '\t'
		         : strcmp(name, "cntrl") == 0 ? c < 32 || c == 127
		         : strcmp(name, "digit") == 0 ? dig
		         : strcmp(name, "graph") == 0 ? graph
		         : strcmp(name, "lower") == 0 ? lo
		         : strcmp(name, "print") == 0 ? graph || c == ' '
		         : strcmp(name, "punct") == 0 ? graph && !up && !lo && !dig
		         : strcmp(name, "space") == 0 ? c == ' ' || (c >= 9 && c <= 13)
		         : strcmp(name, "upper") == 0 ? up
		         : strcmp(name, "xdigit") == 0
		                 ? dig || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
		                 : -1;
		if (in < 0)
			return 0;
		if (in)
			set_add(s, c);
	}
	return 1;
}

/* ---- bracket expressions -------------------------------------------------------------------- */

#define SKIP_FAIL (-1) /* fnmatch gives up: no match */
#define SKIP_OPEN (-3) /* no closing ']': the '[' was an ordinary byte after all */

/* Where fnmatch goes on after a bracket whose byte matched at offset p (its loop that skips
 * the rest of the expression): the offset past the closing ']', SKIP_FAIL or SKIP_OPEN. */
static int32_t skip_from(struct pat *t, size_t p)
{
	const unsigned char *s = t->p;
	size_t first = p;
	int32_t r;
	for (;;) {
		if (t->skip[p] != -2) {
			r = t->skip[p];
			break;
		}
		unsigned c = s[p++];
		if (c == ']') {
			r = (int32_t)p;
			break;
		}
		if (c == 0) {
			r = SKIP_OPEN;
			break;
		}
		if (c == '\\') {
			if (s[p] == 0) {
				r = SKIP_FAIL;
				break;
			}
			p++;
		} else if (c == '[' && s[p] == ':') {
			size_t startp = p;
			int c1 = 0, bad = 0;
			for (;;) {
				c = s[++p];
				if (++c1 == CLASS_MAX) {
					bad = 1;
					break;
				}
				if (c == ':' && s[p + 1] == ']')
					break;
				if (c < 'a' || c >= 'z') {
					p = startp - 2;
					break;
				}
			}
			if (bad) {
				r = SKIP_FAIL;
				break;
			}
			p += 2;
		} else if (c == '[' && s[p] == '=') {
			c = s[++p];
			if (c == 0 || s[++p] != '=' || s[p + 1] != ']') {
				r = SKIP_FAIL;
				break;
			}
			p += 2;
		} else if (c == '[' && s[p] == '.') {
			for (;;) {
				c = s[++p];
				if (c == 0 || (c == '.' && s[p + 1] == ']'))
					break;
			}
			if (c == 0) {
				r = SKIP_FAIL;
				break;
			}
			p += 2;
		}
	}
	/* Every offset from first on reaches the same end: one walk answers them all. The walk
	 * only moves forward (p = startp - 2 is followed by += 2), so this is linear overall. */
	t->skip[first] = r;
	return r;
}

struct bracket {
	struct pat *t;
	uint16_t *tab;
	struct set open; /* bytes not decided yet */
	int neg;
};

/* The bytes of m not decided yet matched at offset p: the rest of the expression is skipped,
 * then a negation fails them. Without a closing ']' the '[' at x is an ordinary byte, which
 * only '[' itself can match (negated or not). */
static void decide(struct bracket *b, size_t x, const struct set *m, size_t p)
{
	for (int i = 0; i < 4; i++) {
		uint64_t w = m->w[i] & b->open.w[i];
		b->open.w[i] &= ~w;
		while (w != 0) {
			unsigned c = (unsigned)i * 64 + (unsigned)__builtin_ctzll(w);
			w &= w - 1;
			int32_t end = skip_from(b->t, p);
			if (end == SKIP_OPEN)
				b->tab[c] = c == '[' ? (uint16_t)(x + 1) : NONE;
			else
				b->tab[c] = end < 0 || b->neg ? NONE : (uint16_t)end;
		}
	}
}

static void decide_one(struct bracket *b, size_t x, unsigned c, size_t p)
{
	struct set m = {{0}};
	set_add(&m, c);
	decide(b, x, &m, p);
}

/* The bytes not decided yet go to next (NONE: they do not match). */
static void rest(struct bracket *b, uint16_t next)
{
	for (unsigned c = 1; c < 256; c++)
		if (b->open.w[c >> 6] & ((uint64_t)1 << (c & 63)))
			b->tab[c] = next;
}

/* The table of the bracket at offset x, as fnmatch_loop.c's case '[' reads it. */
static void bracket(struct pat *t, size_t x, uint16_t *tab)
{
	const unsigned char *s = t->p;
	struct bracket b = {.t = t, .tab = tab};
	for (int i = 0; i < 256; i++)
		tab[i] = NONE; /* wherever fnmatch gives up, the bytes left do not match */
	memset(&b.open, 0xff, sizeof b.open);
	b.open.w[0] &= ~(uint64_t)1; /* no NUL in a name */
	size_t p = x + 1;
	b.neg = s[p] == '!' || s[p] == '^';
	if (b.neg)
		p++;
	unsigned c = s[p++], cold;
	for (;;) {
		if (c == '\\') {
			if (s[p] == 0)
				return;
			c = s[p++];
			goto normal;
		} else if (c == '[' && s[p] == ':') {
			size_t startp = p, c1 = 0;
			char name[CLASS_MAX + 1];
			for (;;) {
				if (c1 == CLASS_MAX)
					return;
				c = s[++p];
				if (c == ':' && s[p + 1] == ']') {
					p += 2;
					break;
				}
				if (c < 'a' || c >= 'z') {
					p = startp;
					c = '[';
					goto normal;
				}
				name[c1++] = (char)c;
			}
			name[c1] = 0;
			struct set m;
			if (!class_set(name, &m))
				return;
			decide(&b, x, &m, p);
			c = s[p++];
		} else if (c == '[' && s[p] == '=') {
			size_t startp = p;
			c = s[++p];
			if (c == 0) {
				p = startp;
				c = '[';
				goto normal;
			}
			unsigned one = c;
			c = s[++p];
			if (c != '=' || s[p + 1] != ']') {
				p = startp;
				c = '[';
				goto normal;
			}
			p += 2;
			decide_one(&b, x, one, p);
			c = s[p++];
		} else if (c == 0) {
			/* Unterminated: the '[' is an ordinary byte. */
			for (unsigned k = 1; k < 256; k++)
				if (b.open.w[k >> 6] & ((uint64_t)1 << (k & 63)))
					tab[k] = k == '[' ? (uint16_t)(x + 1) : NONE;
			return;
		} else {
			int is_range;
			if (c == '[' && s[p] == '.') {
				size_t startp = p, c1 = 0;
				for (;;) {
					c = s[++p];
					if (c == '.' && s[p + 1] == ']') {
						p += 2;
						break;
					}
					if (c == 0)
						return;
					c1++;
				}
				is_range = s[p] == '-' && s[p + 1] != 0;
				if (c1 != 1)
					return;
				if (!is_range)
					decide_one(&b, x, s[startp + 1], p);
				cold = s[startp + 1];
				c = s[p++];
			} else {
			normal:
				is_range = s[p] == '-' && s[p + 1] != 0 && s[p + 1] != ']';
				if (!is_range && c != 0)
					decide_one(&b, x, c, p);
				cold = c;
				c = s[p++];
			}
			if (c == '-' && s[p] != ']') {
				unsigned cend = s[p++];
				if (cend == '[' && s[p] == '.') {
					size_t startp = p, c1 = 0;
					for (;;) {
						c = s[++p];
						if (c == '.' && s[p + 1] == ']') {
							p += 2;
							break;
						}
						if (c == 0)
							return;
						c1++;
					}
					if (c1 != 1)
						return;
					cend = s[startp + 1];
				} else {
					if (cend == '\\')
						cend = s[p++];
					if (cend == 0)
						return;
				}
				struct set m = {{0}};
				if (cold <= cend)
					set_range(&m, cold, cend);
				decide(&b, x, &m, p);
				c = s[p++];
			}
		}
		if (c == ']')
			break;
	}
	rest(&b, b.neg ? (uint16_t)p : NONE);
}

/* ---- building ------------------------------------------------------------------------------- */

/* gnulib's fnmatch_pattern_has_wildcards, for EXCLUDE_WILDCARDS without FNM_NOESCAPE. */
static int has_wildcards(const char *s)
{
	for (;;) {
		switch (*s++) {
		case '\\':
			s += *s != 0;
			break;
		case '?':
		case '*':
		case '[':
			return 1;
		case 0:
			return 0;
		}
	}
}

static void pat_free(struct pat *t)
{
	free((void *)t->p);
	free(t->el);
	free(t->br);
	free(t->skip);
	free(t->cur);
	free(t->nxt);
	free(t->mark);
}

/* The element of a pattern with wildcards at offset x, as fnmatch reads it there. */
static int build_at(struct pat *t, size_t x)
{
	struct elem *el = &t->el[x];
	const unsigned char *s = t->p;
	if (x == t->n) {
		el->kind = K_END;
		return 0;
	}
	unsigned c = s[x];
	if (c == '?') {
		el->kind = K_ANY, el->next = (uint16_t)(x + 1);
	} else if (c == '\\' && s[x + 1] == 0) {
		el->kind = K_NEVER; /* a trailing '\' never matches */
	} else if (c == '\\') {
		el->kind = K_LIT, el->lit = s[x + 1], el->next = (uint16_t)(x + 2);
	} else if (c == '*') {
		size_t y = x;
		while (s[y] == '*')
			y++;
		el->kind = K_STAR, el->next = (uint16_t)y;
	} else if (c == '[') {
		if (t->nbr == t->capbr) {
			size_t cap = t->capbr ? t->capbr * 2 : 4;
			uint16_t(*nb)[256] = realloc(t->br, cap * sizeof *nb);
			if (nb == NULL)
				return -1;
			t->br = nb, t->capbr = cap;
		}
		el->kind = K_BRACKET, el->br = (uint32_t)t->nbr++;
		bracket(t, x, t->br[el->br]);
	} else {
		el->kind = K_LIT, el->lit = (uint8_t)c, el->next = (uint16_t)(x + 1);
	}
	return 0;
}

static int pat_build(struct pat *t, const char *pattern)
{
	memset(t, 0, sizeof *t);
	size_t len = strlen(pattern);
	unsigned char *s = malloc(len + 2);
	if (s == NULL)
		return -1;
	int wild = has_wildcards(pattern);
	if (wild) {
		memcpy(s, pattern, len + 1);
		t->n = len;
	} else {
		/* gnulib's unescape_pattern: a '\' before a byte goes (a trailing one stays). */
		size_t o = 0;
		for (const char *q = pattern; *q != 0; q++) {
			if (*q == '\\' && q[1] != 0)
				q++;
			s[o++] = (unsigned char)*q;
		}
		s[o] = 0;
		t->n = o;
		t->never = o == 0; /* never equal to a whole name or a leading part of one */
	}
	s[t->n + 1] = 0; /* bracket scans may look one byte past the NUL */
	t->p = s;
	size_t m = t->n + 1;
	t->el = calloc(m, sizeof *t->el);
	t->cur = malloc(m * sizeof *t->cur);
	t->nxt = malloc(m * sizeof *t->nxt);
	t->mark = calloc(m, sizeof *t->mark);
	uint16_t *work = malloc(m * sizeof *work);
	if (wild) {
		t->skip = malloc((m + 1) * sizeof *t->skip);
		for (size_t i = 0; t->skip != NULL && i <= m; i++)
			t->skip[i] = -2;
	}
	if (t->el == NULL || t->cur == NULL || t->nxt == NULL || t->mark == NULL || work == NULL ||
	    (wild && t->skip == NULL)) {
		free(work);
		return -1;
	}
	if (!wild) {
		/* A literal is only literal bytes: build them all. */
		for (size_t x = 0; x < t->n; x++)
			t->el[x] = (struct elem){
			        .kind = K_LIT, .lit = s[x], .next = (uint16_t)(x + 1)};
		t->el[t->n].kind = t->never ? K_NEVER : K_END;
		free(work);
		return 0;
	}
	/* Only the offsets the automaton can reach get an element (a bracket's table can lead
	 * anywhere after it); each is queued once. */
	uint8_t *queued = calloc(m, 1);
	size_t nw = 0;
	int rc = queued == NULL ? -1 : 0;
	if (rc == 0)
		work[nw++] = 0, queued[0] = 1;
#define REACH(y)                                                                                   \
	do {                                                                                       \
		if (!queued[y])                                                                    \
			queued[y] = 1, work[nw++] = (uint16_t)(y);                                 \
	} while (0)
	while (rc == 0 && nw > 0) {
		size_t x = work[--nw];
		if ((rc = build_at(t, x)) != 0)
			break;
		const struct elem *el = &t->el[x];
		if (el->kind == K_LIT || el->kind == K_ANY || el->kind == K_STAR)
			REACH(el->next);
		if (el->kind == K_BRACKET)
			for (int k = 1; k < 256; k++)
				if (t->br[el->br][k] != NONE)
					REACH(t->br[el->br][k]);
	}
#undef REACH
	free(queued);
	free(work);
	return rc;
}

/* ---- running a name through --------------------------------------------------------------- */

static void add(struct pat *t, uint16_t *list, size_t *n, uint16_t x)
{
	while (t->mark[x] != t->epoch) {
		t->mark[x] = t->epoch;
		list[(*n)++] = x;
		if (t->el[x].kind != K_STAR)
			break;
		x = t->el[x].next; /* a star also matches nothing */
	}
}

static int pat_test(struct pat *t, const char *name)
{
	if (t->never)
		return 0;
	while (name[0] == '.' && name[1] == '/')
		name += 2;
	size_t nlen = strlen(name), len = nlen + 2; /* judged as "./NAME", as tar packs "." */
	size_t ncur = 0;
	if (++t->epoch == 0) {
		memset(t->mark, 0, (t->n + 1) * sizeof *t->mark);
		t->epoch = 1;
	}
	unsigned prev = 0;
	for (size_t i = 0;; i++) {
		unsigned c = i < 2     ? (unsigned char)"./"[i]
		             : i < len ? (unsigned char)name[i - 2]
		                       : 0;
		/* gnulib tries the whole name, then the part after every '/' not followed by one.
		 */
		if (i == 0 || (prev == '/' && c != '/'))
			add(t, t->cur, &ncur, 0);
		if (t->mark[t->n] == t->epoch && (c == 0 || c == '/'))
			return 1; /* FNM_LEADING_DIR: a match may end where a component ends */
		if (c == 0)
			return 0;
		if (++t->epoch == 0) {
			memset(t->mark, 0, (t->n + 1) * sizeof *t->mark);
			t->epoch = 1;
		}
		size_t nn = 0;
		for (size_t k = 0; k < ncur; k++) {
			uint16_t x = t->cur[k];
			const struct elem *el = &t->el[x];
			switch (el->kind) {
			case K_LIT:
				if (el->lit == c)
					add(t, t->nxt, &nn, el->next);
				break;
			case K_ANY:
				add(t, t->nxt, &nn, el->next);
				break;
			case K_STAR:
				add(t, t->nxt, &nn, x);
				break;
			case K_BRACKET:
				if (t->br[el->br][c] != NONE)
					add(t, t->nxt, &nn, t->br[el->br][c]);
				break;
			default:
				break;
			}
		}
		uint16_t *sw = t->cur;
		t->cur = t->nxt;
		t->nxt = sw;
		ncur = nn;
		prev = c;
	}
}

/* ---- the set -------------------------------------------------------------------------------- */

int sbx_exclude_new(struct sbx_exclude **out, const char *const *patterns, struct sbx_err *e)
{
	*out = NULL;
	size_t n = 0, total = 0;
	for (const char *const *p = patterns; p != NULL && *p != NULL; p++, n++) {
		size_t l = strlen(*p);
		if (l > SBX_EXCLUDE_PATTERN_MAX)
			return sbx_err_set(e, SBX_EUSAGE, 0, "exclude pattern longer than %d bytes",
			                   SBX_EXCLUDE_PATTERN_MAX);
		total += l;
	}
	if (total > SBX_EXCLUDE_TOTAL_MAX)
		return sbx_err_set(e, SBX_EUSAGE, 0, "exclude patterns longer than %d bytes in all",
		                   SBX_EXCLUDE_TOTAL_MAX);
	struct sbx_exclude *x = calloc(1, sizeof *x);
	if (x == NULL || (n > 0 && (x->pats = calloc(n, sizeof *x->pats)) == NULL)) {
		free(x);
		return sbx_err_set(e, SBX_ETRANSFER, 12, "exclude patterns");
	}
	for (size_t i = 0; i < n; i++) {
		x->n = i + 1;
		if (pat_build(&x->pats[i], patterns[i]) != 0) {
			sbx_exclude_free(x);
			return sbx_err_set(e, SBX_ETRANSFER, 12, "exclude patterns");
		}
	}
	x->n = n;
	*out = x;
	return 0;
}

int sbx_exclude_test(struct sbx_exclude *x, const char *name)
{
	for (size_t i = 0; x != NULL && i < x->n; i++)
		if (pat_test(&x->pats[i], name))
			return 1;
	return 0;
}

void sbx_exclude_free(struct sbx_exclude *x)
{
	if (x == NULL)
		return;
	for (size_t i = 0; i < x->n; i++)
		pat_free(&x->pats[i]);
	free(x->pats);
	free(x);
}

int sbx_exclude_match(const char *pattern, const char *name)
{
	const char *one[2] = {pattern, NULL};
	struct sbx_exclude *x;
	if (sbx_exclude_new(&x, one, NULL) != 0)
		return -1;
	int r = sbx_exclude_test(x, name);
	sbx_exclude_free(x);
	return r;
}
