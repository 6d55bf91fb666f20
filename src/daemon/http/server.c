/* Import circle with stream.c (allowed inside a folder, docs/architecture.md#layering): one
 * libmicrohttpd request split in two files: server.c answers requests and hands a streamed
 * answer to stream.c, whose reader parks and resumes that request through server.c
 * (server_int.h). Both are the HTTP layer's; nothing outside sees the loop. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../auth/auth.h"
#include "cors.h"
#include "errors.h"
#include "server_int.h"

static void server_kick(struct http_server *s);

static void req_free(struct http_req *r)
{
    if (!r)
        return;
    http_stream_unlink(r);
    free(r->path);
    free(r->target);
    free(r->cors_origin);
    free(r->body);
    free(r->resp);
    free(r->resp_type);
    if (r->resp_fd >= 0)
        close(r->resp_fd);
    while (r->sse_head) {
        struct sse_chunk *c = r->sse_head;
        r->sse_head = c->next;
        free(c);
    }
    for (unsigned i = 0; i < HTTP_MAX_PARAMS; i++)
        free(r->params[i]);
    for (unsigned i = 0; i < 2 * r->n_extra; i++)
        free(r->extra_headers[i]);
    free(r);
}

static void unlink_suspended(struct http_req *r)
{
    if (r->prev_suspended)
        r->prev_suspended->next_suspended = r->next_suspended;
    else if (r->srv->suspended == r)
        r->srv->suspended = r->next_suspended;
    if (r->next_suspended)
        r->next_suspended->prev_suspended = r->prev_suspended;
    r->next_suspended = r->prev_suspended = NULL;
}

const char *http_req_method(const struct http_req *r)
{
    return r->method;
}
const char *http_req_path(const struct http_req *r)
{
    return r->path;
}
const char *http_req_id(const struct http_req *r)
{
    return r->id;
}
const char *http_req_target(const struct http_req *r)
{
    return r->target ? r->target : r->path;
}

struct each_header {
    http_header_fn fn;
    void *data;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    struct each_header *e = cls;
    e->fn(key, value ? value : "", e->data);
    return MHD_YES;
}

void http_req_each_header(const struct http_req *r, http_header_fn fn, void *data)
{
    struct each_header e = {fn, data};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, each_header, &e);
}

bool http_req_set_id(struct http_req *r, const char *id)
{
    size_t n = strlen(id);
    if (n < 5 || n > HTTP_REQUEST_ID_LEN || strncmp(id, "req_", 4))
        return false;
    for (size_t i = 4; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    memcpy(r->id, id, n + 1);
    return true;
}

const char *http_req_header(const struct http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
const char *http_req_query(const struct http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}
int http_req_query_int(const struct http_req *r, const char *name, long long min, long long max,
                       const char *code, long long *out, struct sbx_err *err)
{
    const char *v = http_req_query(r, name);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max)
        return sbx_err_set(err, EINVAL, code, "%s must be an integer from %lld to %lld", name, min,
                           max);
    *out = n;
    return 0;
}

const char *http_req_body(const struct http_req *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}
const char *http_req_param(const struct http_req *r, unsigned i)
{
    return i < HTTP_MAX_PARAMS ? r->params[i] : NULL;
}
void http_req_set_param(struct http_req *r, unsigned i, const char *value, size_t len)
{
    if (i >= HTTP_MAX_PARAMS)
        return;
    free(r->params[i]);
    r->params[i] = strndup(value, len);
    if (!r->params[i])
        abort();
}
bool http_req_content_length(const struct http_req *r, uint64_t *len)
{
    const char *cl = http_req_header(r, "Content-Length");
    if (!cl || !*cl)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(cl, &end, 10);
    if (errno || *end || *cl == '-')
        return false;
    *len = v;
    return true;
}

void http_req_stream_body(struct http_req *r, const struct http_body_sink *sink, void *data,
                          http_abort_fn on_abort)
{
    r->sink = sink;
    r->sink_data = data;
    r->on_abort = on_abort;
    r->abort_data = data;
}

static int discard_data(struct http_req *r, const char *buf, size_t len, void *data,
                        struct sbx_err *err)
{
    return 0;
}

static void discard_end(struct http_req *r, void *data)
{
}

static const struct http_body_sink discard_sink = {
    .on_data = discard_data, .on_end = discard_end, .on_failed = discard_end};

void http_req_discard_body(struct http_req *r)
{
    if (!r->sink)
        return;
    r->sink = &discard_sink;
    r->sink_data = NULL;
}

void http_server_set_cors(struct http_server *s, char *const *origins)
{
    s->cors_origins = origins;
}

void http_server_set_streaming(struct http_server *s, http_streams_fn fn)
{
    s->streams = fn;
}

struct auth_identity *http_req_identity(struct http_req *r)
{
    return &r->ident;
}

int http_req_json(struct http_req *r, json_t **out, struct sbx_err *err)
{
    json_error_t jerr;
    if (r->body_len == 0)
        return sbx_err_set(err, EINVAL, "invalid_json", "request body must be a JSON object");
    json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return sbx_err_set(err, EINVAL, "invalid_json", "malformed JSON at line %d column %d: %s",
                           jerr.line, jerr.column, jerr.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return sbx_err_set(err, EINVAL, "invalid_json", "request body must be a JSON object");
    }
    *out = j;
    return 0;
}

void http_req_resume(struct http_req *r)
{
    if (!r->suspended)
        return;
    r->suspended = false;
    unlink_suspended(r);
    if (r->mhd_suspended) {
        r->mhd_suspended = false;
        MHD_resume_connection(r->conn);
        server_kick(r->srv);
    }
}

/* Inside the access handler the suspension is only noted: an answer may still come
 * before it returns, and then the connection never needs to leave MHD's loop. */
