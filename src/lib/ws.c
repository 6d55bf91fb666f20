/* WebSocket client for libsbx: libcurl opens the connection (CONNECT_ONLY, so TLS comes
 * for free), http_parser reads the handshake's answer and wslay does the framing. */
#include <curl/curl.h>
#include <errno.h>
#include <http_parser.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "../common/text.h"
#include "../common/util.h"
#include "client_priv.h"
#include "sbx.h"

/* The handshake answer's head (and an error answer's body) is read up to this size. */
#define WS_HEAD_MAX (16 * 1024)
/* A message bigger than this closes the connection (1009), as the server does. */
#define WS_MSG_MAX (1024 * 1024)
#define WS_HANDSHAKE_TIMEOUT_MS 30000

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

struct sbx_ws {
    CURL *curl;
    int fd;
    wslay_event_context_ptr ctx;
    /* Bytes read past the handshake's head: the first frames. */
    uint8_t *pre;
    size_t pre_off, pre_len;
    int closed; /* the peer closed the TCP connection */
    sbx_ws_msg_fn fn;
    void *ud;
};

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    struct sbx_ws *ws = ud;
    if (ws->pre_off < ws->pre_len) {
        size_t n = ws->pre_len - ws->pre_off;
        if (n > len)
            n = len;
        memcpy(buf, ws->pre + ws->pre_off, n);
        ws->pre_off += n;
        return (ssize_t)n;
    }
    size_t got = 0;
    CURLcode rc = curl_easy_recv(ws->curl, buf, len, &got);
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK || got == 0) {
        ws->closed = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)got;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *buf, size_t len, int flags,
                       void *ud)
{
    struct sbx_ws *ws = ud;
    size_t sent = 0;
    CURLcode rc = curl_easy_send(ws->curl, buf, len, &sent);
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK) {
        ws->closed = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)sent;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
    return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                      void *ud)
{
    struct sbx_ws *ws = ud;
    if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
        return;
    if (ws->fn)
        ws->fn(ws->ud, arg->opcode == WSLAY_TEXT_FRAME, arg->msg, arg->msg_length);
}

/* --- the handshake's answer --------------------------------------------------------- */

struct head {
    char field[64];
    size_t field_len;
    int last_was_value;
    int is_accept, is_rid;
    char accept[64];
    size_t accept_len;
    char rid[SBX_REQUEST_ID_MAX];
    size_t rid_len;
    int headers_done, complete;
    char body[SBX_ERROR_BODY_MAX];
    size_t body_len;
};

static void append(char *dst, size_t *len, size_t cap, const char *at, size_t n)
{
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(dst + *len, at, n);
    *len += n;
    dst[*len] = '\0';
}

static int on_field(http_parser *p, const char *at, size_t len)
{
    struct head *h = p->data;
    if (h->last_was_value)
        h->field_len = 0;
    h->last_was_value = 0;
    append(h->field, &h->field_len, sizeof(h->field), at, len);
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    struct head *h = p->data;
    if (!h->last_was_value) {
        h->is_accept = !strcasecmp(h->field, "Sec-WebSocket-Accept");
        h->is_rid = !strcasecmp(h->field, "x-request-id");
    }
    h->last_was_value = 1;
    if (h->is_accept)
        append(h->accept, &h->accept_len, sizeof(h->accept), at, len);
    if (h->is_rid)
        append(h->rid, &h->rid_len, sizeof(h->rid), at, len);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct head *h = p->data;
    h->headers_done = 1;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct head *h = p->data;
    append(h->body, &h->body_len, sizeof(h->body), at, len);
    return 0;
}

static int on_complete(http_parser *p)
{
    struct head *h = p->data;
    h->complete = 1;
    return 0;
}

static int wait_fd(int fd, short events, long long deadline)
{
    long long left = deadline - sbx_now_ms();
    if (left <= 0)
        return -ETIMEDOUT;
    struct pollfd pfd = {.fd = fd, .events = events};
    int r = poll(&pfd, 1, (int)left);
    if (r < 0 && errno != EINTR)
        return -errno;
    return 0;
}

static int send_all(CURL *curl, int fd, const char *buf, size_t len, long long deadline)
{
    while (len) {
        size_t n = 0;
        CURLcode rc = curl_easy_send(curl, buf, len, &n);
        if (rc == CURLE_AGAIN) {
            int r = wait_fd(fd, POLLOUT, deadline);
            if (r < 0)
                return r;
            continue;
        }
        if (rc != CURLE_OK)
            return -EIO;
        buf += n;
        len -= n;
    }
    return 0;
}

