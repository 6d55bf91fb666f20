/* What server.c shares with the parts of the HTTP layer split from it (stream.c: streamed
 * answers and server-sent events; form.c: multipart forms). Not for the rest of the daemon:
 * handlers see struct http_req only through server.h. */
#ifndef SBX_HTTP_SERVER_INT_H
#define SBX_HTTP_SERVER_INT_H

#include <microhttpd.h>

#include "../auth/auth.h"
#include "server.h"

struct http_req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    char id[HTTP_REQUEST_ID_LEN + 1];
    const char *method;
    char *path;
    long long t0_ms; /* monotonic, when the request came (metrics) */
    char *body;
    size_t body_len;
    bool body_too_large;
    bool dispatched;
    /* A streamed body (http_req_stream_body): bytes go to the sink as they arrive. */
    const struct http_body_sink *sink;
    void *sink_data;
    bool sink_failed;
    struct sbx_err sink_err;
    /* An answer from a file (http_respond_fd), sent by MHD with sendfile. */
    int resp_fd;
    uint64_t resp_fd_size;
    char *resp_type;
    bool suspended;
    bool in_handler; /* inside our access handler: MHD must not be told yet */
    bool mhd_suspended;
    /* The answer, once decided; queued when MHD next calls us for this request. */
    unsigned status;
    char *resp;
    size_t resp_len;
    bool has_resp;
    http_abort_fn on_abort;
    void *abort_data;
    http_answer_fn on_answer;
    void *answer_data;
    char *extra_headers[2 * HTTP_EXTRA_HEADERS_MAX];
    unsigned n_extra;
    /* Server-sent events: encoded events waiting for the socket, and whether the
     * producer has finished. The reader suspends the connection when it runs dry. */
    bool sse;
    bool sse_ended;
    bool raw_stream; /* http_stream_begin: the chunks are the body itself */
    uint64_t raw_len; /* http_stream_set_length + 1: the body's known length; 0: unknown */
    struct sse_chunk *sse_head, *sse_tail;
    size_t sse_bytes;
    bool revoked; /* its key was deleted: the stream ends with an error, then the connection */
    struct http_req *next_stream, *prev_stream;
    /* An upgrade answer (http_respond_upgrade), until MHD hands over the socket. */
    struct http_upgraded *upgrade;
    char *params[HTTP_MAX_PARAMS];
    struct auth_identity ident;
    char *cors_origin; /* the request's Origin when SBX_CORS_ORIGINS allows it */
    struct http_req *next_suspended, *prev_suspended;
    /* The request target in MHD's buffer before it decodes it, and its strlen then. */
    const char *raw_uri;
    size_t raw_uri_len;
    char *target; /* a copy of it, as sent (MHD decodes the buffer in place) */
    /* A streamed answer's producer, told when the queue has room again. */
    http_drain_fn on_drain;
    void *drain_data;
};

struct http_server {
    struct loop *loop;
    struct MHD_Daemon *mhd;
    struct loop_watch *watch;
    struct loop_timer *timer;
    http_dispatch_fn dispatch;
    http_streams_fn streams;
    void *app;
    char *const *cors_origins;  /* borrowed; NULL: no cross-origin access */
    const struct http_server_hooks *hooks; /* borrowed; NULL: none */
    struct http_req *suspended; /* list, to fail them all on shutdown */
    struct http_req *live_streams; /* streamed answers under way (http_server_revoke_key) */
};

struct http_upgraded {
    struct http_server *srv;
    struct MHD_UpgradeResponseHandle *urh;
    http_upgraded_fn on_upgraded;
    http_abort_fn on_abort;
    void *data;
};

struct sse_chunk {
    struct sse_chunk *next;
    size_t len, off;
    char data[];
};

/* The list of streamed answers (server.streams). */
void http_stream_link(struct http_req *r);
void http_stream_unlink(struct http_req *r);

/* A suspended request goes on (its answer, or more of a stream, is ready), or waits. */
void http_req_resume(struct http_req *r);
void http_req_park(struct http_req *r);

/* MHD's reader of a streamed answer (stream.c). */
ssize_t http_stream_read(void *cls, uint64_t pos, char *buf, size_t max);

#endif
