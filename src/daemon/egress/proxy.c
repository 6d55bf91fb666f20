/* Import circle with decide.c (allowed inside a folder, docs/architecture.md#layering): a
 * proxied connection's life is one state machine split in two files: proxy.c owns the
 * socket and calls decide.c for the verdict, which answers by calling back
 * egress_conn_connect or egress_conn_refuse (proxy_internal.h). Both are the egress
 * folder's; nothing outside sees the loop. */
#include "proxy.h"

#include <errno.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../billing/metrics.h"
#include "../http/reqhead.h"
#include "../sandbox/manager.h"
#include "mitm.h"
#include "netpolicy.h"
#include "proxy_internal.h"
#include "resolve.h"
#include "sni.h"

/* --- bookkeeping -------------------------------------------------------------------- */

static unsigned count_for(struct egress_proxy *px, const struct sandbox *sb)
{
    unsigned n = 0;
    for (struct egress_conn *c = px->conns; c; c = c->next)
        n += c->sb == sb;
    return n;
}

static void set_verdict(struct egress_conn *c, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_verdict(struct egress_conn *c, const char *verdict, const char *fmt, ...)
{
    snprintf(c->verdict, sizeof(c->verdict), "%s", verdict);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
    va_end(ap);
}

/* The log row: written when the verdict is known, finished when the connection ends.
 * A failed write is not the client's problem: the connection goes on unlogged. */
static void log_write(struct egress_conn *c, bool final)
{
    struct sbx_err err = {0};
    long long now = sbx_wall_ms();
    if (c->logged_final)
        return;
    if (!c->log_id) {
        struct store_egress_conn row = {
            .sandbox_id = c->sb->rec.id,
            .method = c->method[0] ? c->method : "-",
            .host = c->host,
            .address = c->address,
            .port = c->port,
            .bytes_up = c->bytes_up,
            .bytes_down = c->bytes_down,
            .started_at_ms = c->started_ms,
            .ended_at_ms = final ? now : 0,
            .verdict = c->verdict[0] ? c->verdict : "error",
            .reason = c->reason,
        };
        (void)store_egress_log_insert(c->px->store, &row, &c->log_id, &err);
    } else if (final) {
        (void)store_egress_log_finish(c->px->store, c->log_id, c->bytes_up, c->bytes_down, now,
                                      c->verdict, c->reason, &err);
    }
    if (final)
        metrics_egress(c->verdict[0] ? c->verdict : "error", c->bytes_up, c->bytes_down);
    c->logged_final = final;
}

void egress_conn_stop_timer(struct egress_conn *c)
{
    if (c->timer)
        loop_timer_cancel(c->px->loop, c->timer);
    c->timer = NULL;
}

static void close_upstream(struct egress_conn *c)
{
    if (c->uw)
        loop_watch_del(c->px->loop, c->uw);
    c->uw = NULL;
    c->uevents = 0;
    if (c->ufd >= 0)
        close(c->ufd);
    c->ufd = -1;
}

static void conn_free(struct egress_conn *c)
{
    for (struct egress_conn **p = &c->px->conns; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    log_write(c, true);
    egress_conn_stop_timer(c);
    egress_lookup_cancel(c->lookup);
    close_upstream(c);
    mitm_free(c->mitm);
    json_decref(c->inject_headers);
    free(c->target);
    free(c->up);
    free(c);
}

static void on_linger(struct loop *l, void *data);

/* Stop relaying; the agent ends the stream (EXIT) once the client is gone. */
static void conn_close(struct egress_conn *c)
{
    struct sbx_err err = {0};
    close_upstream(c);
    egress_lookup_cancel(c->lookup);
    c->lookup = NULL;
    log_write(c, true);
    c->state = ST_CLOSING;
    if (!c->down_eof_sent) {
        c->down_eof_sent = true;
        (void)channel_send_eof(c->st, PROTO_CH_STDIN, &err);
    }
    egress_conn_stop_timer(c);
    c->timer = loop_timer_add(c->px->loop, EGRESS_LINGER_MS, on_linger, c);
}

/* Cut it now: the client does not get to read anything more. */
static void conn_abort(struct egress_conn *c)
{
    struct sbx_err err = {0};
    conn_close(c);
    egress_conn_stop_timer(c);
    (void)channel_signal(c->st, 9, &err);
}

static void on_linger(struct loop *l, void *data)
{
    struct egress_conn *c = data;
    c->timer = NULL;
    struct sbx_err err = {0};
    (void)channel_signal(c->st, 9, &err);
}

static void send_down(struct egress_conn *c, const void *buf, size_t len)
{
    struct sbx_err err = {0};
    if (channel_send(c->st, PROTO_CH_STDIN, buf, len, &err) == 0)
        c->down_window = c->down_window > len ? c->down_window - len : 0;
}

void egress_conn_refuse(struct egress_conn *c, unsigned status, const char *verdict,
                        const char *code, const char *fmt, ...)
{
    if (c->state == ST_CLOSING)
        return;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    set_verdict(c, verdict, "%s: %s", code, msg);
    const char *text = status == 403   ? "Forbidden"
                       : status == 400 ? "Bad Request"
                       : status == 408 ? "Request Timeout"
                       : status == 502 ? "Bad Gateway"
                       : status == 504 ? "Gateway Timeout"
                                       : "Error";
    char body[256];
    int blen = snprintf(body, sizeof(body), "sbx egress proxy: %s: %s\n", code, msg);
    char resp[512];
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "X-Sbx-Egress-Reason: %s\r\nConnection: close\r\nContent-Length: %d\r\n"
                     "\r\n%s",
                     status, text, code, blen, body);
    if (n > 0)
        send_down(c, resp, (size_t)n < sizeof(resp) ? (size_t)n : sizeof(resp) - 1);
    conn_close(c);
}

/* --- upstream I/O ------------------------------------------------------------------- */

static void upstream_update(struct egress_conn *c);

static void credit_up(struct egress_conn *c, size_t written)
{
    size_t pre = written < c->precredited ? written : c->precredited;
    c->precredited -= pre;
    size_t n = written - pre;
    if (n) {
        struct sbx_err err = {0};
        c->up_window += n;
        (void)channel_credit(c->st, PROTO_CH_STDOUT, (uint32_t)n, &err);
    }
}

static void flush_up(struct egress_conn *c)
{
    while (c->ufd >= 0 && c->up_off < c->up_len) {
        ssize_t n = write(c->ufd, c->up + c->up_off, c->up_len - c->up_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            set_verdict(c, "allowed", "upstream_write_failed: %s", strerror(errno));
            conn_close(c);
            return;
        }
        c->up_off += (size_t)n;
        c->bytes_up += n;
        if (!c->mitm)
            credit_up(c, (size_t)n);
    }
    if (c->mitm && c->credit_owed &&
        c->up_len - c->up_off + mitm_buffered(c->mitm) < MITM_UP_QUEUE_MAX) {
        credit_up(c, c->credit_owed);
        c->credit_owed = 0;
    }
    if (c->up_off == c->up_len) {
        c->up_off = c->up_len = 0;
        if (c->client_eof && !c->upstream_shut && c->ufd >= 0) {
            c->upstream_shut = true;
            (void)shutdown(c->ufd, SHUT_WR);
        }
    }
}

static void mitm_failed(struct egress_conn *c, const struct sbx_err *err)
{
    set_verdict(c, "error", "%s: %s", err->code, err->msg);
    conn_abort(c);
}

/* What may be read from the upstream now: the agent's window, less room for what TLS
 * adds when the bytes are sealed again towards the sandbox. */
static uint64_t read_budget(const struct egress_conn *c)
{
    if (!c->mitm)
        return c->down_window;
    /* Nor while the interception holds what the sandbox cannot take yet. */
    if (mitm_buffered(c->mitm) >= MITM_UP_QUEUE_MAX)
        return 0;
    return c->down_window > MITM_TLS_SLACK ? c->down_window - MITM_TLS_SLACK : 0;
}

static void read_upstream(struct egress_conn *c)
{
    static uint8_t buf[PROTO_MAX_PAYLOAD];
    while (c->ufd >= 0 && !c->upstream_eof && read_budget(c) > 0 && !channel_congested(c->st)) {
        size_t want = read_budget(c) < sizeof(buf) ? (size_t)read_budget(c) : sizeof(buf);
        ssize_t n = read(c->ufd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            struct sbx_err err = {0};
            c->upstream_eof = true;
            c->down_eof_sent = true;
            if (c->mitm)
                mitm_upstream_eof(c->mitm);
            (void)channel_send_eof(c->st, PROTO_CH_STDIN, &err);
            return;
        }
        c->bytes_down += n;
        if (c->mitm) {
            struct sbx_err err = {0};
            if (mitm_from_upstream(c->mitm, buf, (size_t)n, &err) < 0) {
                mitm_failed(c, &err);
                return;
            }
        } else {
            send_down(c, buf, (size_t)n);
        }
        if ((size_t)n < want)
            return; /* drained for now: let epoll say when there is more */
    }
}

static void upstream_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct egress_conn *c = data;
    if (c->state != ST_TUNNEL)
        return;
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        flush_up(c);
    if (c->state == ST_TUNNEL && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        read_upstream(c);
    if (c->state == ST_TUNNEL)
        upstream_update(c);
}

/* Watch for what we can act on: writable while bytes wait, readable while the agent
 * has window and the channel is not congested. */
static void upstream_update(struct egress_conn *c)
{
    if (c->ufd < 0)
        return;
    uint32_t ev = 0;
    if (c->up_off < c->up_len)
        ev |= EPOLLOUT;
    if (!c->upstream_eof && read_budget(c) > 0 && !channel_congested(c->st))
        ev |= EPOLLIN;
    if (ev == c->uevents && c->uw)
        return;
    if (c->uw)
        loop_watch_del(c->px->loop, c->uw);
    c->uw = NULL;
    c->uevents = ev;
    /* No watch at all while idle: epoll would still report EPOLLHUP. */
    if (ev && loop_watch_add(c->px->loop, c->ufd, ev, upstream_cb, c, &c->uw) < 0) {
        set_verdict(c, "error", "internal: watching the upstream socket");
        conn_close(c);
    }
}

static void up_append(struct egress_conn *c, const uint8_t *p, size_t n)
{
    sbx_queue_append(&c->up, &c->up_off, &c->up_len, p, n);
}

static void start_tunnel(struct egress_conn *c)
{
    egress_conn_stop_timer(c);
    c->state = ST_TUNNEL;
    flush_up(c);
    if (c->state == ST_TUNNEL) {
        read_upstream(c);
        upstream_update(c);
    }
}

/* --- header injection (docs/configs.md) ----------------------------------------------- */

static void mitm_to_client(void *data, const uint8_t *buf, size_t len)
{
    send_down(data, buf, len);
}

static void mitm_to_upstream(void *data, const uint8_t *buf, size_t len)
{
    up_append(data, buf, len);
}

/* Client bytes into the interception; they are credited back once taken in, unless the
 * queue towards the upstream is full (then when it drains). */
static void mitm_client_bytes(struct egress_conn *c, const uint8_t *buf, size_t len)
{
    struct sbx_err err = {0};
    unsigned before = mitm_injected(c->mitm);
    if (mitm_from_client(c->mitm, buf, len, &err) < 0) {
        mitm_failed(c, &err);
        return;
    }
    if (c->up_len - c->up_off + mitm_buffered(c->mitm) < MITM_UP_QUEUE_MAX)
        credit_up(c, len);
    else
        c->credit_owed += len;
    if (mitm_injected(c->mitm) > before)
        set_verdict(c, "allowed", "ok: rule %s injected %u header(s)",
                    json_string_value(json_object_get(c->inject_rule, "name")),
                    mitm_injected(c->mitm));
    flush_up(c);
    if (c->state == ST_TUNNEL)
        upstream_update(c);
}

static void start_mitm(struct egress_conn *c)
{
    static const struct mitm_io io = {.to_client = mitm_to_client, .to_upstream = mitm_to_upstream};
    /* The client's ClientHello waits in the queue: it is the interception's now. */
    size_t n = c->up_len - c->up_off;
    uint8_t *hello = sbx_xmalloc(n + 1);
    memcpy(hello, c->up + c->up_off, n);
    c->up_off = c->up_len = 0;
    struct sbx_err err = {0};
    const json_t *path = json_object_get(c->inject_rule, "path");
    c->mitm =
        mitm_new(c->px->ca, c->host, c->inject_headers, json_object_get(c->inject_rule, "methods"),
                 json_string_value(path), &io, c, &err);
    if (!c->mitm) {
        free(hello);
        mitm_failed(c, &err);
        return;
    }
    egress_conn_stop_timer(c);
    c->state = ST_TUNNEL;
    set_verdict(c, "allowed", "ok: rule %s: TLS ended here for injection",
                json_string_value(json_object_get(c->inject_rule, "name")));
    mitm_client_bytes(c, hello, n);
    free(hello);
    if (c->state == ST_TUNNEL) {
        read_upstream(c);
        upstream_update(c);
    }
}

/* --- SNI ------------------------------------------------------------------------------ */

static void sni_refuse(struct egress_conn *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sni_refuse(struct egress_conn *c, const char *code, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    set_verdict(c, "denied", "%s: %s", code, msg);
    /* The 200 is already out: the client hears a TLS fatal alert, access_denied. */
    static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49};
    send_down(c, alert, sizeof(alert));
    conn_close(c);
}

static void check_sni(struct egress_conn *c)
{
    char name[SNI_NAME_MAX + 1];
    int r = sni_parse(c->up + c->up_off, c->up_len - c->up_off, name);
    if (r == 1) {
        if (c->up_len - c->up_off < SNI_RECORD_MAX)
            return;
        r = -EPROTO;
    }
    if (r == -ENOENT) {
        sni_refuse(c, "sni_missing", "the TLS ClientHello names no server (SNI)");
        return;
    }
    if (r < 0) {
        sni_refuse(c, "sni_unreadable", "the tunnel does not start with a TLS ClientHello");
        return;
    }
    char norm[EGRESS_HOST_MAX + 1];
    struct sbx_err err = {0};
    if (egress_host_normalise(name, strlen(name), norm, &err) < 0 || strcmp(norm, c->host)) {
        sni_refuse(c, "sni_mismatch", "TLS SNI %.64s does not match CONNECT %s", name, c->host);
        return;
    }
    if (c->inject_rule)
        start_mitm(c);
    else
        start_tunnel(c);
}

static void on_sni_timeout(struct loop *l, void *data)
{
    struct egress_conn *c = data;
    c->timer = NULL;
    sni_refuse(c, "sni_timeout", "no TLS ClientHello within %d ms", EGRESS_SNI_TIMEOUT_MS);
}

/* --- connecting ----------------------------------------------------------------------- */

static void connected(struct egress_conn *c)
{
    loop_watch_del(c->px->loop, c->uw);
    c->uw = NULL;
    c->uevents = 0;
    egress_conn_stop_timer(c);
    if (c->audit_rule[0])
        set_verdict(c, "allowed", "ok: audit rule %s", c->audit_rule);
    else
        set_verdict(c, "allowed", "ok");
    log_write(c, false);
    if (c->is_connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        send_down(c, ok, sizeof(ok) - 1);
        c->state = ST_SNI;
        c->timer = loop_timer_add(c->px->loop, EGRESS_SNI_TIMEOUT_MS, on_sni_timeout, c);
        if (c->up_len > c->up_off)
            check_sni(c);
        return;
    }
    /* Plain HTTP: the origin-form request, without hop-by-hop headers, one request per
     * connection (the upstream closes after its answer). */
    static const char *const hop[] = {"connection",
                                      "proxy-connection",
                                      "keep-alive",
                                      "proxy-authorization",
                                      "proxy-authenticate",
                                      "te",
                                      "trailer",
                                      "upgrade",
                                      "host"};
    size_t cap = c->rh.len + EGRESS_HOST_MAX + strlen(c->target) + 128;
    char *req = sbx_xmalloc(cap);
    size_t n =
        (size_t)snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: %s", c->method, c->target, c->host);
    if (c->port != 80)
        n += (size_t)snprintf(req + n, cap - n, ":%u", c->port);
    n += (size_t)snprintf(req + n, cap - n, "\r\n");
    for (unsigned i = 0; i < c->rh.nheaders; i++) {
        const struct reqhead_header *h = &c->headers[i];
        bool skip = false;
        for (size_t k = 0; k < SBX_ARRAY_SIZE(hop) && !skip; k++)
            skip = h->name_len == strlen(hop[k]) &&
                   !strncasecmp((const char *)c->head + h->name_off, hop[k], h->name_len);
        if (skip)
            continue;
        n += (size_t)snprintf(req + n, cap - n, "%.*s: %.*s\r\n", (int)h->name_len,
                              (const char *)c->head + h->name_off, (int)h->value_len,
                              (const char *)c->head + h->value_off);
    }
    n += (size_t)snprintf(req + n, cap - n, "Connection: close\r\n\r\n");
    /* The rewritten head goes before the body bytes already buffered; it was credited
     * with the head, so it counts as precredited. */
    uint8_t *nb = sbx_xmalloc(n + c->up_len - c->up_off);
    memcpy(nb, req, n);
    memcpy(nb + n, c->up + c->up_off, c->up_len - c->up_off);
    c->up_len = n + c->up_len - c->up_off;
    c->up_off = 0;
    c->precredited += n;
    free(c->up);
    c->up = nb;
    free(req);
    start_tunnel(c);
}

static void connect_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct egress_conn *c = data;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    if (soerr) {
        set_verdict(c, "error", "connect_failed: %s", strerror(soerr));
        close_upstream(c);
        egress_conn_connect(c);
        return;
    }
    connected(c);
}

