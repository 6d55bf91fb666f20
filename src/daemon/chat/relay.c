/* A request without the sandbox tool: its body goes to the operator's endpoint as it
 * came (with the operator's key instead of the caller's), and the answer comes back as it
 * went: status and body, or, streamed, each piece as it arrives. */
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "chat.h"

struct relay {
    struct http_req *req;
    struct llm_call *up;
    bool streaming; /* the endpoint's Content-Type said it streams: so does the answer */
    char *buf;      /* a buffered answer (not streamed) */
    size_t len;
};

static void relay_free(struct relay *x)
{
    free(x->buf);
    free(x);
}

static void on_abort(struct http_req *req, void *data)
{
    struct relay *x = data;
    llm_cancel(x->up);
    relay_free(x);
}

static int on_data(long status, const char *ctype, const char *buf, size_t len, void *data)
{
    struct relay *x = data;
    if (!x->streaming && status == 200 && ctype && !strncmp(ctype, "text/event-stream", 17)) {
        x->streaming = true;
        http_stream_begin(x->req, ctype, on_abort, x);
    }
    if (x->streaming)
        return http_stream_write(x->req, buf, len, NULL, 0);
    if (x->len + len > LLM_RESPONSE_MAX)
        return -1;
    x->buf = sbx_xrealloc(x->buf, x->len + len + 1);
    memcpy(x->buf + x->len, buf, len);
    x->len += len;
    x->buf[x->len] = '\0';
    return 0;
}

static void on_done(long status, const char *ctype, const char *body, size_t len,
                    const struct sbx_err *err, void *data)
{
    struct relay *x = data;
    x->up = NULL;
    if (x->streaming) {
        http_stream_end(x->req); /* a cut stream: the client sees it end early */
        relay_free(x);
        return;
    }
    json_t *doc = x->buf ? json_loadb(x->buf, x->len, 0, NULL) : NULL;
    if (err)
        http_respond_error(x->req, err);
    else if (!doc)
        http_respond_errorf(x->req, "upstream_error",
                            "the model endpoint answered HTTP %ld without a JSON body", status);
    else
        http_respond_text(x->req, (unsigned)status, x->buf);
    json_decref(doc);
    relay_free(x);
}

static const struct llm_raw_ops relay_ops = {.on_data = on_data, .on_done = on_done};

void chat_relay(struct sbxd *d, struct http_req *req, const struct chat_format *f)
{
    struct sbx_err err = {0};
    size_t len = 0;
    const char *body = http_req_body(req, &len);
    char *headers[CHAT_FORWARD_HEADERS_MAX + 1];
    chat_forward_headers(req, f, headers);
    struct relay *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    int r = llm_post(d->llm, f->api, body, len, (const char *const *)headers, &relay_ops, x, &x->up,
                     &err);
    chat_forward_headers_free(headers);
    if (r < 0) {
        free(x);
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, on_abort, x);
}
