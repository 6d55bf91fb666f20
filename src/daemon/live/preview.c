#include "preview.h"

#include <ctype.h>
#include <errno.h>
#include <http_parser.h>
#include <openssl/crypto.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../auth/signurl.h"
#include "../http/errors.h"
#include "../http/reqhead.h"
#include "../http/server.h"
#include "../sandbox/channel.h"
#include "../sandbox/params.h"
#include "../store/store.h"

enum conn_state {
    PS_HEAD,   /* reading the first request head */
    PS_RELAY,  /* relaying bytes with the agent's tcp_connect stream */
    PS_ANSWER, /* writing our own answer, then closing */
};

struct previews {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct manager *mgr;
    struct signurl_key key;
    int lfd;
    struct loop_watch *lw;
    struct preview_conn *conns;
    unsigned nconns;
};

struct preview_conn {
    struct previews *pv;
    struct preview_conn *next;
    int fd;
    struct loop_watch *w;
    uint32_t events;
    enum conn_state state;
    struct loop_timer *timer; /* the head's deadline, then the link's expiry */

    struct reqhead rh;
    char head[PREVIEW_HEAD_MAX];
    struct reqhead_header headers[PREVIEW_HEADERS_MAX];

    char sandbox_id[STORE_ID_MAX + 1];
    unsigned port;
    struct chan_stream *st; /* NULL once the stream ended */
    uint64_t up_window;     /* what the agent lets us send on channel 0 */
    bool client_eof;
    /* agent -> client, and our own answers */
    uint8_t *down;
    size_t down_off, down_len;
    bool down_eof, client_shut, relayed_any;
};

static void conn_update(struct preview_conn *c);

/* --- bookkeeping ---------------------------------------------------------------------- */

static void listener_update(struct previews *pv);

static void conn_free(struct preview_conn *c)
{
    struct previews *pv = c->pv;
    for (struct preview_conn **p = &pv->conns; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    if (c->st) {
        /* The client is gone or the link expired: the agent drops its connection. */
        struct sbx_err err = {0};
        (void)channel_signal(c->st, 9, &err);
        channel_detach(c->st);
    }
    if (c->timer)
        loop_timer_cancel(pv->loop, c->timer);
    if (c->w)
        loop_watch_del(pv->loop, c->w);
    close(c->fd);
    free(c->down);
    free(c);
    pv->nconns--;
    listener_update(pv);
}

static void down_append(struct preview_conn *c, const void *p, size_t n)
{
    sbx_queue_append(&c->down, &c->down_off, &c->down_len, p, n);
}

/* Write a whole answer of ours, then close. */
static void send_answer(struct preview_conn *c, const char *resp)
{
    if (c->timer)
        loop_timer_cancel(c->pv->loop, c->timer);
    c->timer = NULL;
    c->state = PS_ANSWER;
    c->down_off = c->down_len = 0;
    down_append(c, resp, strlen(resp));
    conn_update(c);
}

/* Our own answer, as the API's errors: JSON, the status http/errors.c gives the code. */
static void answer(struct preview_conn *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void answer(struct preview_conn *c, const char *code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    unsigned status = http_status_for_code(code);
    _cleanup_free_ char *resp =
        sbx_xasprintf("HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n%s\n",
                      status, MHD_get_reason_phrase_for(status), strlen(text) + 1, text);
    send_answer(c, resp);
}

/* --- client socket ---------------------------------------------------------------------- */

/* Returns false when it freed c. */
static bool flush_down(struct preview_conn *c)
{
    while (c->down_off < c->down_len) {
        ssize_t n = write(c->fd, c->down + c->down_off, c->down_len - c->down_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n < 0) {
            conn_free(c);
            return false;
        }
        c->down_off += (size_t)n;
        if (c->state == PS_RELAY && c->st) {
            struct sbx_err err = {0};
            (void)channel_credit(c->st, PROTO_CH_STDOUT, (uint32_t)n, &err);
        }
    }
    c->down_off = c->down_len = 0;
    if (c->state == PS_ANSWER || (c->state == PS_RELAY && !c->st)) {
        conn_free(c);
        return false;
    }
    if (c->down_eof && !c->client_shut) {
        c->client_shut = true;
        (void)shutdown(c->fd, SHUT_WR);
    }
    return true;
}

/* Returns false when it freed c. */
static bool read_client(struct preview_conn *c)
{
    static uint8_t buf[PROTO_MAX_PAYLOAD];
    while (c->st && !c->client_eof && c->up_window > 0 && !channel_congested(c->st)) {
        size_t want = c->up_window < sizeof(buf) ? (size_t)c->up_window : sizeof(buf);
        ssize_t n = read(c->fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        struct sbx_err err = {0};
        if (n < 0) {
            conn_free(c);
            return false;
        }
        if (n == 0) {
            c->client_eof = true;
            (void)channel_send_eof(c->st, PROTO_CH_STDIN, &err);
            return true;
        }
        c->up_window -= (uint64_t)n;
        (void)channel_send(c->st, PROTO_CH_STDIN, buf, (size_t)n, &err);
        if ((size_t)n < want)
            return true;
    }
    return true;
}

static void read_head(struct preview_conn *c);

static void client_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct preview_conn *c = data;
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && c->down_off < c->down_len && !flush_down(c))
        return;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (c->state == PS_HEAD) {
            read_head(c); /* may free c */
            return;
        }
        if (c->state == PS_RELAY && !read_client(c))
            return;
    }
    conn_update(c);
}

