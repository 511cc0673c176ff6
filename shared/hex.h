/* Hex text of bytes (installed with libsbx: the CLI prints digests and keys with it). Defined
 * in digest.c. */
#ifndef SBX_HEX_H
#define SBX_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void sbx_hex(const uint8_t *bytes, size_t n, char *out);

#endif