void http_req_park(struct http_req *r)
{
    if (r->suspended)
        return; /* suspended again by the handler a parked request was handed to */
    r->suspended = true;
    r->next_suspended = r->srv->suspended;
    if (r->next_suspended)
        r->next_suspended->prev_suspended = r;
    r->srv->suspended = r;
    if (!r->in_handler) {
        r->mhd_suspended = true;
        MHD_suspend_connection(r->conn);
    }
}

void http_req_pause(struct http_req *r)
{
    if (!r->has_resp && !r->suspended)
        http_req_park(r);
}

void http_req_unpause(struct http_req *r)
{
    if (!r->has_resp)
        http_req_resume(r);
}

void http_req_on_answer(struct http_req *r, http_answer_fn fn, void *data)
{
    r->on_answer = fn;
    r->answer_data = data;
}

void *http_req_answer_data(const struct http_req *r, http_answer_fn fn)
{
    return r->on_answer == fn ? r->answer_data : NULL;
}

void http_req_add_header(struct http_req *r, const char *name, const char *value)
{
    if (r->n_extra == HTTP_EXTRA_HEADERS_MAX)
        abort(); /* a programming error: the routes set a known, small number */
    r->extra_headers[2 * r->n_extra] = sbx_xstrdup(name);
    r->extra_headers[2 * r->n_extra + 1] = sbx_xstrdup(value);
    r->n_extra++;
}

void http_respond_text(struct http_req *r, unsigned status, const char *json_text)
{
    if (r->has_resp)
        return;
    r->status = status;
    r->resp = sbx_xstrdup(json_text);
    r->resp_len = strlen(json_text);
    r->has_resp = true;
    if (r->on_answer) {
        http_answer_fn fn = r->on_answer;
        r->on_answer = NULL;
        fn(r, status, r->resp, r->answer_data);
    }
    http_req_resume(r);
}

void http_respond_bytes(struct http_req *r, unsigned status, const void *body, size_t len,
                        const char *content_type)
{
    if (r->has_resp)
        return;
    r->status = status;
    r->resp = sbx_xmalloc(len ? len : 1);
    memcpy(r->resp, body, len);
    r->resp_len = len;
    r->resp_type = sbx_xstrdup(content_type);
    r->has_resp = true;
    http_req_resume(r);
}

void http_respond_fd(struct http_req *r, unsigned status, int fd, uint64_t size,
                     const char *content_type)
{
    if (r->has_resp) {
        close(fd);
        return;
    }
    r->status = status;
    r->resp_fd = fd;
    r->resp_fd_size = size;
    r->resp_type = sbx_xstrdup(content_type);
    r->has_resp = true;
    http_req_resume(r);
}