/* Watch only for what we can act on: epoll reports EPOLLHUP even with no events asked,
 * so an idle connection has no watch at all. */
static void conn_update(struct preview_conn *c)
{
    uint32_t ev = 0;
    if (c->down_off < c->down_len)
        ev |= EPOLLOUT;
    if (c->state == PS_HEAD || (c->state == PS_RELAY && c->st && !c->client_eof &&
                                c->up_window > 0 && !channel_congested(c->st)))
        ev |= EPOLLIN;
    if (ev == c->events && (c->w || !ev))
        return;
    if (c->w)
        loop_watch_del(c->pv->loop, c->w);
    c->w = NULL;
    c->events = ev;
    if (ev && loop_watch_add(c->pv->loop, c->fd, ev, client_cb, c, &c->w) < 0)
        conn_free(c);
}

/* --- the stream ------------------------------------------------------------------------- */

static void st_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct preview_conn *c = data;
    if (ch != PROTO_CH_STDOUT || len == 0)
        return;
    /* Bounded by the window: credit goes back only once the client took the bytes. */
    c->relayed_any = true;
    down_append(c, buf, len);
    if (flush_down(c))
        conn_update(c);
}

static void st_eof(struct chan_stream *st, unsigned ch, void *data)
{
    struct preview_conn *c = data;
    if (ch != PROTO_CH_STDOUT)
        return;
    c->down_eof = true;
    if (c->down_off == c->down_len && !c->client_shut) {
        c->client_shut = true;
        (void)shutdown(c->fd, SHUT_WR);
    }
}

static void st_window(struct chan_stream *st, unsigned ch, uint32_t credit, void *data)
{
    struct preview_conn *c = data;
    if (ch != PROTO_CH_STDIN)
        return;
    c->up_window += credit;
    conn_update(c);
}

static void st_writable(struct chan_stream *st, void *data)
{
    conn_update(data);
}

/* The stream is over: close once the client has what the server sent. */
static void stream_ended(struct preview_conn *c)
{
    c->st = NULL;
    if (c->down_off == c->down_len)
        conn_free(c);
    else
        conn_update(c);
}

static void st_exit(struct chan_stream *st, json_t *result, void *data)
{
    stream_ended(data);
}

static void st_error(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct preview_conn *c = data;
    c->st = NULL;
    if (c->relayed_any) {
        stream_ended(c);
        return;
    }
    if (!strcmp(err->code, "connect_failed"))
        answer(c, "preview_unreachable",
               "nothing listens on port %u in sandbox %s (only the sandbox's own 127.0.0.1 is "
               "reachable)",
               c->port, c->sandbox_id);
    else
        answer(c, "preview_unreachable", "sandbox %s: %s", c->sandbox_id, err->msg);
}

static const struct chan_stream_ops stream_ops = {
    .on_data = st_data,
    .on_exit = st_exit,
    .on_error = st_error,
    .on_eof = st_eof,
    .on_window = st_window,
    .on_writable = st_writable,
};

/* --- routing the first request -------------------------------------------------------- */

struct find_ctx {
    const char *id;
    struct sandbox *sb;
};

static void find_cb(struct sandbox *sb, void *data)
{
    struct find_ctx *f = data;
    if (!strcmp(sb->rec.id, f->id))
        f->sb = sb;
}

static void sign(const struct previews *pv, const char *sandbox_id, unsigned port,
                 long long expires, char sig[SIGNURL_SIG_HEX_LEN + 1])
{
    char what[16];
    snprintf(what, sizeof(what), "%u", port);
    /* The link key is the preview's own (not the artifacts'), so no artifact link can
     * ever pass for a preview link or the other way round. */
    signurl_sign(&pv->key, sandbox_id, what, "preview", expires, sig);
}

