#include "mcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "../tools/tools.h"
#include "mcp_content.h"
#include "mcp_session.h"

/* JSON-RPC codes (MCP schema). */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_SERVER_ERROR -32000
#define RPC_SESSION_NOT_FOUND -32001
#define RPC_CANCELLED -32800

struct mcp_call {
    struct mcp *m;
    struct http_req *req;
    struct tool_call *call;
    char session[MCP_SESSION_ID_LEN + 1];
    json_t *id;       /* the request's, echoed as it came */
    json_t *progress; /* the progressToken, or NULL */
    bool sse, suspended, done;
    struct loop_timer *timer;
    long long t0;
    json_int_t ticks;
    struct mcp_call *next;
};

struct mcp {
    struct sbxd *d;
    struct mcp_sessions sessions;
    struct mcp_call *calls;
};

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

static bool version_supported(const char *v)
{
    for (size_t i = 0; v && i < SBX_ARRAY_SIZE(versions); i++)
        if (!strcmp(versions[i], v))
            return true;
    return false;
}

void mcp_new(struct sbxd *d, struct mcp **out)
{
    struct mcp *m = sbx_xcalloc(1, sizeof(*m));
    m->d = d;
    *out = m;
}

void mcp_free(struct mcp *m)
{
    if (!m)
        return;
    /* The HTTP server went first: every call's request was aborted, which freed it. */
    mcp_sessions_clear(&m->sessions);
    free(m);
}

/* ---- answers ---- */

/* A transport-level failure: an HTTP status and a JSON-RPC error without id. */
static void http_fail(struct http_req *req, unsigned status, int code, const char *msg)
{
    http_respond_json(
        req, status,
        json_pack("{s:s,s:{s:i,s:s}}", "jsonrpc", "2.0", "error", "code", code, "message", msg));
}

static json_t *rpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *rpc_error(json_t *id, int code, const char *msg)
{
    return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code,
                     "message", msg);
}

/* ---- tools/call ---- */

static void call_unlink(struct mcp_call *c)
{
    for (struct mcp_call **p = &c->m->calls; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
}

static void call_free(struct mcp_call *c)
{
    if (c->timer)
        loop_timer_cancel(c->m->d->loop, c->timer);
    call_unlink(c);
    json_decref(c->id);
    json_decref(c->progress);
    free(c);
}

/* Send the response (NULL: end the stream without one) and forget the call. */
static void call_answer(struct mcp_call *c, json_t *doc)
{
    if (c->sse) {
        if (doc)
            (void)http_sse_event(c->req, doc);
        http_sse_end(c->req);
    } else if (doc) {
        http_respond_json(c->req, 200, doc);
    }
    c->done = true;
    if (c->suspended)
        call_free(c);
}

static void on_tool_done(json_t *result, const struct sbx_err *err, json_t *details, void *data)
{
    struct mcp_call *c = data;
    c->call = NULL;
    json_t *r = err ? mcp_tool_error(err, details) : mcp_tool_result(result);
    call_answer(c, rpc_result(c->id, r));
}

static void on_call_abort(struct http_req *req, void *data)
{
    struct mcp_call *c = data;
    tools_call_abandon(c->call);
    call_free(c);
}

static void on_tick(struct loop *l, void *data)
{
    struct mcp_call *c = data;
    long long ms = sbx_now_ms() - c->t0;
    c->timer = NULL;
    if (c->sse) {
        json_t *p = json_pack("{s:O,s:I,s:o}", "progressToken", c->progress, "progress", ++c->ticks,
                              "message", json_sprintf("running for %lld s", ms / 1000));
        (void)http_sse_event(c->req, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method",
                                               "notifications/progress", "params", p));
    } else if (ms >= c->m->d->cfg.mcp_hold_ms && tools_call_exec_id(c->call)) {
        /* An error result, so clients do not check it against the tool's output schema. */
        struct sbx_err err = {0};
        sbx_err_set(&err, EINPROGRESS, "still_running",
                    "the command is still running after %lld s; poll it with sandbox_exec "
                    "{sandbox_id, exec_id}",
                    ms / 1000);
        json_t *details = json_pack("{s:s,s:s}", "exec_id", tools_call_exec_id(c->call),
                                    "sandbox_id", tools_call_sandbox_id(c->call));
        json_t *r = mcp_tool_error(&err, details);
        json_decref(details);
        tools_call_abandon(c->call); /* the command runs on; its record is finished */
        c->call = NULL;
        call_answer(c, rpc_result(c->id, r));
        return;
    }
    c->timer = loop_timer_add(c->m->d->loop, c->m->d->cfg.mcp_tick_ms, on_tick, c);
}

