/* Output bytes as JSON events, chunk by chunk: text when the bytes are UTF-8, base64
 * with "encoding" when they are not, and an unfinished UTF-8 sequence at the end of a
 * chunk held back for the next one (so a character split across reads stays text). */
#ifndef SBX_TEXTCHUNK_H
#define SBX_TEXTCHUNK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct utf8_carry {
    uint8_t buf[4];
    size_t len;
};

/* {"type": type, "data": …[, "encoding": "base64"]}, or NULL when everything was held
 * back. flush: the stream ended, send what is held back too. */
json_t *textchunk_event(struct utf8_carry *c, const char *type, const uint8_t *buf, size_t len,
                        bool flush);

#endif