static bool verify(const struct previews *pv, const char *sandbox_id, unsigned port,
                   long long expires, const char *sig)
{
    char what[16];
    snprintf(what, sizeof(what), "%u", port);
    return signurl_verify(&pv->key, sandbox_id, what, "preview", expires, sig);
}

static const struct reqhead_header *find_header(const struct preview_conn *c, const char *name)
{
    for (unsigned i = 0; i < c->rh.nheaders; i++)
        if (c->headers[i].name_len == strlen(name) &&
            !strncasecmp(c->head + c->headers[i].name_off, name, strlen(name)))
            return &c->headers[i];
    return NULL;
}

/* "<digits>-<id>" up to end: the host name's first label. */
static bool parse_label(const char *s, size_t len, unsigned *port, char id[STORE_ID_MAX + 1])
{
    const char *dash = memchr(s, '-', len);
    if (!dash || dash == s || dash - s > 5 || len - (size_t)(dash - s) - 1 > STORE_ID_MAX ||
        (size_t)(dash - s) + 1 == len)
        return false;
    unsigned p = 0;
    for (const char *q = s; q < dash; q++) {
        if (*q < '0' || *q > '9')
            return false;
        p = p * 10 + (unsigned)(*q - '0');
    }
    size_t idlen = len - (size_t)(dash - s) - 1;
    for (size_t i = 0; i < idlen; i++)
        id[i] = (char)tolower((unsigned char)dash[1 + i]);
    id[idlen] = '\0';
    *port = p;
    return p > 0 && p <= 65535;
}

/* Whether the host name (no port) is {label}.<domain>, domain's own port ignored. */
static bool under_domain(const char *v, size_t len, const char *domain)
{
    if (!domain || !*domain)
        return false;
    size_t dlen = strcspn(domain, ":");
    const char *dot = memchr(v, '.', len);
    return dot && len - (size_t)(dot - v) - 1 == dlen && !strncasecmp(dot + 1, domain, dlen);
}

/* Host: {port}-{id}.<preview domain or E2B domain>[:port]; *e2b when it was the E2B one. */
static bool route_by_host(const struct preview_conn *c, unsigned *port,
                          char id[STORE_ID_MAX + 1], bool *e2b)
{
    const struct reqhead_header *h = find_header(c, "Host");
    if (!h)
        return false;
    const char *v = c->head + h->value_off;
    size_t len = h->value_len;
    const char *colon = memchr(v, ':', len);
    if (colon)
        len = (size_t)(colon - v);
    *e2b = false;
    if (!under_domain(v, len, c->pv->cfg->preview_domain)) {
        if (!under_domain(v, len, c->pv->cfg->e2b_domain))
            return false;
        *e2b = true;
    }
    return parse_label(v, (size_t)(memchr(v, '.', len) - (const void *)v), port, id);
}

/* A request by E2B name alone: the sandbox is public, or the request has its traffic token. */
static bool public_by_name(const struct preview_conn *c)
{
    struct store *st = manager_store(c->pv->mgr);
    struct sbx_err err = {0};
    char v[PREVIEW_TRAFFIC_TOKEN_MAX + 1];
    if (store_meta_get(st, c->sandbox_id, PREVIEW_META_PUBLIC, v, sizeof(v), &err) == 0 &&
        !strcmp(v, "1"))
        return true;
    const struct reqhead_header *h = find_header(c, PREVIEW_TRAFFIC_HEADER);
    if (!h || store_meta_get(st, c->sandbox_id, PREVIEW_META_TRAFFIC_TOKEN, v, sizeof(v), &err) < 0)
        return false;
    size_t n = strlen(v);
    return n && h->value_len == n && CRYPTO_memcmp(c->head + h->value_off, v, n) == 0;
}

/* Path /p/{id}/{port}[/rest]: the prefix is taken off what the server sees. */
static bool route_by_path(const char *path, size_t len, unsigned *port, char id[STORE_ID_MAX + 1],
                          size_t *prefix)
{
    if (len < 3 || strncmp(path, "/p/", 3))
        return false;
    const char *s = path + 3, *end = path + len;
    const char *slash = memchr(s, '/', (size_t)(end - s));
    if (!slash || slash == s || slash - s > STORE_ID_MAX)
        return false;
    memcpy(id, s, (size_t)(slash - s));
    id[slash - s] = '\0';
    const char *p = slash + 1;
    unsigned n = 0;
    const char *q = p;
    for (; q < end && *q != '/' && q - p < 6; q++) {
        if (*q < '0' || *q > '9')
            return false;
        n = n * 10 + (unsigned)(*q - '0');
    }
    if (q == p || (q < end && *q != '/') || n == 0 || n > 65535)
        return false;
    *port = n;
    *prefix = (size_t)(q - path);
    return true;
}