static void on_connect_timeout(struct loop *l, void *data)
{
    struct egress_conn *c = data;
    c->timer = NULL;
    egress_conn_refuse(c, 504, "error", "connect_timeout", "%s (%s) did not answer in %d ms",
                       c->host, c->address, EGRESS_CONNECT_TIMEOUT_MS);
}

void egress_conn_connect(struct egress_conn *c)
{
    while (c->next_addr < c->naddrs) {
        const struct egress_addr *a = &c->addrs[c->next_addr++];
        egress_addr_format(a, c->address);
        struct sockaddr_storage ss = {0};
        socklen_t sl;
        if (a->family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)c->port);
            memcpy(&s4->sin_addr, a->b, 4);
            sl = sizeof(*s4);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)c->port);
            memcpy(&s6->sin6_addr, a->b, 16);
            sl = sizeof(*s6);
        }
        c->ufd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->ufd < 0) {
            set_verdict(c, "error", "connect_failed: %s", strerror(errno));
            continue;
        }
        int one = 1;
        (void)setsockopt(c->ufd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
        if (connect(c->ufd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS) {
            c->state = ST_CONNECTING;
            if (loop_watch_add(c->px->loop, c->ufd, EPOLLOUT, connect_cb, c, &c->uw) < 0) {
                close_upstream(c);
                continue;
            }
            c->uevents = EPOLLOUT;
            if (!c->timer)
                c->timer =
                    loop_timer_add(c->px->loop, EGRESS_CONNECT_TIMEOUT_MS, on_connect_timeout, c);
            return;
        }
        set_verdict(c, "error", "connect_failed: %s", strerror(errno));
        close_upstream(c);
    }
    egress_conn_stop_timer(c);
    const char *why = c->reason[0] ? c->reason : "connect_failed";
    char msg[192];
    snprintf(msg, sizeof(msg), "%s", why);
    egress_conn_refuse(c, 502, "error", "connect_failed", "%s: %s", c->host, msg);
}