void http_respond_json(struct http_req *r, unsigned status, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!s)
        abort();
    http_respond_text(r, status, s);
    free(s);
}

void http_respond_error(struct http_req *r, const struct sbx_err *err)
{
    const char *code = err->code[0] ? err->code : "internal";
    /* A message quoting a client's name at a fixed width ("%.64s") may cut a character in
     * two; jansson refuses such a string, and the answer must still go out. */
    char msg[sizeof(err->msg)];
    snprintf(msg, sizeof(msg), "%s", err->msg[0] ? err->msg : code);
    msg[sbx_utf8_scrub(msg, strlen(msg))] = '\0';
    json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    const struct http_server_hooks *h = r->srv ? r->srv->hooks : NULL;
    if (h && h->on_error)
        h->on_error(h->data, code, &r->ident, json_object_get(body, "error"));
    http_respond_json(r, http_status_for_code(code), body);
}

void http_respond_errorf(struct http_req *r, const char *code, const char *fmt, ...)
{
    struct sbx_err e = {.errnum = EINVAL};
    snprintf(e.code, sizeof(e.code), "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
    va_end(ap);
    http_respond_error(r, &e);
}

void http_req_suspend(struct http_req *r, http_abort_fn on_abort, void *data)
{
    if (r->has_resp)
        return;
    r->on_abort = on_abort;
    r->abort_data = data;
    http_req_park(r);
}

void http_respond_upgrade(struct http_req *r, http_upgraded_fn on_upgraded, http_abort_fn on_abort,
                          void *data)
{
    if (r->has_resp)
        return;
    struct http_upgraded *u = sbx_xcalloc(1, sizeof(*u));
    *u = (struct http_upgraded){
        .srv = r->srv, .on_upgraded = on_upgraded, .on_abort = on_abort, .data = data};
    r->upgrade = u;
    r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
    r->has_resp = true;
    r->on_abort = NULL;
    http_req_resume(r);
}

static void upgrade_cb(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    struct http_upgraded *u = cls;
    struct http_req *r = con_cls;
    if (r && r->upgrade == u)
        r->upgrade = NULL; /* the owner has it from here on */
    u->urh = urh;
    (void)sbx_set_nonblock(sock);
    u->on_upgraded(u, sock, extra, extra_len, u->data);
}

void http_upgraded_close(struct http_upgraded *u)
{
    if (!u)
        return;
    struct http_server *s = u->srv;
    (void)MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(u);
    server_kick(s);
}

/* The request id, the handler's extra headers and, for an allowed Origin, CORS. */
static void add_headers(const struct http_req *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "x-request-id", r->id);
    for (unsigned i = 0; i < r->n_extra; i++)
        MHD_add_response_header(resp, r->extra_headers[2 * i], r->extra_headers[2 * i + 1]);
    if (!r->cors_origin)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors_origin);
    for (const char *const *h = cors_response_headers; *h; h += 2)
        MHD_add_response_header(resp, h[0], h[1]);
    if (!strcmp(r->method, "OPTIONS"))
        for (const char *const *h = cors_preflight_headers; *h; h += 2)
            MHD_add_response_header(resp, h[0], h[1]);
}

/* A browser's preflight (OPTIONS with Access-Control-Request-Method) is answered here,
 * for every route: 204 with the CORS headers, or origin_not_allowed. */