/* Find name=value among a query's or a cookie header's pairs (sep '&' or ';'). */
static bool find_pair(const char *s, size_t len, char sep, const char *name, const char **val,
                      size_t *vlen, size_t *pair_off, size_t *pair_len)
{
    size_t nlen = strlen(name);
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && s[j] != sep)
            j++;
        size_t b = i;
        while (b < j && s[b] == ' ')
            b++;
        if (j - b > nlen && !strncmp(s + b, name, nlen) && s[b + nlen] == '=') {
            *val = s + b + nlen + 1;
            *vlen = j - b - nlen - 1;
            *pair_off = i;
            *pair_len = j - i;
            return true;
        }
        i = j + 1;
    }
    return false;
}

/* "<expires>.<hex signature>" */
static bool parse_token(const char *v, size_t len, long long *expires,
                        char sig[SIGNURL_SIG_HEX_LEN + 1])
{
    const char *dot = memchr(v, '.', len);
    if (!dot || dot == v || dot - v > 18 || len - (size_t)(dot - v) - 1 != SIGNURL_SIG_HEX_LEN)
        return false;
    long long e = 0;
    for (const char *q = v; q < dot; q++) {
        if (*q < '0' || *q > '9')
            return false;
        e = e * 10 + (*q - '0');
    }
    memcpy(sig, dot + 1, SIGNURL_SIG_HEX_LEN);
    sig[SIGNURL_SIG_HEX_LEN] = '\0';
    *expires = e;
    return true;
}

static unsigned conns_for(const struct previews *pv, const char *sandbox_id)
{
    unsigned n = 0;
    for (const struct preview_conn *c = pv->conns; c; c = c->next)
        n += c->state == PS_RELAY && !strcmp(c->sandbox_id, sandbox_id);
    return n;
}

static void on_expired(struct loop *l, void *data)
{
    struct preview_conn *c = data;
    c->timer = NULL;
    conn_free(c);
}

/* The head the server sees: the path prefix and our token taken off the target; with a
 * path-routed request also "Connection: close", since a later request on the same
 * connection would reach the server with its prefix. Upgrades are left alone. */
static char *rebuild_head(const struct preview_conn *c, const char *target, bool force_close,
                          size_t *len)
{
    size_t cap = strlen(target) + 64 + c->rh.len + 32;
    char *out = sbx_xmalloc(cap);
    size_t n = (size_t)snprintf(out, cap, "%s %s HTTP/%u.%u\r\n",
                                http_method_str((enum http_method)c->rh.parser.method), target,
                                c->rh.parser.http_major, c->rh.parser.http_minor);
    for (unsigned i = 0; i < c->rh.nheaders; i++) {
        const struct reqhead_header *h = &c->headers[i];
        if (force_close && h->name_len == 10 &&
            !strncasecmp(c->head + h->name_off, "Connection", 10))
            continue;
        n += (size_t)snprintf(out + n, cap - n, "%.*s: %.*s\r\n", (int)h->name_len,
                              c->head + h->name_off, (int)h->value_len, c->head + h->value_off);
    }
    n += (size_t)snprintf(out + n, cap - n, "%s\r\n", force_close ? "Connection: close\r\n" : "");
    *len = n;
    return out;
}

/* A browser opening the link (a page load, not an API client or a script's fetch): only
 * then is the token traded for a cookie, so curl and the SDKs keep getting the app's own
 * answer to the link. */
static bool header_has(const struct preview_conn *c, const char *name, const char *needle)
{
    const struct reqhead_header *h = find_header(c, name);
    if (!h)
        return false;
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= h->value_len; i++)
        if (!strncasecmp(c->head + h->value_off + i, needle, n))
            return true;
    return false;
}

static bool is_navigation(const struct preview_conn *c)
{
    if (c->rh.parser.upgrade ||
        (c->rh.parser.method != HTTP_GET && c->rh.parser.method != HTTP_HEAD))
        return false;
    if (find_header(c, "Sec-Fetch-Mode"))
        return header_has(c, "Sec-Fetch-Mode", "navigate");
    return header_has(c, "Accept", "text/html");
}

