/* The HTTP front: libmicrohttpd driven by our epoll loop (no MHD threads), with
 * requests that can be answered later (suspend/resume) so one slow exec never
 * holds the loop. Handlers get a struct http_req and either answer at once or
 * call http_req_suspend and answer from a later callback. */
#ifndef SBX_HTTP_SERVER_H
#define SBX_HTTP_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../../common/loop.h"

#define HTTP_MAX_BODY (1024u * 1024u)
#define HTTP_MAX_PARAMS 4
#define HTTP_REQUEST_ID_LEN 24
#define HTTP_SSE_QUEUE_MAX (8u * 1024u * 1024u)
#define HTTP_EXTRA_HEADERS_MAX 8
#define HTTP_CONN_MEMORY (256u * 1024u)

struct http_server;
struct http_req;
struct auth_identity;

typedef void (*http_dispatch_fn)(void *app, struct http_req *req);
/* Called when the connection goes away while the request is suspended, so its
 * owner stops referring to it. */
typedef void (*http_abort_fn)(struct http_req *req, void *data);

/* Bounds on what clients hold: a connection with nothing to do for idle_s seconds (a slow
 * request head, an idle keep-alive) is closed, and one address holds at most per_address
 * connections. Requests that wait on purpose (suspended: a long exec, SSE, a WebSocket)
 * are not idle. */
#define HTTP_IDLE_SECONDS 30
#define HTTP_PER_ADDRESS_MAX 256
#define HTTP_HEADERS_MAX 100
struct http_server_limits {
    unsigned idle_s;      /* 0: HTTP_IDLE_SECONDS */
    unsigned per_address; /* 0: HTTP_PER_ADDRESS_MAX */
};
/* The process must ignore SIGPIPE (sendfile cannot be told not to raise it). */
int http_server_new(struct loop *l, const char *listen, http_dispatch_fn dispatch, void *app,
                    const struct http_server_limits *lim, struct http_server **out, struct sbx_err *err);
/* Resume every suspended request with a 503 and stop listening. */
void http_server_free(struct http_server *s);
/* "ADDR:PORT" (IPv4) as a socket address; also for sbxd's other listeners. */
struct sockaddr_in;
int http_parse_listen(const char *listen, struct sockaddr_in *sa, struct sbx_err *err);

/* Routes whose body is streamed to a sink instead of buffered: asked once per
 * request, after its headers. Those requests are dispatched at that point. */
typedef bool (*http_streams_fn)(void *app, const struct http_req *req);
void http_server_set_streaming(struct http_server *s, http_streams_fn fn);
/* Origins (NULL-terminated, borrowed) whose browser apps may call the API (http/cors.h). */
void http_server_set_cors(struct http_server *s, char *const *origins);

/* What the layers above add to every request, installed once at start (main.c; the HTTP
 * layer knows no feature). Each member may be NULL. */
struct auth_identity;
struct http_server_hooks {
    /* A request is about to be routed: headers every answer carries. */
    void (*on_request)(void *data, struct http_req *req);
    /* An error answer is being built: count it, add fields to its "error" object. */
    void (*on_error)(void *data, const char *code, const struct auth_identity *who,
                     json_t *error);
    /* A request ended (status 0: no answer went out). */
    void (*on_done)(void *data, const char *method, const char *path, unsigned status,
                    long long ms);
    void *data;
};
/* hooks is borrowed and outlives s; NULL removes them. */
void http_server_set_hooks(struct http_server *s, const struct http_server_hooks *hooks);
/* Key key_id was deleted: each streamed answer (SSE, chunked) it opened ends. An SSE
 * stream gets a last event {type: "error", code: "auth_revoked"}; then the connection
 * closes and the stream's producer is told as when a client leaves (its abort callback). */
void http_server_revoke_key(struct http_server *s, const char *key_id);

