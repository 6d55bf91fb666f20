/* The agent tools over REST (docs/tools.md):
 *   GET  /v1/tools                          every tool's JSON Schemas, MCP and OpenAI shapes
 *   POST /v1/tools/{name}                   a tool that acts on no sandbox (create, list)
 *   POST /v1/sandboxes/{id}/tools/{name}    a tool on that sandbox; the body is its arguments
 *   POST /v1/sandboxes/{id}/edit            edit_file
 *   POST /v1/sandboxes/{id}/bsl/check       bsl_check (docs/bsl.md)
 * A tool's answer is {object: "tool_result", tool, sandbox_id, result}; its failure is the
 * API's error object with the status of its code (edit_file's refusals add candidates). */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/errors.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "tools.h"

struct tool_req {
    struct http_req *req;
    struct tool_call *call;
    char tool[64];
    bool on_sandbox, suspended, done;
};

static void on_done(json_t *result, const struct sbx_err *err, json_t *details, void *data)
{
    struct tool_req *x = data;
    x->call = NULL;
    if (err) {
        json_t *e = json_pack("{s:s,s:s}", "code", err->code, "message", err->msg);
        if (details)
            json_object_update(e, details);
        http_respond_json(x->req, http_status_for_code(err->code), json_pack("{s:o}", "error", e));
    } else {
        json_t *o =
            json_pack("{s:s,s:s,s:O}", "object", "tool_result", "tool", x->tool, "result", result);
        if (x->on_sandbox)
            json_object_set_new(o, "sandbox_id", json_string(http_req_param(x->req, 0)));
        http_respond_json(x->req, 200, o);
    }
    x->done = true;
    if (x->suspended)
        free(x);
}

static void on_abort(struct http_req *req, void *data)
{
    struct tool_req *x = data;
    tools_call_abandon(x->call);
    free(x);
}

static void call(struct sbxd *d, struct http_req *req, const char *sandbox_id, const char *name)
{
    struct sbx_err err = {0};
    json_t *args = NULL;
    size_t len = 0;
    (void)http_req_body(req, &len);
    if (len == 0) /* a tool without arguments may be called without a body */
        args = json_object();
    else if (http_req_json(req, &args, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const struct tool_def *def = tools_find(name);
    if (def && def->needs_sandbox != !!sandbox_id) {
        json_decref(args);
        http_respond_errorf(req, "invalid_request",
                            def->needs_sandbox ? "%s acts on a sandbox: POST "
                                                 "/v1/sandboxes/{id}/tools/%s"
                                               : "%s acts on no sandbox: POST /v1/tools/%s",
                            def->name, def->name);
        return;
    }
    struct tool_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->on_sandbox = sandbox_id != NULL;
    snprintf(x->tool, sizeof(x->tool), "%s", name);
    struct tool_request rq = {.who = http_req_identity(req),
                              .request_id = http_req_id(req),
                              .name = name,
                              .args = args,
                              .sandbox_id = sandbox_id};
    tools_call(d, &rq, on_done, x, &x->call);
    json_decref(args);
    if (x->done) {
        free(x);
        return;
    }
    x->suspended = true;
    http_req_suspend(req, on_abort, x);
}

static void api_tools_list(struct sbxd *d, struct http_req *req)
{
    http_respond_json(req, 200,
                      json_pack("{s:s,s:o,s:o}", "object", "list", "data", tools_list_mcp(),
                                "openai", tools_list_openai()));
}

static void api_tool_call(struct sbxd *d, struct http_req *req)
{
    call(d, req, http_req_param(req, 0), http_req_param(req, 1));
}

static void api_tool_call_global(struct sbxd *d, struct http_req *req)
{
    call(d, req, NULL, http_req_param(req, 0));
}

static void api_edit(struct sbxd *d, struct http_req *req)
{
    call(d, req, http_req_param(req, 0), "edit_file");
}

static void api_bsl_check(struct sbxd *d, struct http_req *req)
{
    call(d, req, http_req_param(req, 0), "bsl_check");
}

static const struct route routes[] = {
    {"GET", "/v1/tools", AUTH_SANDBOX, api_tools_list, 0},
    {"POST", "/v1/tools/{}", AUTH_SANDBOX, api_tool_call_global, 0},
    {"POST", "/v1/sandboxes/{}/tools/{}", AUTH_SANDBOX, api_tool_call, 0},
    {"POST", "/v1/sandboxes/{}/edit", AUTH_SANDBOX, api_edit, 0},
    {"POST", "/v1/sandboxes/{}/bsl/check", AUTH_SANDBOX, api_bsl_check, 0},
};

const struct route_table tool_routes = ROUTE_TABLE(routes);
