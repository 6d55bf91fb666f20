#include "forward.h"

#include <errno.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/util.h"
#include "credential.h"

/* A byte queue toward one side; compacted as it drains so a long stream does not grow
 * it beyond what waits. */
struct bq {
    uint8_t *buf;
    size_t off, len;
};

static size_t bq_pending(const struct bq *q)
{
    return q->len - q->off;
}

static void bq_push(struct bq *q, const void *p, size_t n)
{
    if (q->off > 0 && q->off * 2 >= q->len) {
        memmove(q->buf, q->buf + q->off, q->len - q->off);
        q->len -= q->off;
        q->off = 0;
    }
    sbx_queue_append(&q->buf, &q->off, &q->len, p, n);
}

/* Write what fd takes: 0, or -errno on a broken connection. */
static int bq_flush(struct bq *q, int fd)
{
    while (bq_pending(q)) {
        ssize_t w = send(fd, q->buf + q->off, bq_pending(q), MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
        q->off += (size_t)w;
    }
    return 0;
}

struct fwd {
    struct loop *loop;
    struct http_req *req; /* NULL once the client is gone or answered in full */
    int fd;               /* to the other node */
    struct loop_watch *w;
    struct loop_timer *timer;
    bool connected, head_only, websocket, chunked, sink, paused, waiting_drain;
    struct bq up;   /* toward the other node */
    struct bq down; /* toward the client, once upgraded */
    http_parser parser;
    size_t head_bytes;
    unsigned nheaders;
    char *names[FORWARD_HEADERS_MAX], *values[FORWARD_HEADERS_MAX];
    bool in_value;
    bool started, complete;
    /* After a 101: the client's raw connection. */
    struct http_upgraded *u;
    int cfd;
    struct loop_watch *cw;
};

static void fwd_free(struct fwd *f)
{
    if (f->timer)
        loop_timer_cancel(f->loop, f->timer);
    loop_watch_del(f->loop, f->w);
    loop_watch_del(f->loop, f->cw);
    if (f->fd >= 0)
        close(f->fd);
    http_upgraded_close(f->u);
    for (unsigned i = 0; i < f->nheaders; i++) {
        free(f->names[i]);
        free(f->values[i]);
    }
    free(f->up.buf);
    free(f->down.buf);
    free(f);
}

/* The client has its answer (or is gone): nothing of the request is ours any more. */
static void fwd_finish(struct fwd *f)
{
    if (f->req && f->sink)
        http_req_discard_body(f->req);
    if (f->req && f->waiting_drain)
        http_stream_on_drain(f->req, NULL, NULL); /* the stream outlives the relay */
    f->req = NULL;
    fwd_free(f);
}

static void fwd_fail(struct fwd *f, const char *code, const char *msg)
{
    if (f->req) {
        if (f->started)
            http_stream_end(f->req); /* cut short: the client sees the stream end early */
        else
            http_respond_errorf(f->req, code, "%s", msg);
    }
    fwd_finish(f);
}

static void fwd_failf(struct fwd *f, const char *code, const char *what, int e)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(e));
    fwd_fail(f, code, msg);
}

static void on_client_abort(struct http_req *r, void *data)
{
    struct fwd *f = data;
    f->req = NULL;
    f->sink = false;
    fwd_free(f);
}

static void update_events(struct fwd *f)
{
    uint32_t ev = 0;
    if (!f->connected || bq_pending(&f->up))
        ev |= EPOLLOUT;
    if (f->connected && !f->waiting_drain && !(f->u && bq_pending(&f->down) >= FORWARD_BUF_HIGH) &&
        !(f->websocket && f->complete && !f->u))
        ev |= EPOLLIN;
    (void)loop_watch_mod(f->loop, f->w, ev);
    if (f->cw) {
        uint32_t cev = bq_pending(&f->up) < FORWARD_BUF_HIGH ? EPOLLIN : 0;
        if (bq_pending(&f->down))
            cev |= EPOLLOUT;
        (void)loop_watch_mod(f->loop, f->cw, cev);
    }
    /* The client's body waits while the other node is behind. */
    if (f->sink && f->req) {
        bool full = bq_pending(&f->up) >= FORWARD_BUF_HIGH;
        if (full && !f->paused)
            http_req_pause(f->req);
        else if (!full && f->paused)
            http_req_unpause(f->req);
        f->paused = full;
    }
}