/* --- the request head ------------------------------------------------------------- */

static void head_data(struct egress_conn *c, const uint8_t *p, size_t len)
{
    struct sbx_err err = {0};
    /* Head bytes are ours to bound (EGRESS_HEAD_MAX), so they are credited at once. */
    (void)channel_credit(c->st, PROTO_CH_STDOUT, (uint32_t)len, &err);
    size_t room = sizeof(c->head) - c->rh.len;
    size_t take = len < room ? len : room;
    memcpy(c->head + c->rh.len, p, take);
    if (reqhead_feed(&c->rh, take, &err) < 0) {
        egress_conn_refuse(c, 400, "denied", "bad_request", "%s", err.msg);
        return;
    }
    if (c->rh.done) {
        /* What follows the head (a body, pipelined bytes) goes upstream as it is. */
        size_t used = c->rh.body_off;
        up_append(c, c->head + used, c->rh.len - used);
        c->rh.len = used;
        if (len > take)
            up_append(c, p + take, len - take);
        c->precredited = c->up_len;
        egress_conn_decide(c);
    }
}

/* --- the stream ----------------------------------------------------------------------- */

static void st_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct egress_conn *c = data;
    struct sbx_err err = {0};
    if (ch != PROTO_CH_STDOUT || len == 0)
        return;
    if (c->state == ST_HEAD) {
        head_data(c, buf, len);
        return;
    }
    if (c->state == ST_CLOSING) {
        (void)channel_credit(st, PROTO_CH_STDOUT, (uint32_t)len, &err);
        return;
    }
    if (len > c->up_window) {
        set_verdict(c, "error", "window_exceeded: the agent sent more than its window");
        conn_abort(c);
        return;
    }
    c->up_window -= len;
    if (c->mitm) {
        mitm_client_bytes(c, buf, len);
        return;
    }
    up_append(c, buf, len);
    if (c->state == ST_SNI)
        check_sni(c);
    else if (c->state == ST_TUNNEL) {
        flush_up(c);
        if (c->state == ST_TUNNEL)
            upstream_update(c);
    }
}

