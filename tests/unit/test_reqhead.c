/* The request head reader shared by the egress and preview proxies: a head split
 * across reads, the bytes after it, and each way of failing. */
#include <errno.h>
#include <string.h>

#include "../../src/daemon/http/reqhead.h"
#include "check.h"

struct fixture {
    struct reqhead rh;
    char buf[64];
    struct reqhead_header headers[2];
};

/* Put s into the buffer in pieces of at most step bytes, as reads would. */
static int feed(struct fixture *f, const char *s, size_t step, struct sbx_err *err)
{
    reqhead_init(&f->rh, f->buf, sizeof(f->buf), f->headers, 2);
    size_t len = strlen(s), off = 0;
    int r = 0;
    while (off < len && !f->rh.done && r == 0) {
        size_t n = len - off < step ? len - off : step;
        memcpy(f->buf + f->rh.len, s + off, n);
        off += n;
        r = reqhead_feed(&f->rh, n, err);
    }
    return r;
}

static int header_is(const struct fixture *f, unsigned i, const char *name, const char *value)
{
    const struct reqhead_header *h = &f->headers[i];
    return h->name_len == strlen(name) && !memcmp(f->buf + h->name_off, name, h->name_len) &&
           h->value_len == strlen(value) && !memcmp(f->buf + h->value_off, value, h->value_len);
}

int main(void)
{
    static const char req[] = "GET /a?b HTTP/1.1\r\nHost: x\r\nX-Y: z\r\n\r\nBODY";
    for (size_t step = 1; step <= sizeof(req); step++) {
        struct fixture f;
        struct sbx_err err = {0};
        int r = feed(&f, req, step, &err);
        CHECK(r == 0 && f.rh.done, "pieces of %zu: the head completes", step);
        CHECK(f.rh.url_len == 4 && !memcmp(f.buf + f.rh.url_off, "/a?b", 4),
              "pieces of %zu: the target", step);
        CHECK(f.rh.nheaders == 2 && header_is(&f, 0, "Host", "x") && header_is(&f, 1, "X-Y", "z"),
              "pieces of %zu: the headers", step);
        CHECK(f.rh.body_off == strlen(req) - 4 && f.rh.parser.method == HTTP_GET,
              "pieces of %zu: the body starts after the final LF", step);
    }

    struct fixture f;
    struct sbx_err err = {0};
    CHECK(feed(&f, "GET / HTTP/1.1\r\nHost: x\r\n", 64, &err) == 0 && !f.rh.done,
          "an unfinished head asks for more");
    CHECK(feed(&f, "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 64, &err) == -EBADMSG &&
              !strcmp(err.msg, "malformed request (HPE_CB_header_field)"),
          "more headers than the bound are malformed");
    CHECK(feed(&f, "GET / HTTP/1.1\r\n\x01\r\n\r\n", 64, &err) == -EBADMSG &&
              !strncmp(err.msg, "malformed request (", 19),
          "a bad header line is malformed");
    char big[80];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "GET /", 5);
    big[sizeof(big) - 1] = '\0';
    CHECK(feed(&f, big, 64, &err) == -EMSGSIZE &&
              !strcmp(err.msg, "request head larger than 64 bytes"),
          "a full buffer without a whole head");
    return CHECK_DONE();
}