/* 302 to location with the token as a host-only cookie: HttpOnly, SameSite=Lax, Secure
 * when previews are served over TLS, scoped to the sandbox's path when routed by path
 * (a host-routed preview's host name is already its sandbox and port), and living as long
 * as the link. The signature binds it to this sandbox and port wherever it is replayed. */
static void redirect_with_cookie(struct preview_conn *c, const char *location, bool by_path,
                                 unsigned port, const char *tok, size_t tok_len, long long max_age)
{
    const struct sbxd_config *cfg = c->pv->cfg;
    bool tls =
        by_path ? !strncmp(cfg->preview_url, "https://", 8) : !strcmp(cfg->preview_scheme, "https");
    _cleanup_free_ char *scope =
        by_path ? sbx_xasprintf("/p/%s/%u", c->sandbox_id, port) : sbx_xstrdup("/");
    _cleanup_free_ char *resp = sbx_xasprintf(
        "HTTP/1.1 302 Found\r\nLocation: %s\r\nSet-Cookie: %s=%.*s; Path=%s; Max-Age=%lld; "
        "HttpOnly; SameSite=Lax%s\r\nCache-Control: no-store\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n",
        location, PREVIEW_TOKEN_PARAM, (int)tok_len, tok, scope, max_age > 0 ? max_age : 1,
        tls ? "; Secure" : "");
    send_answer(c, resp);
}

