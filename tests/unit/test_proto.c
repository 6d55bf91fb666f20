/* Unit tests for the wire codec in src/proto/proto.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/proto/proto.h"
#include "check.h"

#define SBX_TEST_ARRAY_N(a) (sizeof(a) / sizeof((a)[0]))

struct tframe {
    uint32_t stream;
    uint8_t type, flags;
    uint32_t len;
    uint8_t *payload;
};

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Encode frames into one byte stream. */
static uint8_t *encode_all(const struct tframe *fr, size_t n, size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += PROTO_HEADER_SIZE + fr[i].len;
    uint8_t *buf = malloc(total ? total : 1), *p = buf;
    for (size_t i = 0; i < n; i++) {
        proto_header_encode(p, fr[i].stream, fr[i].type, fr[i].flags, fr[i].len);
        memcpy(p + PROTO_HEADER_SIZE, fr[i].payload, fr[i].len);
        p += PROTO_HEADER_SIZE + fr[i].len;
    }
    *out_len = total;
    return buf;
}

/* Feed buf in pieces cut at cuts[0..ncuts) and compare every decoded frame with want.
 * Returns 1 when all frames came out intact, in order, and nothing is left over. */
static int decode_split(const uint8_t *buf, size_t len, const size_t *cuts, size_t ncuts,
                        const struct tframe *want, size_t nwant)
{
    struct proto_decoder *d = proto_decoder_new();
    size_t got = 0, pos = 0;
    int ok = 1;
    for (size_t c = 0; c <= ncuts && ok; c++) {
        size_t end = c < ncuts ? cuts[c] : len;
        if (end < pos)
            end = pos;
        if (proto_decoder_feed(d, buf + pos, end - pos) != 0)
            ok = 0;
        pos = end;
        struct proto_frame f;
        int r = 0;
        while (ok && (r = proto_decoder_next(d, &f)) == 1) {
            if (got >= nwant) {
                ok = 0;
                break;
            }
            const struct tframe *w = &want[got++];
            if (f.stream != w->stream || f.type != w->type || f.flags != w->flags ||
                f.len != w->len || (w->len && memcmp(f.payload, w->payload, w->len) != 0))
                ok = 0;
        }
        if (r < 0)
            ok = 0;
    }
    if (got != nwant || proto_decoder_pending(d) != 0)
        ok = 0;
    proto_decoder_free(d);
    return ok;
}

static struct tframe mk(uint32_t stream, uint8_t type, uint8_t flags, uint32_t len)
{
    struct tframe f = {stream, type, flags, len, malloc(len ? len : 1)};
    for (uint32_t i = 0; i < len; i++)
        f.payload[i] = (uint8_t)rnd();
    return f;
}

