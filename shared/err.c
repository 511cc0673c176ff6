/* Error values: class names and the formatting helper used on every failing path. */
#include "err.h"

#include <stdio.h>
#include <string.h>

static const char *const class_names[] = {
        [SBX_OK] = "ok",
        [SBX_ETRANSFER] = "transfer",
        [SBX_EPROBE] = "probe",
        [SBX_EUNAVAILABLE] = "unavailable",
        [SBX_EPROTOCOL] = "protocol",
        [SBX_EUSAGE] = "usage",
};

const char *sbx_err_class_name(enum sbx_err_class cls)
{
	if ((unsigned)cls >= sizeof class_names / sizeof class_names[0])
		return "unknown";
	return class_names[cls];
}

int sbx_err_class_parse(const char *name, enum sbx_err_class *out)
{
	for (size_t i = 0; i < sizeof class_names / sizeof class_names[0]; i++) {
		if (strcmp(name, class_names[i]) == 0) {
			*out = (enum sbx_err_class)i;
			return 0;
		}
	}
	return -1;
}

int sbx_err_set(struct sbx_err *e, enum sbx_err_class cls, int errnum, const char *fmt, ...)
{
	if (e == NULL)
		return -1;
	e->cls = cls;
	e->errnum = errnum;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		e->msg[0] = '\0';
		n = 0;
	}
	if (errnum != 0 && (size_t)n < sizeof e->msg)
		snprintf(e->msg + n, sizeof e->msg - (size_t)n, ": %s", strerror(errnum));
	return -1;
}

int sbx_err_prefix(struct sbx_err *e, const char *fmt, ...)
{
	if (e == NULL)
		return -1;
	char msg[sizeof e->msg];
	memcpy(msg, e->msg, sizeof msg);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	size_t at = n < 0 ? 0 : (size_t)n < sizeof e->msg ? (size_t)n : sizeof e->msg - 1;
	for (const char *p = ": "; *p != '\0' && at + 1 < sizeof e->msg; p++)
		e->msg[at++] = *p;
	size_t len = strlen(msg), room = sizeof e->msg - 1 - at;
	memcpy(e->msg + at, msg, len < room ? len : room);
	e->msg[at + (len < room ? len : room)] = '\0';
	return -1;
}

const char *sbx_err_show(const char *s, char *buf, size_t cap)
{
	size_t n = 0;
	for (; s[n] != '\0' && n + 4 < cap; n++) {
		unsigned char c = (unsigned char)s[n];
		buf[n] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (s[n] != '\0') {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

void sbx_err_clear(struct sbx_err *e)
{
	e->cls = SBX_OK;
	e->errnum = 0;
	e->msg[0] = '\0';
}