static void st_eof(struct chan_stream *st, unsigned ch, void *data)
{
    struct egress_conn *c = data;
    if (ch != PROTO_CH_STDOUT)
        return;
    c->client_eof = true;
    if (c->state == ST_TUNNEL) {
        if (c->mitm)
            mitm_client_eof(c->mitm);
        flush_up(c);
        if (c->state == ST_TUNNEL)
            upstream_update(c);
    } else if (c->state != ST_CLOSING) {
        /* The client gave up before we were through: nobody is left to answer. */
        set_verdict(c, c->verdict[0] ? c->verdict : "error", "client_closed: before %s",
                    c->state == ST_HEAD ? "a whole request" : "the tunnel was up");
        conn_close(c);
    }
}

static void st_window(struct chan_stream *st, unsigned ch, uint32_t credit, void *data)
{
    struct egress_conn *c = data;
    if (ch != PROTO_CH_STDIN)
        return;
    c->down_window += credit;
    if (c->state == ST_TUNNEL) {
        read_upstream(c);
        upstream_update(c);
    }
}

static void st_writable(struct chan_stream *st, void *data)
{
    struct egress_conn *c = data;
    if (c->state == ST_TUNNEL)
        upstream_update(c);
}

static void st_exit(struct chan_stream *st, json_t *result, void *data)
{
    struct egress_conn *c = data;
    if (!c->verdict[0])
        set_verdict(c, "error", "client_closed: before a whole request");
    conn_free(c);
}