static bool answer_preflight(struct http_req *r)
{
    if (strcmp(r->method, "OPTIONS") ||
        !MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Method"))
        return false;
    if (r->cors_origin)
        http_respond_text(r, 204, "");
    else
        http_respond_errorf(r, "origin_not_allowed",
                            "cross-origin requests from this Origin are not allowed "
                            "(SBX_CORS_ORIGINS)");
    return true;
}

static enum MHD_Result queue_answer(struct http_req *r)
{
    if (r->upgrade) {
        struct MHD_Response *uresp = MHD_create_response_for_upgrade(upgrade_cb, r->upgrade);
        if (!uresp)
            return MHD_NO;
        MHD_add_response_header(uresp, "x-request-id", r->id);
        for (unsigned i = 0; i < r->n_extra; i++)
            MHD_add_response_header(uresp, r->extra_headers[2 * i], r->extra_headers[2 * i + 1]);
        enum MHD_Result uret = MHD_queue_response(r->conn, r->status, uresp);
        MHD_destroy_response(uresp);
        return uret;
    }
    if (r->sse) {
        struct MHD_Response *sresp = MHD_create_response_from_callback(
            r->raw_len ? r->raw_len - 1 : MHD_SIZE_UNKNOWN,
            r->raw_stream ? HTTP_STREAM_BLOCK : 16 * 1024, http_stream_read, r,
            NULL);
        if (!sresp)
            return MHD_NO;
        MHD_add_response_header(sresp, "Content-Type",
                                r->raw_stream ? r->resp_type : "text/event-stream");
        MHD_add_response_header(sresp, "Cache-Control", "no-cache");
        add_headers(r, sresp);
        enum MHD_Result sret = MHD_queue_response(r->conn, r->status, sresp);
        MHD_destroy_response(sresp);
        return sret;
    }
    struct MHD_Response *resp;
    if (r->resp_fd >= 0) {
        resp = MHD_create_response_from_fd64(r->resp_fd_size, r->resp_fd);
        if (!resp)
            return MHD_NO;
        r->resp_fd = -1; /* MHD closes it with the response */
    } else {
        resp = MHD_create_response_from_buffer(r->resp_len, r->resp, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            return MHD_NO;
        r->resp = NULL; /* owned by MHD now */
    }
    MHD_add_response_header(resp, "Content-Type", r->resp_type ? r->resp_type : "application/json");
    add_headers(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void new_request_id(char out[HTTP_REQUEST_ID_LEN + 1])
{
    sbx_random_id("req_", (HTTP_REQUEST_ID_LEN - 4) / 2, out, HTTP_REQUEST_ID_LEN + 1);
}

/* A NUL in a value would cut it short for C strings (libmicrohttpd keeps its length), so a
 * proxy in front and sbxd would read different requests: NULs, other control bytes and
 * bytes that are not UTF-8 are refused before any route sees the request. */
struct check_ctx {
    const char *bad; /* the first offending header's name, or a query key */
    unsigned n;
    bool query;
};

static enum MHD_Result check_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    struct check_ctx *c = cls;
    c->n++;
    if (c->bad)
        return MHD_YES;
    if (!sbx_field_valid(key, key_size, false) ||
        (value && !sbx_field_valid(value, value_size, !c->query)))
        c->bad = key;
    return MHD_YES;
}

/* The request line and head checked once, before any route sees them. */
static bool refuse_malformed(struct http_req *r)
{
    if (!sbx_field_valid(r->path, strlen(r->path), false)) {
        http_respond_errorf(r, "invalid_path",
                            "the path holds a control byte, NUL or bytes that are not UTF-8");
        return true;
    }
    struct check_ctx c = {0};
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, check_value, &c);
    if (c.n > HTTP_HEADERS_MAX) {
        http_respond_errorf(r, "too_many_headers", "at most %d header lines", HTTP_HEADERS_MAX);
        return true;
    }
    if (c.bad) {
        http_respond_errorf(r, "invalid_request",
                            "header %.64s holds a control byte, NUL or bytes that are not UTF-8",
                            sbx_field_valid(c.bad, strlen(c.bad), false) ? c.bad : "(unprintable)");
        return true;
    }
    struct check_ctx q = {.query = true};
    MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, check_value, &q);
    if (q.bad) {
        http_respond_errorf(r, "invalid_request",
                            "query parameter %.64s holds a control byte, NUL or bytes that are "
                            "not UTF-8",
                            sbx_field_valid(q.bad, strlen(q.bad), false) ? q.bad : "(unprintable)");
        return true;
    }
    return false;
}

/* libmicrohttpd 0.9.75 reads the request head in place and hands out C strings, so a raw
 * NUL in the target or in a header value cuts it short ("…/trunc\0/../x" is "…/trunc")
 * and no length it reports is longer. What it leaves in its buffer still tells: the head
 * is one run of bytes from the method to the blank line (REQUEST_HEADER_SIZE), in which
 * MHD only turned the line ends, the separators and the colons into NULs. So between
 * where one value's string ends and where the next line starts there must be exactly a
 * line end, the same width as the request line's (CRLF or LF: a client does not mix
 * them), and nothing but NULs; anything else is a NUL that was sent, or a folded header
 * line (obs-fold, which RFC 9112 lets a server refuse). The target's length is taken
 * before MHD decodes it (the URI log callback) and must reach the space before the
 * version. Checked against MHD 0.9.75 (Debian 12), the version sbxd is built with; the
 * tests in tests/security/test_http_strict.py fail loudly should a later one lay its
 * buffer out differently. */
static void route_request(struct http_server *s, struct http_req *r)
{
    if (s->hooks && s->hooks->on_request)
        s->hooks->on_request(s->hooks->data, r);
    s->dispatch(s->app, r);
}

void http_server_set_hooks(struct http_server *s, const struct http_server_hooks *hooks)
{
    s->hooks = hooks;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_req *r = sbx_xcalloc(1, sizeof(*r));
    r->resp_fd = -1;
    r->raw_uri = uri;
    r->raw_uri_len = strlen(uri);
    r->target = sbx_xstrdup(uri);
    return r;
}

struct head_walk {
    const char *end;   /* of the last string checked: a header value, first the version */
    size_t eol;        /* the request line's line end: 1 (LF) or 2 (CRLF) */
    const char *limit; /* the head's end */
    bool bad;
};

static bool only_nuls(const char *p, const char *q)
{
    for (; p < q; p++)
        if (*p)
            return false;
    return true;
}

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    struct head_walk *w = cls;
    if (w->bad)
        return MHD_NO;
    /* The value lies on the key's line, behind its colon; the key follows the line end. */
    if (!value || key < w->end || (size_t)(key - w->end) != w->eol || !only_nuls(w->end, key) ||
        value < key + key_size || value + value_size > w->limit) {
        w->bad = true;
        return MHD_NO;
    }
    w->end = value + value_size;
    return MHD_YES;
}

