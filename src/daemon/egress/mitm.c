#include "mitm.h"

#include <errno.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../http/reqhead.h"

#define PLAIN_CHUNK 16384
#define DRAIN_CHUNK (64 * 1024)

struct mitm {
    SSL *srv, *cli;                           /* towards the sandbox, towards the upstream */
    BIO *srv_in, *srv_out, *cli_in, *cli_out; /* owned by their SSL */
    const struct mitm_io *io;
    void *data;
    json_t *headers; /* [{header, value}] */
    json_t *methods;
    char *path;
    struct reqhead rh;
    uint8_t head[MITM_HEAD_MAX];
    struct reqhead_header hdrs[MITM_HEADERS_MAX];
    bool head_done;
    unsigned injected;
    /* Plain text waiting for the other side's handshake. */
    uint8_t *up;
    size_t up_off, up_len;
    uint8_t *down;
    size_t down_off, down_len;
    bool cli_closed, srv_closed;
};

static void drain(BIO *b, void (*fn)(void *, const uint8_t *, size_t), void *data)
{
    /* Large pieces: each becomes one channel frame (or one socket write). */
    static uint8_t buf[DRAIN_CHUNK];
    int n;
    while ((n = BIO_read(b, buf, sizeof(buf))) > 0)
        fn(data, buf, (size_t)n);
}

static SSL *bio_pair(SSL *s, BIO **in, BIO **out)
{
    *in = BIO_new(BIO_s_mem());
    *out = BIO_new(BIO_s_mem());
    if (!*in || !*out) {
        BIO_free(*in);
        BIO_free(*out);
        SSL_free(s);
        return NULL;
    }
    BIO_set_mem_eof_return(*in, -1);
    SSL_set_bio(s, *in, *out);
    return s;
}

struct mitm *mitm_new(struct mitm_ca *ca, const char *host, json_t *headers, const json_t *methods,
                      const char *path, const struct mitm_io *io, void *data, struct sbx_err *err)
{
    struct mitm *m = sbx_xcalloc(1, sizeof(*m));
    m->io = io;
    m->data = data;
    m->headers = json_incref(headers);
    m->methods = methods ? json_deep_copy(methods) : NULL;
    m->path = path ? sbx_xstrdup(path) : NULL;
    reqhead_init(&m->rh, m->head, sizeof(m->head), m->hdrs, MITM_HEADERS_MAX);
    m->srv = mitm_ca_server(ca, host, err);
    if (m->srv)
        m->srv = bio_pair(m->srv, &m->srv_in, &m->srv_out);
    m->cli = m->srv ? mitm_ca_client(ca, host, err) : NULL;
    if (m->cli)
        m->cli = bio_pair(m->cli, &m->cli_in, &m->cli_out);
    if (!m->srv || !m->cli) {
        if (!err->code[0])
            sbx_err_set(err, ENOMEM, "internal", "TLS buffers");
        mitm_free(m);
        return NULL;
    }
    /* Our ClientHello goes out now, while the sandbox's handshake proceeds. */
    (void)SSL_do_handshake(m->cli);
    drain(m->cli_out, io->to_upstream, data);
    return m;
}

void mitm_free(struct mitm *m)
{
    if (!m)
        return;
    SSL_free(m->srv);
    SSL_free(m->cli);
    json_decref(m->headers);
    json_decref(m->methods);
    free(m->path);
    if (m->up)
        OPENSSL_cleanse(m->up, m->up_len);
    free(m->up);
    free(m->down);
    free(m);
}

size_t mitm_buffered(const struct mitm *m)
{
    return (m->up_len - m->up_off) + (m->down_len - m->down_off);
}

unsigned mitm_injected(const struct mitm *m)
{
    return m->injected;
}

static bool injects_header(const struct mitm *m, const char *name, size_t len)
{
    size_t i;
    json_t *h;
    json_array_foreach(m->headers, i, h)
    {
        const char *n = json_string_value(json_object_get(h, "header"));
        if (strlen(n) == len && !strncasecmp(n, name, len))
            return true;
    }
    return false;
}