static void accept_for(const char *key, char out[64])
{
    _cleanup_free_ char *cat = sbx_xasprintf("%s%s", key, ws_guid);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(cat, strlen(cat), md, &n, EVP_sha1(), NULL);
    _cleanup_free_ char *b = sbx_base64_encode(md, n);
    snprintf(out, 64, "%s", b);
}

/* Send the upgrade request and read the answer's head. 101 with the right accept value:
 * 0, and the bytes after the head stay in ws->pre. Anything else fills err. */
static int handshake(struct sbx_client *c, struct sbx_ws *ws, const char *host, const char *path,
                     struct sbx_err *err)
{
    long long deadline = sbx_now_ms() + WS_HANDSHAKE_TIMEOUT_MS;
    unsigned char nonce[16];
    if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        return sbx_err_sys(err, errno, "getrandom");
    _cleanup_free_ char *key = sbx_base64_encode(nonce, sizeof(nonce));
    _cleanup_free_ char *req = sbx_xasprintf("GET %s HTTP/1.1\r\n"
                                             "Host: %s\r\n"
                                             "Upgrade: websocket\r\n"
                                             "Connection: Upgrade\r\n"
                                             "Sec-WebSocket-Key: %s\r\n"
                                             "Sec-WebSocket-Version: 13\r\n"
                                             "User-Agent: sbx-cli/1\r\n\r\n",
                                             path, host, key);
    if (send_all(ws->curl, ws->fd, req, strlen(req), deadline) < 0)
        return sbx_err_set(err, SBX_E_CONN, "connection_failed", "%s: sending the handshake",
                           c->url);

    struct head *h = sbx_xcalloc(1, sizeof(*h));
    http_parser parser;
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = h;
    http_parser_settings st;
    http_parser_settings_init(&st);
    st.on_header_field = on_field;
    st.on_header_value = on_value;
    st.on_headers_complete = on_headers_complete;
    st.on_body = on_body;
    st.on_message_complete = on_complete;
    char buf[4096];
    size_t total = 0;
    int r = 0;
    while (!h->complete && !(h->headers_done && parser.upgrade)) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(ws->curl, buf, sizeof(buf), &got);
        if (rc == CURLE_AGAIN) {
            r = wait_fd(ws->fd, POLLIN, deadline);
            if (r < 0)
                break;
            continue;
        }
        if (rc != CURLE_OK || got == 0) {
            if (h->headers_done)
                http_parser_execute(&parser, &st, NULL, 0); /* the end of a body to EOF */
            if (!h->headers_done) {
                r = -ECONNRESET;
                break;
            }
            h->complete = 1;
            break;
        }
        total += got;
        size_t used = http_parser_execute(&parser, &st, buf, got);
        if (parser.upgrade && h->headers_done) {
            ws->pre_len = got - used;
            ws->pre = sbx_xmalloc(ws->pre_len ? ws->pre_len : 1);
            memcpy(ws->pre, buf + used, ws->pre_len);
            break;
        }
        if (HTTP_PARSER_ERRNO(&parser) != HPE_OK || (!h->headers_done && total > WS_HEAD_MAX)) {
            free(h);
            return sbx_err_set(err, EBADMSG, "bad_answer",
                               "the server's answer to the WebSocket handshake is not HTTP");
        }
    }
    if (r < 0) {
        free(h);
        return sbx_err_set(err, SBX_E_CONN, "connection_failed",
                           "%s: no answer to the WebSocket handshake (%s)", c->url, strerror(-r));
    }
    c->status = parser.status_code;
    memcpy(c->request_id, h->rid, h->rid_len + 1);
    if (parser.status_code != 101) {
        json_t *j = json_loadb(h->body, h->body_len, 0, NULL);
        json_t *e = json_object_get(j, "error");
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        r = sbx_err_set(err, SBX_E_API, code ? code : "http_error", "%s",
                        msg ? msg : "the server refused the WebSocket");
        json_decref(j);
        free(h);
        return r;
    }
    char want[64];
    accept_for(key, want);
    r = strcmp(want, h->accept)
            ? sbx_err_set(err, EBADMSG, "bad_answer", "the server's Sec-WebSocket-Accept is wrong")
            : 0;
    free(h);
    return r;
}

