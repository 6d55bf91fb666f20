/* The Connect protocol with the JSON codec, as envd speaks it to the e2b SDK
 * (connectrpc.com/docs/protocol): unary calls are a bare JSON body answered with 200
 * application/json or an error status with {"code": "<connect code>", "message"};
 * server streams take one envelope (flags, 4-byte big-endian length, JSON) and answer
 * 200 application/connect+json with envelopes, ending with an end-stream envelope
 * (flags 0x02) that carries any error. A stream also sends a keepalive message after
 * each quiet interval, so proxies and clients never see it idle. */
#ifndef SBX_E2B_CONNECT_H
#define SBX_E2B_CONNECT_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"

/* One request message (the SDK's are small: a command line, a path). */
#define RPC_MESSAGE_MAX (1024u * 1024u)
/* Keepalive-Ping-Interval bounds (seconds) and envd's default without the header. */
#define RPC_KEEPALIVE_DEFAULT_S 90
#define RPC_KEEPALIVE_MAX_S 600

struct http_req;
struct loop;
struct rpc_stream;

/* The request's message: the body of a unary call, the one envelope of a stream call. */
int rpc_read(struct http_req *req, bool streaming, json_t **out, struct sbx_err *err);
/* The same from a body of n bytes (pure, so it is fuzzed on its own). */
int rpc_decode(const char *body, size_t n, bool streaming, json_t **out, struct sbx_err *err);

/* The Connect code for one of our error codes (not_found, invalid_argument, ...). */
const char *rpc_code(const struct sbx_err *err);

/* Unary answers; msg is taken over. */
void rpc_reply(struct http_req *req, json_t *msg);
void rpc_reply_error(struct http_req *req, const char *code, const char *message);
void rpc_reply_sbx_error(struct http_req *req, const struct sbx_err *err);

/* A server stream: answers 200 now. keepalive (taken over) is sent after every quiet
 * Keepalive-Ping-Interval. on_gone runs if the client leaves first; the stream is then
 * freed and must not be used again. With ndjson the messages are lines of ASCII JSON
 * instead (the code interpreter's /execute), with a keepalive every NDJSON_KEEPALIVE_MS
 * of quiet and no end-stream message. */
#define NDJSON_KEEPALIVE_MS 5000
typedef void (*rpc_gone_fn)(void *data);
struct rpc_stream *rpc_stream_begin(struct http_req *req, struct loop *l, bool ndjson,
                                    json_t *keepalive, rpc_gone_fn on_gone, void *data);
/* One message (taken over). */
void rpc_stream_send(struct rpc_stream *s, json_t *msg);
/* Bytes waiting for the client, and fn once they are down to HTTP_STREAM_LOW (once per
 * call; never after rpc_stream_end or the client's leaving): a producer faster than its
 * client waits there, as h2o stops reading a backend while the client's buffer is full,
 * instead of its messages being dropped past HTTP_SSE_QUEUE_MAX. */
typedef void (*rpc_drain_fn)(void *data);
size_t rpc_stream_queued(const struct rpc_stream *s);
void rpc_stream_on_drain(struct rpc_stream *s, rpc_drain_fn fn, void *data);
/* The end-stream envelope ({} or {"error"}; none for ndjson) and the end of the answer;
 * s is freed. */
void rpc_stream_end(struct rpc_stream *s, const char *code, const char *message);

/* Connect-Timeout-Ms, or 0. */
long long rpc_timeout_ms(struct http_req *req);

#endif