static void route(struct preview_conn *c, size_t body_off)
{
    struct previews *pv = c->pv;
    const char *url = c->head + c->rh.url_off;
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (c->rh.parser.method == HTTP_CONNECT ||
        http_parser_parse_url(url, c->rh.url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH))) {
        answer(c, "invalid_request", "the request target must be a path");
        return;
    }
    /* As on the API's listener (http/server.c): nothing a C string or a proxy would read
     * differently. */
    bool clean = sbx_field_valid(url, c->rh.url_len, false);
    for (unsigned i = 0; clean && i < c->rh.nheaders; i++)
        clean = sbx_field_valid(c->head + c->headers[i].value_off, c->headers[i].value_len, true);
    if (!clean) {
        answer(c, "invalid_request",
               "the request holds a control byte, NUL or bytes that are not UTF-8");
        return;
    }
    const char *path = url + u.field_data[UF_PATH].off;
    size_t path_len = u.field_data[UF_PATH].len;
    const char *query = (u.field_set & (1 << UF_QUERY)) ? url + u.field_data[UF_QUERY].off : "";
    size_t query_len = (u.field_set & (1 << UF_QUERY)) ? u.field_data[UF_QUERY].len : 0;

    /* Two Host headers could route us one way and a proxy in front another. */
    unsigned nhost = 0;
    for (unsigned i = 0; i < c->rh.nheaders; i++)
        nhost += c->headers[i].name_len == 4 &&
                 !strncasecmp(c->head + c->headers[i].name_off, "Host", 4);
    if (nhost > 1) {
        answer(c, "invalid_request", "more than one Host header");
        return;
    }
    unsigned port = 0;
    size_t prefix = 0;
    bool by_path = false, e2b = false;
    if (!route_by_host(c, &port, c->sandbox_id, &e2b)) {
        by_path = route_by_path(path, path_len, &port, c->sandbox_id, &prefix);
        if (!by_path) {
            answer(c, "preview_not_found",
                   "no preview here: use {port}-{sandbox id}.<preview domain> or /p/{sandbox "
                   "id}/{port}/");
            return;
        }
    }
    c->port = port;

    const char *tok = NULL;
    size_t tok_len = 0, pair_off = 0, pair_len = 0;
    bool in_query =
        find_pair(query, query_len, '&', PREVIEW_TOKEN_PARAM, &tok, &tok_len, &pair_off, &pair_len);
    const struct reqhead_header *cookie = find_header(c, "Cookie");
    size_t unused_off, unused_len;
    if (!in_query && cookie)
        (void)find_pair(c->head + cookie->value_off, cookie->value_len, ';', PREVIEW_TOKEN_PARAM,
                        &tok, &tok_len, &unused_off, &unused_len);
    long long expires = 0;
    char sig[SIGNURL_SIG_HEX_LEN + 1];
    bool signed_ok = tok && parse_token(tok, tok_len, &expires, sig) &&
                     verify(pv, c->sandbox_id, port, expires, sig);
    /* E2B's getHost(port) names carry no token: a sandbox made public through E2B
     * (allowPublicTraffic, E2B's default) is reached by name alone, or with its traffic
     * token in e2b-traffic-access-token. */
    if (!signed_ok && e2b && public_by_name(c)) {
        signed_ok = true;
        tok = NULL;
        expires = sbx_wall_ms() / 1000 + PREVIEW_PUBLIC_HOLD_S;
    }
    if (!signed_ok) {
        answer(c, "invalid_signature", "this preview link is not signed for port %u of sandbox %s",
               port, c->sandbox_id);
        return;
    }
    long long now_ms = sbx_wall_ms();
    if (expires * 1000 <= now_ms) {
        answer(c, "preview_expired", "this preview link expired at %lld", expires);
        return;
    }
    struct find_ctx f = {.id = c->sandbox_id};
    manager_each(pv->mgr, NULL, find_cb, &f);
    if (!f.sb) {
        answer(c, "sandbox_not_found", "no sandbox with id %s", c->sandbox_id);
        return;
    }
    if (!f.sb->ready || !f.sb->chan || f.sb->ended) { /* a paused one has no channel */
        answer(c, "sandbox_not_running", "sandbox %s is not running", c->sandbox_id);
        return;
    }
    if (conns_for(pv, c->sandbox_id) >= PREVIEW_CONNS_PER_SANDBOX) {
        answer(c, "too_many_preview_connections", "at most %d preview connections per sandbox",
               PREVIEW_CONNS_PER_SANDBOX);
        return;
    }

    /* The target without the route's prefix and without our token. */
    _cleanup_free_ char *target = NULL;
    {
        const char *rest = path + prefix;
        size_t rest_len = path_len - prefix;
        char *q = sbx_xmalloc(query_len + 1);
        size_t qn = 0;
        if (in_query) {
            memcpy(q, query, pair_off);
            qn = pair_off;
            size_t after = pair_off + pair_len + (pair_off + pair_len < query_len);
            memcpy(q + qn, query + after, query_len - after);
            qn += query_len - after;
            if (qn && q[qn - 1] == '&')
                qn--;
        } else {
            memcpy(q, query, query_len);
            qn = query_len;
        }
        target = sbx_xasprintf("%s%.*s%s%.*s", rest_len ? "" : "/", (int)rest_len, rest,
                               qn ? "?" : "", (int)qn, q);
        if (in_query && is_navigation(c)) {
            /* A browser session: the link's token becomes a cookie for this sandbox and
             * port only, and the page reloads without it, so the app's own links work. */
            _cleanup_free_ char *location =
                sbx_xasprintf("%.*s%s%.*s", (int)path_len, path, qn ? "?" : "", (int)qn, q);
            free(q);
            redirect_with_cookie(c, location, by_path, port, tok, tok_len, expires - now_ms / 1000);
            return;
        }
        free(q);
    }

    struct sbx_err err = {0};
    json_t *req = json_pack("{s:s,s:i}", "op", "tcp_connect", "port", (int)port);
    int r = channel_open(f.sb->chan, req, &stream_ops, c, &c->st, &err);
    json_decref(req);
    if (r < 0) {
        c->st = NULL;
        answer(c, "preview_unreachable", "sandbox %s: %s", c->sandbox_id, err.msg);
        return;
    }
    channel_manual_credit(c->st);
    /* The buffer towards the client is bounded by what we grant. */
    (void)channel_credit(c->st, PROTO_CH_STDOUT, PROTO_TUNNEL_WINDOW - PROTO_WINDOW_INIT, &err);
    c->state = PS_RELAY;
    c->up_window = PROTO_WINDOW_INIT;
    if (c->timer)
        loop_timer_cancel(pv->loop, c->timer);
    c->timer = loop_timer_add(pv->loop, expires * 1000 - now_ms, on_expired, c);
    size_t hlen;
    _cleanup_free_ char *head = rebuild_head(c, target, by_path && !c->rh.parser.upgrade, &hlen);
    /* Within the first window: the head is at most PREVIEW_HEAD_MAX plus our changes. */
    (void)channel_send(c->st, PROTO_CH_STDIN, head, hlen, &err);
    c->up_window -= hlen;
    if (body_off < c->rh.len) {
        (void)channel_send(c->st, PROTO_CH_STDIN, c->head + body_off, c->rh.len - body_off, &err);
        c->up_window -= c->rh.len - body_off;
    }
    conn_update(c);
}

/* --- the request head ---------------------------------------------------------------- */