int sbx_ws_connect(struct sbx_client *c, const char *path, struct sbx_ws **out, struct sbx_err *err)
{
    *out = NULL;
    struct sbx_ws *ws = sbx_xcalloc(1, sizeof(*ws));
    ws->fd = -1;
    ws->curl = curl_easy_init();
    _cleanup_free_ char *url = sbx_xasprintf("%s%s", c->url, path);
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *upath = NULL, *query = NULL;
    if (!ws->curl || !u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        sbx_ws_free(ws);
        return sbx_err_set(err, EINVAL, "invalid_url", "cannot use the URL %s", c->url);
    }
    curl_url_get(u, CURLUPART_PORT, &port, 0);
    curl_url_get(u, CURLUPART_PATH, &upath, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    _cleanup_free_ char *hostport = port ? sbx_xasprintf("%s:%s", host, port) : sbx_xstrdup(host);
    _cleanup_free_ char *target =
        sbx_xasprintf("%s%s%s", upath ? upath : "/", query ? "?" : "", query ? query : "");
    curl_free(host);
    curl_free(port);
    curl_free(upath);
    curl_free(query);
    curl_url_cleanup(u);

    curl_easy_setopt(ws->curl, CURLOPT_URL, url);
    curl_easy_setopt(ws->curl, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(ws->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(ws->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ws->curl, CURLOPT_CONNECTTIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(ws->curl);
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        curl_easy_getinfo(ws->curl, CURLINFO_ACTIVESOCKET, &sock);
    if (rc != CURLE_OK || sock == CURL_SOCKET_BAD) {
        sbx_ws_free(ws);
        return sbx_err_set(err, SBX_E_CONN, "connection_failed", "%s: %s", c->url,
                           curl_easy_strerror(rc));
    }
    ws->fd = (int)sock;
    int r = handshake(c, ws, hostport, target, err);
    if (r < 0) {
        sbx_ws_free(ws);
        return r;
    }
    struct wslay_event_callbacks cb = {
        .recv_callback = ws_recv,
        .send_callback = ws_send,
        .genmask_callback = ws_genmask,
        .on_msg_recv_callback = ws_on_msg,
    };
    if (wslay_event_context_client_init(&ws->ctx, &cb, ws) != 0) {
        sbx_ws_free(ws);
        return sbx_err_set(err, ENOMEM, "local_error", "wslay");
    }
    wslay_event_config_set_max_recv_msg_length(ws->ctx, WS_MSG_MAX);
    *out = ws;
    return 0;
}

void sbx_ws_free(struct sbx_ws *ws)
{
    if (!ws)
        return;
    if (ws->ctx)
        wslay_event_context_free(ws->ctx);
    if (ws->curl)
        curl_easy_cleanup(ws->curl);
    free(ws->pre);
    free(ws);
}

int sbx_ws_fd(const struct sbx_ws *ws)
{
    return ws->fd;
}

bool sbx_ws_want_write(const struct sbx_ws *ws)
{
    return wslay_event_want_write(ws->ctx);
}

int sbx_ws_send(struct sbx_ws *ws, bool text, const void *buf, size_t len, struct sbx_err *err)
{
    struct wslay_event_msg m = {
        .opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, .msg = buf, .msg_length = len};
    if (wslay_event_queue_msg(ws->ctx, &m) != 0)
        return sbx_err_set(err, EPIPE, "connection_closed", "the terminal connection is closed");
    return 0;
}

int sbx_ws_close(struct sbx_ws *ws, uint16_t status)
{
    return wslay_event_queue_close(ws->ctx, status, NULL, 0) == 0 ? 0 : -EPIPE;
}

int sbx_ws_pump(struct sbx_ws *ws, sbx_ws_msg_fn fn, void *ud, struct sbx_err *err)
{
    ws->fn = fn;
    ws->ud = ud;
    if (wslay_event_want_read(ws->ctx) && wslay_event_recv(ws->ctx) != 0 && !ws->closed)
        return sbx_err_set(err, EPROTO, "websocket_error", "a WebSocket protocol error");
    if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0 && !ws->closed)
        return sbx_err_set(err, EPROTO, "websocket_error", "sending on the WebSocket failed");
    if (ws->closed)
        return 0;
    return wslay_event_want_read(ws->ctx) || wslay_event_want_write(ws->ctx) ? 1 : 0;
}
