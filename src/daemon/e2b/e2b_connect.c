#include "e2b_connect.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/loop.h"
#include "../../common/util.h"
#include "../http/server.h"

#define ENVELOPE_HEAD 5
#define FLAG_END_STREAM 0x02

int rpc_read(struct http_req *req, bool streaming, json_t **out, struct sbx_err *err)
{
    size_t n;
    const char *body = http_req_body(req, &n);
    return rpc_decode(body, n, streaming, out, err);
}

int rpc_decode(const char *body, size_t n, bool streaming, json_t **out, struct sbx_err *err)
{
    if (streaming) {
        if (n < ENVELOPE_HEAD)
            return sbx_err_set(err, EINVAL, "invalid_request", "a stream call takes one envelope");
        const unsigned char *h = (const unsigned char *)body;
        uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if (h[0] != 0 || len != n - ENVELOPE_HEAD)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "the envelope must be one uncompressed message");
        body += ENVELOPE_HEAD;
        n = len;
    }
    if (n == 0) {
        *out = json_object();
        return 0;
    }
    if (n > RPC_MESSAGE_MAX)
        return sbx_err_set(err, EFBIG, "invalid_request", "the message exceeds %u bytes",
                           RPC_MESSAGE_MAX);
    json_error_t jerr;
    json_t *j = json_loadb(body, n, 0, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return sbx_err_set(err, EINVAL, "invalid_request", "the message must be a JSON object");
    }
    *out = j;
    return 0;
}

const char *rpc_code(const struct sbx_err *err)
{
    static const struct {
        const char *suffix, *code;
    } map[] = {
        {"not_found", "not_found"},
        {"not_running", "not_found"},
        {"stdin_closed", "failed_precondition"},
        {"stdin_full", "resource_exhausted"},
        {"input_full", "resource_exhausted"},
        {"_limit", "resource_exhausted"},
        {"insufficient_balance", "resource_exhausted"},
        {"busy", "unavailable"},
        {"exists", "already_exists"},
        {"unimplemented", "unimplemented"},
        {"too_large", "resource_exhausted"},
        {"not_allowed", "permission_denied"},
        {"permission_denied", "permission_denied"},
    };
    const char *c = err->code;
    size_t n = strlen(c);
    if (!strncmp(c, "invalid_", 8))
        return "invalid_argument";
    if (!strncmp(c, "too_many_", 9))
        return "resource_exhausted";
    for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++) {
        size_t m = strlen(map[i].suffix);
        if (n >= m && !strcmp(c + n - m, map[i].suffix))
            return map[i].code;
    }
    return "internal";
}

/* connectrpc's codeToHttpStatus. */
static unsigned status_for(const char *code)
{
    static const struct {
        const char *code;
        unsigned status;
    } map[] = {
        {"canceled", 499},           {"invalid_argument", 400},    {"deadline_exceeded", 504},
        {"not_found", 404},          {"already_exists", 409},      {"permission_denied", 403},
        {"resource_exhausted", 429}, {"failed_precondition", 400}, {"aborted", 409},
        {"out_of_range", 400},       {"unimplemented", 501},       {"unavailable", 503},
        {"unauthenticated", 401},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++)
        if (!strcmp(map[i].code, code))
            return map[i].status;
    return 500;
}

void rpc_reply(struct http_req *req, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(msg);
    if (!s)
        abort();
    http_respond_text(req, 200, s);
    free(s);
}

void rpc_reply_error(struct http_req *req, const char *code, const char *message)
{
    http_respond_json(req, status_for(code),
                      json_pack("{s:s,s:s}", "code", code, "message", message));
}

void rpc_reply_sbx_error(struct http_req *req, const struct sbx_err *err)
{
    rpc_reply_error(req, rpc_code(err), err->msg[0] ? err->msg : err->code);
}

long long rpc_timeout_ms(struct http_req *req)
{
    const char *h = http_req_header(req, "Connect-Timeout-Ms");
    if (!h || !*h)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(h, &end, 10);
    return errno || *end || v < 0 ? 0 : v;
}