static void st_error(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct egress_conn *c = data;
    if (!c->verdict[0])
        set_verdict(c, "error", "%s", err->code);
    conn_free(c);
}

static const struct chan_stream_ops conn_ops = {
    .on_data = st_data,
    .on_exit = st_exit,
    .on_error = st_error,
    .on_eof = st_eof,
    .on_window = st_window,
    .on_writable = st_writable,
};

static void on_head_timeout(struct loop *l, void *data)
{
    struct egress_conn *c = data;
    c->timer = NULL;
    egress_conn_refuse(c, 408, "denied", "request_timeout", "no complete request in %d ms",
                       EGRESS_HEAD_TIMEOUT_MS);
}

int egress_stream_open(struct sandbox *sb, struct chan_stream *st, json_t *request,
                       const struct chan_stream_ops **ops, void **sdata, void *data,
                       struct sbx_err *err)
{
    struct egress_proxy *px = data;
    const char *op = json_string_value(json_object_get(request, "op"));
    if (!px || !op || strcmp(op, "egress"))
        return sbx_err_set(err, EINVAL, "unknown_op", "sbxd accepts only op \"egress\"");
    if (count_for(px, sb) >= EGRESS_CONNS_PER_SANDBOX)
        return sbx_err_set(err, EBUSY, "too_many_streams",
                           "at most %d egress connections per sandbox", EGRESS_CONNS_PER_SANDBOX);
    struct egress_conn *c = sbx_xcalloc(1, sizeof(*c));
    c->px = px;
    c->st = st;
    c->sb = sb;
    c->ufd = -1;
    c->started_ms = sbx_wall_ms();
    c->up_window = PROTO_TUNNEL_WINDOW;
    c->down_window = PROTO_WINDOW_INIT;
    reqhead_init(&c->rh, c->head, sizeof(c->head), c->headers, EGRESS_HEADERS_MAX);
    channel_manual_credit(st);
    struct sbx_err cerr = {0};
    (void)channel_credit(st, PROTO_CH_STDOUT, PROTO_TUNNEL_WINDOW - PROTO_WINDOW_INIT, &cerr);
    c->timer = loop_timer_add(px->loop, EGRESS_HEAD_TIMEOUT_MS, on_head_timeout, c);
    c->next = px->conns;
    px->conns = c;
    *ops = &conn_ops;
    *sdata = c;
    return 0;
}