enum head_nul { HEAD_CLEAN, HEAD_NUL_IN_TARGET, HEAD_NUL_IN_HEADERS };

static enum head_nul head_nul(struct http_req *r, const char *method, const char *version)
{
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t vlen = strlen(version);
    if (!hs || !vlen || version < method || (size_t)(version - method) + vlen > hs->header_size)
        return HEAD_CLEAN; /* not a head read from the buffer (HTTP/0.9): MHD refuses those */
    if (r->raw_uri && r->raw_uri + r->raw_uri_len != version - 1)
        return HEAD_NUL_IN_TARGET;
    struct head_walk w = {.end = version + vlen, .limit = method + hs->header_size};
    const char *p = w.end;
    while (p < w.limit && !*p && p - w.end < 2)
        p++;
    w.eol = (size_t)(p - w.end);
    if (w.eol == 0 || (p < w.limit && *p == '\0'))
        return HEAD_NUL_IN_HEADERS;
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, walk_header, &w);
    /* After the last line: its line end and the blank line's, then the head is over. */
    if (w.bad || (size_t)(w.limit - w.end) != 2 * w.eol || !only_nuls(w.end, w.limit))
        return HEAD_NUL_IN_HEADERS;
    return HEAD_CLEAN;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    struct http_req *r = *con_cls;

    if (!r || !r->conn) {
        if (!r) {
            r = sbx_xcalloc(1, sizeof(*r));
            r->resp_fd = -1;
        }
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->path = sbx_xstrdup(url);
        r->t0_ms = sbx_now_ms();
        new_request_id(r->id);
        *con_cls = r;
        enum head_nul nul = head_nul(r, method, version);
        if (nul != HEAD_CLEAN) {
            if (nul == HEAD_NUL_IN_TARGET)
                http_respond_errorf(r, "invalid_path", "the request target holds a NUL byte");
            else
                http_respond_errorf(r, "invalid_request",
                                    "a header line holds a NUL byte (or is folded)");
            return queue_answer(r);
        }
        if (refuse_malformed(r))
            return queue_answer(r);
        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        if (cors_origin_allowed(s->cors_origins, origin))
            r->cors_origin = sbx_xstrdup(origin);
        if (answer_preflight(r))
            return queue_answer(r);
        if (s->streams && s->streams(s->app, r)) {
            /* Dispatched before the body: the handler installs a sink or answers now
             * (then MHD closes the connection without reading the body). */
            r->dispatched = true;
            route_request(s, r);
            return r->has_resp ? queue_answer(r) : MHD_YES;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > HTTP_MAX_BODY) {
            /* Answer before reading the body; MHD closes the connection after it. */
            http_respond_errorf(r, "body_too_large", "request body exceeds %u bytes",
                                HTTP_MAX_BODY);
            return queue_answer(r);
        }
        return MHD_YES;
    }

    if (r->sink) {
        if (*upload_data_size) {
            if (!r->sink_failed &&
                r->sink->on_data(r, upload_data, *upload_data_size, r->sink_data, &r->sink_err) < 0)
                r->sink_failed = true; /* the rest is read and dropped, then answered */
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (!r->has_resp && !r->suspended) {
            const struct http_body_sink *sink = TAKE_PTR(r->sink);
            if (r->sink_failed) {
                r->on_abort = NULL;
                sink->on_failed(r, r->sink_data);
                http_respond_error(r, &r->sink_err);
            } else {
                sink->on_end(r, r->sink_data);
            }
        }
        return r->has_resp ? queue_answer(r) : MHD_YES;
    }

    if (*upload_data_size) {
        if (!r->body_too_large && r->body_len + *upload_data_size <= HTTP_MAX_BODY) {
            r->body = sbx_xrealloc(r->body, r->body_len + *upload_data_size + 1);
            memcpy(r->body + r->body_len, upload_data, *upload_data_size);
            r->body_len += *upload_data_size;
            r->body[r->body_len] = '\0';
        } else {
            r->body_too_large = true;
            free(TAKE_PTR(r->body));
            r->body_len = 0;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    if (!r->dispatched) {
        r->dispatched = true;
        r->in_handler = true;
        if (r->body_too_large)
            http_respond_errorf(r, "body_too_large", "request body exceeds %u bytes",
                                HTTP_MAX_BODY);
        else
            route_request(s, r);
        r->in_handler = false;
        if (r->suspended && !r->has_resp) {
            r->mhd_suspended = true;
            MHD_suspend_connection(conn);
        }
    }
    if (r->has_resp)
        return queue_answer(r);
    /* Suspended: MHD calls us again after http_respond_* resumes the connection. */
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_req *r = *con_cls;
    if (r && !r->conn) { /* the head was never complete: no request was handled */
        req_free(r);
        *con_cls = NULL;
        return;
    }
    if (!r)
        return;
    if (r->on_abort && (!r->has_resp || (r->sse && !r->sse_ended)))
        r->on_abort(r, r->abort_data);
    if (r->on_answer)
        r->on_answer(r, 0, NULL, r->answer_data);
    if (r->upgrade) {
        /* The 101 never made it out: its owner gets no socket. */
        if (r->upgrade->on_abort)
            r->upgrade->on_abort(NULL, r->upgrade->data);
        free(r->upgrade);
    }
    if (r->suspended)
        unlink_suspended(r);
    const struct http_server_hooks *h = r->srv ? r->srv->hooks : NULL;
    if (h && h->on_done)
        h->on_done(h->data, r->method, r->path, r->has_resp ? r->status : 0,
                   sbx_now_ms() - r->t0_ms);
    req_free(r);
    *con_cls = NULL;
}

static void run_mhd(struct http_server *s);

static void on_timer(struct loop *l, void *data)
{
    struct http_server *s = data;
    s->timer = NULL;
    run_mhd(s);
}

static void schedule(struct http_server *s, long long ms)
{
    if (s->timer)
        loop_timer_cancel(s->loop, s->timer);
    s->timer = loop_timer_add(s->loop, ms, on_timer, s);
}

/* A resumed connection is only processed inside MHD_run: run it on the next turn. */
static void server_kick(struct http_server *s)
{
    schedule(s, 0);
}

static void run_mhd(struct http_server *s)
{
    (void)MHD_run(s->mhd);
    MHD_UNSIGNED_LONG_LONG to;
    if (MHD_get_timeout(s->mhd, &to) == MHD_YES)
        schedule(s, (long long)to);
    else if (s->timer) {
        loop_timer_cancel(s->loop, s->timer);
        s->timer = NULL;
    }
}

static void on_mhd_fd(struct loop *l, int fd, uint32_t events, void *data)
{
    run_mhd(data);
}

/* MHD's own decoding, except that a decoded NUL, which would silently cut the C
 * string short ("a%00b" -> "a"), becomes DEL: every route that takes a path then
 * refuses it instead of acting on a prefix. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    size_t n = MHD_http_unescape(s);
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0')
            s[i] = 0x7f;
    return n;
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    /* Connection-level noise (resets, malformed requests) is answered by MHD itself. */
}

int http_parse_listen(const char *listen, struct sockaddr_in *sa, struct sbx_err *err)
{
    char host[64];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof(host))
        return sbx_err_set(err, EINVAL, "invalid_config", "listen address must be ADDR:PORT: %s",
                           listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || port == 0 || port > 65535)
        return sbx_err_set(err, EINVAL, "invalid_config", "bad port in %s", listen);
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return sbx_err_set(err, EINVAL, "invalid_config", "bad IPv4 address in %s", listen);
    return 0;
}