struct rpc_stream {
    struct http_req *req;
    struct loop *loop;
    json_t *keepalive;
    long long interval_ms;
    struct loop_timer *timer;
    rpc_gone_fn on_gone;
    void *data;
    bool ndjson;
    rpc_drain_fn on_drain;
    void *drain_data;
};

static void stream_free(struct rpc_stream *s)
{
    if (s->timer)
        loop_timer_cancel(s->loop, s->timer);
    json_decref(s->keepalive);
    free(s);
}

static void envelope(struct rpc_stream *s, unsigned flags, json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(msg);
    if (!text)
        abort();
    size_t n = strlen(text);
    if (s->ndjson) {
        (void)http_stream_write(s->req, text, n, "\n", 1);
        free(text);
        return;
    }
    unsigned char head[ENVELOPE_HEAD] = {(unsigned char)flags, (unsigned char)(n >> 24),
                                         (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                                         (unsigned char)n};
    /* A process's output waits for its client (rpc_stream_on_drain), which keeps this
     * queue small; on the other streams (a PTY's output, a watch's events) a client that
     * stopped reading for HTTP_SSE_QUEUE_MAX loses messages, as on SSE. */
    (void)http_stream_write(s->req, head, sizeof(head), text, n);
    free(text);
}

static void on_quiet(struct loop *l, void *data);

static void rearm(struct rpc_stream *s)
{
    if (s->timer)
        loop_timer_cancel(s->loop, s->timer);
    s->timer = loop_timer_add(s->loop, s->interval_ms, on_quiet, s);
}

static void on_quiet(struct loop *l, void *data)
{
    struct rpc_stream *s = data;
    s->timer = NULL;
    envelope(s, 0, json_incref(s->keepalive));
    rearm(s);
}

static void on_abort(struct http_req *req, void *data)
{
    struct rpc_stream *s = data;
    rpc_gone_fn fn = s->on_gone;
    void *d = s->data;
    stream_free(s);
    if (fn)
        fn(d);
}

struct rpc_stream *rpc_stream_begin(struct http_req *req, struct loop *l, bool ndjson,
                                    json_t *keepalive, rpc_gone_fn on_gone, void *data)
{
    struct rpc_stream *s = sbx_xcalloc(1, sizeof(*s));
    s->ndjson = ndjson;
    s->req = req;
    s->loop = l;
    s->keepalive = keepalive;
    s->on_gone = on_gone;
    s->data = data;
    long long secs = RPC_KEEPALIVE_DEFAULT_S;
    const char *h = http_req_header(req, "Keepalive-Ping-Interval");
    if (h && *h) {
        char *end;
        long long v = strtoll(h, &end, 10);
        if (!*end && v >= 1 && v <= RPC_KEEPALIVE_MAX_S)
            secs = v;
    }
    s->interval_ms = ndjson ? NDJSON_KEEPALIVE_MS : secs * 1000;
    http_stream_begin(req, ndjson ? "application/x-ndjson" : "application/connect+json", on_abort,
                      s);
    rearm(s);
    return s;
}

void rpc_stream_send(struct rpc_stream *s, json_t *msg)
{
    envelope(s, 0, msg);
    rearm(s);
}

size_t rpc_stream_queued(const struct rpc_stream *s)
{
    return http_stream_queued(s->req);
}

static void drained(struct http_req *r, void *data)
{
    struct rpc_stream *s = data;
    rpc_drain_fn fn = s->on_drain;
    s->on_drain = NULL;
    if (fn)
        fn(s->drain_data);
}

void rpc_stream_on_drain(struct rpc_stream *s, rpc_drain_fn fn, void *data)
{
    s->on_drain = fn;
    s->drain_data = data;
    http_stream_on_drain(s->req, drained, s);
}

void rpc_stream_end(struct rpc_stream *s, const char *code, const char *message)
{
    if (!s->ndjson)
        envelope(s, FLAG_END_STREAM,
                 code ? json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message)
                      : json_object());
    http_stream_end(s->req);
    stream_free(s);
}
