/* libFuzzer target for the C client library's text/event-stream parser (src/lib/sse.c),
 * which reads whatever a server (or anything between it and the client) sends.
 *
 * Input: byte 0 seeds the split pattern, the rest is the stream. It is parsed twice: in
 * one piece and in pseudo-random pieces (1..32 bytes, so CR LF pairs and field names are
 * split). Both readings must give the same events with the same data, each NUL-terminated
 * and within SSE_EVENT_MAX, and end the same way.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/sse.h"
#include "fuzz.h"

struct events {
    char *all; /* every event's data, each followed by a NUL */
    size_t len, count;
};

static int on_event(void *ud, const char *data, size_t len)
{
    struct events *e = ud;
    REQUIRE(len <= SSE_EVENT_MAX && data[len] == '\0');
    e->all = realloc(e->all, e->len + len + 1);
    memcpy(e->all + e->len, data, len + 1);
    e->len += len + 1;
    e->count++;
    return 0;
}

static int parse(const char *p, size_t n, uint8_t seed, struct events *e)
{
    struct sse_parser sp;
    sse_init(&sp, on_event, e);
    uint32_t s = seed | 0x100;
    int r = 0;
    for (size_t pos = 0; pos < n && r == 0;) {
        size_t piece = n - pos;
        if (seed && (piece = 1 + fuzz_next(&s) % 32) > n - pos)
            piece = n - pos;
        /* A private copy of the piece, so ASan sees any read past it. */
        char *c = malloc(piece);
        memcpy(c, p + pos, piece);
        r = sse_feed(&sp, c, piece);
        free(c);
        pos += piece;
    }
    sse_release(&sp);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct events a = {0}, b = {0};
    int ra = parse((const char *)data + 1, size - 1, 0, &a);
    int rb = parse((const char *)data + 1, size - 1, data[0] ? data[0] : 1, &b);
    REQUIRE(ra == 0 && rb == 0); /* no input this small is over the bound */
    REQUIRE(a.count == b.count && a.len == b.len && (!a.len || !memcmp(a.all, b.all, a.len)));
    REQUIRE(a.len <= size);
    free(a.all);
    free(b.all);
    return 0;
}
