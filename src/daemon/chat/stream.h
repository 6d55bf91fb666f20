/* The tool loop's answer as server-sent events in the caller's format (stream.c). */
#ifndef SBX_CHAT_STREAM_H
#define SBX_CHAT_STREAM_H

#include <jansson.h>

#include "../../common/loop.h"
#include "../http/server.h"
#include "chat.h"

struct chat_sse {
    struct http_req *req;
    const struct chat_format *f;
    char id[48];
    char model[128];
    long long created;
    int blocks; /* Anthropic content blocks sent */
    struct loop *loop;
    struct loop_timer *keepalive; /* a comment now and then, so proxies keep the stream */
    long long keepalive_ms;
};

/* Answer 200 text/event-stream and send the opening frame; then ": keep-alive" every
 * keepalive_ms until the end. */
void chat_sse_begin(struct chat_sse *s, struct http_req *req, const struct chat_format *f,
                    const char *model, struct loop *l, long long keepalive_ms,
                    http_abort_fn on_abort, void *data);
/* The client went away: stop the keep-alives. */
void chat_sse_stop(struct chat_sse *s);
/* Some of the answer's text. */
void chat_sse_text(struct chat_sse *s, const char *text);
/* A tool's progress, type "tool_call" or "tool_result" (takes ev). */
void chat_sse_progress(struct chat_sse *s, const char *type, json_t *ev);
/* A tool call for the client to run (one of chat_format.calls'), the index-th. */
void chat_sse_tool_use(struct chat_sse *s, size_t index, json_t *call);
/* The end, with the sandbox's part (artifacts) and the usage (may be NULL). */
void chat_sse_end(struct chat_sse *s, const char *stop_reason, json_t *usage, json_t *sbx);
/* The end, after a failure. */
void chat_sse_error(struct chat_sse *s, const struct sbx_err *err);

#endif