static void read_head(struct preview_conn *c)
{
    size_t room = sizeof(c->head) - c->rh.len;
    ssize_t n = read(c->fd, c->head + c->rh.len, room);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        conn_free(c); /* the client gave up before a whole request */
        return;
    }
    struct sbx_err err = {0};
    if (reqhead_feed(&c->rh, (size_t)n, &err) < 0)
        answer(c, "invalid_request", "%s", err.msg);
    else if (c->rh.done)
        route(c, c->rh.body_off);
}

static void on_head_timeout(struct loop *l, void *data)
{
    struct preview_conn *c = data;
    c->timer = NULL;
    answer(c, "request_timeout", "no complete request in %d ms", PREVIEW_HEAD_TIMEOUT_MS);
}

/* --- the listener ---------------------------------------------------------------------- */

static void on_accept(struct loop *l, int fd, uint32_t events, void *data)
{
    struct previews *pv = data;
    while (pv->nconns < PREVIEW_CONNS_MAX) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            break; /* EAGAIN, or a connection that died in the backlog */
        struct preview_conn *c = sbx_xcalloc(1, sizeof(*c));
        c->pv = pv;
        c->fd = cfd;
        c->state = PS_HEAD;
        reqhead_init(&c->rh, c->head, sizeof(c->head), c->headers, PREVIEW_HEADERS_MAX);
        c->next = pv->conns;
        pv->conns = c;
        pv->nconns++;
        c->timer = loop_timer_add(l, PREVIEW_HEAD_TIMEOUT_MS, on_head_timeout, c);
        conn_update(c);
    }
    listener_update(pv);
}

/* Accept only while there is room (the kernel's backlog holds the rest). */
static void listener_update(struct previews *pv)
{
    bool want = pv->nconns < PREVIEW_CONNS_MAX;
    if (want && !pv->lw)
        (void)loop_watch_add(pv->loop, pv->lfd, EPOLLIN, on_accept, pv, &pv->lw);
    else if (!want && pv->lw) {
        loop_watch_del(pv->loop, pv->lw);
        pv->lw = NULL;
    }
}

int previews_new(const struct sbxd_config *cfg, struct loop *l, struct manager *mgr,
                 struct previews **out, struct sbx_err *err)
{
    struct sockaddr_in sa;
    int r = http_parse_listen(cfg->preview_listen, &sa, err);
    if (r < 0)
        return sbx_err_wrap(err, "SBX_PREVIEW_LISTEN");
    struct previews *pv = sbx_xcalloc(1, sizeof(*pv));
    pv->cfg = cfg;
    pv->loop = l;
    pv->mgr = mgr;
    _cleanup_free_ char *keyp = sbx_xasprintf("%s/preview-link.key", cfg->data_dir);
    if ((r = signurl_key_load(keyp, &pv->key, err)) < 0) {
        free(pv);
        return r;
    }
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
        r = sbx_err_sys(err, errno, "cannot listen on %s (SBX_PREVIEW_LISTEN)",
                        cfg->preview_listen);
        free(pv);
        return r;
    }
    pv->lfd = TAKE_FD(fd);
    r = loop_watch_add(l, pv->lfd, EPOLLIN, on_accept, pv, &pv->lw);
    if (r < 0) {
        close(pv->lfd);
        free(pv);
        return sbx_err_sys(err, -r, "watching the preview listener");
    }
    *out = pv;
    return 0;
}

void previews_free(struct previews *pv)
{
    if (!pv)
        return;
    while (pv->conns)
        conn_free(pv->conns);
    if (pv->lw)
        loop_watch_del(pv->loop, pv->lw);
    close(pv->lfd);
    free(pv);
}