/* --- the other node's answer ----------------------------------------------------- */

static struct fwd *of(http_parser *p)
{
    return p->data;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
    struct fwd *f = of(p);
    if (f->in_value || f->nheaders == 0) {
        if (f->nheaders == FORWARD_HEADERS_MAX)
            return 0; /* kept no further; relayed headers are a few known ones */
        f->names[f->nheaders] = sbx_xstrdup("");
        f->values[f->nheaders] = sbx_xstrdup("");
        f->nheaders++;
        f->in_value = false;
    }
    char **n = &f->names[f->nheaders - 1];
    char *joined = sbx_xasprintf("%s%.*s", *n, (int)len, at);
    free(*n);
    *n = joined;
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    struct fwd *f = of(p);
    if (!f->nheaders)
        return 0;
    f->in_value = true;
    char **v = &f->values[f->nheaders - 1];
    char *joined = sbx_xasprintf("%s%.*s", *v, (int)len, at);
    free(*v);
    *v = joined;
    return 0;
}

static const char *answer_header(const struct fwd *f, const char *name)
{
    for (unsigned i = 0; i < f->nheaders; i++)
        if (!strcasecmp(f->names[i], name))
            return f->values[i];
    return NULL;
}

/* The answer headers a client may need; sbxd sets its own request id, region and cost. */
static const char *const relayed[] = {
    "Location", "Content-Disposition", "x-sbx-sha256", "x-sbx-idempotent-replay",
    "X-Next-Token", "Allow", "Retry-After", NULL,
};
#define FORWARD_RELAYED_MAX 5 /* of the request's extra headers, the rest are sbxd's */

static void relay_headers(struct fwd *f)
{
    unsigned n = 0;
    for (const char *const *h = relayed; *h && n < FORWARD_RELAYED_MAX; h++) {
        const char *v = answer_header(f, *h);
        if (v) {
            http_req_add_header(f->req, *h, v);
            n++;
        }
    }
}

static int on_headers_complete(http_parser *p)
{
    struct fwd *f = of(p);
    if (!f->req)
        return 1;
    if (f->websocket && p->status_code == 101)
        return 0; /* the parser stops at the upgrade; the rest is the WebSocket's */
    relay_headers(f);
    const char *ct = answer_header(f, "Content-Type");
    f->started = true;
    http_stream_begin_as(f->req, p->status_code, ct ? ct : "application/json", on_client_abort,
                         f);
    return f->head_only ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct fwd *f = of(p);
    if (f->req && http_stream_write(f->req, at, len, NULL, 0) < 0)
        return -1;
    return 0;
}

static int on_complete(http_parser *p)
{
    of(p)->complete = true;
    return 0;
}

