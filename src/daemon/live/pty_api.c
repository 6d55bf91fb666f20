/* exec_command and write_stdin as HTTP routes (docs/terminals.md):
 *   POST   /v1/sandboxes/{id}/pty                     {command, rows, cols, grace_seconds}
 *   POST   /v1/sandboxes/{id}/pty/{session_id}/input  {input, since, wait_seconds}
 *   GET    /v1/sandboxes/{id}/pty/{session_id}        ?since=&wait_seconds=
 *   DELETE /v1/sandboxes/{id}/pty/{session_id}
 * The calls themselves are ptycall.c's (shared with the agent tools); these routes
 * translate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "ptycall.h"

static void on_abort(struct http_req *req, void *data)
{
    pty_call_cancel(data);
}

static void on_done(json_t *answer, const struct sbx_err *err, void *data)
{
    if (err)
        http_respond_error(data, err);
    else
        http_respond_json(data, 200, json_incref(answer));
}

/* After a call started: wait for it. Else answer its error. */
static void follow(struct http_req *req, int r, struct pty_call *call, const struct sbx_err *err)
{
    if (r < 0)
        http_respond_error(req, err);
    else
        http_req_suspend(req, on_abort, call);
}

static void api_pty_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct sandbox *sb;
    struct pty_call *call = NULL;
    struct pty_origin origin = {http_req_identity(req), http_req_id(req), "rest"};
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err);
    if (r == 0)
        r = pty_exec_command(sb, &origin, body, on_done, req, &call, &err);
    json_decref(body);
    follow(req, r, call, &err);
}

static void api_pty_input(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct sandbox *sb;
    struct pty_call *call = NULL;
    struct pty_origin origin = {http_req_identity(req), http_req_id(req), "rest"};
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err);
    if (r == 0)
        r = pty_write_stdin(sb, &origin, http_req_param(req, 1), body, on_done, req, &call, &err);
    json_decref(body);
    follow(req, r, call, &err);
}

/* A query parameter as a JSON number, NULL when absent, json null when malformed. */
static json_t *query_number(struct http_req *req, const char *name)
{
    const char *v = http_req_query(req, name);
    if (!v)
        return NULL;
    char *end;
    errno = 0;
    double n = strtod(v, &end);
    if (!*v || *end || errno)
        return json_string(v); /* the parsers refuse anything but a number */
    if (n == (double)(json_int_t)n && !strchr(v, '.') && !strchr(v, 'e') && !strchr(v, 'E'))
        return json_integer((json_int_t)n);
    return json_real(n);
}

static void api_pty_read(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    struct pty_call *call = NULL;
    json_t *since = query_number(req, "since"), *wait = query_number(req, "wait_seconds");
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err);
    if (r == 0)
        r = pty_read(sb, http_req_param(req, 1), since, wait, on_done, req, &call, &err);
    json_decref(since);
    json_decref(wait);
    follow(req, r, call, &err);
}

static void api_pty_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    struct pty_call *call = NULL;
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err);
    if (r == 0)
        r = pty_kill(sb, http_req_param(req, 1), on_done, req, &call, &err);
    if (r == 0)
        audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "pty.kill",
                     sb->rec.id, "requested",
                     json_pack("{s:s}", "session_id", http_req_param(req, 1)));
    follow(req, r, call, &err);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/pty", AUTH_SANDBOX, api_pty_create, 0},
    {"GET", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_read, 0},
    {"DELETE", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_delete, 0},
    {"POST", "/v1/sandboxes/{}/pty/{}/input", AUTH_SANDBOX, api_pty_input, 0},
};

const struct route_table pty_routes = ROUTE_TABLE(routes);
