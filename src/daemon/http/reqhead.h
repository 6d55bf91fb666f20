/* An HTTP/1 request head read into a fixed buffer and parsed in place by http_parser:
 * the request target and the headers are kept as offsets into the buffer, so nothing
 * is copied. Parsing pauses at the end of the head; what follows it (a body, pipelined
 * bytes) stays in the buffer for the caller to pass on. Used by the egress proxy and
 * the preview proxy, each with its own buffer size and header bound. */
#ifndef SBX_HTTP_REQHEAD_H
#define SBX_HTTP_REQHEAD_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

struct reqhead_header {
    uint32_t name_off, name_len, value_off, value_len;
};

struct reqhead {
    http_parser parser; /* method, version, upgrade */
    char *buf;
    size_t cap, len; /* len: bytes in buf, the head and what followed it */
    uint32_t url_off, url_len;
    struct reqhead_header *headers;
    unsigned max_headers, nheaders;
    bool in_value; /* the last callback was a header value */
    bool done;
    size_t body_off; /* once done: where the bytes after the head start in buf */
};

/* buf (cap bytes) and headers (max_headers entries) belong to the caller and must
 * outlive h. */
void reqhead_init(struct reqhead *h, void *buf, size_t cap, struct reqhead_header *headers,
                  unsigned max_headers);
/* The caller put n more bytes at buf + len (at most cap - len). Returns 0 with done set
 * once the head is complete, 0 without it while more is needed, -EBADMSG for a malformed
 * head (or more headers than max_headers) and -EMSGSIZE for a full buffer without a
 * whole head; err says which. */
int reqhead_feed(struct reqhead *h, size_t n, struct sbx_err *err);

#endif
