/* libFuzzer target for request heads (src/daemon/http/reqhead.c), as the egress and
 * preview proxies read them from sandboxes and browsers.
 *
 * Input: byte 0 seeds the split pattern, the rest is what the client sends. The head is
 * read twice: fed in one piece and fed in pseudo-random pieces (1..64 bytes), as a socket
 * delivers it. Both readings must agree (done or not, the error, the target, every header
 * and where the body starts), and a complete head's offsets must all lie inside the head.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../../src/daemon/http/reqhead.h"
#include "fuzz.h"

#define CAP 8192
#define HEADERS 64

struct reading {
    struct reqhead h;
    char buf[CAP];
    struct reqhead_header headers[HEADERS];
    int r;
};

static void read_head(struct reading *rd, const uint8_t *p, size_t n, uint8_t seed)
{
    reqhead_init(&rd->h, rd->buf, CAP, rd->headers, HEADERS);
    uint32_t s = seed | 0x100;
    size_t pos = 0;
    rd->r = 0;
    while (pos < n && !rd->h.done && rd->r == 0 && rd->h.len < CAP) {
        size_t piece = n - pos;
        if (seed)
            piece = 1 + fuzz_next(&s) % 64;
        if (piece > n - pos)
            piece = n - pos;
        if (piece > CAP - rd->h.len)
            piece = CAP - rd->h.len;
        memcpy(rd->buf + rd->h.len, p + pos, piece);
        pos += piece;
        struct sbx_err err = {0};
        rd->r = reqhead_feed(&rd->h, piece, &err);
        REQUIRE(rd->r == 0 || rd->r == -EBADMSG || rd->r == -EMSGSIZE);
        REQUIRE(rd->r == 0 || err.msg[0]);
        REQUIRE(rd->r != -EMSGSIZE || rd->h.len == CAP);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static struct reading whole, pieces;
    read_head(&whole, data + 1, size - 1, 0);
    read_head(&pieces, data + 1, size - 1, data[0] ? data[0] : 1);
    REQUIRE(whole.r == pieces.r && whole.h.done == pieces.h.done);
    if (!whole.h.done || whole.r)
        return 0;
    const struct reqhead *a = &whole.h, *b = &pieces.h;
    REQUIRE(a->body_off <= a->len && a->len <= CAP);
    REQUIRE(a->body_off == b->body_off && a->url_off == b->url_off && a->url_len == b->url_len);
    REQUIRE(a->url_len > 0 && a->url_off + a->url_len <= a->body_off);
    REQUIRE(a->nheaders == b->nheaders && a->nheaders <= HEADERS);
    REQUIRE(!memcmp(a->buf, b->buf, a->body_off));
    for (unsigned i = 0; i < a->nheaders; i++) {
        const struct reqhead_header *x = &a->headers[i], *y = &b->headers[i];
        REQUIRE(!memcmp(x, y, sizeof(*x)));
        REQUIRE(x->name_len > 0 && x->name_off + x->name_len <= a->body_off);
        REQUIRE(x->value_off + x->value_len <= a->body_off);
    }
    return 0;
}
