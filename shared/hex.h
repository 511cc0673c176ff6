/* Hex text of bytes and back (installed with libsbx: the CLI prints digests and keys with it).
 * Defined in digest.c. */
#ifndef SBX_HEX_H
#define SBX_HEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void sbx_hex(const uint8_t *bytes, size_t n, char *out);

/* The bytes of the n hex digits at hex (either case; nothing else, no blank, no sign) into
 * out (cap bytes): their count, or -1 when n is odd, a character is no hex digit, or they do
 * not fit. */
ssize_t sbx_unhex(const char *hex, size_t n, uint8_t *out, size_t cap);

#endif
