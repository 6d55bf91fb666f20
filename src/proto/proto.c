#include "proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/util.h"

/* A frame plus slack: the decoder never buffers more than this. */
#define DECODER_MAX (PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD + PROTO_READ_MAX)
/* Frames per writev when flushing a queue. */
#define OUTQ_IOV_MAX 64

uint32_t proto_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void proto_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint64_t proto_get_u64(const uint8_t *p)
{
    return (uint64_t)proto_get_u32(p) << 32 | proto_get_u32(p + 4);
}

void proto_put_u64(uint8_t *p, uint64_t v)
{
    proto_put_u32(p, (uint32_t)(v >> 32));
    proto_put_u32(p + 4, (uint32_t)v);
}

void proto_header_encode(uint8_t out[PROTO_HEADER_SIZE], uint32_t stream, uint8_t type,
                         uint8_t flags, uint32_t len)
{
    proto_put_u32(out, len);
    proto_put_u32(out + 4, stream);
    out[8] = type;
    out[9] = flags;
    out[10] = 0;
    out[11] = 0;
}

struct proto_decoder {
    uint8_t *buf;
    size_t start; /* first unconsumed byte */
    size_t len;   /* end of valid bytes */
    size_t cap;
};

struct proto_decoder *proto_decoder_new(void)
{
    struct proto_decoder *d = sbx_xcalloc(1, sizeof(*d));
    d->cap = 64 * 1024;
    d->buf = sbx_xmalloc(d->cap);
    return d;
}

void proto_decoder_free(struct proto_decoder *d)
{
    if (!d)
        return;
    free(d->buf);
    free(d);
}

size_t proto_decoder_pending(const struct proto_decoder *d)
{
    return d->len - d->start;
}

/* Room for len more bytes at d->buf + d->len, or -EMSGSIZE past the bound. */
static int decoder_reserve(struct proto_decoder *d, size_t len)
{
    if (d->start > 0) {
        memmove(d->buf, d->buf + d->start, d->len - d->start);
        d->len -= d->start;
        d->start = 0;
    }
    if (d->len + len > DECODER_MAX)
        return -EMSGSIZE;
    if (d->len + len > d->cap) {
        size_t cap = d->cap;
        while (cap < d->len + len)
            cap *= 2;
        if (cap > DECODER_MAX)
            cap = DECODER_MAX;
        d->buf = sbx_xrealloc(d->buf, cap);
        d->cap = cap;
    }
    return 0;
}

int proto_decoder_feed(struct proto_decoder *d, const void *buf, size_t len)
{
    if (len == 0)
        return 0;
    int r = decoder_reserve(d, len);
    if (r < 0)
        return r;
    memcpy(d->buf + d->len, buf, len);
    d->len += len;
    return 0;
}

ssize_t proto_decoder_read(struct proto_decoder *d, int fd)
{
    if (d->start == d->len)
        d->start = d->len = 0;
    size_t want = PROTO_READ_MAX;
    if (d->len - d->start + want > DECODER_MAX)
        want = DECODER_MAX - (d->len - d->start);
    if (want == 0)
        return -EMSGSIZE;
    int r = decoder_reserve(d, want);
    if (r < 0)
        return r;
    ssize_t n = read(fd, d->buf + d->len, want);
    if (n < 0)
        return -errno;
    d->len += (size_t)n;
    return n;
}

int proto_decoder_next(struct proto_decoder *d, struct proto_frame *f)
{
    size_t avail = d->len - d->start;
    if (avail < PROTO_HEADER_SIZE)
        return 0;
    const uint8_t *h = d->buf + d->start;
    uint32_t len = proto_get_u32(h);
    uint8_t type = h[8];
    if (len > PROTO_MAX_PAYLOAD || type == 0 || type > PROTO_TYPE_MAX || h[10] || h[11])
        return -EPROTO;
    if (avail < PROTO_HEADER_SIZE + (size_t)len)
        return 0;
    f->len = len;
    f->stream = proto_get_u32(h + 4);
    f->type = type;
    f->flags = h[9];
    f->payload = h + PROTO_HEADER_SIZE;
    d->start += PROTO_HEADER_SIZE + len;
    return 1;
}

struct outq_chunk {
    struct outq_chunk *next;
    size_t len, off;
    uint8_t data[];
};

struct proto_outq {
    struct outq_chunk *head, *tail;
    size_t bytes, max;
};

struct proto_outq *proto_outq_new(size_t max_bytes)
{
    struct proto_outq *q = sbx_xcalloc(1, sizeof(*q));
    q->max = max_bytes;
    return q;
}

void proto_outq_free(struct proto_outq *q)
{
    if (!q)
        return;
    struct outq_chunk *c = q->head;
    while (c) {
        struct outq_chunk *n = c->next;
        free(c);
        c = n;
    }
    free(q);
}

size_t proto_outq_len(const struct proto_outq *q)
{
    return q->bytes;
}

int proto_outq_push(struct proto_outq *q, uint32_t stream, uint8_t type, uint8_t flags,
                    const void *payload, uint32_t len)
{
    if (len > PROTO_MAX_PAYLOAD)
        return -EMSGSIZE;
    size_t total = PROTO_HEADER_SIZE + (size_t)len;
    if (q->bytes + total > q->max)
        return -ENOBUFS;
    struct outq_chunk *c = sbx_xmalloc(sizeof(*c) + total);
    c->next = NULL;
    c->len = total;
    c->off = 0;
    proto_header_encode(c->data, stream, type, flags, len);
    if (len)
        memcpy(c->data + PROTO_HEADER_SIZE, payload, len);
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    q->bytes += total;
    return 0;
}

int proto_outq_flush(struct proto_outq *q, int fd)
{
    while (q->head) {
        /* Many frames per write: a WINDOW frame is 16 bytes. */
        struct iovec iov[OUTQ_IOV_MAX];
        int niov = 0;
        for (struct outq_chunk *c = q->head; c && niov < OUTQ_IOV_MAX; c = c->next)
            iov[niov++] = (struct iovec){c->data + c->off, c->len - c->off};
        ssize_t n = writev(fd, iov, niov);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        q->bytes -= (size_t)n;
        size_t left = (size_t)n;
        while (left) {
            struct outq_chunk *c = q->head;
            size_t take = c->len - c->off < left ? c->len - c->off : left;
            c->off += take;
            left -= take;
            if (c->off == c->len) {
                q->head = c->next;
                if (!q->head)
                    q->tail = NULL;
                free(c);
            }
        }
    }
    return 0;
}
