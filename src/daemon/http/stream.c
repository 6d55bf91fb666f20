/* Import circle with server.c (allowed inside a folder, docs/architecture.md#layering): one
 * libmicrohttpd request split in two files: server.c answers requests and hands a streamed
 * answer to stream.c, whose reader parks and resumes that request through server.c
 * (server_int.h). Both are the HTTP layer's; nothing outside sees the loop. */
/* Streamed answers: server-sent events and raw chunked bodies, queued by their producer
 * (HTTP_SSE_QUEUE_MAX at most) and read out by MHD as the socket takes them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "server_int.h"

bool http_req_wants_sse(const struct http_req *r)
{
    const char *accept = http_req_header(r, "Accept");
    return accept && strstr(accept, "text/event-stream");
}

static void sse_begin(struct http_req *r, unsigned status, http_abort_fn on_abort, void *data)
{
    if (r->has_resp)
        return;
    r->sse = true;
    http_stream_link(r);
    r->has_resp = true;
    r->status = status;
    r->on_abort = on_abort;
    r->abort_data = data;
    http_req_resume(r);
}

void http_sse_begin(struct http_req *r, http_abort_fn on_abort, void *data)
{
    sse_begin(r, 200, on_abort, data);
}

/* Queue the concatenation of a and b (b may be NULL) as one chunk of the stream. */
static int stream_queue(struct http_req *r, const void *a, size_t alen, const void *b, size_t blen)
{
    if (r->revoked)
        return -EPIPE;
    if (!r->sse || r->sse_ended || r->sse_bytes + alen + blen > HTTP_SSE_QUEUE_MAX)
        return r->sse && !r->sse_ended ? -ENOBUFS : -EPIPE;
    struct sse_chunk *c = sbx_xmalloc(sizeof(*c) + alen + blen);
    c->next = NULL;
    c->off = 0;
    c->len = alen + blen;
    memcpy(c->data, a, alen);
    if (blen)
        memcpy(c->data + alen, b, blen);
    if (r->sse_tail)
        r->sse_tail->next = c;
    else
        r->sse_head = c;
    r->sse_tail = c;
    r->sse_bytes += c->len;
    http_req_resume(r);
    return 0;
}

int http_sse_event(struct http_req *r, json_t *event)
{
    char *s = json_dumps(event, JSON_COMPACT);
    json_decref(event);
    if (!s)
        abort();
    _cleanup_free_ char *frame = sbx_xasprintf("data: %s\n\n", s);
    free(s);
    return stream_queue(r, frame, strlen(frame), NULL, 0);
}

void http_stream_begin(struct http_req *r, const char *content_type, http_abort_fn on_abort,
                       void *data)
{
    http_stream_begin_as(r, 200, content_type, on_abort, data);
}

void http_stream_begin_as(struct http_req *r, unsigned status, const char *content_type,
                          http_abort_fn on_abort, void *data)
{
    if (r->has_resp)
        return;
    free(r->resp_type);
    r->resp_type = sbx_xstrdup(content_type);
    r->raw_stream = true;
    sse_begin(r, status, on_abort, data);
}

void http_stream_set_length(struct http_req *r, uint64_t len)
{
    r->raw_len = len + 1;
}

size_t http_stream_queued(const struct http_req *r)
{
    return r->sse_bytes;
}

void http_stream_on_drain(struct http_req *r, http_drain_fn fn, void *data)
{
    r->on_drain = fn;
    r->drain_data = data;
}

int http_stream_write(struct http_req *r, const void *head, size_t head_len, const void *body,
                      size_t body_len)
{
    return stream_queue(r, head, head_len, body, body_len);
}

void http_stream_end(struct http_req *r)
{
    http_sse_end(r);
}

void http_sse_end(struct http_req *r)
{
    if (!r->sse || r->sse_ended)
        return;
    r->sse_ended = true;
    /* The producer is done and may free what its hooks point at (agentws's download ends
     * its stream, then frees itself, while bytes still drain): nothing calls it again. */
    r->on_abort = NULL;
    r->on_drain = NULL;
    http_req_resume(r);
}

ssize_t http_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct http_req *r = cls;
    size_t n = 0;
    while (r->sse_head && n < max) {
        struct sse_chunk *c = r->sse_head;
        size_t take = c->len - c->off < max - n ? c->len - c->off : max - n;
        memcpy(buf + n, c->data + c->off, take);
        c->off += take;
        n += take;
        if (c->off == c->len) {
            r->sse_head = c->next;
            if (!r->sse_head)
                r->sse_tail = NULL;
            r->sse_bytes -= c->len;
            free(c);
        }
    }
    if (r->on_drain && r->sse_bytes <= HTTP_STREAM_LOW) {
        http_drain_fn fn = r->on_drain;
        r->on_drain = NULL;
        fn(r, r->drain_data);
    }
    if (n)
        return (ssize_t)n;
    if (r->revoked) /* the connection closes: the producer is told as if the client left */
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (r->sse_ended)
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Nothing yet: park the connection until the producer sends or ends. */
    http_req_park(r);
    return 0;
}

void http_stream_link(struct http_req *r)
{
    if (r->prev_stream || r->srv->live_streams == r)
        return;
    r->next_stream = r->srv->live_streams;
    if (r->next_stream)
        r->next_stream->prev_stream = r;
    r->srv->live_streams = r;
}

void http_stream_unlink(struct http_req *r)
{
    if (!r->srv || (!r->prev_stream && r->srv->live_streams != r))
        return;
    if (r->prev_stream)
        r->prev_stream->next_stream = r->next_stream;
    else
        r->srv->live_streams = r->next_stream;
    if (r->next_stream)
        r->next_stream->prev_stream = r->prev_stream;
    r->next_stream = r->prev_stream = NULL;
}

void http_server_revoke_key(struct http_server *s, const char *key_id)
{
    for (struct http_req *r = s->live_streams; r; r = r->next_stream) {
        if (r->revoked || r->sse_ended || !r->ident.authenticated ||
            strcmp(r->ident.key_id, key_id))
            continue;
        if (!r->raw_stream)
            (void)http_sse_event(r, json_pack("{s:s,s:s,s:s}", "type", "error", "code",
                                              "auth_revoked", "message",
                                              "the key this stream was opened with was deleted"));
        r->revoked = true;
        http_req_resume(r);
    }
}