static json_t *tool_call(struct mcp *m, struct http_req *req, const char *session, json_t *id,
                         json_t *params)
{
    json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    if (!json_is_string(name))
        return rpc_error(id, RPC_INVALID_PARAMS, "params.name must be a tool name");
    if (args && !json_is_null(args) && !json_is_object(args))
        return rpc_error(id, RPC_INVALID_PARAMS, "params.arguments must be an object");
    if (!tools_find(json_string_value(name))) {
        json_t *e = json_sprintf("Unknown tool: %.64s", json_string_value(name));
        json_t *r = rpc_error(id, RPC_INVALID_PARAMS, json_string_value(e));
        json_decref(e);
        return r;
    }
    json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
    struct mcp_call *c = sbx_xcalloc(1, sizeof(*c));
    c->m = m;
    c->req = req;
    c->id = json_incref(id);
    c->progress = json_is_string(tok) || json_is_integer(tok) ? json_incref(tok) : NULL;
    c->t0 = sbx_now_ms();
    snprintf(c->session, sizeof(c->session), "%s", session);
    c->next = m->calls;
    m->calls = c;
    struct tool_request rq = {.who = http_req_identity(req),
                              .request_id = http_req_id(req),
                              .name = json_string_value(name),
                              .args = json_is_object(args) ? args : NULL};
    tools_call(m->d, &rq, on_tool_done, c, &c->call);
    if (c->done) { /* answered at once */
        call_free(c);
        return NULL;
    }
    c->suspended = true;
    http_req_suspend(req, on_call_abort, c);
    if (c->progress) {
        c->sse = true;
        http_sse_begin(req, on_call_abort, c);
    }
    c->timer = loop_timer_add(m->d->loop, m->d->cfg.mcp_tick_ms, on_tick, c);
    return NULL;
}

/* notifications/cancelled: stop the call (a command is killed) and send no response to it. */
static void cancel(struct mcp *m, const char *session, json_t *params)
{
    json_t *rid = json_object_get(params, "requestId");
    for (struct mcp_call *c = m->calls; rid && c; c = c->next) {
        if (strcmp(c->session, session) || !json_equal(c->id, rid))
            continue;
        tools_call_cancel(c->call);
        c->call = NULL;
        /* A JSON answer must still end the HTTP exchange; the client drops it. */
        call_answer(c, c->sse ? NULL : rpc_error(c->id, RPC_CANCELLED, "cancelled"));
        return;
    }
}

/* ---- the methods ---- */

static json_t *initialize(struct mcp *m, struct http_req *req, json_t *id, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = version_supported(want) ? want : MCP_PROTOCOL_LATEST;
    struct mcp_session *s;
    struct sbx_err err = {0};
    if (mcp_session_new(&m->sessions, http_req_identity(req)->key_id, version, sbx_now_ms(), &s,
                        &err) < 0)
        return rpc_error(id, RPC_SERVER_ERROR, err.msg);
    http_req_add_header(req, "Mcp-Session-Id", s->id);
    return rpc_result(
        id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", version,
                      "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "sbxd",
                      "title", "sbx sandboxes", "version", MCP_SERVER_VERSION, "instructions",
                      "Tools to run code in isolated sandboxes. Create one with sandbox_create "
                      "(or pick one from sandbox_list); every other tool takes its sandbox_id."));
}

