/* The tool loop's answer re-emitted as server-sent events in the caller's format: OpenAI
 * chat.completion.chunk frames ending in "data: [DONE]", or Anthropic's message_start,
 * content_block_*, message_delta and message_stop events. Tool progress rides along:
 * an "sbx_sandbox" member of an empty OpenAI chunk, or its own Anthropic event type
 * (sbx_tool_call, sbx_tool_result), which clients that do not know it skip. */
#include "stream.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../http/server.h"

static bool is_openai(const struct chat_sse *s)
{
    return s->f->api == LLM_API_OPENAI;
}

/* One frame; event NULL: a bare data line. Takes data. */
static void frame(struct chat_sse *s, const char *event, json_t *data)
{
    _cleanup_free_ char *d = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    _cleanup_free_ char *f = event ? sbx_xasprintf("event: %s\ndata: %s\n\n", event, d ?: "{}")
                                   : sbx_xasprintf("data: %s\n\n", d ?: "{}");
    (void)http_stream_write(s->req, f, strlen(f), NULL, 0); /* a gone client is on_abort's */
}

static json_t *chunk(struct chat_sse *s, json_t *delta, const char *finish)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:s?}]}", "id", s->id, "object",
                     "chat.completion.chunk", "created", (json_int_t)s->created, "model", s->model,
                     "choices", "index", 0, "delta", delta, "finish_reason", finish);
}

static void on_keepalive(struct loop *l, void *data)
{
    static const char ping[] = ": keep-alive\n\n";
    struct chat_sse *s = data;
    (void)http_stream_write(s->req, ping, sizeof(ping) - 1, NULL, 0);
    s->keepalive = loop_timer_add(l, s->keepalive_ms, on_keepalive, s);
}

void chat_sse_stop(struct chat_sse *s)
{
    if (s->keepalive)
        loop_timer_cancel(s->loop, s->keepalive);
    s->keepalive = NULL;
}

void chat_sse_begin(struct chat_sse *s, struct http_req *req, const struct chat_format *f,
                    const char *model, struct loop *l, long long keepalive_ms,
                    http_abort_fn on_abort, void *data)
{
    char hex[25];
    sbx_random_id("", 12, hex, sizeof(hex));
    memset(s, 0, sizeof(*s));
    s->req = req;
    s->f = f;
    s->created = time(NULL);
    snprintf(s->model, sizeof(s->model), "%s", model ?: "");
    snprintf(s->id, sizeof(s->id), "%s%s", f->api == LLM_API_OPENAI ? "chatcmpl-" : "msg_", hex);
    s->loop = l;
    s->keepalive_ms = keepalive_ms;
    s->keepalive = loop_timer_add(l, keepalive_ms, on_keepalive, s);
    http_stream_begin(req, "text/event-stream", on_abort, data);
    if (is_openai(s))
        frame(s, NULL, chunk(s, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL));
    else
        frame(s, "message_start",
              json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:{s:i,s:i}}}", "type",
                        "message_start", "message", "id", s->id, "type", "message", "role",
                        "assistant", "model", s->model, "content", "stop_reason", "stop_sequence",
                        "usage", "input_tokens", 0, "output_tokens", 0));
}

void chat_sse_text(struct chat_sse *s, const char *text)
{
    if (!text || !text[0])
        return;
    if (is_openai(s)) {
        frame(s, NULL, chunk(s, json_pack("{s:s}", "content", text), NULL));
        return;
    }
    int i = s->blocks++;
    frame(s, "content_block_start",
          json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_start", "index", i,
                    "content_block", "type", "text", "text", ""));
    frame(s, "content_block_delta",
          json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", i, "delta",
                    "type", "text_delta", "text", text));
    frame(s, "content_block_stop",
          json_pack("{s:s,s:i}", "type", "content_block_stop", "index", i));
}

void chat_sse_progress(struct chat_sse *s, const char *type, json_t *ev)
{
    json_object_set_new(ev, "type", json_string(type));
    if (is_openai(s)) {
        json_t *c = chunk(s, json_object(), NULL);
        json_object_set_new(c, "sbx_sandbox", ev);
        frame(s, NULL, c);
        return;
    }
    _cleanup_free_ char *name = sbx_xasprintf("sbx_%s", type);
    json_object_set_new(ev, "type", json_string(name));
    frame(s, name, ev);
}

void chat_sse_tool_use(struct chat_sse *s, size_t index, json_t *call)
{
    json_t *args = json_object_get(call, "args");
    const char *raw = json_string_value(json_object_get(call, "raw"));
    _cleanup_free_ char *text = raw ? NULL : json_dumps(args ?: json_object(), JSON_COMPACT);
    const char *id = json_string_value(json_object_get(call, "id"));
    const char *name = json_string_value(json_object_get(call, "name"));
    if (is_openai(s)) {
        frame(s, NULL,
              chunk(s,
                    json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", (int)index,
                              "id", id, "type", "function", "function", "name", name,
                              "arguments", raw ? raw : text ?: "{}"),
                    NULL));
        return;
    }
    int i = s->blocks++;
    frame(s, "content_block_start",
          json_pack("{s:s,s:i,s:{s:s,s:s,s:s,s:{}}}", "type", "content_block_start", "index", i,
                    "content_block", "type", "tool_use", "id", id, "name", name, "input"));
    frame(s, "content_block_delta",
          json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", i, "delta",
                    "type", "input_json_delta", "partial_json", raw ? raw : text ?: "{}"));
    frame(s, "content_block_stop",
          json_pack("{s:s,s:i}", "type", "content_block_stop", "index", i));
}

void chat_sse_end(struct chat_sse *s, const char *stop_reason, json_t *usage, json_t *sbx)
{
    if (is_openai(s)) {
        json_t *c = chunk(s, json_object(), stop_reason);
        json_object_set(c, "sbx_sandbox", sbx);
        if (usage)
            json_object_set(c, "usage", usage);
        frame(s, NULL, c);
        static const char done[] = "data: [DONE]\n\n";
        (void)http_stream_write(s->req, done, sizeof(done) - 1, NULL, 0);
    } else {
        json_t *d =
            json_pack("{s:s,s:{s:s,s:n},s:O?,s:O}", "type", "message_delta", "delta", "stop_reason",
                      stop_reason, "stop_sequence", "usage", usage, "sbx_sandbox", sbx);
        frame(s, "message_delta", d);
        frame(s, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    }
    chat_sse_stop(s);
    http_stream_end(s->req);
}

void chat_sse_error(struct chat_sse *s, const struct sbx_err *err)
{
    if (is_openai(s)) {
        frame(s, NULL, json_pack("{s:{s:s,s:s}}", "error", "code", err->code, "message", err->msg));
        static const char done[] = "data: [DONE]\n\n";
        (void)http_stream_write(s->req, done, sizeof(done) - 1, NULL, 0);
    } else {
        frame(s, "error",
              json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", err->code, "message",
                        err->msg));
    }
    chat_sse_stop(s);
    http_stream_end(s->req);
}