int http_server_new(struct loop *l, const char *listen, http_dispatch_fn dispatch, void *app,
                    const struct http_server_limits *lim, struct http_server **out,
                    struct sbx_err *err)
{
    struct sockaddr_in sa;
    int r = http_parse_listen(listen, &sa, err);
    if (r < 0)
        return r;
    struct http_server *s = sbx_xcalloc(1, sizeof(*s));
    s->loop = l;
    s->dispatch = dispatch;
    s->app = app;
    s->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape, s,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_CONNECTION_TIMEOUT,
        lim && lim->idle_s ? lim->idle_s : HTTP_IDLE_SECONDS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        lim && lim->per_address ? lim->per_address : HTTP_PER_ADDRESS_MAX,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
        /* Upload bodies reach sinks in pieces of up to this; the
         * default 32 KiB costs a write per 32 KiB. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
        /* sbxd ignores SIGPIPE (main.c); told so, MHD answers files with sendfile
         * instead of pread + send through a buffer. */
        MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int)1, MHD_OPTION_END);
    if (!s->mhd) {
        free(s);
        return sbx_err_set(err, EADDRINUSE, "invalid_config", "cannot listen on %s", listen);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info) {
        MHD_stop_daemon(s->mhd);
        free(s);
        return sbx_err_set(err, EINVAL, "internal", "libmicrohttpd has no epoll fd");
    }
    r = loop_watch_add(l, info->epoll_fd, EPOLLIN, on_mhd_fd, s, &s->watch);
    if (r < 0) {
        MHD_stop_daemon(s->mhd);
        free(s);
        return sbx_err_sys(err, -r, "watching the HTTP listener");
    }
    *out = s;
    return 0;
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    struct sbx_err e = {.errnum = ESHUTDOWN, .code = "shutting_down", .msg = "sbxd is stopping"};
    while (s->suspended) {
        struct http_req *r = s->suspended;
        if (r->on_abort)
            r->on_abort(r, r->abort_data);
        r->on_abort = NULL;
        if (r->raw_stream) {
            http_stream_end(r);
        } else if (r->sse) {
            (void)http_sse_event(r, json_pack("{s:s,s:s,s:s}", "type", "error", "code",
                                              "shutting_down", "message", e.msg));
            http_sse_end(r);
        } else {
            http_respond_error(r, &e);
        }
    }
    (void)MHD_run(s->mhd);
    loop_watch_del(s->loop, s->watch);
    if (s->timer)
        loop_timer_cancel(s->loop, s->timer);
    MHD_stop_daemon(s->mhd);
    free(s);
}

size_t http_url_decode(char *s)
{
    return MHD_http_unescape(s);
}