int mcp_msg_parse(const char *body, size_t len, struct mcp_msg *out, int *code, const char **why)
{
    *out = (struct mcp_msg){0};
    json_error_t jerr;
    json_t *msg = json_loadb(body ? body : "", len, 0, &jerr);
    if (!msg) {
        *code = RPC_PARSE_ERROR;
        *why = "Parse error: the body is not JSON";
        return -EINVAL;
    }
    if (!json_is_object(msg) ||
        strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0")) {
        *code = RPC_INVALID_REQUEST;
        *why = json_is_array(msg) ? "Invalid Request: batches are not supported"
                                  : "Invalid Request: not a JSON-RPC 2.0 message";
        json_decref(msg);
        return -EINVAL;
    }
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    /* Without a method it is a response: we send no requests, so nothing to match or check. */
    if (method && id && !json_is_string(id) && !json_is_integer(id)) {
        *code = RPC_INVALID_REQUEST;
        *why = "Invalid Request: id must be a string or integer";
        json_decref(msg);
        return -EINVAL;
    }
    *out = (struct mcp_msg){.doc = msg,
                            .method = method,
                            .id = id,
                            .params = json_object_get(msg, "params"),
                            .is_request = method && id};
    return 0;
}

void mcp_post(struct mcp *m, struct http_req *req)
{
    const char *hv = http_req_header(req, "MCP-Protocol-Version");
    if (hv && !version_supported(hv)) {
        http_fail(req, 400, RPC_INVALID_REQUEST, "Unsupported MCP-Protocol-Version");
        return;
    }
    size_t len;
    const char *body = http_req_body(req, &len);
    struct mcp_msg mm;
    int code;
    const char *why;
    if (mcp_msg_parse(body, len, &mm, &code, &why) < 0) {
        http_fail(req, 400, code, why);
        return;
    }
    json_t *msg = mm.doc, *id = mm.id, *params = mm.params;
    const char *method = mm.method;
    bool is_request = mm.is_request;
    if (!method) {
        http_respond_text(req, 202, "");
        goto out;
    }
    if (!strcmp(method, "initialize")) {
        if (!is_request) {
            http_fail(req, 400, RPC_INVALID_REQUEST, "initialize is a request");
            goto out;
        }
        http_respond_json(req, 200, initialize(m, req, id, params));
        goto out;
    }
    const char *sid = http_req_header(req, "Mcp-Session-Id");
    if (!sid) {
        http_fail(req, 400, RPC_SERVER_ERROR, "Bad Request: Mcp-Session-Id header is required");
        goto out;
    }
    struct mcp_session *s =
        mcp_session_find(&m->sessions, sid, http_req_identity(req)->key_id, sbx_now_ms());
    if (!s) {
        http_fail(req, 404, RPC_SESSION_NOT_FOUND, "Session not found");
        goto out;
    }
    if (!is_request) {
        if (!strcmp(method, "notifications/cancelled"))
            cancel(m, s->id, params);
        http_respond_text(req, 202, "");
        goto out;
    }
    json_t *answer;
    if (!strcmp(method, "ping"))
        answer = rpc_result(id, json_object());
    else if (!strcmp(method, "tools/list"))
        answer = rpc_result(id, json_pack("{s:o}", "tools", tools_list_mcp()));
    else if (!strcmp(method, "tools/call"))
        answer = tool_call(m, req, s->id, id, params);
    else
        answer = rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found");
    if (answer)
        http_respond_json(req, 200, answer);
out:
    json_decref(msg);
}

void mcp_delete(struct mcp *m, struct http_req *req)
{
    const char *sid = http_req_header(req, "Mcp-Session-Id");
    if (!sid) {
        http_fail(req, 400, RPC_SERVER_ERROR, "Bad Request: Mcp-Session-Id header is required");
        return;
    }
    struct mcp_session *s =
        mcp_session_find(&m->sessions, sid, http_req_identity(req)->key_id, sbx_now_ms());
    if (!s) {
        http_fail(req, 404, RPC_SESSION_NOT_FOUND, "Session not found");
        return;
    }
    /* Calls in flight run on and answer; the session's id is gone. */
    mcp_session_remove(&m->sessions, s);
    http_respond_text(req, 204, "");
}
