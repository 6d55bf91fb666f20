/* Relaying a request to the node that runs its sandbox (docs/scale-out.md): the request
 * head and body go to that node over a plain HTTP/1.1 connection, with the caller's
 * identity as a node-to-node credential instead of their key, and its answer comes
 * back as it arrives: a JSON answer, a download, an SSE stream, or, for a WebSocket
 * upgrade, the raw connection in both directions. Both directions keep a bounded
 * buffer and stop reading the faster side while it is full. */
#ifndef SBX_CLUSTER_FORWARD_H
#define SBX_CLUSTER_FORWARD_H

#include <stdbool.h>

#include "../../common/err.h"
#include "../../common/loop.h"
#include "../http/server.h"

/* What the node's head must carry besides the client's own headers. */
struct forward_headers {
    const char *node, *identity, *auth, *request_id;
};

/* Bounds on one relayed request. */
#define FORWARD_CONNECT_MS 5000           /* connecting to the other node */
#define FORWARD_HEAD_MAX (64u * 1024u)    /* the other node's answer head */
#define FORWARD_BUF_HIGH (1024u * 1024u)  /* bytes queued one way before its reader stops */
#define FORWARD_READ_CHUNK (64u * 1024u)
#define FORWARD_HEADERS_MAX 32            /* answer headers kept (those relayed: fewer) */

/* Relay req to the node at url ("http://ADDR:PORT"). With stream_body, the body is still
 * to come and is relayed as it arrives (a route that streams its body); otherwise it is
 * the buffered one. From here on the request is answered by the relay: an unreachable
 * node is 503 node_unreachable. <0 (err filled) only when url is not one to dial. */
int forward_request(struct loop *l, struct http_req *req, const char *url,
                    const struct forward_headers *h, bool stream_body, struct sbx_err *err);

/* Does url name a node we can dial ("http://" IPv4 or name ":" port)? */
bool forward_url_valid(const char *url);

#endif
