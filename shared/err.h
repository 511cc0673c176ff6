/* Errors as values: a class (the same on the wire and in the host API), an errno and a
 * message. Nothing in sbx prints and exits from inside a library; it returns one of these. */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum sbx_err_class {
	SBX_OK = 0,
	SBX_ETRANSFER,    /* deterministic failure inside the sandbox; not retryable */
	SBX_EPROBE,       /* the sandbox could not answer a probe; never read as "absent" */
	SBX_EUNAVAILABLE, /* the channel or provider could not run the operation; retryable */
	SBX_EPROTOCOL,    /* a peer broke the protocol (a bug, or a corrupt channel) */
	SBX_EUSAGE,       /* a bad request from the caller */
};

struct sbx_err {
	enum sbx_err_class cls;
	int errnum; /* errno behind the failure, 0 when there is none */
	char msg[256];
};

/* Name of a class as it appears on the wire and in JSON: "ok", "transfer", "probe",
 * "unavailable", "protocol", "usage"; "unknown" for anything else. */
const char *sbx_err_class_name(enum sbx_err_class cls);

/* Parses a class name; returns -1 when the name is not one of the above. */
int sbx_err_class_parse(const char *name, enum sbx_err_class *out);

/* Fills *e (when e is not NULL) and returns -1, so a failing path reads
 * `return sbx_err_set(e, SBX_EPROBE, errno, "lstat %s", path);`. The message is truncated to
 * fit; an errnum other than 0 appends ": strerror(errnum)". */
int sbx_err_set(struct sbx_err *e, enum sbx_err_class cls, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Puts the formatted prefix and ": " before e's message (the whole cut to fit), keeping its
 * class and errno. Returns -1, like sbx_err_set. */
int sbx_err_prefix(struct sbx_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A name (a member, a path component) fit for a message, into buf (cap bytes): control bytes
 * become '?', a name longer than cap - 4 is cut and ends in "...". Returns buf. */
const char *sbx_err_show(const char *s, char *buf, size_t cap);

/* Resets *e to SBX_OK with an empty message. */
void sbx_err_clear(struct sbx_err *e);

#endif