int preview_link(struct previews *pv, const struct sandbox *sb, long long port,
                 long long ttl_seconds, char url[PREVIEW_URL_MAX], long long *expires_at,
                 struct sbx_err *err)
{
    const struct sbxd_config *cfg = pv->cfg;
    if (port < PREVIEW_PORT_MIN || port > PREVIEW_PORT_MAX)
        return sbx_err_set(err, EINVAL, "invalid_port", "port must be an integer %d..%d",
                           PREVIEW_PORT_MIN, PREVIEW_PORT_MAX);
    for (size_t i = 0; i < cfg->npreview_reserved; i++)
        if (cfg->preview_reserved[i] == port)
            return sbx_err_set(err, EINVAL, "invalid_port", "port %lld is reserved by the operator",
                               port);
    if (ttl_seconds < PREVIEW_TTL_MIN || ttl_seconds > PREVIEW_TTL_MAX)
        return sbx_err_set(err, EINVAL, "invalid_ttl", "ttl_seconds must be an integer %d..%d",
                           PREVIEW_TTL_MIN, PREVIEW_TTL_MAX);
    if (port == SANDBOX_DESKTOP_PORT && sb->desktop_disabled)
        return sbx_err_set(err, EPERM, "desktop_disabled",
                           "port %d is the desktop's, and sandbox %s's configuration has "
                           "desktop_enabled false",
                           SANDBOX_DESKTOP_PORT, sb->rec.id);
    long long expires = sbx_wall_ms() / 1000 + ttl_seconds;
    char sig[SIGNURL_SIG_HEX_LEN + 1];
    sign(pv, sb->rec.id, (unsigned)port, expires, sig);
    int n;
    if (cfg->preview_domain)
        n = snprintf(url, PREVIEW_URL_MAX, "%s://%lld-%s.%s/?%s=%lld.%s", cfg->preview_scheme, port,
                     sb->rec.id, cfg->preview_domain, PREVIEW_TOKEN_PARAM, expires, sig);
    else
        n = snprintf(url, PREVIEW_URL_MAX, "%s/p/%s/%lld/?%s=%lld.%s", cfg->preview_url, sb->rec.id,
                     port, PREVIEW_TOKEN_PARAM, expires, sig);
    if (n < 0 || n >= PREVIEW_URL_MAX)
        return sbx_err_set(err, ENAMETOOLONG, "internal", "the preview URL is too long");
    *expires_at = expires;
    return 0;
}

static int parse_body(json_t *body, long long *port, long long *ttl, long long *wait,
                      struct sbx_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "port") && strcmp(k, "ttl_seconds") && (!wait || strcmp(k, "wait_seconds")))
            return sbx_err_set(err, EINVAL, "invalid_request", "unknown field \"%.64s\"", k);
    }
    json_t *p = json_object_get(body, "port");
    if (!json_is_integer(p))
        return sbx_err_set(err, EINVAL, "invalid_port", "port must be an integer %d..%d",
                           PREVIEW_PORT_MIN, PREVIEW_PORT_MAX);
    *port = json_integer_value(p);
    json_t *t = json_object_get(body, "ttl_seconds");
    if (t && !json_is_integer(t))
        return sbx_err_set(err, EINVAL, "invalid_ttl", "ttl_seconds must be an integer %d..%d",
                           PREVIEW_TTL_MIN, PREVIEW_TTL_MAX);
    *ttl = t ? json_integer_value(t) : PREVIEW_TTL_DEFAULT;
    json_t *w = wait ? json_object_get(body, "wait_seconds") : NULL;
    if (w && (!json_is_integer(w) || json_integer_value(w) < 0 ||
              json_integer_value(w) > PREVIEW_WAIT_MAX))
        return sbx_err_set(err, EINVAL, "invalid_request", "wait_seconds must be an integer 0..%d",
                           PREVIEW_WAIT_MAX);
    if (wait)
        *wait = w ? json_integer_value(w) : 0;
    return 0;
}

/* A v1 sandbox has no machine between commands, so nothing could stay listening. */
static int v2_only(const struct sandbox *sb, struct sbx_err *err)
{
    if (strcmp(sb->rec.backend, "v2"))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v1",
                           "preview URLs need a v2 sandbox; %s runs on v1", sb->rec.id);
    return 0;
}

int preview_grant(struct previews *pv, struct store *st, const struct auth_identity *who,
                  const char *request_id, const struct sandbox *sb, json_t *body,
                  long long *wait_seconds, json_t **out, struct sbx_err *err)
{
    long long port = 0, ttl = 0, expires_at = 0;
    char url[PREVIEW_URL_MAX];
    if (v2_only(sb, err) < 0 || parse_body(body, &port, &ttl, wait_seconds, err) < 0 ||
        preview_link(pv, sb, port, ttl, url, &expires_at, err) < 0)
        return sbx_err_ret(err);
    /* The audit entry names the port and lifetime, never the link: it is a credential. */
    audit_record(st, who, NULL, request_id, "sandbox.preview", sb->rec.id, "ok",
                 json_pack("{s:I,s:I,s:I}", "port", (json_int_t)port, "ttl_seconds",
                           (json_int_t)ttl, "expires_at", (json_int_t)expires_at));
    *out = json_pack("{s:s,s:s,s:I,s:s,s:I}", "object", "preview", "sandbox_id", sb->rec.id, "port",
                     (json_int_t)port, "url", url, "expires_at", (json_int_t)expires_at);
    return 0;
}
