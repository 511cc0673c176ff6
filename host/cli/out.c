/* Everything the CLI prints goes out through here: JSON documents from the typed writer, and
 * text through cli_printf, which escapes every %s argument (utf8.h's terminal escape) so no
 * byte from the sandbox reaches a terminal raw. Only exec/sh/output streams are raw. */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#include "cli.h"

void cli_write_esc(FILE *f, const void *bytes, size_t n, unsigned flags)
{
	if (sbx_esc_clean(bytes, n, flags)) {
		fwrite(bytes, 1, n, f);
		return;
	}
	char small[512];
	size_t need = sbx_esc(small, sizeof small, bytes, n, flags);
	char *big = need < sizeof small ? NULL : malloc(need + 1);
	if (big != NULL)
		sbx_esc(big, need + 1, bytes, n, flags);
	/* Without memory the escaped form is cut short, never the escape dropped. */
	fputs(big != NULL ? big : small, f);
	free(big);
}

/* One conversion of the format at *pp (just past its '%'), printed with the argument it takes
 * from ap. The compiler checked the format against the arguments (the format attribute), so
 * the length modifier says exactly which type va_arg must take. */
static void one_conversion(FILE *f, const char **pp, va_list *ap)
{
	const char *p = *pp;
	char spec[48];
	size_t k = 0;
	spec[k++] = '%';
	while (*p != '\0' && strchr("-+ #0", *p) != NULL && k < 8)
		spec[k++] = *p++;
	int width = -1, prec = -1;
	if (*p == '*') {
		width = va_arg(*ap, int);
		p++;
	} else if (isdigit((unsigned char)*p)) {
		width = (int)strtol(p, (char **)&p, 10);
	}
	if (*p == '.') {
		p++;
		if (*p == '*') {
			prec = va_arg(*ap, int);
			p++;
		} else {
			prec = (int)strtol(p, (char **)&p, 10);
		}
		if (prec < 0)
			prec = -1;
	}
	if (width >= 0)
		k += (size_t)snprintf(spec + k, 12, "%d", width);
	char len[3] = "";
	if (p[0] == 'h' || p[0] == 'l') {
		len[0] = *p++;
		if (*p == len[0])
			len[1] = *p++;
	} else if (*p == 'z' || *p == 'j' || *p == 't' || *p == 'L') {
		len[0] = *p++;
	}
	char conv = *p != '\0' ? *p++ : '\0';
	*pp = p;
	if (conv == 's') {
		/* The precision counts input bytes; the width pads the escaped form. */
		const char *s = va_arg(*ap, const char *);
		size_t n = prec >= 0 ? strnlen(s, (size_t)prec) : strlen(s);
		char small[512];
		size_t need = sbx_esc(small, sizeof small, s, n, 0);
		char *big = need < sizeof small ? NULL : malloc(need + 1);
		if (big != NULL)
			sbx_esc(big, need + 1, s, n, 0);
		snprintf(spec + k, sizeof spec - k, "s");
		fprintf(f, spec, big != NULL ? big : small);
		free(big);
		return;
	}
	if (prec >= 0)
		k += (size_t)snprintf(spec + k, 12, ".%d", prec);
	snprintf(spec + k, sizeof spec - k, "%s%c", len, conv);
	switch (conv) {
	case 'd':
	case 'i':
	case 'u':
	case 'o':
	case 'x':
	case 'X':
	case 'c': {
		int is_signed = conv == 'd' || conv == 'i' || conv == 'c';
		if (strcmp(len, "ll") == 0 && is_signed)
			fprintf(f, spec, va_arg(*ap, long long));
		else if (strcmp(len, "ll") == 0)
			fprintf(f, spec, va_arg(*ap, unsigned long long));
		else if (strcmp(len, "l") == 0 && is_signed)
			fprintf(f, spec, va_arg(*ap, long));
		else if (strcmp(len, "l") == 0)
			fprintf(f, spec, va_arg(*ap, unsigned long));
		else if (strcmp(len, "z") == 0)
			fprintf(f, spec, va_arg(*ap, size_t));
		else if (strcmp(len, "j") == 0 && is_signed)
			fprintf(f, spec, va_arg(*ap, intmax_t));
		else if (strcmp(len, "j") == 0)
			fprintf(f, spec, va_arg(*ap, uintmax_t));
		else if (strcmp(len, "t") == 0)
			fprintf(f, spec, va_arg(*ap, ptrdiff_t));
		else if (is_signed)
			fprintf(f, spec, va_arg(*ap, int));
		else
			fprintf(f, spec, va_arg(*ap, unsigned));
		return;
	}
	case 'f':
	case 'F':
	case 'e':
	case 'E':
	case 'g':
	case 'G':
	case 'a':
	case 'A':
		if (len[0] == 'L')
			fprintf(f, spec, va_arg(*ap, long double));
		else
			fprintf(f, spec, va_arg(*ap, double));
		return;
	case 'p':
		fprintf(f, spec, va_arg(*ap, void *));
		return;
	case '%':
		fputc('%', f);
		return;
	default:
		/* %n and anything unknown: nothing a CLI message needs. */
		return;
	}
}

void cli_vfprintf(FILE *f, const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	for (const char *p = fmt; *p != '\0';) {
		if (*p != '%') {
			const char *q = strchr(p, '%');
			size_t n = q != NULL ? (size_t)(q - p) : strlen(p);
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		p++;
		one_conversion(f, &p, &aq);
	}
	va_end(aq);
}

void cli_fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cli_vfprintf(f, fmt, ap);
	va_end(ap);
}

void cli_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cli_vfprintf(stdout, fmt, ap);
	va_end(ap);
}

/* ---- JSON ---- */

void cli_json_out(struct sbx_jw *w)
{
	size_t len;
	const char *t = sbx_jw_flush(w, &len);
	if (t != NULL)
		fwrite(t, 1, len, stdout);
}

void print_json(struct sbx_jw *w)
{
	size_t len;
	const char *t = sbx_jw_text(w, &len);
	if (t == NULL) {
		/* Only allocation failure gets here: the one constant document. */
		fputs("{\"ok\":false,\"error\":{\"class\":\"usage\",\"message\":\"out of "
		      "memory\"}}\n",
		      stdout);
	} else {
		fwrite(t, 1, len, stdout);
		fputc('\n', stdout);
	}
	fflush(stdout);
	sbx_jw_reset(w);
}

void json_ok(struct sbx_jw *w)
{
	sbx_jw_kbool(w, "ok", 1);
}

void json_err(struct sbx_jw *w, const struct sbx_err *e)
{
	sbx_jw_kbool(w, "ok", 0);
	sbx_jw_key(w, "error");
	sbx_jw_obj_begin(w);
	sbx_jw_kstr(w, "class", sbx_err_class_name(e->cls));
	sbx_jw_kint(w, "errno", e->errnum);
	sbx_jw_kstr(w, "message", e->msg);
	sbx_jw_obj_end(w);
}

int fail(const struct opts *o, const struct sbx_err *e, int status)
{
	if (o->json) {
		struct sbx_jw w;
		sbx_jw_init(&w);
		sbx_jw_obj_begin(&w);
		json_err(&w, e);
		sbx_jw_obj_end(&w);
		print_json(&w);
		sbx_jw_free(&w);
	} else {
		cli_fprintf(stderr, "sbx: %s: %s\n", sbx_err_class_name(e->cls), e->msg);
	}
	return status;
}
