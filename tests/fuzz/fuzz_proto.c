/* libFuzzer target for the frame decoder (src/proto/proto.c).
 *
 * Input: byte 0..3 seed the split pattern, the rest is the byte stream. The stream
 * is decoded twice: by a direct reading of the format (the reference below) and by
 * proto_decoder fed in pseudo-random pieces (1 byte .. 64 KiB, drained after each
 * feed as a real reader does). Both must agree frame by frame and on how the stream
 * ends (a malformed header, or so many bytes still pending). Decoded frames are also
 * re-queued through proto_outq and must re-encode to the original bytes.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/proto/proto.h"
#include "fuzz.h"

struct ref_frame {
    size_t off; /* of the header in the input */
    uint32_t len;
};

/* The format, read directly. Returns the number of frames; *err is set when a
 * malformed header ends the stream, *consumed is the end of the last frame. */
static size_t reference(const uint8_t *p, size_t n, struct ref_frame *out, size_t max, int *err,
                        size_t *consumed)
{
    size_t pos = 0, k = 0;
    *err = 0;
    while (n - pos >= PROTO_HEADER_SIZE && k < max) {
        const uint8_t *h = p + pos;
        uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        if (h[8] < 1 || h[8] > PROTO_TYPE_MAX || h[10] || h[11] || len > PROTO_MAX_PAYLOAD) {
            *err = 1;
            break;
        }
        if (n - pos - PROTO_HEADER_SIZE < len)
            break;
        out[k].off = pos;
        out[k].len = len;
        k++;
        pos += PROTO_HEADER_SIZE + len;
    }
    *consumed = pos;
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)data[3] << 24;
    const uint8_t *p = data + 4;
    size_t n = size - 4;

    size_t maxf = n / PROTO_HEADER_SIZE + 1;
    struct ref_frame *ref = malloc(maxf * sizeof(*ref));
    int ref_err;
    size_t consumed;
    size_t nref = reference(p, n, ref, maxf, &ref_err, &consumed);

    struct proto_decoder *d = proto_decoder_new();
    struct proto_outq *q = proto_outq_new((size_t)1 << 30);
    size_t pos = 0, got = 0, requeued = 0;
    int dec_err = 0;
    uint32_t s = seed | 1;
    while (pos < n && !dec_err) {
        fuzz_next(&s);
        /* Mostly tiny pieces (to split headers), sometimes large ones. */
        size_t piece = (s & 3) ? 1 + (s >> 8) % 16 : 1 + (s >> 8) % (64 * 1024);
        if (piece > n - pos)
            piece = n - pos;
        REQUIRE(proto_decoder_feed(d, p + pos, piece) == 0); /* drained readers never overflow */
        pos += piece;
        for (;;) {
            struct proto_frame f;
            int r = proto_decoder_next(d, &f);
            if (r == 0)
                break;
            if (r < 0) {
                REQUIRE(r == -EPROTO);
                REQUIRE(proto_decoder_next(d, &f) == -EPROTO); /* sticky */
                dec_err = 1;
                break;
            }
            REQUIRE(r == 1);
            REQUIRE(got < nref);
            const uint8_t *h = p + ref[got].off;
            REQUIRE(f.len == ref[got].len);
            REQUIRE(f.type >= 1 && f.type <= PROTO_TYPE_MAX && f.len <= PROTO_MAX_PAYLOAD);
            REQUIRE(f.stream ==
                    ((uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7]));
            REQUIRE(f.type == h[8] && f.flags == h[9]);
            REQUIRE(f.len == 0 || memcmp(f.payload, h + PROTO_HEADER_SIZE, f.len) == 0);
            uint8_t enc[PROTO_HEADER_SIZE];
            proto_header_encode(enc, f.stream, f.type, f.flags, f.len);
            REQUIRE(memcmp(enc, h, PROTO_HEADER_SIZE) == 0);
            REQUIRE(proto_outq_push(q, f.stream, f.type, f.flags, f.payload, f.len) == 0);
            requeued += PROTO_HEADER_SIZE + f.len;
            got++;
        }
    }
    REQUIRE(got == nref);
    REQUIRE(dec_err == ref_err);
    if (!dec_err)
        REQUIRE(proto_decoder_pending(d) == n - consumed);
    REQUIRE(proto_outq_len(q) == requeued && requeued == consumed);
    proto_outq_free(q);
    proto_decoder_free(d);
    free(ref);
    return 0;
}
