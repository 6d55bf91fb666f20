#include "sni.h"

#include <errno.h>
#include <string.h>

/* A cursor over [p, end): every read checks the bound first. */
struct rd {
    const uint8_t *p, *end;
};

static int take(struct rd *r, size_t n, const uint8_t **out)
{
    if ((size_t)(r->end - r->p) < n)
        return -EPROTO;
    *out = r->p;
    r->p += n;
    return 0;
}

static int u8(struct rd *r, unsigned *v)
{
    const uint8_t *b;
    if (take(r, 1, &b) < 0)
        return -EPROTO;
    *v = b[0];
    return 0;
}

static int u16(struct rd *r, unsigned *v)
{
    const uint8_t *b;
    if (take(r, 2, &b) < 0)
        return -EPROTO;
    *v = (unsigned)b[0] << 8 | b[1];
    return 0;
}

/* A vector with a 1- or 2-byte length: a sub-cursor over its contents. */
static int vec(struct rd *r, int lenbytes, struct rd *sub)
{
    unsigned n;
    const uint8_t *b;
    if ((lenbytes == 1 ? u8(r, &n) : u16(r, &n)) < 0 || take(r, n, &b) < 0)
        return -EPROTO;
    *sub = (struct rd){b, b + n};
    return 0;
}

static int server_name(struct rd ext, char out[SNI_NAME_MAX + 1])
{
    struct rd list;
    if (vec(&ext, 2, &list) < 0)
        return -EPROTO;
    while (list.p < list.end) {
        unsigned type;
        struct rd name;
        if (u8(&list, &type) < 0 || vec(&list, 2, &name) < 0)
            return -EPROTO;
        if (type != 0)
            continue;
        size_t n = (size_t)(name.end - name.p);
        if (n == 0 || n > SNI_NAME_MAX || memchr(name.p, '\0', n))
            return -EPROTO;
        memcpy(out, name.p, n);
        out[n] = '\0';
        return 0;
    }
    return -ENOENT;
}

int sni_parse(const uint8_t *buf, size_t len, char out[SNI_NAME_MAX + 1])
{
    if (len < 5)
        return len > 0 && buf[0] != 0x16 ? -EPROTO : 1;
    if (buf[0] != 0x16 || buf[1] != 0x03) /* handshake record, TLS 1.x framing */
        return -EPROTO;
    size_t reclen = (size_t)buf[3] << 8 | buf[4];
    if (reclen == 0 || reclen > 16384)
        return -EPROTO;
    if (len < 5 + reclen)
        return 1;
    struct rd r = {buf + 5, buf + 5 + reclen};
    unsigned type, hi, lo;
    if (u8(&r, &type) < 0 || type != 1) /* client_hello */
        return -EPROTO;
    if (u8(&r, &hi) < 0 || u16(&r, &lo) < 0)
        return -EPROTO;
    size_t hlen = (size_t)hi << 16 | lo;
    if (hlen > (size_t)(r.end - r.p))
        return -EPROTO; /* split across records */
    r.end = r.p + hlen;
    const uint8_t *skip;
    struct rd v;
    if (take(&r, 2 + 32, &skip) < 0 || /* legacy_version, random */
        vec(&r, 1, &v) < 0 ||           /* legacy_session_id */
        vec(&r, 2, &v) < 0 ||           /* cipher_suites */
        vec(&r, 1, &v) < 0)             /* legacy_compression_methods */
        return -EPROTO;
    if (r.p == r.end)
        return -ENOENT; /* no extensions at all */
    struct rd exts;
    if (vec(&r, 2, &exts) < 0)
        return -EPROTO;
    while (exts.p < exts.end) {
        unsigned etype;
        struct rd ext;
        if (u16(&exts, &etype) < 0 || vec(&exts, 2, &ext) < 0)
            return -EPROTO;
        if (etype == 0)
            return server_name(ext, out);
    }
    return -ENOENT;
}
