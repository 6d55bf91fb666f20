#include "ws.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "../../common/util.h"
#include "server.h"

/* How long a closing connection waits for the client's close frame. */
#define WS_CLOSE_WAIT_MS 5000

struct ws {
    struct loop *loop;
    struct http_upgraded *u;
    int fd;
    struct loop_watch *watch;
    wslay_event_context_ptr ctx;
    const struct ws_ops *ops;
    void *data;
    char *extra; /* bytes MHD read past the request, consumed first */
    size_t extra_len, extra_off;
    bool paused, high, closing, ending;
    bool in_recv; /* inside wslay_event_recv: sending waits until it returns */
    struct loop_timer *end_t, *close_t;
};

int ws_handshake_check(struct http_req *r, struct sbx_err *err)
{
    const char *up = http_req_header(r, "Upgrade");
    const char *conn = http_req_header(r, "Connection");
    const char *ver = http_req_header(r, "Sec-WebSocket-Version");
    const char *key = http_req_header(r, "Sec-WebSocket-Key");
    if (strcmp(http_req_method(r), "GET") || !up || strcasecmp(up, "websocket") || !conn ||
        !strcasestr(conn, "upgrade"))
        return sbx_err_set(err, EPROTO, "websocket_required",
                           "this route is a WebSocket: send Upgrade: websocket");
    unsigned char raw[32];
    if (!ver || strcmp(ver, "13") || !key || strlen(key) != 24 ||
        EVP_DecodeBlock(raw, (const unsigned char *)key, 24) != 18 || key[22] != '=' ||
        key[23] != '=')
        return sbx_err_set(err, EPROTO, "websocket_required",
                           "Sec-WebSocket-Version must be 13 and Sec-WebSocket-Key a base64 nonce "
                           "of 16 bytes");
    return 0;
}

void ws_handshake_accept(struct http_req *r)
{
    const char *key = http_req_header(r, "Sec-WebSocket-Key");
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char cat[24 + sizeof(guid)];
    memcpy(cat, key, 24);
    memcpy(cat + 24, guid, sizeof(guid));
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)cat, strlen(cat), md);
    char accept[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
    EVP_EncodeBlock((unsigned char *)accept, md, SHA_DIGEST_LENGTH);
    http_req_add_header(r, "Upgrade", "websocket");
    http_req_add_header(r, "Sec-WebSocket-Accept", accept);
}

static void ws_release(struct ws *w)
{
    if (w->end_t)
        loop_timer_cancel(w->loop, w->end_t);
    if (w->close_t)
        loop_timer_cancel(w->loop, w->close_t);
    loop_watch_del(w->loop, w->watch);
    wslay_event_context_free(w->ctx);
    http_upgraded_close(w->u);
    free(w->extra);
}

static void ws_end_cb(struct loop *l, void *data)
{
    struct ws *w = data;
    w->end_t = NULL;
    ws_release(w);
    w->ops->on_closed(w, w->data);
    free(w);
}

void ws_abort(struct ws *w)
{
    ws_release(w);
    free(w);
}

