#include <errno.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/idempotency.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"

static void on_create_abort(struct http_req *req, void *data)
{
    sandbox_drop_waiter(data, req);
}

static void on_created(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct http_req *req = data;
    audit_record(manager_store(sb->mgr), http_req_identity(req), NULL, http_req_id(req),
                 "sandbox.create", sb->rec.id, err ? err->code : "ok", NULL);
    if (err) {
        http_respond_error(req, err);
        return;
    }
    http_respond_json(req, 201, sandbox_to_json(sb));
}

static void api_sandboxes_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct sandbox_params p;
    struct sandbox *sb;
    if (idem_begin(d->store, req, NULL))
        return;
    if (http_req_json(req, &body, &err) < 0 || sandbox_params_parse(body, &p, &err) < 0 ||
        manager_create(d->mgr, http_req_identity(req), &p, on_created, req, &sb, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    /* on_created may already have answered (never today: readiness is asynchronous). */
    http_req_suspend(req, on_create_abort, sb);
}

static void append_sandbox(struct sandbox *sb, void *data)
{
    json_array_append_new(data, sandbox_to_json(sb));
}

static void api_sandboxes_list(struct sbxd *d, struct http_req *req)
{
    json_t *list = json_array();
    manager_each(d->mgr, http_req_identity(req)->user, append_sandbox, list);
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", list));
}

static void api_sandboxes_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, sandbox_to_json(sb));
}

static void api_sandboxes_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        manager_destroy_by(d->mgr, sb, http_req_identity(req), http_req_id(req), "deleted", &err) <
            0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "id", http_req_param(req, 0), "object", "sandbox",
                                "deleted", 1));
}

static void on_restarted(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct http_req *req = data;
    audit_record(manager_store(sb->mgr), http_req_identity(req), NULL, http_req_id(req),
                 "sandbox.restart", sb->rec.id, err ? err->code : "ok", NULL);
    if (err)
        http_respond_error(req, err);
    else
        http_respond_json(req, 200, sandbox_to_json(sb));
}

/* POST /v1/sandboxes/{id}/restart: a failed sandbox (or a running one, stopped first)
 * starts cold from its workspace; the answer is the sandbox with restored: false. */
static void api_sandboxes_restart(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        manager_restart(d->mgr, sb, on_restarted, req, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, on_create_abort, sb);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes", AUTH_SANDBOX, api_sandboxes_create, 0},
    {"GET", "/v1/sandboxes", AUTH_SANDBOX, api_sandboxes_list, 0},
    {"GET", "/v1/sandboxes/{}", AUTH_SANDBOX, api_sandboxes_get, 0},
    {"DELETE", "/v1/sandboxes/{}", AUTH_SANDBOX, api_sandboxes_delete, 0},
    {"POST", "/v1/sandboxes/{}/restart", AUTH_SANDBOX, api_sandboxes_restart, 0},
};

const struct route_table sandbox_routes = ROUTE_TABLE(routes);