/* Request accessors. */
const char *http_req_method(const struct http_req *r);
const char *http_req_path(const struct http_req *r);
const char *http_req_header(const struct http_req *r, const char *name);
/* The request target as the client sent it (path and query, not decoded). */
const char *http_req_target(const struct http_req *r);
typedef void (*http_header_fn)(const char *name, const char *value, void *data);
void http_req_each_header(const struct http_req *r, http_header_fn fn, void *data);
/* Take id ("req_" and lower-case hex, at most HTTP_REQUEST_ID_LEN) as the request's id:
 * a request forwarded by another node keeps the id its client was given. */
bool http_req_set_id(struct http_req *r, const char *id);
/* Stop reading a streamed body until http_req_unpause (the sink's reader is behind). */
void http_req_pause(struct http_req *r);
void http_req_unpause(struct http_req *r);
const char *http_req_query(const struct http_req *r, const char *name);
/* Query parameter name as a decimal integer in min..max. Absent: 0 and *out untouched;
 * anything else: err filled with code. */
int http_req_query_int(const struct http_req *r, const char *name, long long min, long long max,
                       const char *code, long long *out, struct sbx_err *err);
const char *http_req_id(const struct http_req *r);
const char *http_req_body(const struct http_req *r, size_t *len);
/* Route parameters captured by the router ({id} ...). */
const char *http_req_param(const struct http_req *r, unsigned i);
void http_req_set_param(struct http_req *r, unsigned i, const char *value, size_t len);
/* The authenticated caller, set by the router. */
struct auth_identity *http_req_identity(struct http_req *r);

/* The Content-Length header, when present and a valid number. */
bool http_req_content_length(const struct http_req *r, uint64_t *len);

/* For a streamed request: the body's bytes go to on_data as they arrive. When on_data
 * fails (err filled) the rest of the body is read and dropped, on_failed runs, and
 * the request is answered with err. Otherwise on_end runs once the body is complete
 * and answers (or suspends). on_abort runs if the client goes away first. */
struct http_body_sink {
    int (*on_data)(struct http_req *r, const char *buf, size_t len, void *data,
                   struct sbx_err *err);
    void (*on_end)(struct http_req *r, void *data);
    void (*on_failed)(struct http_req *r, void *data);
};
void http_req_stream_body(struct http_req *r, const struct http_body_sink *sink, void *data,
                          http_abort_fn on_abort);
/* The sink is done with the body (the request was answered early): the rest is read and
 * dropped, and the sink is never called again. */
void http_req_discard_body(struct http_req *r);

/* Parse the body as a JSON object. Fills err (invalid_json / invalid_request) on failure. */
int http_req_json(struct http_req *r, json_t **out, struct sbx_err *err);

/* Called once with the answer's status and body when the request is answered with
 * http_respond_*, or with status 0 and NULL when it ends unanswered (client gone, or
 * a stream). Set NULL to detach. */
typedef void (*http_answer_fn)(struct http_req *r, unsigned status, const char *body,
                               void *data);
void http_req_on_answer(struct http_req *r, http_answer_fn fn, void *data);
/* The data given with fn, when fn is the request's answer hook; else NULL. */
void *http_req_answer_data(const struct http_req *r, http_answer_fn fn);
/* An extra response header (at most HTTP_EXTRA_HEADERS_MAX per request). */
void http_req_add_header(struct http_req *r, const char *name, const char *value);

/* Answer with a JSON document already serialised. */
void http_respond_text(struct http_req *r, unsigned status, const char *json_text);
/* Answer with a copy of len bytes of body, of that Content-Type (the console's pages). */
void http_respond_bytes(struct http_req *r, unsigned status, const void *body, size_t len,
                        const char *content_type);
/* Answer with the first size bytes of fd (taking ownership of fd). */
void http_respond_fd(struct http_req *r, unsigned status, int fd, uint64_t size,
                     const char *content_type);