/* --- the proxy ------------------------------------------------------------------------ */

int egress_proxy_new(struct loop *l, struct store *st, const struct egress_proxy_config *cfg,
                     struct egress_proxy **out, struct sbx_err *err)
{
    struct egress_proxy *px = sbx_xcalloc(1, sizeof(*px));
    px->loop = l;
    px->store = st;
    int r = 0;
    if (cfg->policy_path && *cfg->policy_path)
        r = egress_operator_load(cfg->policy_path, &px->op, err);
    if (r == 0)
        r = egress_resolver_new(l, cfg->hosts_file, cfg->test_upstreams, &px->resolver, err);
    if (r == 0)
        r = store_egress_log_interrupt(st, sbx_wall_ms(), err);
    if (r == 0 && cfg->data_dir)
        r = mitm_ca_open(cfg->data_dir, cfg->upstream_ca_file, &px->ca, err);
    if (r < 0) {
        egress_proxy_free(px);
        return r;
    }
    *out = px;
    return 0;
}

void egress_proxy_free(struct egress_proxy *px)
{
    if (!px)
        return;
    while (px->conns) {
        struct egress_conn *c = px->conns;
        if (!c->logged_final && strcmp(c->verdict, "denied"))
            set_verdict(c, c->verdict[0] ? c->verdict : "error", "daemon_stopped");
        channel_detach(c->st);
        conn_free(c);
    }
    egress_resolver_free(px->resolver);
    egress_operator_free(px->op);
    mitm_ca_free(px->ca);
    free(px);
}

const char *egress_proxy_ca_pem(const struct egress_proxy *px)
{
    return px && px->ca ? mitm_ca_pem(px->ca) : NULL;
}

void egress_proxy_policy_changed(struct egress_proxy *px, const char *sandbox_id)
{
    for (struct egress_conn *c = px->conns; c; c = c->next) {
        if (strcmp(c->sb->rec.id, sandbox_id) || c->state == ST_CLOSING || c->state == ST_HEAD)
            continue;
        if (c->sb->egress && egress_policy_allows(c->sb->egress, c->host))
            continue;
        if (c->sb->net && c->sb->net->op && c->sb->egress &&
            c->sb->egress->mode == EGRESS_MODE_NONE)
            continue;
        set_verdict(c, "allowed", "policy_changed: %s is no longer allowed", c->host);
        conn_abort(c);
    }
}