static bool rule_matches(const struct mitm *m, const char *method, const char *url, size_t ulen)
{
    if (m->path && (ulen < strlen(m->path) || strncmp(url, m->path, strlen(m->path))))
        return false;
    if (!m->methods)
        return true;
    size_t i;
    json_t *v;
    json_array_foreach(m->methods, i, v)
    {
        if (!strcmp(json_string_value(v), method))
            return true;
    }
    return false;
}

static void up_queue(struct mitm *m, const void *p, size_t n)
{
    sbx_queue_append(&m->up, &m->up_off, &m->up_len, p, n);
}

/* The head as it goes upstream: the client's, its hop-by-hop headers and any of the names
 * we put in dropped, then ours and Connection: close. */
static void rewrite_head(struct mitm *m)
{
    const char *buf = (const char *)m->head;
    const char *method = http_method_str((enum http_method)m->rh.parser.method);
    const char *url = buf + m->rh.url_off;
    bool inject = rule_matches(m, method, url, m->rh.url_len);
    char *out = sbx_xasprintf("%s %.*s HTTP/1.1\r\n", method, (int)m->rh.url_len, url);
    for (unsigned i = 0; i < m->rh.nheaders; i++) {
        const struct reqhead_header *h = &m->hdrs[i];
        const char *name = buf + h->name_off;
        static const char *const hop[] = {"connection", "proxy-connection", "keep-alive"};
        bool drop = inject && injects_header(m, name, h->name_len);
        for (size_t k = 0; k < SBX_ARRAY_SIZE(hop) && !drop; k++)
            drop = h->name_len == strlen(hop[k]) && !strncasecmp(name, hop[k], h->name_len);
        if (drop)
            continue;
        char *next = sbx_xasprintf("%s%.*s: %.*s\r\n", out, (int)h->name_len, name,
                                   (int)h->value_len, buf + h->value_off);
        free(out);
        out = next;
    }
    size_t i;
    json_t *h;
    json_array_foreach(inject ? m->headers : NULL, i, h)
    {
        char *next =
            sbx_xasprintf("%s%s: %s\r\n", out, json_string_value(json_object_get(h, "header")),
                          json_string_value(json_object_get(h, "value")));
        OPENSSL_cleanse(out, strlen(out));
        free(out);
        out = next;
        m->injected++;
    }
    char *next = sbx_xasprintf("%sConnection: close\r\n\r\n", out);
    OPENSSL_cleanse(out, strlen(out));
    free(out);
    up_queue(m, next, strlen(next));
    OPENSSL_cleanse(next, strlen(next));
    free(next);
    if (m->rh.len > m->rh.body_off)
        up_queue(m, m->head + m->rh.body_off, m->rh.len - m->rh.body_off);
}

static int client_plain(struct mitm *m, const uint8_t *p, size_t n, struct sbx_err *err)
{
    while (!m->head_done && n > 0) {
        size_t room = m->rh.cap - m->rh.len;
        size_t take = n < room ? n : room;
        memcpy(m->head + m->rh.len, p, take);
        p += take;
        n -= take;
        struct sbx_err perr = {0};
        if (reqhead_feed(&m->rh, take, &perr) < 0)
            return sbx_err_set(err, EPROTO, "bad_request", "the request inside TLS: %s", perr.msg);
        if (m->rh.done) {
            m->head_done = true;
            rewrite_head(m);
        }
    }
    if (n)
        up_queue(m, p, n);
    return 0;
}

