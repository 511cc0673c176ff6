/* UTF-8 (RFC 3629) validation and encoding, and the one escape that makes bytes from the
 * sandbox safe to print on a terminal. Pure functions over caller buffers: no allocation, no
 * I/O; the agent's receipts, the host's JSON codec and the CLI's printer all use these. */
#ifndef SBX_UTF8_H
#define SBX_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid UTF-8 sequence at s[0..n), or 0 when s does not start one (n == 0,
 * a stray continuation byte, an overlong form, an encoded surrogate, a code point past
 * U+10FFFF, or a sequence cut short by n). */
size_t sbx_utf8_seq(const void *s, size_t n);

/* 1 when s[0..n) is entirely valid UTF-8. */
int sbx_utf8_valid(const void *s, size_t n);

/* The code point of the valid sequence of length len (from sbx_utf8_seq) at s. */
uint32_t sbx_utf8_decode(const void *s, size_t len);

/* Writes cp (at most U+10FFFF, not a surrogate) as 1-4 bytes at out; returns the count. */
size_t sbx_utf8_put(uint8_t out[4], uint32_t cp);

/* Bytes (0-3) at the end of s[0..n) that begin a valid sequence the end cuts short: a reader
 * that works in chunks keeps them for the next chunk instead of judging them invalid. */
size_t sbx_utf8_cut_tail(const void *s, size_t n);

/* ---- the terminal escape ----
 * Every byte string that came from the sandbox goes through this before it reaches a
 * terminal. Valid UTF-8 passes unchanged except:
 *   C0 controls (0x00-0x1f) and DEL (0x7f)          -> \xHH   (e.g. ESC -> \x1b)
 *   C1 controls U+0080-U+009F, encoded as UTF-8     -> \uHHHH (e.g. CSI -> \u009b)
 *   each byte that is not part of valid UTF-8        -> \xHH   (e.g. a raw 0x9b -> \x9b)
 * with lower-case hex. A backslash is not escaped: the form is for reading, not for decoding
 * back. With SBX_ESC_LINES, newline and tab pass (multi-line text such as a test's output). */
#define SBX_ESC_LINES 1u

/* snprintf-like: writes at most cap - 1 bytes of the escaped form of in[0..n) and a NUL (when
 * cap > 0), never cutting an escape in two, and returns the length of the whole escaped form
 * (so a return >= cap means out was too small). */
size_t sbx_esc(char *out, size_t cap, const void *in, size_t n, unsigned flags);

/* 1 when sbx_esc would return in[0..n) unchanged. */
int sbx_esc_clean(const void *in, size_t n, unsigned flags);

#endif