/* Finish on the next loop turn, so on_closed never runs inside a caller's ws_* call. */
static void ws_end(struct ws *w)
{
    if (w->ending)
        return;
    w->ending = true;
    loop_watch_del(w->loop, w->watch);
    w->watch = NULL;
    w->end_t = loop_timer_add(w->loop, 0, ws_end_cb, w);
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user)
{
    struct ws *w = user;
    if (w->extra_off < w->extra_len) {
        size_t n = w->extra_len - w->extra_off;
        if (n > len)
            n = len;
        memcpy(buf, w->extra + w->extra_off, n);
        w->extra_off += n;
        return (ssize_t)n;
    }
    if (w->paused) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    ssize_t n;
    do
        n = recv(w->fd, buf, len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (n <= 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    struct ws *w = user;
    ssize_t n;
    do
        n = send(w->fd, data, len, MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (n < 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return n;
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user)
{
    struct ws *w = user;
    if (w->closing || w->ending)
        return;
    if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
        w->ops->on_message(w, arg->opcode == WSLAY_TEXT_FRAME, arg->msg, arg->msg_length,
                           w->data);
}

static void ws_update(struct ws *w)
{
    if (w->ending)
        return;
    if (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx)) {
        ws_end(w);
        return;
    }
    uint32_t ev = (wslay_event_want_read(w->ctx) && !w->paused ? EPOLLIN : 0) |
                  (wslay_event_want_write(w->ctx) ? EPOLLOUT : 0);
    (void)loop_watch_mod(w->loop, w->watch, ev);
    if (w->high && ws_queued(w) < WS_QUEUE_LOW) {
        w->high = false;
        if (w->ops->on_drain)
            w->ops->on_drain(w, w->data);
    }
}

static void ws_io(struct loop *l, int fd, uint32_t events, void *data)
{
    struct ws *w = data;
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !w->paused) {
        w->in_recv = true;
        int r = wslay_event_recv(w->ctx);
        w->in_recv = false;
        if (r != 0) {
            ws_end(w);
            return;
        }
    }
    if (w->ending)
        return;
    if (wslay_event_send(w->ctx) != 0) {
        ws_end(w);
        return;
    }
    ws_update(w);
}

static void ws_close_timeout(struct loop *l, void *data)
{
    struct ws *w = data;
    w->close_t = NULL;
    ws_end(w);
}

struct ws *ws_start(struct loop *l, struct http_upgraded *u, int fd, const char *extra,
                    size_t extra_len, const struct ws_ops *ops, void *data)
{
    static const struct wslay_event_callbacks cbs = {
        .recv_callback = recv_cb, .send_callback = send_cb, .on_msg_recv_callback = msg_cb};
    struct ws *w = sbx_xcalloc(1, sizeof(*w));
    w->loop = l;
    w->u = u;
    w->fd = fd;
    w->ops = ops;
    w->data = data;
    if (extra_len) {
        w->extra = sbx_xmalloc(extra_len);
        memcpy(w->extra, extra, extra_len);
        w->extra_len = extra_len;
    }
    if (wslay_event_context_server_init(&w->ctx, &cbs, w) != 0)
        abort(); /* only ever fails for lack of memory */
    wslay_event_config_set_max_recv_msg_length(w->ctx, WS_MSG_MAX);
    if (loop_watch_add(l, fd, EPOLLIN, ws_io, w, &w->watch) < 0) {
        ws_end(w);
        return w;
    }
    if (extra_len)
        ws_io(l, fd, EPOLLIN, w);
    return w;
}

int ws_send(struct ws *w, bool text, const void *buf, size_t len)
{
    if (w->closing || w->ending)
        return -EPIPE;
    struct wslay_event_msg m = {.opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                .msg = buf,
                                .msg_length = len};
    if (wslay_event_queue_msg(w->ctx, &m) != 0)
        return -EPIPE;
    if (ws_queued(w) > WS_QUEUE_HIGH)
        w->high = true;
    if (w->in_recv)
        return 0;
    if (wslay_event_send(w->ctx) != 0) {
        ws_end(w);
        return -EPIPE;
    }
    ws_update(w);
    return 0;
}

size_t ws_queued(struct ws *w)
{
    return wslay_event_get_queued_msg_length(w->ctx);
}

void ws_pause_reading(struct ws *w, bool pause)
{
    w->paused = pause;
    ws_update(w);
}

void ws_close(struct ws *w, uint16_t code, const char *reason)
{
    if (w->closing || w->ending)
        return;
    w->closing = true;
    (void)wslay_event_queue_close(w->ctx, code, (const uint8_t *)reason, strlen(reason));
    w->paused = false; /* read the client's close frame */
    w->close_t = loop_timer_add(w->loop, WS_CLOSE_WAIT_MS, ws_close_timeout, w);
    if (w->in_recv)
        return;
    if (wslay_event_send(w->ctx) != 0) {
        ws_end(w);
        return;
    }
    ws_update(w);
}
