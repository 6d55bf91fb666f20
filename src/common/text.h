/* Text helpers shared by the daemon's JSON output: UTF-8 validation and base64. */
#ifndef SBX_TEXT_H
#define SBX_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Is buf[0..len) fit for a request's path, query or header value: UTF-8 without NUL,
 * DEL or other control bytes (a tab only with tab_ok)? */
bool sbx_field_valid(const char *buf, size_t len, bool tab_ok);
/* Is buf[0..len) valid UTF-8 (no overlongs, no surrogates, no NUL)? */
bool sbx_utf8_valid(const char *buf, size_t len);
/* Drops, in place, every byte of buf[0..len) that starts no valid sequence (NUL among
 * them); returns the new length. */
size_t sbx_utf8_scrub(char *buf, size_t len);
/* buf[0..len) as valid UTF-8 (malloc'd): each byte that starts no valid sequence becomes
 * U+FFFD, as a file name that is not UTF-8 is shown in JSON. */
char *sbx_utf8_lossy(const char *buf, size_t len);
/* Length of the longest prefix of buf[0..len) that does not end inside a sequence. */
size_t sbx_utf8_prefix(const char *buf, size_t len);
/* Standard base64 with padding; returns a malloc'd NUL-terminated string. */
char *sbx_base64_encode(const void *buf, size_t len);
/* Standard or URL-safe base64, padding optional, into out (room for len * 3 / 4 bytes).
 * -1 when in is not base64. */
int sbx_base64_decode(const char *in, size_t len, unsigned char *out, size_t *out_len);
/* Lower-case hex of len bytes. */
void sbx_hex(const unsigned char *in, size_t len, char *out /* 2*len+1 */);
/* An id: prefix, then bytes (at most 32) of fresh randomness in hex, into out of size bytes.
 * Aborts when the kernel gives no randomness or out is too small: an id that could repeat,
 * or be cut, must never be handed out. */
void sbx_random_id(const char *prefix, size_t bytes, char *out, size_t size);

#endif