static void test_header(void)
{
    uint8_t h[PROTO_HEADER_SIZE];
    proto_header_encode(h, 0x01020304u, PROTO_DATA, 2, 0x0a0b0c0du);
    const uint8_t want[PROTO_HEADER_SIZE] = {0x0a, 0x0b, 0x0c, 0x0d, 1, 2, 3, 4, 3, 2, 0, 0};
    CHECK_MEM(h, want, sizeof(want), "header is big endian: len, stream, type, flags, reserved");
    uint8_t b[4];
    proto_put_u32(b, 0xdeadbeefu);
    CHECK_EQ_INT(proto_get_u32(b), 0xdeadbeefu, "u32 round trip");
    CHECK(b[0] == 0xde && b[3] == 0xef, "u32 is big endian");
    uint8_t q[8];
    proto_put_u64(q, 0x0102030405060708ull);
    const uint8_t want_q[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_MEM(q, want_q, sizeof(want_q), "u64 is big endian (IDLE's count)");
    CHECK(proto_get_u64(q) == 0x0102030405060708ull, "u64 round trip");
}

static void test_round_trip_and_splits(void)
{
    struct tframe fr[] = {
        mk(0, PROTO_HELLO, 0, 40),          mk(1, PROTO_OPEN, 0, 0),  mk(1, PROTO_DATA, 1, 1),
        mk(0xffffffffu, PROTO_DATA, 2, 13), mk(3, PROTO_EOF, 255, 0), mk(3, PROTO_PONG, 0, 7),
    };
    size_t n = SBX_TEST_ARRAY_N(fr), len;
    uint8_t *buf = encode_all(fr, n, &len);
    CHECK(decode_split(buf, len, NULL, 0, fr, n), "round trip of %zu frames fed at once", n);

    /* Every one- and two-point split of the byte stream. */
    int ok1 = 1, ok2 = 1;
    for (size_t i = 0; i <= len; i++) {
        size_t c1[1] = {i};
        ok1 &= decode_split(buf, len, c1, 1, fr, n);
        for (size_t j = i; j <= len; j++) {
            size_t c2[2] = {i, j};
            ok2 &= decode_split(buf, len, c2, 2, fr, n);
        }
    }
    CHECK(ok1, "every single split of a %zu-byte stream", len);
    CHECK(ok2, "every pair of splits of a %zu-byte stream", len);

    /* One byte at a time. */
    size_t *cuts = malloc(len * sizeof(*cuts));
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    CHECK(decode_split(buf, len, cuts, len, fr, n), "fed one byte at a time");
    free(cuts);
    free(buf);
    for (size_t i = 0; i < n; i++)
        free(fr[i].payload);
}

static void test_large_random(void)
{
    /* Many frames including maximum-size ones, fed in random pieces no larger than a
     * reader would take in one read (64 KiB), as the agent does. */
    enum { N = 40 };
    struct tframe fr[N];
    for (int i = 0; i < N; i++) {
        uint32_t len = i % 7 == 0 ? PROTO_MAX_PAYLOAD : rnd() % 70000;
        fr[i] = mk(rnd(), (uint8_t)(1 + rnd() % PROTO_TYPE_MAX), (uint8_t)rnd(), len);
    }
    size_t len;
    uint8_t *buf = encode_all(fr, N, &len);
    int ok = 1;
    for (int round = 0; round < 20; round++) {
        size_t cuts[4096], nc = 0, pos = 0;
        while (nc < 4096) {
            pos += 1 + rnd() % (64 * 1024);
            if (pos >= len)
                break;
            cuts[nc++] = pos;
        }
        ok &= decode_split(buf, len, cuts, nc, fr, N);
    }
    CHECK(ok, "%d frames (%zu bytes, max-size payloads) in 20 random splittings", N, len);
    free(buf);
    for (int i = 0; i < N; i++)
        free(fr[i].payload);
}

static int decode_header_only(uint32_t len, uint8_t type, uint8_t flags, uint16_t reserved)
{
    uint8_t h[PROTO_HEADER_SIZE];
    proto_header_encode(h, 1, type, flags, len);
    h[10] = (uint8_t)(reserved >> 8);
    h[11] = (uint8_t)reserved;
    struct proto_decoder *d = proto_decoder_new();
    struct proto_frame f;
    int r = proto_decoder_feed(d, h, sizeof(h));
    if (r == 0)
        r = proto_decoder_next(d, &f);
    proto_decoder_free(d);
    return r;
}

static void test_bad_headers(void)
{
    CHECK_EQ_INT(decode_header_only(0, 0, 0, 0), -EPROTO, "type 0 -> -EPROTO");
    CHECK_EQ_INT(decode_header_only(0, PROTO_TYPE_MAX + 1, 0, 0), -EPROTO, "type %d -> -EPROTO",
                 PROTO_TYPE_MAX + 1);
    CHECK_EQ_INT(decode_header_only(0, 255, 0, 0), -EPROTO, "type 255 -> -EPROTO");
    CHECK_EQ_INT(decode_header_only(0, PROTO_PING, 0, 1), -EPROTO, "reserved low bit -> -EPROTO");
    CHECK_EQ_INT(decode_header_only(0, PROTO_PING, 0, 0x8000), -EPROTO,
                 "reserved high bit -> -EPROTO");
    CHECK_EQ_INT(decode_header_only(PROTO_MAX_PAYLOAD + 1, PROTO_DATA, 1, 0), -EPROTO,
                 "length max+1 -> -EPROTO before any payload arrives");
    CHECK_EQ_INT(decode_header_only(0xffffffffu, PROTO_DATA, 1, 0), -EPROTO,
                 "length 2^32-1 -> -EPROTO");
    CHECK_EQ_INT(decode_header_only(PROTO_MAX_PAYLOAD, PROTO_DATA, 1, 0), 0,
                 "length max with no payload yet -> needs more");
    CHECK_EQ_INT(decode_header_only(0, PROTO_TYPE_MAX, 0, 0), 1, "type max, empty -> a frame");
    CHECK_EQ_INT(decode_header_only(8, PROTO_IDLE, 0, 0), 0, "IDLE is a known type");
    CHECK_EQ_INT(decode_header_only(0, PROTO_PING, 0xff, 0), 1, "any flags are accepted");

    /* An error is sticky: the stream cannot be resynchronised. */
    struct proto_decoder *d = proto_decoder_new();
    uint8_t h[PROTO_HEADER_SIZE * 2];
    proto_header_encode(h, 0, 0, 0, 0);
    proto_header_encode(h + PROTO_HEADER_SIZE, 0, PROTO_PING, 0, 0);
    struct proto_frame f;
    proto_decoder_feed(d, h, sizeof(h));
    int r1 = proto_decoder_next(d, &f), r2 = proto_decoder_next(d, &f);
    CHECK(r1 == -EPROTO && r2 == -EPROTO, "a bad header stays an error (%d, %d)", r1, r2);
    proto_decoder_free(d);

    /* A good frame before a bad one still comes out. */
    d = proto_decoder_new();
    proto_header_encode(h, 0, PROTO_PING, 0, 0);
    proto_header_encode(h + PROTO_HEADER_SIZE, 0, 42, 0, 0);
    proto_decoder_feed(d, h, sizeof(h));
    r1 = proto_decoder_next(d, &f);
    r2 = proto_decoder_next(d, &f);
    CHECK(r1 == 1 && r2 == -EPROTO, "good frame, then error (%d, %d)", r1, r2);
    proto_decoder_free(d);
}

static void test_max_size_and_bound(void)
{
    struct tframe fr = mk(5, PROTO_DATA, 1, PROTO_MAX_PAYLOAD);
    size_t len;
    uint8_t *buf = encode_all(&fr, 1, &len);
    CHECK(decode_split(buf, len, NULL, 0, &fr, 1), "a max-size frame decodes");

    /* Partial header: nothing yet, pending counts it. */
    struct proto_decoder *d = proto_decoder_new();
    struct proto_frame f;
    proto_decoder_feed(d, buf, 5);
    CHECK(proto_decoder_next(d, &f) == 0 && proto_decoder_pending(d) == 5,
          "partial header -> 0, 5 pending");
    proto_decoder_free(d);

    /* The decoder's buffer is bounded: a reader that never drains is refused. */
    d = proto_decoder_new();
    uint8_t junk[64 * 1024];
    memset(junk, 0, sizeof(junk));
    int r = 0;
    size_t fed = 0;
    while (r == 0 && fed < 4u * 1024 * 1024) {
        r = proto_decoder_feed(d, junk, sizeof(junk));
        if (r == 0)
            fed += sizeof(junk);
    }
    CHECK(r == -EMSGSIZE && fed >= PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD,
          "undrained feeding stops with -EMSGSIZE (after %zu bytes)", fed);
    proto_decoder_free(d);

    /* But a max frame plus a full PROTO_READ_MAX read always fits when drained in between. */
    d = proto_decoder_new();
    int ok = proto_decoder_feed(d, buf, len - 1) == 0 && proto_decoder_next(d, &f) == 0 &&
             proto_decoder_feed(d, buf + len - 1, 1) == 0;
    size_t next_len = PROTO_READ_MAX;
    uint8_t *next = malloc(next_len);
    proto_header_encode(next, 7, PROTO_DATA, 1, (uint32_t)(next_len - PROTO_HEADER_SIZE));
    memset(next + PROTO_HEADER_SIZE, 0xab, next_len - PROTO_HEADER_SIZE);
    /* Not drained yet: one complete max frame + one whole read. */
    ok = ok && proto_decoder_feed(d, next, next_len) == 0;
    ok = ok && proto_decoder_next(d, &f) == 1 && f.len == PROTO_MAX_PAYLOAD;
    ok = ok && proto_decoder_next(d, &f) == 1 && f.len == next_len - PROTO_HEADER_SIZE;
    CHECK(ok, "max frame + a PROTO_READ_MAX read fit the decoder bound");
    free(next);
    proto_decoder_free(d);
    free(buf);
    free(fr.payload);
}

static void test_outq(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct proto_outq *q = proto_outq_new(1000);
    uint8_t p[600];
    memset(p, 0x5a, sizeof(p));
    CHECK_EQ_INT(proto_outq_push(q, 1, PROTO_DATA, 1, p, 500), 0, "push 512 bytes into 1000");
    CHECK_EQ_INT(proto_outq_len(q), 512, "len counts header + payload");
    CHECK_EQ_INT(proto_outq_push(q, 1, PROTO_DATA, 1, p, 500), -ENOBUFS,
                 "push past the bound -> -ENOBUFS");
    CHECK_EQ_INT(proto_outq_len(q), 512, "a refused push changes nothing");
    CHECK_EQ_INT(proto_outq_push(q, 1, PROTO_DATA, 1, p, 476), 0, "push up to exactly the bound");
    CHECK_EQ_INT(proto_outq_push(q, 1, PROTO_EOF, 1, NULL, 0), -ENOBUFS,
                 "even an empty frame past the bound is refused");
    proto_outq_free(q);

    q = proto_outq_new(8u << 20);
    CHECK_EQ_INT(proto_outq_push(q, 1, PROTO_DATA, 1, p, PROTO_MAX_PAYLOAD + 1), -EMSGSIZE,
                 "oversized payload -> -EMSGSIZE");

    /* Flush into a small non-blocking pipe: partial writes, then the rest. */
    int fds[2];
    if (pipe2(fds, O_NONBLOCK) < 0) {
        CHECK(0, "pipe2");
        return;
    }
    (void)fcntl(fds[1], F_SETPIPE_SZ, 4096);
    /* More frames than one writev takes. */
    enum { NF = 150 };
    struct tframe fr[NF];
    int ok = 1;
    for (int i = 0; i < NF; i++) {
        fr[i] = mk((uint32_t)i, PROTO_DATA, (uint8_t)(i % 3), rnd() % 5000);
        ok &= proto_outq_push(q, fr[i].stream, fr[i].type, fr[i].flags, fr[i].payload, fr[i].len) ==
              0;
    }
    CHECK(ok, "queued %d frames", NF);
    size_t want_len;
    uint8_t *want = encode_all(fr, NF, &want_len);
    CHECK_EQ_INT(proto_outq_len(q), want_len, "queue length is the encoded size");
    uint8_t *got = malloc(want_len);
    size_t have = 0;
    int rounds = 0, err = 0;
    while (have < want_len && rounds < 100000) {
        int r = proto_outq_flush(q, fds[1]);
        if (r < 0) {
            err = r;
            break;
        }
        ssize_t n = read(fds[0], got + have, want_len - have);
        if (n > 0)
            have += (size_t)n;
        rounds++;
    }
    CHECK(err == 0 && rounds > 1, "flush to a full pipe returns 0 and resumes (%d rounds)", rounds);
    CHECK(have == want_len && memcmp(got, want, want_len) == 0 && proto_outq_len(q) == 0,
          "the bytes written are exactly the encoded frames");
    CHECK(decode_split(got, have, NULL, 0, fr, NF), "and they decode back");

    proto_outq_push(q, 1, PROTO_PING, 0, NULL, 0);
    close(fds[0]);
    CHECK_EQ_INT(proto_outq_flush(q, fds[1]), -EPIPE, "flush to a closed reader -> -EPIPE");
    close(fds[1]);
    proto_outq_free(q);
    free(got);
    free(want);
    for (int i = 0; i < NF; i++)
        free(fr[i].payload);
}

static void test_decoder_read(void)
{
    int fds[2];
    if (pipe2(fds, O_NONBLOCK) < 0) {
        CHECK(0, "pipe2");
        return;
    }
    (void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    enum { NF = 20 };
    struct tframe fr[NF];
    for (int i = 0; i < NF; i++)
        fr[i] = mk((uint32_t)i, PROTO_DATA, 1, i % 4 == 0 ? PROTO_MAX_PAYLOAD : rnd() % 9000);
    size_t len;
    uint8_t *all = encode_all(fr, NF, &len);
    struct proto_decoder *d = proto_decoder_new();
    size_t wrote = 0;
    int got = 0, ok = 1, reads = 0;
    while (got < NF && reads < 100000) {
        if (wrote < len) {
            ssize_t w = write(fds[1], all + wrote, len - wrote);
            if (w > 0)
                wrote += (size_t)w;
        }
        ssize_t n = proto_decoder_read(d, fds[0]);
        ok &= n > 0 || n == -EAGAIN;
        ok &= n <= (ssize_t)PROTO_READ_MAX;
        reads++;
        struct proto_frame f;
        while (proto_decoder_next(d, &f) == 1) {
            ok &= got < NF && f.stream == fr[got].stream && f.len == fr[got].len &&
                  memcmp(f.payload, fr[got].payload, f.len) == 0;
            got++;
        }
    }
    CHECK(ok && got == NF, "decoder_read: %d frames read straight from a pipe (%d reads)", got,
          reads);
    close(fds[1]);
    CHECK_EQ_INT(proto_decoder_read(d, fds[0]), 0, "decoder_read at EOF -> 0");
    close(fds[0]);
    CHECK_EQ_INT(proto_decoder_read(d, fds[0]), -EBADF, "decoder_read error -> -errno");
    proto_decoder_free(d);
    free(all);
    for (int i = 0; i < NF; i++)
        free(fr[i].payload);
}

int main(void)
{
    test_header();
    test_round_trip_and_splits();
    test_large_random();
    test_bad_headers();
    test_max_size_and_bound();
    test_outq();
    test_decoder_read();
    return CHECK_DONE();
}