/* Answer: takes ownership of body. Allowed once per request. */
void http_respond_json(struct http_req *r, unsigned status, json_t *body);
/* Answer with {"error":{code,message}}; the status comes from the code (http/errors.c). */
void http_respond_error(struct http_req *r, const struct sbx_err *err);
void http_respond_errorf(struct http_req *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Keep the request open; answer later with http_respond_*. on_abort runs if the client
 * goes away first (and then the request must not be touched again). */
void http_req_suspend(struct http_req *r, http_abort_fn on_abort, void *data);

/* Server-sent events. http_sse_begin answers 200 text/event-stream (also from a
 * suspended request); each http_sse_event (taking ownership) becomes one "data: <json>"
 * frame, sent as soon as the socket takes it; http_sse_end finishes the response.
 * on_abort runs if the client goes away before the end. http_sse_event returns
 * -ENOBUFS when more than HTTP_SSE_QUEUE_MAX bytes wait for a slow client, -EPIPE
 * after the end. */
/* HTTP Upgrade (WebSocket): answer 101 Switching Protocols with the extra headers
 * already added (http_req_add_header: Upgrade, Sec-WebSocket-Accept...). Once MHD has
 * sent it, on_upgraded gets the raw, non-blocking socket and the bytes MHD had already
 * read past the request; the socket is then the owner's until http_upgraded_close. If
 * the connection fails before that, on_abort runs instead (with NULL request). */
struct http_upgraded;
typedef void (*http_upgraded_fn)(struct http_upgraded *u, int fd, const char *extra,
                                 size_t extra_len, void *data);
void http_respond_upgrade(struct http_req *r, http_upgraded_fn on_upgraded, http_abort_fn on_abort,
                          void *data);
/* MHD closes the socket; u is freed. NULL is fine (a socket of the caller's own). */
void http_upgraded_close(struct http_upgraded *u);

/* A streamed answer of raw bytes (Connect streams, NDJSON) on the same queue as SSE:
 * 200 with content_type; each write (head then body, body may be NULL) goes out as one
 * piece, -ENOBUFS past HTTP_SSE_QUEUE_MAX waiting, -EPIPE after the end. */
void http_stream_begin(struct http_req *r, const char *content_type, http_abort_fn on_abort,
                       void *data);
int http_stream_write(struct http_req *r, const void *head, size_t head_len, const void *body,
                      size_t body_len);
void http_stream_end(struct http_req *r);
/* The same with another status than 200 (a relayed answer). */
void http_stream_begin_as(struct http_req *r, unsigned status, const char *content_type,
                          http_abort_fn on_abort, void *data);
/* Before http_stream_begin: the body's length is known (Content-Length instead of chunks; a
 * stream that ends short of it closes the connection, so a cut download is not taken for a
 * whole one). */
void http_stream_set_length(struct http_req *r, uint64_t len);
/* Bytes waiting for the client, and a call once they are down to HTTP_STREAM_LOW (once
 * per registration): a producer faster than its client waits instead of hitting
 * -ENOBUFS. */
#define HTTP_STREAM_LOW (256u * 1024u)
/* What MHD asks a raw stream for at once: relayed downloads move in pieces this big. */
#define HTTP_STREAM_BLOCK (256u * 1024u)
typedef void (*http_drain_fn)(struct http_req *r, void *data);
size_t http_stream_queued(const struct http_req *r);
void http_stream_on_drain(struct http_req *r, http_drain_fn fn, void *data);

/* multipart/form-data (and urlencoded) bodies, parsed by libmicrohttpd's post processor
 * as they are fed: fn gets each value's bytes in order with their offset in the value
 * (0 starts a new one). NULL when the request's Content-Type is not a form. */
#define HTTP_FORM_BUFFER (64u * 1024u)
struct http_form;
typedef int (*http_form_fn)(void *data, const char *field, const char *filename, uint64_t off,
                            const char *buf, size_t len);
struct http_form *http_form_new(struct http_req *r, http_form_fn fn, void *data);
/* <0: fn's error or -EINVAL for a malformed body. */
int http_form_feed(struct http_form *f, const char *buf, size_t len);
/* The end of the body: flushes the last value. */
int http_form_finish(struct http_form *f);
void http_form_free(struct http_form *f);

/* Percent-decode s in place (for values encoded more than once); its new length. */
size_t http_url_decode(char *s);

bool http_req_wants_sse(const struct http_req *r);
void http_sse_begin(struct http_req *r, http_abort_fn on_abort, void *data);
int http_sse_event(struct http_req *r, json_t *event);
void http_sse_end(struct http_req *r);

#endif