static const http_parser_settings answer_settings = {
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

static void on_drained(struct http_req *r, void *data)
{
    struct fwd *f = data;
    f->waiting_drain = false;
    update_events(f);
}

/* --- a WebSocket: both connections, raw ------------------------------------------- */

/* What fd has, onto q: -1 once the connection is closed or broken. */
static int recv_into(int fd, struct bq *q)
{
    char buf[FORWARD_READ_CHUNK];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        return -1;
    if (n > 0)
        bq_push(q, buf, (size_t)n);
    return 0;
}

static void pump_client(struct loop *l, int fd, uint32_t events, void *data)
{
    struct fwd *f = data;
    if (events & EPOLLIN) {
        if (recv_into(fd, &f->up) < 0) {
            fwd_free(f);
            return;
        }
    } else if (events & (EPOLLERR | EPOLLHUP)) {
        fwd_free(f);
        return;
    }
    if (bq_flush(&f->down, fd) < 0 || bq_flush(&f->up, f->fd) < 0) {
        fwd_free(f);
        return;
    }
    update_events(f);
}

static void on_upgraded(struct http_upgraded *u, int fd, const char *extra, size_t extra_len,
                        void *data)
{
    struct fwd *f = data;
    f->u = u;
    f->cfd = fd;
    f->req = NULL; /* the request is over; the connection is the relay's */
    if (extra_len)
        bq_push(&f->up, extra, extra_len);
    if (loop_watch_add(f->loop, fd, EPOLLIN | EPOLLOUT, pump_client, f, &f->cw) < 0) {
        fwd_free(f);
        return;
    }
    update_events(f);
}

static void on_upgrade_abort(struct http_req *r, void *data)
{
    fwd_free(data);
}

static void upgrade(struct fwd *f, const char *rest, size_t rest_len)
{
    const char *accept = answer_header(f, "Sec-WebSocket-Accept");
    if (!accept) {
        fwd_fail(f, "node_error", "the sandbox's node upgraded without a WebSocket accept");
        return;
    }
    if (rest_len)
        bq_push(&f->down, rest, rest_len);
    http_req_add_header(f->req, "Upgrade", "websocket");
    http_req_add_header(f->req, "Sec-WebSocket-Accept", accept);
    const char *proto = answer_header(f, "Sec-WebSocket-Protocol");
    if (proto)
        http_req_add_header(f->req, "Sec-WebSocket-Protocol", proto);
    struct http_req *r = f->req;
    f->sink = false;
    f->complete = true; /* no more HTTP from the node: reading waits for the client */
    http_respond_upgrade(r, on_upgraded, on_upgrade_abort, f);
    update_events(f);
}

/* --- the connection to the other node ---------------------------------------------- */

/* The node answers in small writes (head, then body); acknowledging each at once keeps
 * its Nagle from holding the next for our delayed ACK (tens of ms a request). Linux
 * clears quick-ack by itself, so it is set again after every read. */
static void quick_ack(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

static void on_node(struct loop *l, int fd, uint32_t events, void *data)
{
    struct fwd *f = data;
    if (!f->connected) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr) {
            fwd_failf(f, "node_unreachable", "the sandbox's node does not answer", soerr);
            return;
        }
        f->connected = true;
        loop_timer_cancel(f->loop, f->timer);
        f->timer = NULL;
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (bq_flush(&f->up, fd) < 0) {
        fwd_fail(f, "node_unreachable", "the sandbox's node closed the connection");
        return;
    }
    if (f->u) { /* a WebSocket: bytes from the node go to the client as they are */
        if ((events & EPOLLIN) && recv_into(fd, &f->down) < 0) {
            fwd_free(f);
            return;
        }
        if (bq_flush(&f->down, f->cfd) < 0) {
            fwd_free(f);
            return;
        }
        update_events(f);
        return;
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !f->complete) {
        char buf[FORWARD_READ_CHUNK];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        quick_ack(fd);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            fwd_failf(f, "node_error", "the sandbox's node broke the connection", errno);
            return;
        }
        if (n >= 0) {
            size_t used = http_parser_execute(&f->parser, &answer_settings, buf, (size_t)n);
            if (!f->started)
                f->head_bytes += used;
            if (f->parser.upgrade && f->websocket && f->parser.status_code == 101 && f->req) {
                upgrade(f, buf + used, (size_t)n - used);
                return;
            }
            if (HTTP_PARSER_ERRNO(&f->parser) != HPE_OK && !f->complete) {
                fwd_fail(f, "node_error",
                         n == 0 ? "the sandbox's node closed the connection without an answer"
                                : "the sandbox's node answered what is not HTTP");
                return;
            }
            if (!f->started && f->head_bytes > FORWARD_HEAD_MAX) {
                fwd_fail(f, "node_error", "the sandbox's node sent an answer head too long");
                return;
            }
            if (n == 0 && !f->complete) {
                fwd_fail(f, "node_error",
                         "the sandbox's node closed the connection before its answer was whole");
                return;
            }
        }
    }
    if (f->complete) {
        if (f->req)
            http_stream_end(f->req);
        fwd_finish(f);
        return;
    }
    if (f->req && f->started && http_stream_queued(f->req) >= FORWARD_BUF_HIGH) {
        f->waiting_drain = true;
        http_stream_on_drain(f->req, on_drained, f);
    }
    update_events(f);
}