static int tls_failed(SSL *s, int ret, const char *side, struct sbx_err *err)
{
    int e = SSL_get_error(s, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    long v = SSL_get_verify_result(s);
    char why[160];
    unsigned long code = ERR_get_error();
    if (v != X509_V_OK)
        snprintf(why, sizeof(why), "certificate: %s", X509_verify_cert_error_string(v));
    else if (code)
        ERR_error_string_n(code, why, sizeof(why));
    else
        snprintf(why, sizeof(why), "closed during the handshake");
    ERR_clear_error();
    return sbx_err_set(err, EPROTO, !strcmp(side, "upstream") ? "upstream_tls" : "client_tls",
                       "%s TLS: %s", side, why);
}

static int pump(struct mitm *m, struct sbx_err *err)
{
    int r = 0;
    if (!SSL_is_init_finished(m->cli)) {
        int h = SSL_do_handshake(m->cli);
        if (h <= 0 && (r = tls_failed(m->cli, h, "upstream", err)) < 0)
            goto out;
    }
    if (!SSL_is_init_finished(m->srv)) {
        int h = SSL_do_handshake(m->srv);
        if (h <= 0 && (r = tls_failed(m->srv, h, "client", err)) < 0)
            goto out;
    }
    uint8_t buf[PLAIN_CHUNK];
    int n = 0;
    if (SSL_is_init_finished(m->srv) && !m->srv_closed) {
        while ((n = SSL_read(m->srv, buf, sizeof(buf))) > 0) {
            r = client_plain(m, buf, (size_t)n, err);
            OPENSSL_cleanse(buf, (size_t)n);
            if (r < 0)
                goto out;
        }
        if (SSL_get_error(m->srv, n) == SSL_ERROR_ZERO_RETURN)
            m->srv_closed = true;
        else if ((r = tls_failed(m->srv, n, "client", err)) < 0)
            goto out;
    }
    if (SSL_is_init_finished(m->cli) && m->up_len > m->up_off) {
        if (SSL_write(m->cli, m->up + m->up_off, (int)(m->up_len - m->up_off)) <= 0) {
            r = tls_failed(m->cli, -1, "upstream", err);
            goto out;
        }
        OPENSSL_cleanse(m->up, m->up_len);
        m->up_off = m->up_len = 0;
    }
    if (SSL_is_init_finished(m->cli) && !m->cli_closed) {
        while ((n = SSL_read(m->cli, buf, sizeof(buf))) > 0)
            sbx_queue_append(&m->down, &m->down_off, &m->down_len, buf, (size_t)n);
        if (SSL_get_error(m->cli, n) == SSL_ERROR_ZERO_RETURN)
            m->cli_closed = true;
        else if ((r = tls_failed(m->cli, n, "upstream", err)) < 0)
            goto out;
    }
    if (SSL_is_init_finished(m->srv) && m->down_len > m->down_off) {
        if (SSL_write(m->srv, m->down + m->down_off, (int)(m->down_len - m->down_off)) <= 0) {
            r = tls_failed(m->srv, -1, "client", err);
            goto out;
        }
        m->down_off = m->down_len = 0;
    }
    if (m->cli_closed && m->down_len == 0 && SSL_is_init_finished(m->srv))
        (void)SSL_shutdown(m->srv);
out:
    drain(m->srv_out, m->io->to_client, m->data);
    drain(m->cli_out, m->io->to_upstream, m->data);
    return r;
}

int mitm_from_client(struct mitm *m, const uint8_t *buf, size_t len, struct sbx_err *err)
{
    if (len && BIO_write(m->srv_in, buf, (int)len) != (int)len)
        return sbx_err_set(err, ENOMEM, "internal", "TLS buffer");
    return pump(m, err);
}

int mitm_from_upstream(struct mitm *m, const uint8_t *buf, size_t len, struct sbx_err *err)
{
    if (len && BIO_write(m->cli_in, buf, (int)len) != (int)len)
        return sbx_err_set(err, ENOMEM, "internal", "TLS buffer");
    return pump(m, err);
}

void mitm_client_eof(struct mitm *m)
{
    if (SSL_is_init_finished(m->cli))
        (void)SSL_shutdown(m->cli);
    drain(m->cli_out, m->io->to_upstream, m->data);
}

void mitm_upstream_eof(struct mitm *m)
{
    m->cli_closed = true;
    if (SSL_is_init_finished(m->srv))
        (void)SSL_shutdown(m->srv);
    drain(m->srv_out, m->io->to_client, m->data);
}
