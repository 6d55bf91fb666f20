#include "ring.h"

#include <string.h>

#include "../common/util.h"

void ring_init(struct ring *r, size_t max)
{
    *r = (struct ring){.max = max};
}

void ring_free(struct ring *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = r->len = r->head = 0;
}

uint64_t ring_start(const struct ring *r)
{
    return r->total - r->len;
}

void ring_write(struct ring *r, const void *p, size_t n)
{
    const uint8_t *src = p;
    r->total += n;
    if (n >= r->max) {
        /* Only the tail survives. */
        src += n - r->max;
        n = r->max;
        r->head = r->len = 0;
    }
    if (r->len + n > r->cap && r->cap < r->max) {
        /* Growth happens before the first wrap, so head is still 0 here. */
        size_t cap = r->cap ? r->cap * 2 : 4096;
        while (cap < r->len + n)
            cap *= 2;
        if (cap > r->max)
            cap = r->max;
        r->buf = sbx_xrealloc(r->buf, cap);
        r->cap = cap;
    }
    while (n > 0) {
        size_t tail = (r->head + r->len) % r->cap;
        size_t room = r->cap - tail;
        size_t k = n < room ? n : room;
        memcpy(r->buf + tail, src, k);
        src += k;
        n -= k;
        r->len += k;
        if (r->len > r->cap) {
            /* Overwrote the oldest bytes. */
            r->head = (r->head + (r->len - r->cap)) % r->cap;
            r->len = r->cap;
        }
    }
}

size_t ring_peek(const struct ring *r, uint64_t off, const uint8_t **p, size_t max)
{
    uint64_t start = ring_start(r);
    if (off < start || off >= r->total)
        return 0;
    size_t rel = (size_t)(off - start);
    size_t pos = (r->head + rel) % r->cap;
    size_t n = r->len - rel;
    if (n > r->cap - pos)
        n = r->cap - pos;
    if (n > max)
        n = max;
    *p = r->buf + pos;
    return n;
}