static void on_connect_timeout(struct loop *l, void *data)
{
    struct fwd *f = data;
    f->timer = NULL;
    fwd_fail(f, "node_unreachable", "the sandbox's node did not answer within 5 s");
}

/* --- the client's body, relayed as it arrives ---------------------------------------- */

static int sink_data(struct http_req *r, const char *buf, size_t len, void *data,
                     struct sbx_err *err)
{
    struct fwd *f = data;
    if (f->chunked) {
        char size[24];
        int n = snprintf(size, sizeof(size), "%zx\r\n", len);
        bq_push(&f->up, size, (size_t)n);
    }
    bq_push(&f->up, buf, len);
    if (f->chunked)
        bq_push(&f->up, "\r\n", 2);
    if (f->connected && bq_flush(&f->up, f->fd) < 0)
        return sbx_err_set(err, EPIPE, "node_unreachable",
                           "the sandbox's node closed the connection during the upload");
    update_events(f);
    return 0;
}

static void sink_end(struct http_req *r, void *data)
{
    struct fwd *f = data;
    f->sink = false;
    if (f->chunked)
        bq_push(&f->up, "0\r\n\r\n", 5);
    if (!f->started)
        http_req_suspend(r, on_client_abort, f);
    update_events(f);
}

static void sink_failed(struct http_req *r, void *data)
{
    struct fwd *f = data;
    f->sink = false;
    f->req = NULL; /* the server answers with the sink's error */
    fwd_free(f);
}

static const struct http_body_sink relay_sink = {
    .on_data = sink_data, .on_end = sink_end, .on_failed = sink_failed};

/* --- the request head ------------------------------------------------------------------ */

/* Headers that describe this connection, the caller's credentials, or what the relay
 * sets itself. */
static bool dropped(const char *name)
{
    static const char *const names[] = {
        "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
        "Transfer-Encoding", "Content-Length", "Upgrade", "Expect", "Authorization",
        "X-API-Key", "Proxy-Authorization", CLUSTER_HDR_REQUEST_ID, NULL,
    };
    for (const char *const *n = names; *n; n++)
        if (!strcasecmp(name, *n))
            return true;
    /* x-sbx-node and every x-sbx-node-…: only the relay's own reach the node. */
    return !strncasecmp(name, CLUSTER_HDR_NODE, strlen(CLUSTER_HDR_NODE));
}

static void add_header(const char *name, const char *value, void *data)
{
    struct bq *q = data;
    if (dropped(name) || strpbrk(value, "\r\n"))
        return;
    char *line = sbx_xasprintf("%s: %s\r\n", name, value);
    bq_push(q, line, strlen(line));
    free(line);
}

bool forward_url_valid(const char *url)
{
    if (strncmp(url, "http://", 7))
        return false;
    const char *host = url + 7, *colon = strrchr(host, ':');
    if (!colon || colon == host || strchr(host, '/') || strchr(host, '@'))
        return false;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return !*end && port > 0 && port < 65536 && (size_t)(colon - host) < 256;
}

