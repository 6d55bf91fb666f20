/* WebSocket connections (RFC 6455) on sockets handed over by an HTTP upgrade: the
 * handshake answer and, after it, wslay's framing driven by our event loop. wslay
 * does the protocol: fragmented messages are reassembled, pings answered, client
 * frames without a mask and other protocol errors end the connection with the
 * right close code; we add a bound on message size and on what waits to be sent. */
#ifndef SBX_HTTP_WS_H
#define SBX_HTTP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../../common/loop.h"

/* Past this many queued bytes a producer should stop; on_drain says when to go on. */
#define WS_QUEUE_HIGH (1024u * 1024u)
#define WS_QUEUE_LOW (256u * 1024u)
/* A message from a client larger than this closes the connection with 1009. */
#define WS_MSG_MAX (1024u * 1024u)

#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_INTERNAL 1011

struct ws;
struct http_req;
struct http_upgraded;

struct ws_ops {
    /* A complete message. text is true for a text message. */
    void (*on_message)(struct ws *w, bool text, const uint8_t *buf, size_t len, void *data);
    /* The send queue fell below WS_QUEUE_LOW after passing WS_QUEUE_HIGH. Optional. */
    void (*on_drain)(struct ws *w, void *data);
    /* Once, when the connection is over (either side closed it, or it failed); w is
     * freed right after. Never called from inside a ws_* call. */
    void (*on_closed)(struct ws *w, void *data);
};

/* Check a request's WebSocket handshake headers. err: websocket_required. */
int ws_handshake_check(struct http_req *r, struct sbx_err *err);
/* Add the 101 answer's headers (Upgrade, Sec-WebSocket-Accept) to a checked request,
 * just before http_respond_upgrade. */
void ws_handshake_accept(struct http_req *r);

/* Take over an upgraded socket; extra: bytes already read from it. */
struct ws *ws_start(struct loop *l, struct http_upgraded *u, int fd, const char *extra,
                    size_t extra_len, const struct ws_ops *ops, void *data);
/* Queue a message; -EPIPE once closing. */
int ws_send(struct ws *w, bool text, const void *buf, size_t len);
size_t ws_queued(struct ws *w);
/* Stop or resume reading from the client (back-pressure on its input). */
void ws_pause_reading(struct ws *w, bool pause);
/* Send a close frame with code; the connection ends once the client answers (or
 * fails to). */
void ws_close(struct ws *w, uint16_t code, const char *reason);
/* Drop the connection now, without on_closed (sbxd is stopping). */
void ws_abort(struct ws *w);

#endif
