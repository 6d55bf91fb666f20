#include "reqhead.h"

#include <errno.h>

static uint32_t off_of(const struct reqhead *h, const char *at)
{
    return (uint32_t)(at - h->buf);
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct reqhead *h = p->data;
    if (!h->url_len)
        h->url_off = off_of(h, at);
    h->url_len += (uint32_t)len; /* pieces are contiguous: the whole head is in buf */
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct reqhead *h = p->data;
    if (h->nheaders == 0 || h->in_value) {
        if (h->nheaders == h->max_headers)
            return 1;
        h->headers[h->nheaders++] = (struct reqhead_header){.name_off = off_of(h, at)};
        h->in_value = false;
    }
    h->headers[h->nheaders - 1].name_len += (uint32_t)len;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct reqhead *h = p->data;
    struct reqhead_header *hd = &h->headers[h->nheaders - 1];
    if (!h->in_value) {
        hd->value_off = off_of(h, at);
        h->in_value = true;
    }
    hd->value_len += (uint32_t)len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct reqhead *h = p->data;
    h->done = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
};

void reqhead_init(struct reqhead *h, void *buf, size_t cap, struct reqhead_header *headers,
                  unsigned max_headers)
{
    *h = (struct reqhead){.buf = buf, .cap = cap, .headers = headers, .max_headers = max_headers};
    http_parser_init(&h->parser, HTTP_REQUEST);
    h->parser.data = h;
}

int reqhead_feed(struct reqhead *h, size_t n, struct sbx_err *err)
{
    size_t start = h->len;
    size_t parsed = http_parser_execute(&h->parser, &settings, h->buf + start, n);
    h->len += n;
    enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
    if (h->done && (e == HPE_PAUSED || e == HPE_OK)) {
        size_t used = start + parsed;
        /* Paused in on_headers_complete, http_parser stops on the head's final LF
         * without counting it. */
        if (used < h->len && h->buf[used] == '\n')
            used++;
        h->body_off = used;
        return 0;
    }
    if (e != HPE_OK)
        return sbx_err_set(err, EBADMSG, "bad_request", "malformed request (%s)",
                           http_errno_name(e));
    if (h->len == h->cap)
        return sbx_err_set(err, EMSGSIZE, "bad_request", "request head larger than %u bytes",
                           (unsigned)h->cap);
    return 0;
}