static int dial(const char *url, int *out, struct sbx_err *err)
{
    const char *host = url + 7, *colon = strrchr(host, ':');
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)(colon - host), host);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(name, colon + 1, &hints, &ai);
    if (g != 0)
        return sbx_err_set(err, EHOSTUNREACH, "node_unreachable",
                           "the sandbox's node address %.200s does not resolve: %s", url,
                           gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int r = fd < 0 ? -errno : 0;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
        r = -errno;
    freeaddrinfo(ai);
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        return sbx_err_set(err, -r, "node_unreachable", "the sandbox's node %.200s: %s", url,
                           strerror(-r));
    }
    *out = fd;
    return 0;
}

int forward_request(struct loop *l, struct http_req *req, const char *url,
                    const struct forward_headers *h, bool stream_body, struct sbx_err *err)
{
    if (!forward_url_valid(url))
        return sbx_err_set(err, EINVAL, "node_unreachable",
                           "the sandbox's node advertises no address to dial (%.200s)", url);
    struct fwd *f = sbx_xcalloc(1, sizeof(*f));
    f->loop = l;
    f->req = req;
    f->fd = f->cfd = -1;
    http_parser_init(&f->parser, HTTP_RESPONSE);
    f->parser.data = f;
    const char *method = http_req_method(req);
    f->head_only = !strcmp(method, "HEAD");
    const char *up = http_req_header(req, "Upgrade");
    f->websocket = up && !strcasecmp(up, "websocket");

    /* The client's Host goes on as it was (E2B's data plane and MCP read it), as a
     * reverse proxy's does; HTTP/1.1 needs one, so a request without it names the node. */
    const char *host = http_req_header(req, "Host");
    char *line = host ? sbx_xasprintf("%s %s HTTP/1.1\r\n", method, http_req_target(req))
                      : sbx_xasprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", method,
                                      http_req_target(req), url + 7);
    bq_push(&f->up, line, strlen(line));
    free(line);
    http_req_each_header(req, add_header, &f->up);
    uint64_t clen = 0;
    const char *te = http_req_header(req, "Transfer-Encoding");
    size_t blen = 0;
    const char *body = stream_body ? NULL : http_req_body(req, &blen);
    if (stream_body && !http_req_content_length(req, &clen) && te)
        f->chunked = true;
    line = f->chunked ? sbx_xstrdup("Transfer-Encoding: chunked\r\n")
                      : sbx_xasprintf("Content-Length: %llu\r\n",
                                      (unsigned long long)(stream_body ? clen : blen));
    bq_push(&f->up, line, strlen(line));
    free(line);
    line = sbx_xasprintf("%s%s: %s\r\n%s: %s\r\n%s: %s\r\n%s: %s\r\n\r\n",
                         f->websocket ? "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                      : "Connection: close\r\n",
                         CLUSTER_HDR_NODE, h->node, CLUSTER_HDR_IDENTITY, h->identity,
                         CLUSTER_HDR_AUTH, h->auth, CLUSTER_HDR_REQUEST_ID, h->request_id);
    bq_push(&f->up, line, strlen(line));
    free(line);
    if (body && blen)
        bq_push(&f->up, body, blen);

    int r = dial(url, &f->fd, err);
    if (r == 0 && (r = loop_watch_add(l, f->fd, EPOLLOUT, on_node, f, &f->w)) < 0)
        sbx_err_sys(err, -r, "watching the connection to the sandbox's node");
    if (r < 0) {
        /* Answered here: the caller's request is the relay's from the start. */
        f->req = NULL;
        fwd_free(f);
        http_respond_error(req, err);
        return 0;
    }
    f->timer = loop_timer_add(l, FORWARD_CONNECT_MS, on_connect_timeout, f);
    if (stream_body) {
        f->sink = true;
        http_req_stream_body(req, &relay_sink, f, on_client_abort);
    } else {
        http_req_suspend(req, on_client_abort, f);
    }
    return 0;
}
